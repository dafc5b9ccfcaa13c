"""Trust in a measurement: nccl-tests through the stand-in srun, judged run by run. A run whose env did
not reach NCCL, whose ranks did not form one job or that printed wrong results is not a result; what
NCCL chose per size comes from its own TUNING lines."""

import pytest

from cluster_helpers import BIN, standin_env
from ncdoc.cluster import bench, tuning_log
from ncdoc.cluster.slurm import SlurmLauncher

SPEC = bench.BenchSpec(sizes=(1 << 20, 1 << 26), timeout_s=30, tests_dir=str(BIN))


def _measure(tmp_path, faults, env, nodes=("node01", "node02"), spec=SPEC):
    launcher = SlurmLauncher(environ=standin_env(tmp_path, nodes="node[01-04]", faults=faults))
    g = bench.group(launcher, nodes, env=env, gpus_per_node=2)
    return bench.run(launcher, [g], spec, log_dir=str(tmp_path / "runs"))[0]


def test_a_good_run_has_rows_with_what_nccl_chose(tmp_path):
    r = _measure(tmp_path, {"nodes": 4}, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MAX_NCHANNELS": "8",
                                          "NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"})
    assert r.ok, r.reason
    assert r.verdict.valid and r.verdict.nranks == 4 and r.verdict.nccl_versions == ("2.21.5",)
    assert [row.size for row in r.rows] == [1 << 20, 1 << 26]
    assert {(row.algo, row.proto, row.channels) for row in r.rows} == {("Ring", "Simple", 8)}
    assert r.rows[-1].busbw > r.rows[0].busbw > 0
    # the INFO log was asked for, nccl-tests' own timeout and checks were on, iterations scaled by size
    cmds = [c for c in r.to_dict()["commands"]]
    assert len(cmds) == 2 and all("-T" in c and "-c" in c for c in cmds)
    iters = [int(c[c.index("-n") + 1]) for c in cmds]
    assert iters[0] > iters[1]
    log = (tmp_path / "runs").glob("*.log")
    assert any("NCCL_DEBUG" not in p.read_text() and "set by environment" in p.read_text() for p in log)


def test_an_env_that_did_not_reach_nccl_rejects_the_trial(tmp_path):
    r = _measure(tmp_path, {"nodes": 4, "faults": {"node02": {"ignore_env": ["NCCL_ALGO"]}}}, {"NCCL_ALGO": "Tree"})
    assert not r.ok and not r.verdict.valid
    assert r.reason.startswith("invalid: NCCL_ALGO=Tree did not reach NCCL on node02")
    assert "2 of 4 ranks never reported it" in r.reason
    assert r.verdict.env_missing == {"NCCL_ALGO": ("node02",)}


def test_ranks_that_did_not_form_one_job(tmp_path):
    r = _measure(tmp_path, {"nodes": 4, "faults": {"node02": {"perf": "lose-rank"}}}, {})
    assert not r.ok
    assert "did not form one job" in r.reason


def test_a_lost_rank_count_or_a_crash(tmp_path):
    crash = _measure(tmp_path, {"nodes": 4, "faults": {"node02": {"perf": "crash"}}}, {})
    assert not crash.ok and crash.runs[0].kind in ("crash", "exit")
    assert "node02" in crash.runs[0].output


def test_a_hang_ends_at_the_nccl_tests_timeout(tmp_path):
    spec = bench.BenchSpec(sizes=(1 << 20,), timeout_s=2, tests_dir=str(BIN))
    r = _measure(tmp_path, {"nodes": 4, "faults": {"node01": {"perf": "hang"}}}, {}, spec=spec)
    assert not r.ok
    assert "operation timed out" in r.runs[0].output or r.runs[0].kind == "timeout"


