"""Gather + check of 64 simulated nodes through the stand-in srun, against one node's `ncdoc check`.

The nodes are fixture snapshots (dgx-h100, two of them drifted) served by the stand-in node agent
(tests/fixtures/bin/ncdoc-fixture-node) on every "node" of the stand-in srun: one process per node,
labelled output, the node named by ncdoc's wrapper, exactly the path `ncdoc cluster snapshot` takes
on a real allocation, minus the network. Then `ncdoc cluster check` on the cluster file. Printed:
wall time of each, their sum (target: under 10 s on two cores) and the ratio to the baseline, one
`ncdoc check --snapshot` of a single node measured in the same run.

    python benchmarks/cluster_gather_check.py [--nodes 64] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = ROOT / "tests" / "fixtures" / "bin"


def _timed(cmd, env, cwd) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return time.perf_counter() - t0, p.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from ncdoc.engine.cases import cluster_facts
    facts = cluster_facts({"example": "dgx-h100", "nodes": args.nodes,
                           "patch": {"node07": {"host.modules.nvidia_peermem": False},
                                     "node33": {"hcas.hcas.3.ports.0.rate_gbps": 200.0}}})
    width = max(2, len(str(args.nodes)))
    with tempfile.TemporaryDirectory() as tmp:
        snaps = Path(tmp) / "snaps"
        snaps.mkdir()
        for name, snap in facts.nodes.items():
            (snaps / f"{name}.json").write_text(snap.to_json())
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SLURM_", "NCDOC_STANDIN"))}
        env.update(PATH=f"{BIN}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}",
                   SLURM_JOB_NODELIST=f"node[{1:0{width}d}-{args.nodes:0{width}d}]", SLURM_JOB_ID="1",
                   NCDOC_FIXTURE_SNAPS=str(snaps))
        ncdoc = [sys.executable, "-m", "ncdoc"]
        gather = ncdoc + ["cluster", "snapshot", "--launcher", "slurm", "--agent", "ncdoc-fixture-node",
                          "--out-dir", str(Path(tmp) / "out"), "-o", str(Path(tmp) / "cluster.json")]
        check = ncdoc + ["cluster", "check", str(Path(tmp) / "cluster.json")]
        single = ncdoc + ["check", "--snapshot", str(snaps / "node01.json")]
        _timed(single, env, tmp)                                   # warm the bytecode cache
        g, c, b = [], [], []
        for _ in range(args.runs):
            t, rc = _timed(gather, env, tmp)
            assert rc == 0, f"gather failed ({rc})"
            g.append(t)
            t, rc = _timed(check, env, tmp)
            assert rc == 1, f"check should report the two drifted nodes ({rc})"
            c.append(t)
            b.append(_timed(single, env, tmp)[0])
        doc = json.loads((Path(tmp) / "cluster.json").read_text())
        assert len(doc["nodes"]) == args.nodes
    res = {"nodes": args.nodes, "gather_s": statistics.median(g), "check_s": statistics.median(c),
           "total_s": statistics.median(g) + statistics.median(c), "baseline_single_check_s": statistics.median(b)}
    res["ratio_total_to_single_check"] = res["total_s"] / res["baseline_single_check_s"]
    res["per_node_ms"] = 1000 * res["total_s"] / args.nodes
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"gather of {args.nodes} simulated nodes (stand-in srun): {res['gather_s']:.2f} s")
        print(f"cluster check (cross-node rules + drift matrix):   {res['check_s']:.2f} s")
        print(f"total: {res['total_s']:.2f} s (target < 10 s), {res['per_node_ms']:.0f} ms per node")
        print(f"baseline, one node's ncdoc check: {res['baseline_single_check_s']:.2f} s; "
              f"ratio {res['ratio_total_to_single_check']:.1f}x for {args.nodes} nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
