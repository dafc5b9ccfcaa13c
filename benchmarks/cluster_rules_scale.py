"""Cross-node rules and the drift matrix over 256 ... 1,024 node snapshots: time, and linearity in nodes.

Builds N fixture snapshots in memory (dgx-h100 with a few drifted nodes), then times, per N:
the attribute table + drift (ClusterFacts.drift), the 22 cross-node rules on it, and rendering the
drift matrix as text and JSON. Also the load of N snapshot files from disk (what `cluster check
FOLDER` adds). Target: rules + matrix over 1,024 nodes under 2 s on two cores, and per-node cost
flat as N grows (the ratio t(N)/N against t(256)/256, measured in the same run, stays near 1).

    python benchmarks/cluster_rules_scale.py [--sizes 256,512,1024] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _facts(n: int):
    from ncdoc.cluster.facts import ClusterFacts
    from ncdoc.engine.cases import cluster_facts
    base = cluster_facts({"example": "dgx-h100", "nodes": 8,
                          "patch": {"node03": {"versions.nccl": "2.19.3"},
                                    "node05": {"hcas.hcas.3.ports.0.rate_gbps": 200.0},
                                    "node07": {"host.modules.nvidia_peermem": False}}})
    snaps = list(base.nodes.values())
    from ncdoc.startup.record import replace
    nodes = {}
    width = len(str(n))
    for i in range(n):
        s = snaps[i % 8] if i % 97 in (3, 5, 7) else snaps[0]     # a few drifted nodes, spread out
        name = f"gpu{i:0{width}d}"
        nodes[name] = s.replace(host=replace(s.host, hostname=name))
    return ClusterFacts(nodes, source="bench")


def measure(n: int, rules) -> dict:
    from ncdoc.cluster.render import render_check
    from ncdoc.engine.rules import Context, run_rules
    facts = _facts(n)
    t0 = time.perf_counter()
    facts.drift()
    t1 = time.perf_counter()
    report = run_rules(Context(cluster=facts), rules)
    t2 = time.perf_counter()
    render_check(facts, report, "text", color="never")
    render_check(facts, report, "json")
    t3 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, s in facts.nodes.items():
            (Path(tmp) / f"{name}.json").write_text(s.to_json(indent=None))
        from ncdoc.cluster.facts import load_inputs
        t4 = time.perf_counter()
        loaded = load_inputs([tmp])
        t5 = time.perf_counter()
        assert len(loaded.nodes) == n
    return {"nodes": n, "drift_s": t1 - t0, "rules_s": t2 - t1, "render_s": t3 - t2, "rules_and_matrix_s": t3 - t0,
            "load_s": t5 - t4, "findings": len(report.findings)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from ncdoc.checks import import_all
    from ncdoc.engine import ruleset
    import_all()
    rules = [r for r in ruleset.load() if r.pack == "cluster"]
    rows = [measure(int(x), rules) for x in args.sizes.split(",")]
    base = rows[0]["rules_and_matrix_s"] / rows[0]["nodes"]
    for r in rows:
        r["per_node_ratio_to_smallest"] = (r["rules_and_matrix_s"] / r["nodes"]) / base
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'nodes':>6}  {'drift':>7}  {'rules':>7}  {'render':>7}  {'total':>7}  {'per-node ratio':>14}  {'load files':>10}")
    for r in rows:
        print(f"{r['nodes']:>6}  {r['drift_s']:7.3f}  {r['rules_s']:7.3f}  {r['render_s']:7.3f}  "
              f"{r['rules_and_matrix_s']:7.3f}  {r['per_node_ratio_to_smallest']:14.2f}  {r['load_s']:10.3f}")
    print(f"target: rules + matrix over 1,024 nodes < 2 s; per-node ratio near 1 (linear); findings "
          f"{rows[-1]['findings']} at {rows[-1]['nodes']} nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
