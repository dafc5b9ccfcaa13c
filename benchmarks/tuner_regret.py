"""How close does a short study get to the best setting? (prints figures; not a test)

Scenarios are simulator clusters searched over the space `ncdoc tune` ships for their fabric
(tuners/spaces/), narrowed as the tune narrows it (safety.safe_space: nothing lint warns about, no
NCCL default), with a variable or two left out where the space is too big to enumerate; every method
searches that same space. A point's true value is its workload objective (log of the weighted
geometric-mean busbw over the profile's buckets) on the noise-free simulator, and the exhaustive
optimum is the best of every valid point. Three methods, 10 seeds each (the seed drives both the
sampler and the simulator's noise):

  ncdoc    the study `ncdoc tune` runs (TuneStudy: NCCL defaults, known-good starts, screening,
           joint search over the survivors, early stopping); its incumbent after k trials is the
           best shrunk estimate among them (ncdoc.tuner.study.ranked_trials);
  random   random points without replacement, 2 runs each, incumbent = best mean;
  coord    coordinate descent from NCCL's defaults (AutoCCL-style: one variable at a time, every
           value, keep the best, next variable, round again), 2 runs each, incumbent = best mean.

After k trials (k = 10, 20, 30, 50) the incumbent's true value over the optimum is what a user
would get. Targets: >= 0.98 at 30 trials in every scenario, never worse at 50 than at 30, ahead
of both baselines at 20 and 30. Also counted: measurements per study (runs of the workload), and
for the whole default `ncdoc tune` (study + confirmation + leave-one-out + table + guard sweep).

    .venv/bin/python benchmarks/tuner_regret.py [--seeds 10] [--scenario roce-qp-cost ...] [--no-full]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncdoc.tuner.backends import TrialFailed  # noqa: E402
from ncdoc.tuner.backends.sim import SimBackend, sim_cluster  # noqa: E402
from ncdoc.tuner.dispatch import InProcessExecutor  # noqa: E402
from ncdoc.tuner.profiles import get_profile  # noqa: E402
from ncdoc.tuner.safety import safe_space  # noqa: E402
from ncdoc.tuner.space import UNSET, apply_params  # noqa: E402
from ncdoc.tuner.space_file import load_space  # noqa: E402
from ncdoc.tuner.study import StudyConfig, TuneStudy, incumbent, summarise  # noqa: E402

CHECKPOINTS = (10, 20, 30, 50)
REPEATS = 2
OLD_DEFAULT_MEASUREMENTS = 343      # the count for the previous default study (50 trials x 3 + rest)

# name: (preset, profile, the shipped space it searches, variables left out so that every point can
# be enumerated in a minute or two, base env). Each space is narrowed as `ncdoc tune` narrows it.
SCENARIOS = {
    # RoCE across two leaves: QPs recover hashing losses up to a plateau, then cost; the split mode
    # matters only with several QPs; buffers interact with the chunk pipeline; the rest of the
    # RoCE space (TC, CROSS_NIC, GDR level, relaxed ordering, NVLS) is there to be screened out.
    "roce-qp-cost": ("h100-roce-8node", "fsdp", "roce", (), {}),
    # The same fabric with adaptive-routing switches: AR (and its threshold) beats any QP count.
    "roce-ar": ("h100-roce-8node-ar", "fsdp", "roce", (), {}),
    # All-to-all on a rail-optimised fabric at 16 nodes, from a job env that turned PXN off.
    "alltoall-rail": ("h100-ib-16node", "moe-alltoall", "ib", ("NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NVLS_ENABLE"),
                      {"NCCL_P2P_PXN_LEVEL": "0"}),
    # TCP sockets: helper threads and sockets per thread, product at most 64 (LL128 is never an
    # option: NCCL keeps it off over sockets and forcing it corrupts data).
    "socket-threads": ("h100-socket-2node", "dp-allreduce", "socket", (), {}),
    # RoCE with PFC on one traffic class only, across leaves: the class, then QPs.
    "roce-lossless-class": ("h100-roce-8node-lossless-tc", "dp-allreduce", "roce", ("NCCL_NVLSTREE_MAX_CHUNKSIZE",),
                            {}),
}


def make_space(space_name: str, drop, backend, profile):
    space = load_space(str(ROOT / "tuners" / "spaces" / f"{space_name}.yaml"))
    space = safe_space(space, backend.hardware(), profile.collectives)
    return space.only([v.name for v in space.variables if v.name not in drop]) if drop else space


def _points(space):
    seen = {}
    for combo in itertools.product(*(v.values for v in space.variables)):
        params = space.complete(dict(zip((v.name for v in space.variables), combo)))
        if not space.violations(params):
            seen.setdefault(tuple(sorted(params.items())), params)
    return list(seen.values())


def _score(backend, base, params, profile, repeat, base_buckets):
    m = backend.measure(apply_params(base, params), profile.workload(), repeat)
    buckets, _, _ = summarise(profile, [m], None)
    return profile.log_score(buckets, base_buckets)


def true_values(cluster, space, profile, base):
    """log objective of every valid point on the noise-free simulator (no jitter, no stragglers,
    no run-to-run ECMP collisions): the expectation a user's job gets, not one lucky run."""
    backend = SimBackend(dataclasses.replace(cluster, noise_sigma=0.0, straggler_prob=0.0))
    unit = {b.key: 1.0 for b in profile.buckets}
    out = {}
    for params in _points(space):
        try:
            out[tuple(sorted(params.items()))] = _score(backend, base, params, profile, 0, unit)
        except TrialFailed:
            continue
    return out


