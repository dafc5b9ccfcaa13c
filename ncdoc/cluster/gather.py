"""`ncdoc cluster snapshot`: every node's Snapshot, through a launcher, into one ClusterFacts.

Each node runs the agent command (default `ncdoc snapshot`, the ncdoc on that node's PATH:
`--agent` changes it) and prints its snapshot as JSON; the effective NCCL env, with
/etc/nccl.conf and ~/.nccl.conf as NCCL reads them, is part of it. A node that does not
answer in time, crashes, exits non-zero or prints something that is not a snapshot is
recorded as unreachable with the reason; every other node is still gathered.
"""

from __future__ import annotations

import datetime as _dt

from ncdoc.cluster.facts import ClusterFacts, Unreachable
from ncdoc.errors import InputError

DEFAULT_AGENT = ("ncdoc", "snapshot")


def snapshot_from(run) -> tuple[object | None, str]:
    """(Snapshot, "") from a node's stdout, or (None, why not)."""
    from ncdoc.snapshot import Snapshot
    from ncdoc.startup.json_load import loads
    text = run.stdout.strip()
    if not text:
        return None, "printed nothing on stdout"
    try:
        data = loads(text)
    except ValueError:
        first = text.splitlines()[0][:120]
        return None, f"did not print a snapshot (first line: {first!r})"
    try:
        return Snapshot.from_dict(data, path=run.node), ""
    except InputError as exc:
        return None, str(exc).splitlines()[0]


def gather(launcher, nodes, *, agent=DEFAULT_AGENT, env=None, timeout_s: float = 60.0, log_dir: str,
           progress=None) -> ClusterFacts:
    """Run the agent on `nodes` and collect their snapshots (unreachable nodes with the reason)."""
    runs = launcher.run_per_node(list(nodes), list(agent), env=env, timeout_s=timeout_s, log_dir=log_dir)
    snaps, unreachable, offsets = {}, [], {}
    for node, run in runs.items():
        if run.clock is not None and run.window is not None:
            offsets[node] = (run.clock - run.window[1], run.clock - run.window[0])
        if not run.ok:
            unreachable.append(Unreachable(node, run.reason, run.kind))
            continue
        snap, why = snapshot_from(run)
        if snap is None:
            unreachable.append(Unreachable(node, why, "malformed"))
            continue
        snaps[node] = snap
    if progress:
        progress(f"{len(snaps)} of {len(runs)} node(s) answered")
    created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return ClusterFacts(snaps, unreachable=unreachable, source=f"gather:{launcher.name}", launcher=launcher.name,
                        created=created, clock_offsets=offsets)


__all__ = ["DEFAULT_AGENT", "gather", "snapshot_from"]
