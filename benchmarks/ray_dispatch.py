"""Throughput of concurrent trials on a local Ray with 1, 2 and 4 node groups (prints figures; not a test).

Each trial is what `ncdoc tune` dispatches (one Ray task in a fresh process with the trial's
env in runtime_env, reserving its node group's custom resource), running the sim backend with
a fixed sleep that stands for the benchmark run. Parallel efficiency at G groups is
throughput(G) / (G x throughput(1)); target >= 80 % at 4 groups.

    .venv/bin/python benchmarks/ray_dispatch.py [--sleep 5] [--waves 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ncdoc.tuner.backends.sim import SimBackend, sim_cluster  # noqa: E402
from ncdoc.tuner.dispatch import Job, RayExecutor, Step, env_tuple  # noqa: E402

WORKLOAD = (("all_reduce", (1 << 26, 1 << 28, 1 << 30)),)


def run(groups: int, n_trials: int, sleep_s: float) -> tuple[float, int]:
    backend = SimBackend(sim_cluster(preset="h100-roce-2node"), delay_s=sleep_s)
    ex = RayExecutor(backend, groups=groups)          # starts (and later stops) its own local Ray
    try:
        assert ex.slots == groups
        todo = [Job(f"t{i}", (Step("trial", env_tuple(env), 0),), WORKLOAD, 120.0)
                for i, env in enumerate({"NCCL_IB_QPS_PER_CONNECTION": str(1 + i % 8)} for i in range(n_trials))]
        ok = 0
        t0 = time.monotonic()
        while todo or ex.in_flight():
            while todo and len(ex.in_flight()) < ex.slots:
                ex.submit(todo.pop(0))
            ok += sum(r.ok for r in ex.wait())
        return time.monotonic() - t0, ok
    finally:
        ex.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep", type=float, default=5.0, help="seconds each simulated trial runs")
    ap.add_argument("--waves", type=int, default=2, help="trials per group")
    args = ap.parse_args(argv)
    print(f"each trial: fresh worker process + {args.sleep:g} s simulated benchmark; {args.waves} trials per group")
    print(f"{'groups':>6} {'trials':>6} {'wall s':>7} {'trials/min':>10} {'efficiency':>10}")
    base = None
    for groups in (1, 2, 4):
        n = groups * args.waves
        wall, ok = run(groups, n, args.sleep)
        rate = n / wall * 60.0
        base = base or rate
        eff = rate / (groups * base)
        print(f"{groups:>6} {n:>6} {wall:>7.1f} {rate:>10.2f} {eff:>9.0%}" + ("" if ok == n else f"  ({n - ok} failed)"))
    print(f"\ntarget: >= 80 % parallel efficiency at 4 groups: {'met' if eff >= 0.8 else 'NOT met'} ({eff:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