def _key(params):
    return tuple(sorted(params.items()))


def run_ncdoc(cluster, space, profile, base, trial_base, seed, trials):
    """[(params key, state) in measurement order], the study, its measurements."""
    import optuna
    backend = SimBackend(cluster, seed=seed, base_env=base)
    cfg = StudyConfig("bench", "memory", "tpe", seed, trials, REPEATS, 60.0, False)
    st = TuneStudy(cfg, space, profile, InProcessExecutor(backend), storage=optuna.storages.InMemoryStorage(),
                   base_env=base, trial_base=trial_base, describe={})
    st.open()
    st.measure_baseline()
    st.optimize()
    recs = sorted((r for r in st.records() if r.duplicate_of is None and r.state in ("complete", "failed", "stopped")),
                  key=lambda r: r.number)
    return recs, st


def ncdoc_incumbent(recs, noise, k, space=None):
    inc = incumbent(recs[:k], noise, space)
    return _key(inc[0].params) if inc else None


def _measure_mean(backend, base, params, profile, base_buckets, seed_offset):
    try:
        return statistics.fmean(_score(backend, base, params, profile, seed_offset + r, base_buckets)
                                for r in range(REPEATS))
    except TrialFailed:
        return None


def run_random(cluster, space, profile, base, trial_base, seed, trials):
    backend = SimBackend(cluster, seed=seed, base_env=base)
    base_buckets = summarise(profile, [backend.measure(base, profile.workload(), 0)], None)[0]
    pts = _points(space)
    random.Random(seed).shuffle(pts)
    out = []
    for i, p in enumerate(pts[:trials]):
        out.append((_key(p), _measure_mean(backend, trial_base, p, profile, base_buckets, 100 * i)))
    return out, len(out) * REPEATS + 1


def run_coord(cluster, space, profile, base, trial_base, seed, trials):
    """AutoCCL-style coordinate descent: from NCCL's defaults, sweep each variable's values with the
    others fixed at the current best, keep the best, move on; round again until the budget is spent."""
    backend = SimBackend(cluster, seed=seed, base_env=base)
    base_buckets = summarise(profile, [backend.measure(base, profile.workload(), 0)], None)[0]
    current = space.complete({v.name: UNSET for v in space.variables})
    seen: dict = {}
    out = []

    def measure(p):
        k = _key(p)
        if k not in seen:
            seen[k] = _measure_mean(backend, trial_base, p, profile, base_buckets, 100 * len(out))
            out.append((k, seen[k]))
        return seen[k]

    best = measure(current)
    changed = True
    while len(out) < trials and changed:
        changed = False
        for var in space.variables:
            for value in var.values:
                if len(out) >= trials:
                    break
                cand = space.complete({**current, var.name: value})
                if space.violations(cand) or _key(cand) == _key(current):
                    continue
                score = measure(cand)
                if score is not None and (best is None or score > best):
                    best, current, changed = score, cand, True
    return out, len(out) * REPEATS + 1


def baseline_incumbent(seq, k):
    scored = [(v, p) for p, v in seq[:k] if v is not None]
    return max(scored)[1] if scored else None


