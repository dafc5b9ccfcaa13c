"""The Ray launcher: per-node tasks pinned by node affinity, the node's name in NCDOC_NODE, a task past
its deadline force-cancelled, and (in a process of its own, on three raylets) a node lost mid-gather."""

import json
import os
import subprocess
import sys
import time

import pytest

from cluster_helpers import BIN, standin_env, write_snapshots
from paths import TESTS


def test_one_task_per_node_with_its_name_and_clock(ray_runtime, tmp_path):
    from ncdoc.cluster.ray_nodes import RayLauncher
    launcher = RayLauncher()
    nodes = launcher.nodes()
    assert len(nodes) == 1                      # the suite's local runtime: this machine
    before = time.time()
    runs = launcher.run_per_node(nodes, ["sh", "-c", "echo $NCDOC_NODE; echo oops >&2; exit 3"], timeout_s=30,
                                 log_dir=str(tmp_path))
    after = time.time()
    run = runs[nodes[0]]
    assert run.stdout.strip() == nodes[0]
    assert not run.ok and run.kind == "exit" and "exited with 3: oops" in run.reason
    assert before <= run.clock <= after             # the node's own clock, read while the task ran (one host here)
    assert (tmp_path / f"{nodes[0]}.out").read_text().startswith(nodes[0])


def test_a_hung_task_is_cancelled(ray_runtime, tmp_path, monkeypatch):
    from ncdoc.cluster import ray_nodes
    launcher = ray_nodes.RayLauncher()
    monkeypatch.setattr(ray_nodes, "START_GRACE_S", 0.5)

    def stuck(argv, env, timeout_s, node):       # a task that never returns (its node is wedged)
        time.sleep(3600)
    launcher._task = ray_runtime.remote(num_cpus=0, max_retries=0)(stuck)
    # without the cancel this call would never return (the task sleeps an hour)
    runs = launcher.run_per_node(launcher.nodes(), ["true"], timeout_s=1, log_dir=str(tmp_path))
    run = next(iter(runs.values()))
    assert run.kind == "timeout" and "Ray task cancelled" in run.reason


def test_unknown_nodes_are_refused(ray_runtime):
    from ncdoc.cluster.ray_nodes import RayLauncher
    from ncdoc.errors import UsageError
    with pytest.raises(UsageError, match="not live nodes of the Ray cluster: gpu99"):
        RayLauncher(nodes="gpu99")


def test_a_node_lost_mid_gather_costs_only_its_answer(tmp_path):
    pytest.importorskip("ray")
    snaps = tmp_path / "snaps"
    write_snapshots(snaps, {"example": "dgx-h100", "nodes": 3})
    env = standin_env(tmp_path, nodes="node[01-03]", snaps=snaps, faults={"nodes": 3})
    env.pop("SLURM_JOB_NODELIST")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(TESTS / "cluster" / "ray_cluster_gather.py"), str(tmp_path / "logs")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    assert res["nodes"] == ["node01", "node02", "node03"]
    assert res["first"] == ["node01", "node02", "node03"] and res["first_unreachable"] == []
    assert res["second"] == ["node01", "node02"]
    kind, reason = res["second_unreachable"]["node03"]
    assert kind in ("lost", "crash") and "Ray task failed" in reason
    assert res["offsets"] == ["node01", "node02", "node03"]
    assert str(BIN) in env["PATH"]
