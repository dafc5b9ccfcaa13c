"""`ncdoc demo`: the main job on the embedded default, no GPU needed."""

from __future__ import annotations

import argparse

NAME = "demo"
HELP = "run doctor, triage and a short simulated tune on a bundled two-node cluster (no GPU needed)"
DESCRIPTION = """\
Runs ncdoc's three jobs on a bundled two-node example cluster (8 x H100 with 8 x 400G RoCE
per node) launched with a misconfigured env: the pre-launch check, doctor, triage of the
launch script and of what all_reduce_perf measured, a generated env, and a short tune on
the simulator (in this process; every file it writes says SIMULATED).

It writes into OUT: evidence/ (the inputs), generated.env, nccl.env, nccl_tuner.conf,
EXPLAIN.md, the study database and report.html (everything on one page). Each step prints the command it runs, so you can repeat
it by hand or point it at your own files.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="ncdoc-demo", metavar="DIR",
                   help="folder for the demo's files (default: ./ncdoc-demo)")
    p.add_argument("--trials", type=int, default=30, help="tuning trials (default: 30)")
    p.add_argument("--seed", type=int, default=0, help="simulator and sampler seed (default: 0)")


def run(args: argparse.Namespace) -> int:
    from ncdoc.errors import UsageError
    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    from ncdoc.demo import main_entry
    return main_entry(args.out, args.trials, args.seed)