def full_tune_measurements(preset, prof):
    """Measurements of one whole default `ncdoc tune` of the scenario's cluster and profile."""
    import tempfile

    from ncdoc.tuner.run import TuneOptions, run_tune
    with tempfile.TemporaryDirectory() as tmp:
        res = run_tune(TuneOptions(backend="sim", preset=preset, profile=prof, storage="memory", out=tmp))
    return res.measurements, res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--no-full", action="store_true", help="skip the whole-tune measurement counts")
    args = ap.parse_args(argv)
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from ncdoc.tuner import safety
    names = args.scenario or list(SCENARIOS)
    print(f"median over {args.seeds} seeds of the incumbent's true objective / exhaustive optimum "
          f"(2 runs per trial at most)")
    print(f"{'scenario':<20} {'points':>6} {'defaults':>8}  {'method':<7} " +
          " ".join(f"{'@' + str(k):>6}" for k in CHECKPOINTS) + "  meas/study   time")
    verdicts = []
    for name in names:
        preset, prof_name, space_name, drop, base = SCENARIOS[name]
        profile = get_profile(prof_name)
        cluster = sim_cluster(preset=preset)
        space = make_space(space_name, drop, SimBackend(cluster), profile)
        flagged = safety.flagged(base, cluster.nccl_version)
        trial_base = {k: v for k, v in base.items() if k not in flagged}
        truth = true_values(cluster, space, profile, trial_base)
        best = max(truth.values())
        defaults = math.exp(truth[_key(space.complete({v.name: UNSET for v in space.variables}))] - best)
        med: dict[str, dict[int, float]] = {}
        for method in ("ncdoc", "random", "coord"):
            t0 = time.monotonic()
            fracs = {k: [] for k in CHECKPOINTS}
            meas = []
            for seed in range(args.seeds):
                if method == "ncdoc":
                    recs, st = run_ncdoc(cluster, space, profile, base, trial_base, seed, max(CHECKPOINTS))
                    meas.append(st.measurements)
                    for k in CHECKPOINTS:
                        inc = ncdoc_incumbent(recs, st.noise, k, space)
                        fracs[k].append(math.exp(truth.get(inc, -math.inf) - best) if inc else 0.0)
                    continue
                run = run_random if method == "random" else run_coord
                seq, n = run(cluster, space, profile, base, trial_base, seed, max(CHECKPOINTS))
                meas.append(n)
                for k in CHECKPOINTS:
                    inc = baseline_incumbent(seq, k)
                    fracs[k].append(math.exp(truth.get(inc, -math.inf) - best) if inc else 0.0)
            med[method] = {k: statistics.median(v) for k, v in fracs.items()}
            print(f"{name:<20} {len(truth):>6} {defaults:>8.3f}  {method:<7} " +
                  " ".join(f"{med[method][k]:>6.3f}" for k in CHECKPOINTS) +
                  f"  {statistics.median(meas):>10.0f} {time.monotonic() - t0:5.0f}s")
        n = med["ncdoc"]
        verdicts.append((name, n[30] >= 0.98, n[50] >= n[30] - 1e-9,
                         all(n[k] > max(med["random"][k], med["coord"][k]) for k in (20, 30)),
                         all(n[k] >= max(med["random"][k], med["coord"][k]) for k in (20, 30))))
    print()
    for name, ok30, mono, ahead, level in verdicts:
        print(f"{name:<20} >=0.98@30: {'yes' if ok30 else 'NO'}   @50>=@30: {'yes' if mono else 'NO'}   "
              f"ahead of both @20,@30: {'yes' if ahead else ('tied' if level else 'NO')}")
    if not args.no_full:
        from ncdoc.tuner.run import TuneOptions
        d = TuneOptions()
        print(f"\nmeasurements of a whole default `ncdoc tune` ({d.trials} trials, {d.repeats} runs, confirmation, "
              f"leave-one-out, table, guard sweep); the previous default study took ~{OLD_DEFAULT_MEASUREMENTS}")
        for name in names:
            preset, prof_name = SCENARIOS[name][:2]
            n, res = full_tune_measurements(preset, prof_name)
            print(f"  {name:<20} {preset:<28} {prof_name:<13} {n:>4} measurements "
                  f"({100 * n / OLD_DEFAULT_MEASUREMENTS:.0f} %); recommends {res.recommended or 'nothing'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
