"""Rounds to find one bad node among N = 8 ... 1,024 on the simulator: pairwise two-pass vs bisection.

Each N is run with the bad node at several positions and seeds. Printed per N: the first-pass
rounds, the extra rounds pairwise isolation needs to name the node (attribution + confirmation:
constant in N) and the rounds bisection of a slow full-scale ring needs (1 + log2 N), and whether
the right node was named every time. The baseline is the first pass itself (1 round).

    python benchmarks/cluster_isolation_rounds.py [--sizes 8,16,...,1024] [--trials 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    from ncdoc.cluster.fabric_sim import Fabric, FabricSpec
    from ncdoc.cluster.isolation import isolate, sim_measurer
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="8,16,32,64,128,256,512,1024")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        width = max(2, len(str(n)))
        pair_extra, bis, found, jobs = [], [], 0, []
        for t in range(args.trials):
            bad = f"node{(t * 7919) % n + 1:0{width}d}"
            spec = FabricSpec.from_dict({"nodes": n, "seed": t, "faults": {bad: {"net": 0.5}}})
            r = isolate(spec.nodes, sim_measurer(Fabric(spec)), scales=("pair",))
            pair_extra.append(r.extra_rounds)
            jobs.append(len(r.outcomes))
            ok = [f.subject for f in r.findings] == [bad]
            b = isolate(spec.nodes, sim_measurer(Fabric(spec)), scales=("full",))
            bis.append(b.rounds)
            found += ok and [f.subject for f in b.findings] == [bad]
        rows.append({"nodes": n, "first_pass_rounds": 1, "pairwise_extra_rounds": max(pair_extra),
                     "pairwise_jobs": max(jobs), "bisection_rounds": max(bis), "log2_n": math.log2(n),
                     "found": f"{found}/{args.trials}"})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'N':>5}  {'pass 1':>6}  {'pairwise extra':>14}  {'jobs':>5}  {'bisection':>9}  {'log2 N':>6}  found")
    for r in rows:
        print(f"{r['nodes']:>5}  {r['first_pass_rounds']:>6}  {r['pairwise_extra_rounds']:>14}  {r['pairwise_jobs']:>5}  "
              f"{r['bisection_rounds']:>9}  {r['log2_n']:>6.0f}  {r['found']}")
    print("pairwise: O(1) extra rounds after the first pass (attribution + confirmation); bisection: 1 + log2 N")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
