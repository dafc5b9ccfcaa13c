"""`run_tune`: the whole tune as one use case (the CLI and `ncdoc demo` call this).

backend -> search space narrowed to the hardware and to what may be recommended (safety.py) ->
study (baseline, screening, joint search) -> candidates re-measured against the baseline ->
leave-one-out in the final env -> per-size tuner table from probes (where the backend can load
one) -> guard sweep of the final env (and table) against the baseline -> nccl.env (+ other
formats), nccl_tuner.conf, EXPLAIN.md, summary.json, all written atomically, each file only when
it is safe to load.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner.backends import BACKENDS, Backend
from ncdoc.tuner.confirm import (Comparison, Side, Verdict, VariableEffect, changes, compare, confirm_and_reduce,
                                 final_job, pct, size_label)
from ncdoc.tuner.profiles import Profile, get_profile
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import (StudyConfig, TrialRecord, TuneStudy, check_sampler, incumbent, ranked_trials,
                               runs_per_config, storage_for)

SCHEMA_VERSION = 2


@dataclass(frozen=True)
class TuneOptions:
    backend: str | None = None               # None: sim where no GPU is present, else nccl-tests
    preset: str | None = None
    snapshot: str | None = None
    example: str | None = None
    nodes: int | None = None
    fabric: dict = field(default_factory=dict)   # simulator fabric fields (fabric, nic_rate_gbps, ...)
    trials: int = 30
    repeats: int = 2
    profile: str | None = None
    collectives: tuple[str, ...] = ()
    space: str | None = None
    sampler: str = "tpe"
    storage: str | None = None
    study_name: str = "ncdoc-tune"
    resume: bool = False
    ray_address: str | None = None
    groups: int | None = None                # concurrent node groups (local Ray: simulated groups)
    executor: str = "auto"                   # auto | ray | inprocess (auto: the simulator in process)
    timeout_s: float | None = None           # per measurement
    out: str = "ncdoc-tune"
    seed: int = 0
    formats: tuple[str, ...] = ("sh",)
    top_k: int = 2
    confirm_pairs: int = 6
    min_gain: float = 0.01
    replicate: bool = False                  # run the final comparison on a second node group too
    nccl_tests_dir: str | None = None
    gpus_per_node: int | None = None
    hosts: tuple[str, ...] = ()              # the nodes (hostlist items) the real backends run on
    mpirun: str = "mpirun"                   # the mpirun binary (--launcher-cmd says it for any launcher)
    tuner_plugin: str | None = None          # NCCL's libnccl-tuner-example.so, for the real backends
    # How the real backends reach the nodes (ncdoc.cluster launchers) and tune at scale (scale.py).
    launcher: str | None = None              # slurm | mpirun | ray | local (default: see LaunchOptions.kind)
    hostfile: str | None = None
    launcher_cmd: str | None = None
    launcher_args: tuple[str, ...] = ()
    mpi_flavour: str | None = None
    topology: str | None = None              # Slurm topology.conf for placing node groups
    health_gate: str | None = None           # scales (node,pair), or "off"
    full_scale_rounds: int = 3               # 0: no full-scale A/B after tuning on subsets
    torch_python: str | None = None
    iters: int | None = None                 # benchmark iterations per size (None: scaled by size)
    sim_failures: str = "report"             # report | emulate (a simulated hang really hangs)
    lint_findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableResult:
    rules: tuple = ()                        # what nccl_tuner.conf holds (empty: no file)
    overrides: tuple = ()                    # the measured choices in it
    comparison: Comparison | None = None     # env + table against env alone
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuneResult:
    out_dir: str
    study_name: str
    storage_display: str
    sampler: str
    repeats: int
    backend: dict
    simulated: bool
    profile: Profile
    space: dict
    baseline_env: dict
    baseline_buckets: dict
    baseline_sizes: dict
    trials_complete: int
    trials_failed: int
    trials_stopped: int
    requeued: tuple[int, ...]
    best: TrialRecord | None
    verdicts: tuple[Verdict, ...]
    effects: tuple[VariableEffect, ...]
    env: dict                                # the environment to deploy (None-free), in order
    unset: tuple[str, ...]                   # variables to remove from today's environment
    final: Comparison | None                 # the recommended env against the baseline (guard sweep)
    replica: Comparison | None
    noise: float
    noise_floor: float
    tuned_sizes: dict
    tried: dict
    failures: dict
    measurements: int
    nccl_version: str | None
    table: TableResult = TableResult()
    refused: str = ""                        # why nccl.env was not written
    files: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    scale: dict | None = None                # real backends: node groups, health gate, full scale (scale.py)

    @property
    def recommended(self) -> dict[str, str]:
        """What changes against today's environment (empty: nothing)."""
        return {k: v for k, v in self.env.items() if self.baseline_env.get(k) != v}

    def to_json(self) -> dict[str, Any]:
        fin = self.final
        return {
            "schema_version": SCHEMA_VERSION, "out_dir": self.out_dir, "study_name": self.study_name,
            "backend": self.backend.get("backend"), "simulated": self.simulated, "cluster": self.backend,
            "storage": self.storage_display, "sampler": self.sampler, "repeats": self.repeats,
            "profile": self.profile.name, "nccl_version": self.nccl_version, "space": self.space,
            "baseline_env": self.baseline_env, "trials_complete": self.trials_complete,
            "trials_failed": self.trials_failed, "trials_stopped_early": self.trials_stopped,
            "measurements": self.measurements, "requeued": list(self.requeued),
            "best_trial": None if self.best is None else {"number": self.best.number, "score": self.best.value,
                                                          "changes": self.best.changes()},
            "recommended_env": self.env if not self.refused else None, "changes": self.recommended,
            "unset": list(self.unset), "refused": self.refused or None,
            "gain": None if fin is None else {"pct": round(pct(fin.gain), 2), "lower_bound_pct":
                                              round(pct(fin.lcb), 2), "wilcoxon_p": round(fin.p_wilcoxon, 4),
                                              "rounds": fin.n, "regressions": list(fin.regressions)},
            "guard_sweep": None if fin is None else _guard_rows(fin),
            "replica": None if self.replica is None else {"pct": round(pct(self.replica.gain), 2),
                                                          "regressions": list(self.replica.regressions)},
            "noise_pct": round(100 * self.noise, 2), "noise_floor_pct": round(100 * self.noise_floor, 2),
            "candidates": [{"changes": {k: v for k, v in v.params.items() if v != UNSET}, "recommended": v.recommended,
                            "why": v.why} for v in self.verdicts],
            "minimal_env": [{"name": e.name, "value": e.value, "kept": e.kept, "why": e.why, "final": e.final}
                            for e in self.effects],
            "tuner_table": {"rules": len(self.table.rules), "overrides": [o.__dict__ for o in self.table.overrides],
                            "notes": list(self.table.notes)},
            "failures": self.failures, "files": self.files, "notes": list(self.notes),
            "scale": self.scale,
        }