def test_mixed_nccl_versions_and_missing_info_log():
    from ncdoc.cluster.trust import judge
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    table = ("# nccl-tests version 2.19.6 nccl-headers=22105 nccl-library=22105\n# nThread 1 nGpus 1 minBytes 8 "
             "maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n"
             "#\n# Using devices\n#  Rank  0 Group  0 Pid   1000 on     node01 device  0 [0000:18:00] H100\n"
             "#  Rank  1 Group  0 Pid   1001 on     node02 device  0 [0000:18:00] H100\n#\n"
             "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw  "
             " busbw  #wrong\n"
             "     1048576        262144     float     sum      -1    20.58   50.96   76.44       0    20.58   50.96  "
             " 76.44       0\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 76.44 \n")
    tests = parse_nccl_tests(table.splitlines(), "t")
    logs = ["node01:1000:1000 [0] NCCL INFO NCCL version 2.21.5+cuda12.2",
            "node02:1001:1001 [0] NCCL INFO NCCL version 2.19.3+cuda12.2"]
    v = judge(tests, tuning_log.read(logs), expected_ranks=2, tuned={})
    assert not v.valid and "different NCCL versions (2.19.3 on node02; 2.21.5 on node01)" in v.reasons[0]
    v = judge(tests, tuning_log.read([]), expected_ranks=2, tuned={"NCCL_ALGO": "Ring"})
    assert not v.valid and "no NCCL INFO lines" in v.reasons[0]
    v = judge(tests, tuning_log.read(logs[:1] + ["node02:1001:1001 [0] NCCL INFO NCCL version 2.21.5+cuda12.2"]),
              expected_ranks=4, tuned={})
    assert not v.valid and "saw 2 rank(s), 4 were launched" in v.reasons[0]


@pytest.mark.parametrize("line, pick", [
    ("h:1:1 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}",
     ("AllReduce", 1048576, "Ring", "Simple", 16)),
    ("h:1:1 [0] NCCL INFO AllGather: 4096 Bytes -> Algo NVLS_TREE proto LL128 channel{Lo..Hi}={2..3}",
     ("AllGather", 4096, "NVLSTree", "LL128", 2)),
    ("h:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo 0 proto 0 time 12.500000", ("AllReduce", 8, "Tree", "LL", None)),
    ("0: h:1:1 [0] NCCL INFO 65536 Bytes -> Algo 1 proto 1 time 9.1", (None, 65536, "Ring", "LL128", None)),
])
def test_tuning_lines_of_every_release(line, pick):
    got = tuning_log.read([line]).picks
    assert [(p.collective, p.nbytes, p.algo, p.proto, p.channels) for p in got] == [pick]


def test_env_lines_in_both_forms_per_rank():
    log = tuning_log.read(["a:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 4194304.",
                           "a:1:1 [0] NCCL INFO NCCL_IB_HCA set to =mlx5_0:1",
                           "b:2:2 [0] NCCL INFO NCCL_ALGO set by environment to Ring"])
    assert log.env == {"a:1": {"NCCL_BUFFSIZE": "4194304", "NCCL_IB_HCA": "=mlx5_0:1"}, "b:2": {"NCCL_ALGO": "Ring"}}
    from ncdoc.cluster.trust import _same
    assert _same("0x400000", "4194304") and not _same("Ring", "Tree")


def _measure_group(tmp_path, faults, env, **checks):
    launcher = SlurmLauncher(environ=standin_env(tmp_path, nodes="node[01-04]", faults=faults))
    g = bench.group(launcher, ("node01", "node02"), env=env, gpus_per_node=2, **checks)
    return bench.run(launcher, [g], SPEC, log_dir=str(tmp_path / "runs"))[0]


def test_nodes_that_run_different_nccl_envs_are_not_one_measurement(tmp_path):
    """Today's variables need no ENV line of their own, but every node must have read the same: an
    nccl.conf on some nodes only, a launcher passing the env to some ranks only."""
    r = _measure_group(tmp_path, {"nodes": 4, "faults": {"node02": {"ignore_env": ["NCCL_SOCKET_IFNAME"]}}},
                       {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_ALGO": "Ring"}, tuned={"NCCL_ALGO": "Ring"})
    assert not r.ok and r.verdict.env_uneven == {"NCCL_SOCKET_IFNAME": {"node01": "eth0", "node02": None}}
    assert "the nodes did not run with the same NCCL environment: NCCL_SOCKET_IFNAME" in r.reason
    assert "unset on node02" in r.reason
    ok = _measure_group(tmp_path, {"nodes": 4}, {"NCCL_SOCKET_IFNAME": "eth0"}, tuned={})
    assert ok.ok and ok.verdict.env_uneven == {}


def test_a_variable_the_run_is_meant_to_be_without_must_not_reach_nccl(tmp_path):
    r = _measure_group(tmp_path, {"nodes": 4}, {"NCCL_IB_HCA": "mlx5_0"}, tuned={}, unset=("NCCL_IB_HCA",))
    assert not r.ok and "NCCL_IB_HCA was meant to be unset, but NCCL read 'mlx5_0' on node01, node02" in r.reason
