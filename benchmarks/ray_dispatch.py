"""What dispatching a trial costs, and how well node groups run trials side by side (prints figures; not a test).

Part 1, per-job overhead of each way a job runs, against the measurement itself:
  - one simulated measurement (the sim backend's measure(), the work a trial does);
  - a job in this process (the simulator's default executor);
  - a job on a reused Ray worker (nccl-tests and the simulator on Ray);
  - a job on a fresh Ray worker with its env in runtime_env (torch: NCCL inside the worker).
Part 2, parallel efficiency at 1, 2 and 4 node groups: each group runs --waves jobs that take
--sleep seconds (the simulator with a fixed delay standing for the benchmark run), on reused
workers as `ncdoc tune` dispatches them. Efficiency at G groups = throughput(G) / (G x
throughput(1)); target >= 90 % at 4 groups with 5 s trials.

    .venv/bin/python benchmarks/ray_dispatch.py [--sleep 5] [--waves 2] [--jobs 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ncdoc.tuner.backends.sim import SimBackend, sim_cluster  # noqa: E402
from ncdoc.tuner.dispatch import InProcessExecutor, Job, RayExecutor, Step, env_tuple  # noqa: E402

WORKLOAD = (("all_reduce", (1 << 23, 1 << 26, 1 << 28, 1 << 30)),)


class FreshSim(SimBackend):
    """The simulator dispatched as a backend whose NCCL lives in the worker would be (torch)."""
    needs_fresh_process = True
    in_process_ok = False


def _jobs(n: int, sleep: float = 0.0) -> list[Job]:
    envs = [{"NCCL_IB_QPS_PER_CONNECTION": str(1 + i % 8)} for i in range(n)]
    return [Job(f"t{i}", (Step("trial", env_tuple(env), 0),), WORKLOAD, 120.0 + sleep) for i, env in enumerate(envs)]


def _drain(ex, jobs) -> tuple[float, list[float], int]:
    """Wall time, per-job latency (submit to result, one at a time), successes."""
    lat, ok = [], 0
    t0 = time.monotonic()
    for job in jobs:
        s = time.monotonic()
        ex.submit(job)
        while ex.in_flight():
            for r in ex.wait():
                ok += r.ok
        lat.append(time.monotonic() - s)
    return time.monotonic() - t0, lat, ok


def overheads(n: int) -> None:
    cluster = sim_cluster(preset="h100-roce-8node")
    be = SimBackend(cluster)
    be.measure({}, WORKLOAD, 0)
    t = []
    for i in range(n):
        s = time.perf_counter()
        be.measure({"NCCL_IB_QPS_PER_CONNECTION": str(1 + i % 8)}, WORKLOAD, i)
        t.append(time.perf_counter() - s)
    measure = statistics.median(t)
    print(f"one simulated measurement (4 sizes): {1000 * measure:8.2f} ms")
    rows = [("in this process", InProcessExecutor(be))]
    for label, ex in rows:
        _, lat, _ = _drain(ex, _jobs(n))
        print(f"job {label:<28} {1000 * statistics.median(lat):8.2f} ms  (overhead {1000 * (statistics.median(lat) - measure):7.2f} ms)")
    for label, backend in (("on a reused Ray worker", be), ("on a fresh Ray worker", FreshSim(cluster))):
        ex = RayExecutor(backend, groups=1)
        try:
            _drain(ex, _jobs(2))                            # the first worker start is not per-trial cost
            _, lat, _ = _drain(ex, _jobs(n))
        finally:
            ex.close()
        print(f"job {label:<28} {1000 * statistics.median(lat):8.2f} ms  (overhead {1000 * (statistics.median(lat) - measure):7.2f} ms)")


def efficiency(sleep: float, waves: int) -> float:
    print(f"\neach job: {sleep:g} s simulated benchmark on a reused worker; {waves} jobs per group")
    print(f"{'groups':>6} {'jobs':>5} {'wall s':>7} {'jobs/min':>9} {'efficiency':>10}")
    base = eff = None
    for groups in (1, 2, 4):
        backend = SimBackend(sim_cluster(preset="h100-roce-8node"), delay_s=sleep)
        ex = RayExecutor(backend, groups=groups)          # starts (and later stops) its own local Ray
        try:
            assert ex.slots == groups
            for job in _jobs(groups):                      # every group's worker started before timing
                ex.submit(job)
            while ex.in_flight():
                ex.wait()
            todo = _jobs(groups * waves, sleep)
            ok, n = 0, len(todo)
            t0 = time.monotonic()
            while todo or ex.in_flight():
                while todo and len(ex.in_flight()) < ex.slots:
                    ex.submit(todo.pop(0))
                ok += sum(r.ok for r in ex.wait())
            wall = time.monotonic() - t0
        finally:
            ex.close()
        rate = n / wall * 60.0
        base = base or rate
        eff = rate / (groups * base)
        print(f"{groups:>6} {n:>5} {wall:>7.1f} {rate:>9.2f} {eff:>9.0%}" + ("" if ok == n else f"  ({n - ok} failed)"))
    return eff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep", type=float, default=5.0, help="seconds each simulated trial runs")
    ap.add_argument("--waves", type=int, default=2, help="jobs per group")
    ap.add_argument("--jobs", type=int, default=30, help="jobs for the per-job overhead")
    args = ap.parse_args(argv)
    overheads(args.jobs)
    eff = efficiency(args.sleep, args.waves)
    print(f"\ntarget: >= 90 % parallel efficiency at 4 groups: {'met' if eff >= 0.9 else 'NOT met'} ({eff:.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
