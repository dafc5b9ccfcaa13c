"""Clusters made in the test, never committed: per-node snapshot files of a bundled example with a few
nodes drifted, and the results of `ncdoc cluster test` on the simulator."""

from __future__ import annotations

import json

# 64 nodes; four of them odd in four different ways (the text report's own test uses the same kinds)
DRIFT = {"node07": {"host.modules.nvidia_peermem": False},
         "node11": {"hcas.hcas.3.ports.0.rate_gbps": 200.0},
         "node40": {"versions.nccl": "2.19.3"}}
ENV = {"node04": {"NCCL_IB_HCA": None}}


def facts(nodes: int = 64, patch=None, env=None, hostnames=None):
    """A ClusterFacts of `nodes` dgx-h100 nodes (node01 ...), drifted as `patch` / `env` say."""
    from ncdoc.engine.cases import cluster_facts
    f = cluster_facts({"example": "dgx-h100", "nodes": nodes, "patch": DRIFT if patch is None else patch,
                       "env": ENV if env is None else env})
    if hostnames:
        from ncdoc.cluster.facts import ClusterFacts
        from ncdoc.startup.record import replace
        renamed = {}
        for n, s in f.nodes.items():
            name = hostnames.get(n, n)
            renamed[name] = s.replace(host=replace(s.host, hostname=name))
        f = ClusterFacts(renamed, source=f.source)
    return f


def write_snapshots(folder, **kw) -> dict:
    """One <node>.json per node (what `srun ncdoc snapshot -o snaps/%h.json` leaves); returns the drift."""
    folder.mkdir(parents=True, exist_ok=True)
    f = facts(**kw)
    for i, (name, snap) in enumerate(f.nodes.items()):
        (folder / f"n{i:04d}.json").write_text(snap.to_json() + "\n")
    return {d.key: d for d in f.drift()}


SIM = {"nodes": 16, "faults": {"node03": {"net": 0.5}, "node09": {"rails": {"mlx5_3": 0.5}}}}


def cluster_test_results(tmp_path, capsys) -> "object":
    """results.json of `ncdoc cluster test --simulate` (16 nodes, one bad node, one bad rail)."""
    from ncdoc.cli.main import main
    spec = tmp_path / "faults.json"
    spec.write_text(json.dumps(SIM))
    out = tmp_path / "ct"
    assert main(["cluster", "test", "--simulate", str(spec), "--scales", "node,pair,rail", "--out-dir",
                 str(out)]) == 1
    capsys.readouterr()
    return out / "results.json"
