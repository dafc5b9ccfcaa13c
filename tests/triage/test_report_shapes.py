"""`ncdoc triage` on evidence shaped like real bug reports: launch lines above a run, summary-only
pastes, PHB topologies, headerless GID tables, lone ports that are down, env files alone, RoCE
with an old NCCL, and a verdict that prefers what was seen failing over what was merely set.

Every input here is written by the test, in the exact formats the tools print.
"""

from __future__ import annotations

import json

import pytest

from ncdoc.cli.main import main


def run_json(capsys, *argv):
    rc = main(["triage", *map(str, argv), "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def by_name(doc) -> dict:
    return {f["name"]: f for f in doc["findings"]}


TABLE = """\
# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  40211 on     gpu-a1 device  0 [0x1b] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  51877 on     gpu-b1 device  0 [0x1b] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  1073741824     268435456     float     sum      -1   912345    1.18    1.18      0   910012    1.18    1.18      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.18
#
"""
LAUNCH = ("$ mpirun -np 2 -H gpu-a1:1,gpu-b1:1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=ens5 "
          "./build/all_reduce_perf -b 1G -e 1G -g 1\n")


# ---------------------------------------------------------------- R1: the launch line above a run

def test_launch_line_above_nccl_tests_output_sets_the_env(capsys, tmp_path):
    path = write(tmp_path, "run.txt", LAUNCH + TABLE)
    rc, doc, err = run_json(capsys, path)
    assert doc["inputs"][0]["kind"] == "nccl_tests"
    assert doc["inputs"][0]["read_as"] == ["nccl_tests", "env"]
    assert doc["facts"]["env"] == {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "ens5"}
    ib = by_name(doc)["ib-disabled-by-env"]
    assert ib["severity"] == "warning" and "TCP sockets between nodes" in ib["message"]
    assert ib["evidence"][0]["where"] == f"{path}:1" and "mpirun" in ib["evidence"][0]["text"]
    assert doc["facts"]["peak_busbw_gbps"] == pytest.approx(1.18)


def test_cli_env_beats_the_launch_line(capsys, tmp_path):
    path = write(tmp_path, "run.txt", LAUNCH + TABLE)
    rc, doc, _ = run_json(capsys, path, "--env", "NCCL_IB_DISABLE=0")
    assert doc["facts"]["env"]["NCCL_IB_DISABLE"] == "0"
    assert doc["facts"]["env"]["NCCL_SOCKET_IFNAME"] == "ens5"
    assert "ib-disabled-by-env" not in by_name(doc)


def test_launch_line_above_an_nccl_log(capsys, tmp_path):
    log = ("NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0,mlx5_1 torchrun --nproc_per_node 8 train.py\n"
           "gpu-a1:2231:2231 [0] NCCL INFO Bootstrap : Using ens5:10.0.3.11<0>\n"
           "NCCL version 2.19.3+cuda12.3\n"
           "gpu-a1:2231:2290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ens5:10.0.3.11<0>\n")
    path = write(tmp_path, "train.log", log)
    rc, doc, _ = run_json(capsys, path)
    assert doc["inputs"][0]["read_as"] == ["nccl_log", "env"]
    assert doc["facts"]["env"]["NCCL_IB_HCA"] == "mlx5_0,mlx5_1"


def test_log_prose_is_not_read_as_a_launch_setting(capsys, tmp_path):
    log = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, unhandled system error "
           "(run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6\n"
           "gpu-a1:2231:2231 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens5\n"
           "gpu-a1:2231:2231 [0] NCCL INFO Bootstrap : Using ens5:10.0.3.11<0>\n")
    path = write(tmp_path, "err.log", log)
    rc, doc, _ = run_json(capsys, path)
    assert "env" not in doc["inputs"][0]["read_as"]
    assert "NCCL_DEBUG" not in doc["facts"]["env"]


def test_launch_lines_keep_their_line_numbers_among_log_lines():
    from ncdoc.evidence.launch_env import parse_launch_env_in_run
    lines = ["gpu-a1:2231:2231 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_4",
             "step=100 loss=0.52 lr=1e-4",
             "mpirun -np 16 --hostfile hosts \\",
             "    -x NCCL_IB_HCA=mlx5_0,mlx5_1 -x LD_LIBRARY_PATH \\",
             "    ./build/all_reduce_perf -b 8 -e 8G",
             "gpu-a1:2231:2231 [0] NCCL INFO Bootstrap : Using ens5:10.0.3.11<0>",
             "export NCCL_DEBUG=INFO"]
    found = parse_launch_env_in_run(lines, "run.txt")
    assert [(v.name, v.value, v.line) for v in found.values] == [("NCCL_IB_HCA", "mlx5_0,mlx5_1", 4),
                                                                 ("NCCL_DEBUG", "INFO", 7)]
    assert [p.name for p in found.inherited] == ["LD_LIBRARY_PATH"]


def test_launch_line_of_a_streamed_log(monkeypatch, tmp_path):
    import ncdoc.importers.inputs
    from ncdoc.triage.run import triage
    monkeypatch.setattr(ncdoc.importers.inputs, "STREAM_BYTES", 100)
    path = write(tmp_path, "run.txt", LAUNCH + TABLE)
    result = triage([path])
    assert result.inputs[0].read_as == ("nccl_tests", "env")
    assert result.facts["env"]["NCCL_IB_DISABLE"] == "1"


# ---------------------------------------------------------------- R2: summary lines alone

def test_summary_only_paste_reports_wrong_results(capsys, tmp_path):
    path = write(tmp_path, "grep.txt", "$ grep -E 'Out of bounds|Avg bus' run.log\n"
                                       "# Out of bounds values : 7 FAILED\n# Avg bus bandwidth    : 61.25 \n")
    rc, doc, _ = run_json(capsys, path)
    assert rc == 1 and doc["inputs"][0]["read_as"] == ["nccl_tests"] and doc["inputs"][0]["notes"] == []
    assert by_name(doc)["nccl-tests-wrong-results"]["severity"] == "error"
    assert doc["verdict"]["name"] == "nccl-tests-wrong-results"
    assert doc["verdict"]["evidence"][0]["where"] == f"{path}:2"      # the FAILED line itself
    src = doc["facts"]["sources"][0]["facts"]
    assert src["avg_busbw_gbps"] == pytest.approx(61.25) and src["out_of_bounds"] == 7


def test_summary_only_ok_paste_is_read_and_clean(capsys, tmp_path):
    path = write(tmp_path, "ok.txt", "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 362.198 \n")
    rc, doc, _ = run_json(capsys, path)
    assert doc["inputs"][0]["read_as"] == ["nccl_tests"]
    assert "nccl-tests-wrong-results" not in by_name(doc)
    assert doc["facts"]["sources"][0]["facts"]["avg_busbw_gbps"] == pytest.approx(362.198)


# ---------------------------------------------------------------- R3 / minor: PHB and one-node runs

TOPO_PHB = ("\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\tPHB\tSYS\t0-23\t0\n"
            "GPU1\tSYS\t X \tSYS\tPHB\t24-47\t1\n"
            "NIC0\tPHB\tSYS\t X \tSYS\n"
            "NIC1\tSYS\tPHB\tSYS\t X \n\n"
            "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")


def test_phb_nic_means_gdr_off_at_the_default_level(capsys, tmp_path):
    rc, doc, _ = run_json(capsys, write(tmp_path, "topo.txt", TOPO_PHB))
    f = by_name(doc)["gpu-without-local-nic"]
    assert f["severity"] == "warning"
    assert "PHB" in f["message"] and "host bridge" in f["message"] and "host memory" in f["message"]
    assert "GPU0" in f["message"] and "GPU1" in f["message"]


def test_phb_is_fine_when_the_gdr_level_covers_it(capsys, tmp_path):
    rc, doc, _ = run_json(capsys, write(tmp_path, "topo.txt", TOPO_PHB), "--env", "NCCL_NET_GDR_LEVEL=PHB")
    assert "gpu-without-local-nic" not in by_name(doc)


def test_far_nic_on_a_one_node_run_is_info(capsys, tmp_path):
    topo = write(tmp_path, "topo.txt", TOPO_PHB)
    # both ranks on gpu-a1: rank 0 lists every rank's device, so the run is on one node
    one = TABLE.replace("Pid  51877 on     gpu-b1 device  0", "Pid  51877 on     gpu-a1 device  1")
    rc, doc, _ = run_json(capsys, topo, write(tmp_path, "one.txt", one))
    assert doc["facts"]["nodes"] == 1
    f = by_name(doc)["gpu-without-local-nic"]
    assert f["severity"] == "info" and "one node" in f["message"]


# ---------------------------------------------------------------- R4: a GID table without its header

GIDS = ("\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0e42:a1ff:fe5b:7c10, RoCE v1\n"
        "\t\t\tGID[  1]:\t\tfe80::e42:a1ff:fe5b:7c10, RoCE v2\n"
        "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:0a14:0b07, RoCE v1\n"
        "\t\t\tGID[  3]:\t\t::ffff:10.20.11.7, RoCE v2\n")


def test_headerless_gid_table_is_read_as_one_unnamed_port(capsys, tmp_path):
    rc, doc, err = run_json(capsys, write(tmp_path, "gids.txt", GIDS), "--env", "NCCL_IB_GID_INDEX=1")
    inp = doc["inputs"][0]
    assert rc == 1 and inp["kind"] == "ibv_devinfo" and inp["read_as"] == ["ibv_devinfo"]
    assert any("without their hca_id line" in n for n in inp["notes"])
    assert doc["facts"]["ports"][0]["link_layer"] == "Ethernet"
    f = by_name(doc)["roce-gid-link-local"]
    assert f["severity"] == "error" and "NCCL_IB_GID_INDEX=1" in f["message"]


def test_headerless_gid_table_takes_the_device_from_the_command_line(capsys, tmp_path):
    text = "$ ibv_devinfo -d mlx5_bond_0 -v\n\t\t\tphys_state:\t\tLINK_UP (5)\n" + GIDS
    rc, doc, _ = run_json(capsys, write(tmp_path, "gids.txt", text), "--env", "NCCL_IB_GID_INDEX=3")
    assert doc["facts"]["ports"][0]["device"] == "mlx5_bond_0"
    assert "roce-gid-link-local" not in by_name(doc) and "roce-gid-v1" not in by_name(doc)


# ---------------------------------------------------------------- R5: ports that are down

IBSTAT_ONE = """\
CA 'mlx5_0'
\tCA type: MT4123
\tNumber of ports: 1
\tFirmware version: 20.35.1012
\tHardware version: 0
\tNode GUID: 0x08c0eb0300a1b2c4
\tSystem image GUID: 0x08c0eb0300a1b2c4
\tPort 1:
\t\tState: Down
\t\tPhysical state: LinkUp
\t\tRate: 200
\t\tBase lid: 65535
\t\tLMC: 0
\t\tSM lid: 3
\t\tCapability mask: 0xa651e848
\t\tPort GUID: 0x08c0eb0300a1b2c4
\t\tLink layer: InfiniBand
"""


def test_lone_port_down_with_link_up_points_at_the_sm_and_tcp(capsys, tmp_path):
    rc, doc, _ = run_json(capsys, write(tmp_path, "ibstat.txt", IBSTAT_ONE))
    f = by_name(doc)["port-down"]
    assert f["severity"] == "error"
    assert "subnet manager" in f["message"] and "TCP sockets" in f["message"]
    assert "other NICs" not in f["message"] and "cable is fine" in f["message"]
    assert "subnet manager" in f["fix"] and "cable" not in f["fix"]


def test_vf_port_down_asks_for_sm_virtualization(capsys, tmp_path):
    vf = IBSTAT_ONE.replace("MT4123", "MT4124").replace("CA 'mlx5_0'", "CA 'mlx5_7'")
    rc, doc, _ = run_json(capsys, write(tmp_path, "ibstat.txt", vf))
    f = by_name(doc)["port-down"]
    assert "virtual function" in f["message"] and "virtualization" in f["message"]
    assert "GUID" in f["fix"]


def test_disabled_port_beside_an_active_one_is_a_warning(capsys, tmp_path):
    second = (IBSTAT_ONE.replace("State: Down", "State: Active").replace("Base lid: 65535", "Base lid: 17")
              + IBSTAT_ONE.replace("mlx5_0", "mlx5_1").replace("Physical state: LinkUp", "Physical state: Disabled"))
    rc, doc, _ = run_json(capsys, write(tmp_path, "ibstat.txt", second))
    f = by_name(doc)["port-down"]
    assert f["severity"] == "warning" and "mlx5_1" in f["message"] and rc == 0


# ---------------------------------------------------------------- R6: env files alone

def test_env_file_alone(capsys, tmp_path):
    env = write(tmp_path, "job.sh", "export NCCL_IB_DISABLE=1\nexport NCCL_BLOCKING_WAIT=1\n"
                                    "export NCCL_SHM_DISABLE=0\nexport NCCL_IB_TIMEOUTS=22\nsrun python train.py\n")
    rc, doc, _ = run_json(capsys, env)
    f = by_name(doc)
    assert f["ib-disabled-by-env"]["severity"] == "warning"
    assert "wrong if these nodes have IB/RoCE ports" in f["ib-disabled-by-env"]["message"]
    unknown = {x["message"].split()[0]: x for x in doc["findings"] if x["name"] == "unknown-nccl-var"}
    pt = unknown["NCCL_BLOCKING_WAIT"]
    assert pt["severity"] == "info" and "PyTorch" in pt["message"] and "TORCH_NCCL_BLOCKING_WAIT" in pt["message"]
    assert "not read by anything" not in pt["message"]
    assert "debug-var-in-production" not in f          # NCCL_SHM_DISABLE=0 is NCCL's default
    assert "(see the suggestion)" not in unknown["NCCL_IB_TIMEOUTS"]["fix"]


def test_ib_disabled_with_active_ports_is_an_error(capsys, tmp_path):
    env = write(tmp_path, "job.sh", "export NCCL_IB_DISABLE=1\n")
    ibstat = write(tmp_path, "ibstat.txt", IBSTAT_ONE.replace("State: Down", "State: Active"))
    rc, doc, _ = run_json(capsys, env, ibstat)
    f = by_name(doc)["ib-disabled-by-env"]
    assert f["severity"] == "error" and "mlx5_0:1" in f["message"]


# ---------------------------------------------------------------- R7: RoCE GID index from a log

ROCE_LOG = ("gpu-a1:3101:3101 [0] NCCL INFO Bootstrap : Using bond0:10.0.0.17<0>\n"
            "gpu-a1:3101:3101 [0] NCCL INFO NET/IB : Using [0]mlx5_bond_0:1/RoCE ; OOB bond0:10.0.0.17<0>\n"
            "NCCL version {v}+cuda11.4\n")
RETRY = ("gpu-a1:3101:3140 [0] transport/net_ib.cc:1128 NCCL WARN NET/IB : Got completion from peer "
         "10.0.0.19<43211> with error 12, opcode 0, len 0, vendor err 129\n")


def test_old_nccl_on_roce_without_gid_index_from_the_log(capsys, tmp_path):
    rc, doc, _ = run_json(capsys, write(tmp_path, "roce.log", ROCE_LOG.format(v="2.10.3")))
    f = by_name(doc)["roce-gid-index-unset"]
    assert f["severity"] == "warning" and "2.10.3" in f["message"] and "GID index 0" in f["message"]


def test_retry_exceeded_on_old_roce_names_the_gid_index(capsys, tmp_path):
    path = write(tmp_path, "roce.log", ROCE_LOG.format(v="2.10.3") + RETRY)
    rc, doc, _ = run_json(capsys, path)
    f = by_name(doc)["roce-gid-index-unset"]
    assert f["severity"] == "error" and "error 12" in f["message"]
    assert any(e["where"] == f"{path}:4" for e in f["evidence"])
    assert doc["verdict"]["name"] == "roce-gid-index-unset"


def test_new_nccl_selects_the_gid_itself(capsys, tmp_path):
    rc, doc, _ = run_json(capsys, write(tmp_path, "roce.log", ROCE_LOG.format(v="2.21.5") + RETRY))
    assert "roce-gid-index-unset" not in by_name(doc)


def test_gid_index_on_the_launch_line_silences_it(capsys, tmp_path):
    text = "mpirun -np 2 -x NCCL_IB_GID_INDEX=3 ./all_reduce_perf -b 8 -e 128M\n" + ROCE_LOG.format(v="2.10.3")
    rc, doc, _ = run_json(capsys, write(tmp_path, "roce.log", text))
    assert "roce-gid-index-unset" not in by_name(doc)


def test_roce_from_ibv_devinfo_and_version_from_the_log(capsys, tmp_path):
    devinfo = ("hca_id:\tmlx5_bond_0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n"
               "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_mtu:\t\t1024 (3)\n"
               "\t\t\tlink_layer:\t\tEthernet\n")
    log = "gpu-a1:3101:3101 [0] NCCL INFO Bootstrap : Using bond0:10.0.0.17<0>\nNCCL version 2.8.3+cuda10.2\n"
    rc, doc, _ = run_json(capsys, write(tmp_path, "devinfo.txt", devinfo), write(tmp_path, "run.log", log))
    f = by_name(doc)["roce-gid-index-unset"]
    assert "mlx5_bond_0:1" in f["message"] and f["severity"] == "warning"


# ---------------------------------------------------------------- R8: the verdict

def test_an_observed_failure_outranks_a_state(capsys, tmp_path):
    log = ("node7:796:796 [1] NCCL INFO Bootstrap : Using enp67s0:192.168.5.8<0>\n"
           "node7:796:796 [1] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\n"
           "node7:796:796 [1] NCCL INFO NET/IB : No device found.\n"
           "node7:796:796 [1] NCCL INFO NET/Socket : Using [0]enp67s0:192.168.5.8<0>\n"
           "node7:796:796 [1] NCCL INFO Using network Socket\n"
           "\n"
           "node7:795:822 [0] include/socket.h:409 NCCL WARN Net : Connect to 192.168.5.9<40000> failed : "
           "No route to host\n")
    rc, doc, _ = run_json(capsys, write(tmp_path, "fail.log", log))
    f = by_name(doc)
    assert f["no-rdma-devices"]["severity"] == "error" and f["bootstrap-unreachable"]["severity"] == "error"
    assert doc["verdict"]["name"] == "bootstrap-unreachable"
    assert f["bootstrap-unreachable"]["observed_failure"] is True
    assert f["no-rdma-devices"]["observed_failure"] is False


def test_ibv_devinfo_pasted_inside_a_log_is_read_as_node_evidence(capsys, tmp_path):
    # one file holding everything the user ran: the listing's port state joins the log's facts
    path = write(tmp_path, "all.txt", (
        "$ ibv_devinfo\nhca_id: mlx5_0\n        transport:                      InfiniBand (0)\n"
        "        phys_port_cnt:                  1\n                port:   1\n"
        "                        state:                  PORT_DOWN (1)\n"
        "                        link_layer:             InfiniBand\n\n"
        "nodeA:300:300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "nodeA:300:300 [0] NCCL INFO NET/IB : No device found.\n"
        "nodeA:300:300 [0] NCCL INFO Using network Socket\n"
        "nodeA:300:300 [0] NCCL INFO comm 0x5566 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"))
    rc, doc, _ = run_json(capsys, path)
    assert rc == 1 and doc["inputs"][0]["read_as"] == ["nccl_log", "ibv_devinfo"]
    assert doc["facts"]["ports"][0]["device"] == "mlx5_0" and doc["facts"]["ports"][0]["state"] == "DOWN"
    assert by_name(doc)["port-down"]["severity"] == "error"


def test_a_log_that_only_mentions_ibv_devinfo_reads_no_listing(capsys, tmp_path):
    path = write(tmp_path, "job.log", "nodeA:300:300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                                      "check ibv_devinfo on every node\n"
                                      "nodeA:300:300 [0] NCCL INFO Using network IB\n")
    rc, doc, _ = run_json(capsys, path)
    assert doc["inputs"][0]["read_as"] == ["nccl_log"] and doc["facts"]["ports"] == []
