"""What the node commands start from (check, doctor, lint, env show, topo, env generate): the node,
the NCCL env its job will see, and the rules' Context built from both.

The node is a snapshot file, a bundled example, or this machine probed live. The env is one
layering (envfiles/layers.job_env) of --env values over --env-file files over a base, and
the commands differ only in the base:

  check, doctor   the node's own env (live: this process's NCCL_* and NCCL's config files)
  env show        the named node's env; else this process's, unless --env/--env-file are
                  given, then exactly those (what a job script would export)
  lint            like env show, except that with --env/--env-file it lints exactly those
                  values even when a node is named (the node is what they are judged against)

Kept light: imported on the `ncdoc check` path.
"""

from __future__ import annotations

from ncdoc.errors import UsageError

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Sequence

    from ncdoc.engine.rules import Context
    from ncdoc.snapshot import NcclEnv, Snapshot


def capture_live(**options) -> Snapshot:
    """This machine, probed (`options`: ncdoc.probes.live.capture's keywords, e.g. timeout_s, job);
    UsageError in a build without the probes."""
    try:
        from ncdoc.probes.live import capture
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ncdoc"):
            raise UsageError("live probing is not available in this build; read the node from a file "
                             "(--snapshot FILE)") from None
        raise
    return capture(**options)


def load_example_node(name: str) -> Snapshot:
    """A bundled example machine, from its stored snapshot (no tree to build); UsageError naming the
    known ones when there is none of that name."""
    try:
        from ncdoc.examples.stored import load_example
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("ncdoc"):
            raise UsageError("bundled example machines are not available in this build") from None
        raise
    return load_example(name)


def load_node(*, snapshot: str | None = None, example: str | None = None, live: bool = True,
              live_options: dict | None = None) -> Snapshot | None:
    """The Snapshot from a snapshot file or an example name, else the live node (None when not `live`;
    `live_options`: the live capture's keywords)."""
    if snapshot:
        from ncdoc.snapshot import Snapshot
        return Snapshot.load(snapshot)
    if example:
        return load_example_node(example)
    return capture_live(**(live_options or {})) if live else None


def current_env() -> NcclEnv:
    """NCCL_* of this process plus the config files NCCL reads, with sources."""
    import os
    from ncdoc.probes.nccl_env import read_nccl_env
    return read_nccl_env(os.environ, home=None)


def _layered(base: NcclEnv | None, env: Sequence[str], env_files: Sequence[str]) -> NcclEnv | None:
    if not env and not env_files:
        return base
    from ncdoc.envfiles.layers import job_env, read_env_file
    return job_env(base, env=env, files=[read_env_file(f) for f in env_files])


def _empty_env() -> NcclEnv:
    from ncdoc.snapshot import NcclEnv, Status
    return NcclEnv(Status.ok("empty"))


def _job_here(captured, claims: dict):
    """The job about to start, for a node read from a file or an example: this process's launcher
    variables (SLURM_NNODES, WORLD_SIZE, CUDA_VISIBLE_DEVICES, ...) when any is set, else the job the
    snapshot was captured with; ncdoc's own claims (--expect-gpus, --nodes, the config's) added."""
    import os
    from ncdoc.snapshot import JOB_VARIABLES
    if any(name in os.environ for name in JOB_VARIABLES):
        from ncdoc.probes.job import probe_job
        return probe_job(os.environ, **claims)
    if not claims:
        return captured
    from ncdoc.probes.job import with_options
    return with_options(captured, **claims)


def node_context(*, snapshot: str | None = None, example: str | None = None, env: Sequence[str] = (),
                 env_files: Sequence[str] = (), nccl_version: str | None = None, job: dict | None = None,
                 live_options: dict | None = None) -> tuple[Snapshot, Context]:
    """check and doctor: the node (live unless a file or example is named) with --env and --env-file
    layered over its own env, and the Context every rule reads.

    job: ncdoc's own claims about the job (ncdoc.probes.job keywords: expect_gpus, nodes, config_gpus),
    read with the live node, or with a file's or an example's job (see _job_here); live_options: more
    keywords for the live capture (timeout_s)."""
    from ncdoc.engine.rules import Context
    claims = {k: v for k, v in (job or {}).items() if v is not None}
    snap = load_node(snapshot=snapshot, example=example,
                     live_options={**(live_options or {}), **({"job": claims} if claims else {})})
    if snapshot or example:
        job_here = _job_here(snap.job, claims)
        if job_here is not snap.job:
            snap = snap.replace(job=job_here)
    layered = _layered(snap.env, env, env_files)
    if layered is not snap.env:
        snap = snap.replace(env=layered)
    return snap, Context(snapshot=snap, env=snap.env, nccl_version=nccl_version)


def shown_env(*, snapshot: str | None = None, example: str | None = None, env: Sequence[str] = (),
              env_files: Sequence[str] = ()) -> NcclEnv:
    """env show: the env a job would see (see the module's table)."""
    node = load_node(snapshot=snapshot, example=example, live=False)
    if node is not None:
        base = node.env
    else:
        base = None if (env or env_files) else current_env()
    return _layered(base, env, env_files) or _empty_env()


def lint_context(*, snapshot: str | None = None, example: str | None = None, env: Sequence[str] = (),
                 env_files: Sequence[str] = (), nccl_version: str | None = None) -> Context:
    """lint: the env to lint (see the module's table) and, when a node is named, that node to
    judge it against."""
    import platform

    from ncdoc.engine.rules import Context
    node = load_node(snapshot=snapshot, example=example, live=False)
    if env or env_files:
        linted = _layered(None, env, env_files)
    else:
        linted = node.env if node is not None else current_env()
    linted = linted or _empty_env()
    if node is not None:
        node = node.replace(env=linted)
    return Context(snapshot=node, env=linted, nccl_version=nccl_version, options={"hostname": platform.node()})


class TopoNode:
    """topo's node: the Snapshot its inputs make together, the inputs as read, the files cut short."""

    __slots__ = ("snapshot", "inputs", "truncated")

    def __init__(self, snapshot: Snapshot, inputs: list[dict], truncated: list[str]):
        self.snapshot, self.inputs, self.truncated = snapshot, inputs, truncated


def topo_node(evidence: Sequence[str], *, snapshot: str | None = None, example: str | None = None) -> TopoNode:
    """topo: node evidence files merged as facts of one node, over a snapshot or example when named;
    the live node when nothing is given."""
    from ncdoc.importers import import_evidence_detail, merge
    node = load_node(snapshot=snapshot, example=example, live=False)
    inputs: list[dict] = []
    if snapshot:
        inputs.append({"path": snapshot, "kind": "snapshot_json"})
    elif example:
        inputs.append({"kind": "example", "name": example})
    truncated: list[str] = []
    for path in evidence:
        imp = import_evidence_detail(path)
        inputs.append({"path": path, "kind": imp.kind, "tool": imp.tool, "truncated": imp.truncated})
        if imp.truncated:
            truncated.append(path)
        node = imp.snapshot if node is None else merge(node, imp.snapshot)
    if node is None:
        node = capture_live()
        inputs.append({"path": None, "kind": "live"})
    return TopoNode(node, inputs, truncated)


__all__ = ["capture_live", "load_example_node", "load_node", "current_env", "node_context", "shown_env",
           "lint_context", "TopoNode", "topo_node"]
