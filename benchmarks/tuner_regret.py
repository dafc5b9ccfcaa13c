"""How close does a short study get to the best setting? (prints figures; not a test)

Scenarios are simulator clusters with small search spaces (3-4 variables x a few values) whose
optimum is found by enumerating every point. A point's true value is its workload objective
(the weighted geometric mean busbw of the profile's buckets) averaged over 8 noisy repeats.
Each study runs in process through the same code path as `ncdoc tune` (TuneStudy with the
in-process executor; noisy trials, 3 repeats each, median), 10 seeds per sampler. After k
measured trials the study's incumbent is the trial it scored best; its *true* value over the
optimum is what a user would get. Target: median >= 98 % of the optimum within 30 trials.

    .venv/bin/python benchmarks/tuner_regret.py [--seeds 10] [--scenario roce-qps ...]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ncdoc.tuner.backends.sim import SimBackend, sim_cluster  # noqa: E402
from ncdoc.tuner.dispatch import InProcessExecutor  # noqa: E402
from ncdoc.tuner.profiles import get_profile  # noqa: E402
from ncdoc.tuner.space import UNSET, apply_params  # noqa: E402
from ncdoc.tuner.space_file import parse_space  # noqa: E402
from ncdoc.tuner.study import StudyConfig, TuneStudy, summarise  # noqa: E402
from ncdoc.tuner.backends import TrialFailed  # noqa: E402

CHECKPOINTS = (10, 20, 30, 50)
TRUE_REPEATS = 8

SCENARIOS = {
    "roce-qps": ("h100-roce-2node", "dp-allreduce", {
        "NCCL_IB_QPS_PER_CONNECTION": ["unset", 2, 4, 8, 16],
        "NCCL_IB_SPLIT_DATA_ON_QPS": ["unset", 0, 1],
        "NCCL_BUFFSIZE": ["unset", 2097152, 8388608, 16777216],
        "NCCL_ALGO": ["unset", "Ring", "Tree", "NVLSTree"],
    }),
    "ib-algo-proto": ("h100-ib-8node", "dp-allreduce", {
        "NCCL_ALGO": ["unset", "Ring", "Tree", "NVLSTree"],
        "NCCL_PROTO": ["unset", "Simple", "LL128", "^LL128"],
        "NCCL_MIN_NCHANNELS": ["unset", 4, 8, 16, 32],
        "NCCL_NTHREADS": ["unset", 128, 256, 512],
    }),
    "socket-threads": ("h100-socket-2node", "dp-allreduce", {
        "NCCL_SOCKET_NTHREADS": ["unset", 1, 2, 4, 8, 16],
        "NCCL_NSOCKS_PERTHREAD": ["unset", 1, 2, 4, 8, 16],
        "NCCL_BUFFSIZE": ["unset", 8388608],
        "NCCL_ALGO": ["unset", "Ring", "Tree"],
    }),
    "a100-latency": ("a100-ib-4node", "latency", {
        "NCCL_ALGO": ["unset", "Ring", "Tree"],
        "NCCL_PROTO": ["unset", "LL", "LL128", "Simple"],
        "NCCL_MAX_NCHANNELS": ["unset", 4, 8, 16],
        "NCCL_NTHREADS": ["unset", 128, 256, 512],
    }),
}


def make_space(variables: dict) -> object:
    data = {"schema_version": 1, "name": "bench", "variables": {k: {"values": v} for k, v in variables.items()}}
    return parse_space(data, "<benchmark>")


def true_values(backend: SimBackend, space, profile) -> dict[tuple, float]:
    """log objective (weighted geometric mean busbw) of every point, averaged over noisy repeats."""
    workload = profile.workload()
    unit = {b.key: 1.0 for b in profile.buckets}
    out = {}
    for combo in itertools.product(*(v.values for v in space.variables)):
        params = dict(zip((v.name for v in space.variables), combo))
        env = apply_params(backend.baseline_env(), params)
        scores = []
        try:
            for r in range(TRUE_REPEATS):
                m = backend.measure(env, workload, 10_000 + r)
                buckets, _, _ = summarise(profile, [m], None)
                scores.append(profile.log_score(buckets, unit))
        except TrialFailed:
            continue
        out[tuple(sorted(params.items()))] = statistics.fmean(scores)
    return out


def run_study(backend, space, profile, sampler: str, seed: int, trials: int) -> list[tuple]:
    """The measured trials in order, as (params key, study score)."""
    import optuna

    storage = optuna.storages.InMemoryStorage()
    cfg = StudyConfig("bench", "memory", sampler, seed, trials, 3, 60.0, False)
    st = TuneStudy(cfg, space, profile, InProcessExecutor(backend), storage=storage, base_env={}, describe={})
    st.open()
    st.measure_baseline()
    st.optimize()
    seq = []
    for r in sorted(st.records(), key=lambda r: r.number):
        if r.duplicate_of is None and r.state in ("complete", "failed"):
            seq.append((tuple(sorted(r.params.items())), r.value if r.state == "complete" else None))
    return seq


def incumbent_fraction(seq: list[tuple], truth: dict, k: int, best: float) -> float:
    scored = [(v, p) for p, v in seq[:k] if v is not None]
    if not scored:
        return 0.0
    _, params = max(scored)
    return math.exp(truth.get(params, -math.inf) - best)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    args = ap.parse_args(argv)
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = args.scenario or list(SCENARIOS)
    print(f"median over {args.seeds} seeds of the incumbent's true objective / exhaustive optimum")
    print(f"{'scenario':<16} {'points':>6} {'defaults':>8}  {'sampler':<7} " +
          " ".join(f"{'@' + str(k):>7}" for k in CHECKPOINTS) + "   time")
    worst30 = 1.0
    for name in names:
        preset, prof_name, variables = SCENARIOS[name]
        profile = get_profile(prof_name)
        space = make_space(variables)
        backend = SimBackend(sim_cluster(preset=preset))
        truth = true_values(backend, space, profile)
        best = max(truth.values())
        defaults = math.exp(truth[tuple(sorted((v.name, UNSET) for v in space.variables))] - best)
        for sampler in ("tpe", "random"):
            t0 = time.monotonic()
            fracs = {k: [] for k in CHECKPOINTS}
            for seed in range(args.seeds):
                seq = run_study(backend, space, profile, sampler, seed, max(CHECKPOINTS))
                for k in CHECKPOINTS:
                    fracs[k].append(incumbent_fraction(seq, truth, k, best))
            med = {k: statistics.median(v) for k, v in fracs.items()}
            if sampler == "tpe":
                worst30 = min(worst30, med[30])
            print(f"{name:<16} {len(truth):>6} {defaults:>8.3f}  {sampler:<7} " +
                  " ".join(f"{med[k]:>7.3f}" for k in CHECKPOINTS) + f"  {time.monotonic() - t0:5.0f}s")
    print(f"\nTPE, worst scenario, median at 30 trials: {worst30:.3f} of the optimum "
          f"(target >= 0.98: {'met' if worst30 >= 0.98 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
