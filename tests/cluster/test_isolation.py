"""Fault isolation: on the simulator (one slow node, one degraded rail, one flapping node, one node with
GPUDirect RDMA off), the bad node or rail is named in O(1) extra rounds after the first pairwise pass
(O(log N) by bisection); through the stand-in srun and nccl-tests, `ncdoc cluster test` finds the same
and prints the drain lines without running them."""

import json
import shlex

import pytest

from cluster_helpers import BIN, ncdoc, standin_calls, standin_env, write_snapshots
from ncdoc.cluster.fabric_sim import Fabric, FabricSpec
from ncdoc.cluster.isolation import isolate, sim_measurer


def _run(faults, n=16, scales=("pair",), **kw):
    spec = FabricSpec.from_dict({"nodes": n, "faults": faults, **kw})
    return isolate(spec.nodes, sim_measurer(Fabric(spec)), scales=scales, rails=spec.rails)


@pytest.mark.parametrize("n", [8, 32, 128])
def test_one_slow_node_in_constant_extra_rounds(n):
    bad = f"node{5:0{max(2, len(str(n)))}d}"
    r = _run({bad: {"net": 0.5}}, n=n)
    assert [(f.kind, f.subject) for f in r.findings] == [("bad-node", bad)]
    assert r.first_pass_rounds == 1 and r.extra_rounds == 2           # attribution + one confirmation
    pct = int(r.findings[0].evidence[0].split("(")[1].split(" %")[0])
    assert 45 <= pct <= 55                                            # half the line-rate figure


def test_bisection_needs_log_n_rounds():
    rounds = {}
    for n in (8, 64):
        bad = "node05" if n < 100 else "node005"
        r = _run({bad: {"net": 0.5}}, n=n, scales=("full",))
        assert [f.subject for f in r.findings] == [bad]
        rounds[n] = r.rounds
    assert rounds[64] - rounds[8] == 3                                 # log2(64) - log2(8)


def test_degraded_rail_gdr_off_and_flapping_node_are_told_apart():
    r = _run({"node05": {"rails": {"mlx5_3": 0.5}}, "node09": {"gdr": False}, "node12": {"flap": 0.7}},
             scales=("pair", "rail"))
    kinds = {f.subject: f.kind for f in r.findings}
    assert kinds["node05:mlx5_3"] == "bad-rail"                        # the rail, not the whole node
    assert "node05" not in kinds
    assert kinds["node09"] == "bad-node"                               # every rail slow: a node-wide problem
    gdr = next(f for f in r.findings if f.subject == "node09")
    assert any("8 of 8 rails" in e for e in gdr.evidence)
    assert any(s.startswith("node12") for s in kinds)                  # the flapping node is named ...
    assert set(kinds) <= {"node05:mlx5_3", "node09", "node12"} | {f"node12:{r}" for r in FabricSpec(()).rails}


def test_a_slow_node_alone_is_named_by_the_node_scale():
    r = _run({"node03": {"nvlink": 0.6}}, n=8, scales=("node", "pair"))
    assert [(f.kind, f.subject) for f in r.findings] == [("slow-node", "node03")]


def test_everything_slow_is_not_blamed_on_one_node():
    r = _run({f"node{i:02d}": {"net": 0.5} for i in range(1, 9)}, n=8)
    assert r.findings == []
    assert any("the fault is not one node" in n or "median" in n for n in r.notes)