def _guard_rows(cmp: Comparison) -> dict[str, Any]:
    """The guard sweep as the final comparison measured it: every size of every collective, the
    baseline's busbw and the recommended env's, and whether it counted as slower."""
    slower = {r.split(":")[0] for r in cmp.regressions}
    rows = []
    for collective, base_rows in cmp.sizes_a.items():
        tuned = {r[0]: r[1] for r in cmp.sizes_b.get(collective, ())}
        for size, bw, *_ in base_rows:
            if size not in tuned:
                continue
            rows.append({"collective": collective, "size": size, "baseline": bw, "tuned": tuned[size],
                         "change_pct": round(100 * (tuned[size] / bw - 1), 2) if bw else None,
                         "regression": f"{collective} {size_label(size)}" in slower})
    return {"rounds": cmp.n, "regressions": list(cmp.regressions), "rows": rows}


def has_gpu() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def _snapshot(opts: TuneOptions) -> Any:
    if opts.snapshot:
        from ncdoc.snapshot import Snapshot
        return Snapshot.load(opts.snapshot)
    if opts.example:
        from ncdoc.examples.machines import load_example
        return load_example(opts.example)
    return None


def _nccl_env(values: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if k.startswith("NCCL_")}


def no_cluster_message() -> str:
    from ncdoc.tuner.sim import PRESETS
    return ("this machine has no GPU, so there is no cluster to tune: say which one to simulate with --preset "
            f"NAME (one of: {', '.join(PRESETS)}), or give its node with --snapshot FILE or --example NAME "
            "(and --nodes); on a GPU node, --backend nccl-tests measures the real one")


