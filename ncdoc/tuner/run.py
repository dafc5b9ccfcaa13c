"""`run_tune`: the whole tune as one use case (the CLI and `ncdoc demo` call this).

backend -> search space narrowed to its hardware -> study (baseline, trials) -> top-k
re-measured against the baseline, interleaved -> minimal env -> final interleaved check ->
nccl.env (+ other formats), nccl_tuner.conf, EXPLAIN.md, summary.json, all written atomically.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import BACKENDS, Backend
from ncdoc.tuner.confirm import (Comparison, Verdict, VariableEffect, compare, confirm, interleaved_job, minimal_env,
                                 noise_floor)
from ncdoc.tuner.profiles import Profile, get_profile
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import StudyConfig, TrialRecord, TuneStudy, check_sampler, storage_for

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TuneOptions:
    backend: str | None = None               # None: sim where no GPU is present, else nccl-tests
    preset: str | None = None
    snapshot: str | None = None
    example: str | None = None
    nodes: int | None = None
    fabric: dict = field(default_factory=dict)   # simulator fabric fields (fabric, nic_rate_gbps, ...)
    trials: int = 50
    repeats: int = 3
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
    top_k: int = 3
    confirm_pairs: int = 8
    min_gain: float = 0.01
    nccl_tests_dir: str | None = None
    gpus_per_node: int | None = None
    hosts: tuple[str, ...] = ()
    mpirun: str = "mpirun"
    sim_failures: str = "report"             # report | emulate (a simulated hang really hangs)
    lint_findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuneResult:
    out_dir: str
    study_name: str
    storage_display: str
    sampler: str
    repeats: int
    backend: dict
    profile: Profile
    space: dict
    baseline_env: dict
    baseline_buckets: dict
    baseline_sizes: dict
    trials_complete: int
    trials_failed: int
    requeued: tuple[int, ...]
    best: TrialRecord | None
    verdicts: tuple[Verdict, ...]
    effects: tuple[VariableEffect, ...]
    env: dict                                # recommended values to set (the minimal env), in order
    unset: tuple[str, ...]                   # variables to remove from today's environment
    final: Comparison | None                 # the recommended env against the baseline
    noise_floor: float
    tuned_sizes: dict
    tried: dict
    failures: dict
    tuner_rules: tuple = ()
    tuner_notes: tuple[str, ...] = ()
    files: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        fin = self.final
        return {
            "schema_version": SCHEMA_VERSION, "out_dir": self.out_dir, "study_name": self.study_name,
            "storage": self.storage_display, "sampler": self.sampler, "repeats": self.repeats,
            "backend": self.backend, "profile": self.profile.name, "space": self.space,
            "baseline_env": self.baseline_env, "trials_complete": self.trials_complete,
            "trials_failed": self.trials_failed, "requeued": list(self.requeued),
            "best_trial": None if self.best is None else {"number": self.best.number, "score": self.best.value,
                                                          "changes": self.best.changes()},
            "recommended_env": self.env, "unset": list(self.unset),
            "gain": None if fin is None else {"pct": round(fin.pct(fin.gain), 2), "lower_bound_pct":
                                              round(fin.pct(fin.lcb), 2), "pairs": fin.n},
            "noise_floor_pct": round(100 * self.noise_floor, 2),
            "candidates": [{"changes": {k: v for k, v in v.params.items() if v != UNSET}, "recommended": v.recommended,
                            "why": v.why} for v in self.verdicts],
            "minimal_env": [{"name": e.name, "value": e.value, "kept": e.kept, "why": e.why} for e in self.effects],
            "failures": self.failures, "files": self.files, "notes": list(self.notes),
        }


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


def create_backend(opts: TuneOptions, log: Callable[[str], None]) -> Backend:
    name = opts.backend or ("nccl-tests" if has_gpu() else "sim")
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")
    snap = _snapshot(opts)
    if name == "sim":
        from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
        if opts.preset and snap is not None:
            raise UsageError("--preset and --snapshot/--example both describe the cluster; give one")
        cluster = sim_cluster(preset=opts.preset, snapshot=snap, nodes=opts.nodes, **opts.fabric)
        base = _nccl_env(snap.env.as_dict()) if snap is not None else {}
        return SimBackend(cluster, seed=opts.seed, base_env=base, emulate_failures=opts.sim_failures == "emulate")
    # Real backends measure this cluster: its hardware comes from a snapshot (or this node, probed).
    if snap is None:
        from ncdoc.probes.live import capture
        snap = capture()
    from ncdoc.nccl.bandwidth import expected_bandwidth
    from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
    nodes = opts.nodes or max(1, len(opts.hosts))
    fab = {k: v for k, v in opts.fabric.items() if k in ("fabric", "gpus_per_node")}
    if opts.gpus_per_node:
        fab["gpus_per_node"] = opts.gpus_per_node
    hw = SimBackend(sim_cluster(snapshot=snap, nodes=nodes, **fab)).hardware()
    expect = expected_bandwidth(snap, nodes=nodes, local_ranks=hw.gpus_per_node)
    base = _nccl_env(dict(os.environ))
    if name == "torch":
        from ncdoc.tuner.backends.torch import TorchBackend, available
        why = available()
        if why:
            raise UsageError(f"backend torch is not available: {why}")
        return TorchBackend(hardware=hw, base_env=base, expectation=expect)
    from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend
    return NcclTestsBackend(opts.nccl_tests_dir, hardware=hw, base_env=base, gpus_per_node=opts.gpus_per_node,
                            hosts=opts.hosts, mpirun=opts.mpirun, expectation=expect,
                            collectives=get_profile(opts.profile, opts.collectives).collectives)


def _check(opts: TuneOptions) -> None:
    if opts.trials < 1 or opts.repeats < 1 or opts.confirm_pairs < 2 or opts.top_k < 0:
        raise UsageError("--trials and --repeats must be >= 1, --confirm-pairs >= 2, --top-k >= 0")
    check_sampler(opts.sampler)
    from ncdoc.envfiles.formats import FORMATS
    bad = [f for f in opts.formats if f not in FORMATS]
    if bad:
        raise UsageError(f"unknown --format {bad[0]!r} (expected one of {', '.join(FORMATS)})")


def _space(opts: TuneOptions, backend: Backend, profile: Profile, log: Callable[[str], None]) -> SearchSpace:
    hw = backend.hardware()
    space = load_space(opts.space or hw.fabric)
    if space.fabric not in ("any", hw.fabric):
        log(f"note: search space {space.name!r} is written for fabric {space.fabric}, the cluster uses {hw.fabric}")
    return space.for_hardware(hw, profile.collectives)


def _candidates(records: list[TrialRecord], base_env: dict, k: int) -> list[dict[str, str]]:
    seen, out = set(), []
    for r in sorted((r for r in records if r.state == "complete" and r.value and r.value > 1.0),
                    key=lambda r: -r.value):
        if apply_params(base_env, r.params) == base_env:
            continue
        key = tuple(sorted(r.params.items()))
        if key not in seen:
            seen.add(key)
            out.append(dict(r.params))
        if len(out) >= k:
            break
    return out


def _tried(records: list[TrialRecord], space: SearchSpace) -> dict[str, dict[str, tuple[float, int]]]:
    out: dict[str, dict[str, tuple[float, int]]] = {}
    for var in space.variables:
        per: dict[str, list[float]] = {}
        for r in records:
            if r.state == "complete" and r.value is not None and r.duplicate_of is None:
                per.setdefault(r.params.get(var.name, UNSET), []).append(r.value)
        out[var.name] = {v: (max(vals), len(vals)) for v, vals in per.items()}
    return out


def run_tune(options: TuneOptions, *, progress: Any = None, backend: Backend | None = None) -> TuneResult:
    """Run a whole tune. `progress`: an ncdoc.tuner.progress.Progress (default: silent);
    `backend`: a ready Backend instead of the one the options describe (custom backends, tests)."""
    from ncdoc.tuner.dispatch import make_executor
    from ncdoc.tuner.progress import Progress
    from ncdoc.tuner.outputs import write_outputs

    opts = options
    _check(opts)
    prog = progress or Progress(quiet=True)
    log = prog.note
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    backend = backend or create_backend(opts, log)
    profile = get_profile(opts.profile, opts.collectives)
    space = _space(opts, backend, profile, log)
    timeout = opts.timeout_s or (60.0 if backend.name == "sim" else 600.0)
    storage = storage_for(opts.storage, out_dir)
    display = opts.storage or str(out_dir / "study.db")
    groups = opts.groups
    cfg = StudyConfig(opts.study_name, display, opts.sampler, opts.seed, opts.trials, opts.repeats, timeout, opts.resume)
    base_env = backend.baseline_env()
    log(f"{backend.name} backend: {', '.join(f'{k}={v}' for k, v in backend.describe().items() if k != 'backend')}")
    log(f"search space {space.name}: {len(space.variables)} variables, {space.size} combinations; "
        f"profile {profile.name}: {', '.join(b.key for b in profile.buckets)}")
    # Ray prints worker-death notices on stdout from a background thread; stdout is for reports.
    with contextlib.redirect_stdout(sys.stderr), \
            make_executor(backend, kind=opts.executor, address=opts.ray_address, groups=groups, log=log) as ex:
        info_slots = ex.slots
        study = TuneStudy(cfg, space, profile, ex, storage=storage, base_env=base_env, describe=backend.describe(),
                          on_progress=lambda info: prog.update({**info, "slots": info_slots}), log=log)
        study.open()
        baseline = study.measure_baseline()
        study.optimize()
        prog.finish()
        records = study.records()
        base_buckets = baseline["buckets"]
        cands = _candidates(records, base_env, opts.top_k)
        common = dict(base_env=base_env, profile=profile, baseline_buckets=base_buckets, pairs=opts.confirm_pairs,
                      timeout_s=timeout, min_gain=opts.min_gain)
        log(f"re-measuring {len(cands)} candidate(s) against the baseline in {opts.confirm_pairs} interleaved rounds")
        verdicts = confirm(study.run_jobs, cands, **common) if cands else []
        accepted = sorted((v for v in verdicts if v.recommended), key=lambda v: -v.comparison.gain)
        effects: list[VariableEffect] = []
        final, floor = None, max(opts.min_gain, 0.0)
        env_params: dict[str, str] = {}
        if accepted:
            win = accepted[0]
            floor = win.noise_floor
            env_params, effects = minimal_env(study.run_jobs, win.params, space=space, log=log, **common)
            if env_params == {k: v for k, v in win.params.items() if base_env.get(k, UNSET) != v
                              and not (v == UNSET and k not in base_env)}:
                final = win.comparison
            elif env_params:
                env_b = apply_params(base_env, env_params)
                job = interleaved_job("final", [("A", base_env), ("B", env_b)], opts.confirm_pairs,
                                      tuple(profile.workload()), timeout, offset=9000)
                final = compare("final", study.run_jobs([job])["final"], profile, base_buckets, base_env, env_b)
                # The reduced env is a new configuration: it must clear the same bar on fresh runs.
                if final.failed or final.lcb <= noise_floor(final, opts.min_gain):
                    log(f"the minimal env ({', '.join(f'{k}={v}' for k, v in env_params.items())}) did not clear "
                        f"the floor on its own re-measurement ({final.pct(final.gain):+.1f} %); nothing is recommended")
                    final, env_params = None, {}
    complete = [r for r in records if r.state == "complete" and r.duplicate_of is None]
    failed = [r for r in records if r.state == "failed" and r.duplicate_of is None and not r.reason.startswith("interrupted")]
    tuned_env = apply_params(base_env, env_params) if final is not None else dict(base_env)
    result = TuneResult(
        out_dir=str(out_dir), study_name=opts.study_name, storage_display=display, sampler=opts.sampler,
        repeats=opts.repeats, backend=backend.describe(), profile=profile, space=space.to_dict(),
        baseline_env=base_env, baseline_buckets=base_buckets,
        baseline_sizes=final.sizes_a if final else baseline["sizes"],
        trials_complete=len(complete), trials_failed=len(failed), requeued=tuple(study.requeued),
        best=max(complete, key=lambda r: r.value or 0.0, default=None), verdicts=tuple(verdicts),
        effects=tuple(effects),
        env={k: v for k, v in tuned_env.items() if k in env_params or k in base_env},
        unset=tuple(k for k in base_env if k not in tuned_env), final=final, noise_floor=floor,
        tuned_sizes=final.sizes_b if final else baseline["sizes"], tried=_tried(records, space),
        failures=dict(Counter(r.reason for r in failed).most_common()),
        notes=space.notes)
    return write_outputs(result, backend, records, out_dir, opts.formats, opts.lint_findings)