def test_cluster_test_on_the_simulator_cli(tmp_path):
    spec = tmp_path / "faults.yaml"
    spec.write_text("nodes: 16\nfaults:\n  node07: {net: 0.4}\n  node11: {rails: {mlx5_9: 0.5}}\n")
    p = ncdoc(["cluster", "test", "--simulate", str(spec), "--scales", "pair,rail", "--out-dir", str(tmp_path / "o"),
               "--json"], standin_env(tmp_path, nodes="x", allocation=False), cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["bad_nodes"] == ["node07"] and doc["bad_rails"] == ["node11:mlx5_9"]
    assert doc["drain"]["slurm"][0].startswith("scontrol update NodeName=node07 State=DRAIN Reason=")
    assert json.loads((tmp_path / "o" / "results.json").read_text())["kind"] == "ncdoc-cluster-test"


@pytest.fixture(scope="module")
def snaps8(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snaps8")
    write_snapshots(folder, {"example": "dgx-h100", "nodes": 8})
    return folder


def test_cluster_test_through_srun_finds_the_bad_node_and_prints_the_drain(tmp_path, snaps8):
    env = standin_env(tmp_path, nodes="node[01-08]", faults={"nodes": 8, "faults": {"node06": {"net": 0.5}}})
    p = ncdoc(["cluster", "test", "--launcher", "slurm", "--snapshots", str(snaps8), "--gpus-per-node", "2",
               "--sizes", "1M,64M", "--nccl-tests-dir", str(BIN), "--out-dir", str(tmp_path / "o"), "--timeout", "30"],
              env, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "BAD NODE node06" in p.stdout
    assert "scontrol update NodeName=node06 State=DRAIN" in p.stdout
    assert "kubectl taint nodes node06 ncdoc.io/nccl-fault=bad-node:NoSchedule" in p.stdout
    calls = standin_calls(tmp_path)
    assert not any(isinstance(c, list) and c[0] == "scontrol" for c in calls)        # printed, not run
    srun = [c for c in calls if isinstance(c, list) and c[0] == "srun"]
    assert any("--ntasks-per-node=2" in c for c in srun)
    assert (tmp_path / "o" / "runs" / "round-001").is_dir()
    # the measurements were judged: NCCL's own lines confirm the env (NCCL_ALGO=Ring for the pair scale)
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert all(m["algo"] == "Ring" for m in doc["measurements"] if m["busbw"] is not None)


def test_drain_runs_scontrol_only_when_asked(tmp_path):
    spec = tmp_path / "faults.json"
    spec.write_text(json.dumps({"nodes": 8, "faults": {"node02": {"net": 0.3}}}))
    env = standin_env(tmp_path, nodes="x", allocation=False)
    p = ncdoc(["cluster", "test", "--simulate", str(spec), "--drain", "--out-dir", str(tmp_path / "o")], env,
              cwd=tmp_path)
    assert p.returncode == 1
    drains = [c for c in standin_calls(tmp_path) if isinstance(c, list) and c[0] == "scontrol"]
    assert len(drains) == 1 and drains[0][:4] == ["scontrol", "update", "NodeName=node02", "State=DRAIN"]
    assert "drained: scontrol update NodeName=node02" in p.stdout


@pytest.mark.parametrize("launcher, extra, head", [
    ("slurm", [], ["srun", "--nodelist=node[01-02]", "--nodes=2", "--ntasks=16", "--ntasks-per-node=8",
                   "--kill-on-bad-exit=1", "--export=ALL"]),
    ("mpirun", ["--mpi-flavour", "openmpi", "--nodes", "node[01-04]"],
     ["mpirun", "-np", "16", "-H", "node01:8,node02:8", "--bind-to", "none", "-x", "NCCL_ALGO=Ring"]),
])
def test_dry_run_prints_the_first_round(tmp_path, launcher, extra, head):
    env = standin_env(tmp_path, nodes="node[01-04]")
    p = ncdoc(["cluster", "test", "--launcher", launcher, *extra, "--scales", "pair", "--sizes", "1M", "--dry-run"],
              env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if not ln.startswith("#")]
    assert len(lines) == 2                                  # node01+node02, node03+node04
    argv = shlex.split(lines[0])
    if launcher == "slurm":
        assert argv[:2] == ["env", "NCCL_ALGO=Ring"] or "NCCL_ALGO=Ring" in argv[:6]
        argv = argv[argv.index("srun"):]
    assert argv[:len(head)] == head
    tail = argv[argv.index("all_reduce_perf"):]
    assert tail[:3] == ["all_reduce_perf", "-b", "1048576"] and "-T" in tail and "-c" in tail
    assert standin_calls(tmp_path) == []


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_clusters_end_with_a_note(n):
    r = _run({"node02": {"net": 0.5}}, n=n, scales=("pair",))
    assert r.findings == [] and r.notes and r.rounds <= 1