def create_backend(opts: TuneOptions, log: Callable[[str], None]) -> Backend:
    name = opts.backend or ("nccl-tests" if has_gpu() else "sim")
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")
    snap = _snapshot(opts)
    if name == "sim":
        from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
        if opts.preset and snap is not None:
            raise UsageError("--preset and --snapshot/--example both describe the cluster; give one")
        if not opts.preset and snap is None:
            raise UsageError(no_cluster_message())
        cluster = sim_cluster(preset=opts.preset, snapshot=snap, nodes=opts.nodes, **opts.fabric)
        base = _nccl_env(snap.env.as_dict()) if snap is not None else {}
        return SimBackend(cluster, seed=opts.seed, base_env=base, emulate_failures=opts.sim_failures == "emulate")
    # Real backends measure this cluster: its hardware comes from a snapshot (or this node, probed);
    # they reach its nodes through the cluster launchers (srun, mpirun, Ray, or this machine alone).
    if snap is None:
        from ncdoc.probes.live import capture
        snap = capture()
    from ncdoc.cluster.launchers import make_launcher
    from ncdoc.nccl.bandwidth import expected_bandwidth
    from ncdoc.tuner.backends.launched import LaunchOptions
    from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
    launch = LaunchOptions(launcher=opts.launcher, nodes=",".join(opts.hosts) or None, hostfile=opts.hostfile,
                           ray_address=opts.ray_address,
                           command=opts.launcher_cmd or (opts.mpirun if opts.mpirun != "mpirun" else None),
                           extra_args=tuple(opts.launcher_args), mpi_flavour=opts.mpi_flavour)
    kind = launch.kind(os.environ)
    if name == "torch" and kind == "local":
        from ncdoc.tuner.backends.torch import available
        why = available()
        if why:
            raise UsageError(f"backend torch is not available: {why}")
    launcher = make_launcher(kind, nodes=launch.nodes, hostfile=launch.hostfile, ray_address=launch.ray_address,
                             command=launch.command, extra_args=launch.extra_args, mpi_flavour=launch.mpi_flavour,
                             environ={k: v for k, v in os.environ.items() if not k.startswith("NCCL_")})
    reach = launcher.nodes()
    nodes = opts.nodes or len(reach)
    if nodes > len(reach):
        launcher.close()
        raise UsageError(f"--nodes {nodes}: the {kind} launcher reaches {len(reach)} node(s) "
                         f"({', '.join(reach[:6])}{' ...' if len(reach) > 6 else ''})")
    fab = {k: v for k, v in opts.fabric.items() if k in ("fabric", "gpus_per_node")}
    if opts.gpus_per_node:
        fab["gpus_per_node"] = opts.gpus_per_node
    model = sim_cluster(snapshot=snap, nodes=nodes, **fab)
    hw = SimBackend(model).hardware()
    expect = expected_bandwidth(snap, nodes=nodes, local_ranks=hw.gpus_per_node)
    base = _nccl_env(dict(os.environ))
    common = dict(hardware=hw, base_env=base, launch=launch, gpus_per_node=opts.gpus_per_node, expectation=expect,
                  tuner_plugin=opts.tuner_plugin, table_dir=opts.out, log_dir=str(Path(opts.out) / "trials"),
                  iters=opts.iters)
    try:
        if name == "torch":
            from ncdoc.tuner.backends.torch import TorchBackend
            backend: Any = TorchBackend(python=opts.torch_python, **common)
        else:
            from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend
            backend = NcclTestsBackend(opts.nccl_tests_dir, collectives=get_profile(opts.profile,
                                                                                    opts.collectives).collectives,
                                       **common)
    except BaseException:
        launcher.close()
        raise
    backend._launcher = launcher             # made once: the nodes above are the ones it reaches
    backend.model_cluster = model            # ncdoc's model of NCCL's choices on this hardware (tables)
    return backend


