"""Tuning at scale: how well node groups run trials side by side, and what a launched measurement
costs beyond the benchmark (prints figures; not a test).

Part 1, the dispatcher alone: LaunchExecutor with 1, 2, 4 and 8 node groups, each job a backend
that sleeps --sleep seconds (standing for a benchmark run on the group's nodes). Efficiency at G
groups = throughput(G) / (G x throughput(1)), measured in this run.
Part 2, the real path through the stand-ins (tests/fixtures/bin: srun, nccl-tests with NCCL's INFO
lines): one measurement's wall time, of which parsing and the trust verdict (bench.evaluate) take
what share; then 1 against 2 node groups of 2 nodes. On a machine with few cores the stand-ins'
processes compete for them, so part 2's efficiency says more about this machine than about the
dispatcher; part 1 is the dispatcher's own figure.

    .venv/bin/python benchmarks/tune_groups.py [--sleep 0.5] [--waves 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncdoc.tuner.backends import Measurement, SizeResult  # noqa: E402
from ncdoc.tuner.dispatch import Job, LaunchExecutor, NodeGroup, Step, env_tuple  # noqa: E402

WORKLOAD = (("all_reduce", (1 << 20, 1 << 26)),)
BIN = ROOT / "tests" / "fixtures" / "bin"


class Sleeper:
    name = "sleeper"

    def __init__(self, sleep: float):
        self.sleep = sleep
        self.cancel = threading.Event()

    def launcher(self):
        return SimpleNamespace(cancel=self.cancel, nodes=lambda: [])

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        time.sleep(self.sleep)
        return Measurement((("all_reduce", (SizeResult(size=1 << 20, busbw=1.0),)),))


def _jobs(n: int) -> list[Job]:
    return [Job(f"t{i}", (Step("trial", env_tuple({"NCCL_BUFFSIZE": str(4194304 * (1 + i % 4))}), 0),), WORKLOAD, 600.0)
            for i in range(n)]


def _run(ex, jobs) -> float:
    """Wall time to finish `jobs`, keeping every group busy (as the study does)."""
    todo = list(jobs)
    t0 = time.monotonic()
    while todo or ex.in_flight():
        while todo and len(ex.in_flight()) < ex.slots:
            ex.submit(todo.pop(0))
        ex.wait()
    return time.monotonic() - t0


def dispatcher(sleep: float, waves: int) -> None:
    print(f"part 1: the dispatcher, jobs of {sleep:g} s, {waves} per group")
    base = None
    for g in (1, 2, 4, 8):
        ex = LaunchExecutor(Sleeper(sleep), [NodeGroup(f"g{i}", (f"n{i}",)) for i in range(g)])
        wall = _run(ex, _jobs(g * waves))
        thr = g * waves / wall
        base = base or thr
        print(f"  {g} group(s): {wall:6.2f} s, {thr:6.2f} jobs/s, efficiency {100 * thr / (g * base):5.1f} %")


def standins(waves: int) -> None:
    from ncdoc.cluster import bench
    from ncdoc.tuner.backends.launched import LaunchOptions
    from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend
    from ncdoc.tuner.space import Hardware

    tmp = Path(tempfile.mkdtemp(prefix="ncdoc-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SLURM_", "NCDOC_STANDIN"))}
    env.update(PATH=f"{BIN}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}",
               SLURM_JOB_NODELIST="node[01-04]", SLURM_JOB_ID="1")
    os.environ.update({k: v for k, v in env.items() if k.startswith("SLURM_")})
    hw = Hardware(fabric="ib", nodes=2, gpus_per_node=1, nics_per_node=8)
    be = NcclTestsBackend(str(BIN), hardware=hw, launch=LaunchOptions(launcher="slurm"), iters=20,
                          log_dir=str(tmp / "trials"), environ=env)
    print("part 2: nccl-tests stand-ins through srun (2 nodes x 1 rank per measurement)")
    t0 = time.monotonic()
    r, spec = be.bench_run(("node01", "node02"), {}, "all_reduce", (1 << 20, 1 << 26), timeout_s=60, key="probe")
    wall = time.monotonic() - t0
    assert r.ok, r.reason
    t1 = time.monotonic()
    for _ in range(20):
        bench.evaluate(spec, r.group, r.runs)
    judge = (time.monotonic() - t1) / 20
    print(f"  one measurement: {wall * 1000:7.1f} ms, of which parsing and the trust verdict "
          f"{judge * 1000:5.1f} ms ({100 * judge / wall:4.1f} %)")
    base = None
    for groups in ([("node01", "node02")], [("node01", "node02"), ("node03", "node04")]):
        ex = LaunchExecutor(be, [NodeGroup(f"g{i}", g) for i, g in enumerate(groups)])
        wall = _run(ex, _jobs(len(groups) * waves))
        thr = len(groups) * waves / wall
        base = base or thr
        print(f"  {len(groups)} group(s): {wall:6.2f} s, {thr:5.2f} measurements/s, efficiency "
              f"{100 * thr / (len(groups) * base):5.1f} % (on {os.cpu_count()} cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--sleep", type=float, default=0.5,
                    help="part 1: seconds one job of a node group lasts (default 0.5)")
    ap.add_argument("--waves", type=int, default=4,
                    help="jobs per node group in each run, both parts (default 4)")
    args = ap.parse_args()
    dispatcher(args.sleep, args.waves)
    standins(args.waves)


if __name__ == "__main__":
    main()
