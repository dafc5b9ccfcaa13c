"""`ncdoc demo`: the three jobs on a bundled two-node cluster, for someone with no GPU.

The cluster is two copies of the bundled `h100-roce` node (8 x H100, 8 x 400G RoCE,
NCCL 2.20) in two racks, launched with an env file full of the mistakes people really make.
The demo writes that evidence into a folder, then runs the same commands a user would type —
doctor, triage, env generate, tune (on the simulator, cluster given explicitly) — and prints
each command first, so every step can be repeated by hand.
"""

from __future__ import annotations

import os
import sys
import time

NODE_EXAMPLE = "h100-roce"
NODES = 2
# The fabric between the two nodes: RoCE through a leaf-spine network, each node under its own
# leaf, so their traffic crosses the spine, where ECMP hashes flows over 8 paths (what the
# simulator adds to the node snapshots).
ECMP_PATHS = 8
LEAF_NODES = 1

# What the user's launch script exported. Each line is a mistake seen in real bug reports.
BAD_LAUNCH = """\
#!/bin/bash
#SBATCH --nodes=2 --gpus-per-node=8
# Copied from an old wiki page.
export NCCL_DEBUG=INFO
export NCCL_IB_HCA=mlx5
export NCCL_SOCKET_IFNAME=docker0
export NCCL_IB_GID_INDEX=0
export NCCL_P2P_LEVEL=pxb
export NCCL_ALGO=Ring
export NCCL_IB_TIMEOUT=22abc
srun --mpi=pmix ./all_reduce_perf -b 8 -e 8G -f 2 -g 1
"""


def _say(text: str = "") -> None:
    print(text, flush=True)


def _step(title: str, argv: list[str]) -> int:
    from ncdoc.cli.main import main
    _say()
    _say(f"== {title}")
    _say("$ ncdoc " + " ".join(argv))
    rc = main(argv)
    _say(f"(exit code {rc})")
    return rc


def _write(path: str, text: str) -> None:
    from ncdoc.envfiles.formats import write_atomic
    write_atomic(path, text)


def prepare(out: str, *, seed: int = 0) -> dict[str, str]:
    """Write the demo's evidence into `out/evidence`: snapshots, launch script, nccl-tests output."""
    from ncdoc.evidence.launch_env import parse_launch_env
    from ncdoc.examples.machines import load_example
    from ncdoc.tuner.sim import cluster_from_snapshot, nccl_tests_text

    ev = os.path.join(out, "evidence")
    os.makedirs(ev, exist_ok=True)
    paths = {k: os.path.join(ev, name) for k, name in (
        ("launch", "launch.sbatch"), ("snapshot", "node.json"), ("tests", "all_reduce_perf.txt"))}
    node = load_example(NODE_EXAMPLE)
    # The node as the job saw it: the launch script's env is the process env.
    bad = node.replace(env=parse_launch_env(BAD_LAUNCH, paths["launch"]).to_nccl_env())
    _write(paths["launch"], BAD_LAUNCH)
    _write(paths["snapshot"], bad.to_json())
    # What the job measured: the simulated cluster under the launch script's env.
    cluster = cluster_from_snapshot(node, NODES, ecmp_paths=ECMP_PATHS, leaf_nodes=LEAF_NODES)
    sizes = [2 ** k for k in range(3, 34, 2)]
    _write(paths["tests"], nccl_tests_text(cluster, bad.env.as_dict(), "all_reduce", sizes, seed=seed))
    return paths


def run_demo(out: str, *, trials: int = 30, seed: int = 0) -> int:
    from ncdoc.examples.machines import load_example

    t0 = time.monotonic()
    os.makedirs(out, exist_ok=True)
    _say(f"ncdoc demo: two {NODE_EXAMPLE} nodes (8 x H100, 8 x 400G RoCE each) in two racks ({ECMP_PATHS} ECMP "
         f"spine paths between them), a launch script with common mistakes; output in {out}/")
    paths = prepare(out, seed=seed)

    _step("1. Pre-launch check: would this job start on a healthy path?",
          ["check", "--snapshot", paths["snapshot"]])
    _step("2. Doctor: the node and its env, in the order an expert checks",
          ["doctor", "--snapshot", paths["snapshot"]])
    _step("3. Triage: the launch script and what all_reduce_perf measured",
          ["triage", paths["launch"], paths["tests"], "--snapshot", paths["snapshot"], "--nodes", str(NODES)])

    generated = os.path.join(out, "generated.env")
    _step("4. A correct starting env from the topology", ["env", "generate", "--snapshot",
                                                          paths["snapshot"], "-o", generated])
    # The tune starts from the generated env: it only adds what a measurement justifies.
    from ncdoc.envfiles.generate import generate
    from ncdoc.snapshot import EnvValue, NcclEnv, Status
    node = load_example(NODE_EXAMPLE)
    gen = generate(node)
    fixed = node.replace(env=NcclEnv(Status.ok(f"file:{generated}"),
                                     tuple(EnvValue(k, v, f"file:{generated}") for k, v in gen.values().items())))
    fixed_path = os.path.join(out, "evidence", "node-fixed-env.json")
    _write(fixed_path, fixed.to_json())
    rc = _step("5. Tune on the simulator (SIMULATED: a rehearsal, not a measurement): screening, an Optuna "
               "search, candidates confirmed against the baseline, a guard sweep",
               ["tune", "--backend", "sim", "--snapshot", fixed_path, "--nodes", str(NODES),
                "--fabric", "roce", "--ecmp-paths", str(ECMP_PATHS), "--leaf-nodes", str(LEAF_NODES),
                # Sharded data parallel: its all-gather and reduce-scatter ride the network between the
                # racks (a 2-node all-reduce hides it behind NVLink SHARP).
                "--profile", "fsdp",
                "--trials", str(trials), "--seed", str(seed), "--out", out])
    _step("6. The report: findings, topology, busbw curve and the tuning story on one page",
          ["report", paths["launch"], paths["tests"], "--snapshot", paths["snapshot"], "--nodes", str(NODES),
           "--tune", out, "-o", os.path.join(out, "report.html")])
    _say()
    _say(f"Done in {time.monotonic() - t0:.0f} s. Files in {out}/:")
    for name in ("report.html", "nccl.env", "nccl_tuner.conf", "EXPLAIN.md", "generated.env"):
        p = os.path.join(out, name)
        if os.path.exists(p):
            _say(f"  {p}")
    return 0 if rc in (0, 1) else rc


def main_entry(out: str, trials: int, seed: int) -> int:
    try:
        return run_demo(out, trials=trials, seed=seed)
    finally:
        sys.stdout.flush()