def _check(opts: TuneOptions) -> None:
    from ncdoc.tuner.scale import parse_gate
    parse_gate(opts.health_gate)
    if opts.full_scale_rounds < 0:
        raise UsageError("--full-scale-rounds must be 0 (off) or more")
    if opts.trials < 1 or opts.repeats < 1 or opts.confirm_pairs < 5 or opts.top_k < 0:
        raise UsageError("--trials and --repeats must be >= 1, --confirm-pairs >= 5 (Wilcoxon's test needs them), "
                         "--top-k >= 0")
    check_sampler(opts.sampler)
    from ncdoc.envfiles.formats import FORMATS
    bad = [f for f in opts.formats if f not in FORMATS]
    if bad:
        raise UsageError(f"unknown --format {bad[0]!r} (expected one of {', '.join(FORMATS)})")


def _space(opts: TuneOptions, backend: Backend, profile: Profile, log: Callable[[str], None]) -> SearchSpace:
    from ncdoc.tuner.safety import safe_space

    hw = backend.hardware()
    space = load_space(opts.space or hw.fabric)
    if space.fabric not in ("any", hw.fabric):
        log(f"note: search space {space.name!r} is written for fabric {space.fabric}, the cluster uses {hw.fabric}")
    return safe_space(space, hw, profile.collectives)


def _deviation(params: dict[str, str], trial_base: dict, space: SearchSpace) -> tuple[int, float]:
    """How far a configuration moves from today's env: variables changed, then how far each numeric
    value is from NCCL's default (octaves), so 4 QPs is nearer than 16 and 8 MiB buffers than 16."""
    moved = changes(params, trial_base)
    octaves = 0.0
    for name, value in moved.items():
        var = space.variable(name) if name in {v.name for v in space.variables} else None
        try:
            x = float(value)
        except (TypeError, ValueError):
            octaves += 1.0
            continue
        ref = var.default if var is not None and var.default else None
        octaves += abs(math.log2(x / ref)) if ref and x > 0 else 1.0
    return len(moved), octaves


def _candidates(ranked: list[tuple[TrialRecord, float]], trial_base: dict, k: int,
                useful: set[str] | None = None, *, records: list[TrialRecord] | None = None,
                noise: float = 0.0, space: SearchSpace | None = None) -> list[dict[str, str]]:
    """The best trials by shrunk estimate, each kept to the variables that showed an effect (screening
    or a refinement step): what rode along in a lucky trial is not a candidate's part. Among the
    ones within a standard error of the best, the nearest to today's env comes first: when the
    measurements cannot tell them apart, the smaller change is the safer one to deploy."""
    own = {tuple(sorted(r.params.items())): est for r, est in ranked}
    best: dict[tuple, tuple[dict[str, str], float]] = {}
    for r, est in ranked:
        params = {n: (v if useful is None or n in useful else UNSET) for n, v in r.params.items()}
        if not changes(params, trial_base):
            continue
        key = tuple(sorted(params.items()))
        est = own.get(key, est)           # a reduced configuration that was measured speaks for itself
        if key not in best or est > best[key][1]:
            best[key] = (params, est)
    out = sorted(((p, e, key) for key, (p, e) in best.items() if e > 0), key=lambda c: -c[1])
    if out and records is not None and space is not None and noise > 0:
        runs = {key: len(v) for key, v in runs_per_config(records).items()}
        top, top_n = out[0][1], runs.get(out[0][2], 1)
        near = [c for c in out if top - c[1] <= noise * math.sqrt(1 / top_n + 1 / runs.get(c[2], 1))]
        near.sort(key=lambda c: (_deviation(c[0], trial_base, space), -c[1]))
        out = near + [c for c in out if c not in near]
    return [params for params, _, _ in out[:k]]


def _tried(records: list[TrialRecord], space: SearchSpace) -> dict[str, dict[str, tuple[float, int]]]:
    """Per variable and value: the best score of the trials that tried it (stopped ones by their runs)."""
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for var in space.variables:
        per: dict[str, list[float]] = {}
        for r in records:
            if r.state in ("complete", "stopped") and r.mean is not None and r.duplicate_of is None:
                per.setdefault(r.params.get(var.name, UNSET), []).append(math.exp(r.mean))
        out[var.name] = {v: (max(vals), len(vals)) for v, vals in per.items()}
    return out


def _reach_value(var: Any) -> str:
    """The value the health gate's env check sets for a variable: of those screening tries, the one
    nearest NCCL's default (octaves), the least likely to break a run; else the first."""
    def distance(value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            return math.inf
        return abs(math.log2(x / var.default)) if var.default and x > 0 else math.inf
    return min(var.screened, key=distance)


def _observed(rows_by_collective: Any) -> dict:
    """NCCL's choices from summarised size rows ([size, busbw, algo, proto, channels] per collective)."""
    out: dict = {}
    for collective, rows in (rows_by_collective or {}).items():
        for row in rows:
            if len(row) >= 5 and row[2] and row[3]:
                out.setdefault(collective, {})[row[0]] = (row[2], row[3], row[4])
    return out


def _search_table(study: TuneStudy, backend: Backend, env: dict, profile: Profile, opts: TuneOptions,
                  timeout: float, log: Callable[[str], None], *, confirmed: Any = None,
                  baseline: Any = None) -> tuple[tuple, tuple, list[str]]:
    """Probe each (algorithm, protocol) NCCL could run for the profile's collectives in the final
    env; where one beats NCCL's own choice by more than noise at measured sizes, a table with that
    choice there and NCCL's everywhere else. NCCL's own choice at the measured sizes is what its
    TUNING lines said where the backend reads them (the real backends: `reports_choices`), in the
    final env's confirmation runs and then in the probe job's own runs of the env alone.
    Returns (rules, overrides, notes)."""
    from ncdoc.tuner.table import COLLECTIVES
    from ncdoc.tuner.table_build import build, observed_choices, overrides_from_probes, probe_tables

    notes: list[str] = []
    why = backend.table_support()
    model = getattr(backend, "model_cluster", None)
    steerable = [c for c in profile.collectives if c in COLLECTIVES]
    if not steerable:
        return (), (), [f"no tuner table: NCCL's tuner plugin does not steer {', '.join(profile.collectives)}"]
    if why:
        return (), (), [f"no tuner table: {why}"]
    if model is None:
        return (), (), ["no tuner table: ncdoc has no model of NCCL's choices for this backend"]
    observed = None
    if getattr(backend, "reports_choices", False):
        rows = confirmed.sizes_b if confirmed is not None else \
            (baseline.get("sizes") if baseline and env == study.base_env else None)
        observed = _observed(rows)
    probes = probe_tables(model, env, profile, observed=observed)
    if not probes:
        return (), (), ["no tuner table: NCCL has one algorithm and protocol for every measured size"]
    from ncdoc.tuner.dispatch import env_tuple
    from ncdoc.tuner.confirm import interleaved_job
    sides = [Side("env", env_tuple(env))] + [Side(p.label, env_tuple(env), p.rules) for p in probes]
    log(f"tuner table: probing {len(probes)} algorithm/protocol choice(s) against NCCL's own")
    res = study.run_jobs([interleaved_job("probe", sides, 1, tuple(profile.workload()), timeout, offset=7000,
                                          seed=opts.seed)])["probe"]
    overrides = overrides_from_probes(res, probes, profile, model, env, noise=study.noise, min_gain=opts.min_gain)
    if not overrides:
        return (), (), ["no tuner table: no algorithm/protocol beat NCCL's own choice beyond noise at a measured size"]
    if observed is not None:
        own = next((m for lab, m in res.measurements if lab == "env"), None)
        fresh = observed_choices(own)
        for collective, by_size in fresh.items():
            observed.setdefault(collective, {}).update(by_size)
        n = sum(len(v) for v in observed.values())
        notes.append(f"NCCL's own algorithm, protocol and channel count at the {n} measured size(s) are what its "
                     "TUNING lines reported in the recommended env; between and beyond them, ncdoc's model of NCCL's "
                     "choice" if n else "the backend read no TUNING lines: NCCL's own choice is ncdoc's model of it")
    # Every collective the plugin steers gets rules, measured or not: one it left out would run on ONE channel.
    rules = build(model, env, list(COLLECTIVES), overrides, observed=observed)
    return tuple(rules), tuple(overrides), notes


def run_tune(options: TuneOptions, *, progress: Any = None, backend: Backend | None = None) -> TuneResult:
    """Run a whole tune. `progress`: an ncdoc.tuner.progress.Progress (default: silent);
    `backend`: a ready Backend instead of the one the options describe (custom backends, tests).
    One tune per study: the study's lock is held throughout (a second one exits 2 at once)."""
    from ncdoc.tuner.progress import Progress
    from ncdoc.tuner.study_lock import StudyLock, lock_path

    _check(options)
    prog = progress or Progress(quiet=True)
    with StudyLock(lock_path(options.storage, Path(options.out), options.study_name), options.study_name,
                   log=prog.note):
        backend = backend or create_backend(options, prog.note)
        try:
            return _tune(options, prog, backend)
        finally:
            close = getattr(backend, "close", None)   # a launcher (Ray started here, open handles)
            if close is not None:
                close()


def _tune(opts: TuneOptions, prog: Any, backend: Backend) -> TuneResult:
    from ncdoc.tuner import safety, scale
    from ncdoc.tuner.dispatch import make_executor
    from ncdoc.tuner.outputs import write_outputs

    log = prog.note
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    profile = get_profile(opts.profile, opts.collectives)
    space = _space(opts, backend, profile, log)
    hw = backend.hardware()
    version = hw.nccl_version
    timeout = opts.timeout_s or (60.0 if backend.name == "sim" else 600.0)
    storage = storage_for(opts.storage, out_dir)
    from ncdoc.tuner.storage import DEFAULT_NAME
    display = opts.storage or str(out_dir / DEFAULT_NAME)
    base_env = backend.baseline_env()
    flagged = safety.flagged(base_env, version)
    trial_base = {k: v for k, v in base_env.items() if k not in flagged}
    for name, why in flagged.items():
        log(f"{name}={base_env[name]} in today's environment: {why}; trials run without it")
    cfg = StudyConfig(opts.study_name, display, opts.sampler, opts.seed, opts.trials, opts.repeats, timeout,
                      opts.resume, min_gain=opts.min_gain)
    if backend.simulated:
        log("SIMULATED: every figure comes from ncdoc's simulator, not from hardware")
    log(f"{backend.name} backend: {', '.join(f'{k}={v}' for k, v in backend.describe().items() if k != 'backend')}")
    log(f"search space {space.name}: {len(space.variables)} variables, {space.size} combinations; "
        f"profile {profile.name}: {', '.join(b.key for b in profile.buckets)}")
    floor = math.log1p(opts.min_gain)
    groups = opts.groups or (2 if opts.replicate and opts.executor == "ray" else None)
    plan = None
    if hasattr(backend, "all_nodes") and opts.executor == "auto":
        # A real backend: node groups placed by topology, the health gate, a baseline per group (scale.py).
        reach = {v.name: _reach_value(v) for v in space.variables if not v.when and v.screened}
        plan = scale.plan(backend, per_group=hw.nodes, max_groups=opts.groups, gate=scale.parse_gate(opts.health_gate),
                          topology_file=opts.topology, env=base_env, workload=profile.workload(), timeout_s=timeout,
                          log=log, reach=reach)
        if plan.not_reported:
            from dataclasses import replace
            kept = [v.name for v in space.variables if v.name not in plan.not_reported]
            if not kept:
                raise RunnerError("nothing left to search: NCCL reported none of the search space's variables",
                                  cause=", ".join(plan.not_reported))
            space = replace(space.only(kept), notes=space.notes + tuple(
                f"{n} not searched: no node's NCCL reported it when set (health gate)" for n in plan.not_reported))
    # Ray prints worker-death notices on stdout from a background thread; stdout is for reports.
    with contextlib.redirect_stdout(sys.stderr), \
            make_executor(backend, kind=opts.executor, address=opts.ray_address, groups=groups, log=log,
                          node_groups=plan.node_groups() if plan else None, full=plan.healthy if plan else ()) as ex:
        info_slots = ex.slots
        study = TuneStudy(cfg, space, profile, ex, storage=storage, base_env=base_env, trial_base=trial_base,
                          describe=backend.describe(),
                          on_progress=lambda info: prog.update({**info, "slots": info_slots}), log=log)
        study.open()
        per_group = scale.calibrate(study.run_jobs, ex, plan, base_env, study.workload, max(2, opts.repeats), timeout,
                                    log) if plan else []
        baseline = study.measure_baseline(per_group)
        study.optimize()
        prog.finish()
        stages = {"study": study.measurements}
        records = study.records()
        base_buckets = baseline["buckets"]
        noise = study.noise
        ranked = ranked_trials(records, noise, space)
        cands = _candidates(ranked, trial_base, opts.top_k, study.useful_variables(), records=records, noise=noise,
                            space=space)
        common = dict(trial_base=trial_base, profile=profile, baseline_buckets=base_buckets, pairs=opts.confirm_pairs,
                      timeout_s=timeout, min_gain=opts.min_gain, seed=opts.seed)
        verdicts: list[Verdict] = []
        effects: list[VariableEffect] = []
        final_changes: dict[str, str] = {}
        confirmed = None
        if cands:
            log(f"re-measuring up to {len(cands)} candidate(s) against the baseline ({opts.confirm_pairs}+ rounds, "
                "with the guard sweep and leave-one-out)")
            outcome = confirm_and_reduce(study.run_jobs, cands, space=space, base_env=base_env, log=log, **common)
            verdicts, effects = list(outcome.verdicts), list(outcome.effects)
            final_changes, confirmed = outcome.changes, outcome.final
        stages["confirmation with the guard sweep"] = study.measurements - sum(stages.values())
        env = apply_params(trial_base, final_changes)
        env, default_notes = safety.without_defaults(env, version)
        scale_notes: list[str] = []
        if plan is not None and plan.subsets and opts.full_scale_rounds > 0 and final_changes:
            # Tuned on subsets: the final env and the other candidates once on every healthy node.
            plan.full = scale.full_scale_check(
                study.run_jobs, plan, base_env=base_env, final_env=env,
                candidates=[apply_params(trial_base, v.params) for v in verdicts], profile=profile,
                baseline_buckets=base_buckets, rounds=opts.full_scale_rounds, timeout_s=timeout, seed=opts.seed, log=log)
            stages["full-scale A/B"] = study.measurements - sum(stages.values())
            if not plan.full["accepted"]:
                scale_notes.append(f"at full scale ({len(plan.healthy)} nodes) the final env was rejected: "
                                   f"{plan.full['why']}; nothing is recommended")
                log(scale_notes[-1])
                final_changes, confirmed, effects = {}, None, []
                env, _ = safety.without_defaults(dict(trial_base), version)
        rules, overrides, table_notes = _search_table(study, backend, env, profile, opts, timeout, log,
                                                      confirmed=confirmed, baseline=baseline)
        stages["table probes"] = study.measurements - sum(stages.values())
        final = replica = table_cmp = None
        # The confirmation measured the recommended env against the baseline over the guard workload:
        # that is its guard sweep; only an env it did not measure (removals alone) needs one here.
        need_env = env != base_env and confirmed is None
        replicate = opts.replicate and env != base_env
        if need_env or rules or replicate:
            from ncdoc.tuner.dispatch import env_tuple
            jobs = []
            if need_env or rules:
                sides = ([Side("A", env_tuple(base_env))] if need_env else []) + [Side("B", env_tuple(env))]
                if rules:
                    sides.append(Side("T", env_tuple(env), tuple(rules)))
                jobs.append(final_job(sides, profile, opts.confirm_pairs, timeout, seed=opts.seed))
                log("guard sweep: " + " and ".join(x for x, on in (("the env", need_env), ("its tuner table", rules))
                                                   if on)
                    + f" against {'the baseline' if need_env else 'the env alone'}, {opts.confirm_pairs} rounds over "
                    f"the profile, small sizes and {', '.join(profile.guard) or 'no other'} collective(s)")
            if replicate:
                rep = [Side("A", env_tuple(base_env)), Side("B", env_tuple(env))]
                jobs.append(_on_another_group(final_job(rep, profile, opts.confirm_pairs, timeout, key="replica",
                                                        offset=20000, seed=opts.seed + 1)))
                log("replication: the env against the baseline on a second node group")
            res = study.run_jobs(jobs)
            guard = jobs[0].workload
            if need_env:
                final = compare("final", res["final"], profile, base_buckets, "A", "B", floor=floor, guard=guard)
            if rules:
                table_cmp = compare("table", res["final"], profile, base_buckets, "B", "T", guard=guard)
            if replicate:
                replica = compare("replica", res["replica"], profile, base_buckets, "A", "B", floor=floor,
                                  guard=jobs[-1].workload)
        if final is None and confirmed is not None:
            final = confirmed
        stages["final guard sweep"] = study.measurements - sum(stages.values())
        log("measurements: " + ", ".join(f"{k} {v}" for k, v in stages.items() if v or k == "study"))
    verdict_notes: list[str] = []
    env_ok = True                            # the env the guard sweep measured may be recommended
    if final is not None and final_changes:
        env_ok = final.clears(floor, 0.05) and not final.regressions and \
            (replica is None or (replica.gain > 0 and not replica.regressions))
        if not env_ok:
            why = final.failed or ("; ".join(final.regressions) if final.regressions else
                                   f"{pct(final.gain):+.1f} % (lower bound {pct(final.lcb):+.1f} %, "
                                   f"Wilcoxon p={final.p_wilcoxon:.3f})")
            if replica is not None and (replica.gain <= 0 or replica.regressions):
                why += f"; on the second node group {pct(replica.gain):+.1f} %"
            verdict_notes.append(f"the final env failed the guard sweep ({why}); nothing is recommended")
            log(verdict_notes[-1])
            final_changes = {}
            env = dict(trial_base)
    elif final is not None and flagged:
        # Only what lint flags is removed: it must not cost anything, no gain needed.
        env_ok = not final.failed and not final.regressions
        if not env_ok:
            verdict_notes.append("removing " + ", ".join(flagged) + " from today's environment regresses ("
                                 + (final.failed or "; ".join(final.regressions)) + ")")
            log(verdict_notes[-1])
            env = dict(base_env)               # lints with warnings: outputs will refuse to write it
    if env_ok and flagged and not final_changes and final is None:
        env = dict(trial_base)
    table = TableResult(notes=tuple(table_notes))
    if rules and table_cmp is not None:
        if not env_ok:
            table = TableResult(notes=tuple(table_notes) + ("no tuner table: it was measured with an environment "
                                                            "that is not recommended",))
        elif table_cmp.failed or table_cmp.regressions or not (table_cmp.gain > 0 and table_cmp.p_wilcoxon < 0.05):
            why = table_cmp.failed or ("; ".join(table_cmp.regressions) if table_cmp.regressions else
                                       f"{pct(table_cmp.gain):+.1f} %, Wilcoxon p={table_cmp.p_wilcoxon:.3f}")
            table = TableResult(notes=tuple(table_notes) + (f"no tuner table: with the table the guard sweep "
                                                            f"measured {why}",))
        else:
            table = TableResult(rules, overrides, table_cmp, tuple(table_notes))
    complete = [r for r in records if r.state == "complete" and r.duplicate_of is None]
    stopped = [r for r in records if r.state == "stopped" and r.duplicate_of is None]
    failed = [r for r in records if r.state == "failed" and r.duplicate_of is None and not r.reason.startswith("interrupted")]
    best = incumbent(records, noise, space)
    unset = tuple(k for k in base_env if k not in env)
    result = TuneResult(
        out_dir=str(out_dir), study_name=opts.study_name, storage_display=display, sampler=opts.sampler,
        repeats=opts.repeats, backend=backend.describe(), simulated=bool(backend.simulated), profile=profile,
        space=space.to_dict(), baseline_env=base_env, baseline_buckets=base_buckets,
        baseline_sizes=final.sizes_a if final else baseline["sizes"],
        trials_complete=len(complete), trials_failed=len(failed), trials_stopped=len(stopped),
        requeued=tuple(study.requeued), best=best[0] if best else None, verdicts=tuple(verdicts),
        effects=tuple(effects), env=env, unset=unset, final=final if env != base_env else None, replica=replica,
        noise=noise, noise_floor=floor, tuned_sizes=final.sizes_b if final else baseline["sizes"],
        tried=_tried(records, space), failures=dict(Counter(r.reason for r in failed).most_common()),
        measurements=study.measurements, nccl_version=version, table=table,
        notes=space.notes + tuple(default_notes) + tuple(verdict_notes) + tuple(scale_notes) +
        tuple(f"{k}={base_env[k]} removed: {why}" for k, why in flagged.items()),
        scale=plan.to_dict() if plan is not None else None)
    return write_outputs(result, backend, out_dir, opts.formats, opts.lint_findings)


def _on_another_group(job: Any) -> Any:
    """The replica runs where the other groups run it (Ray); in process it is another simulated group."""
    from dataclasses import replace
    return replace(job, group_hint="replica")
