"""What a user sees for the failure classes real cases brought that triage had no rule or no reading for: each
test writes the input a user would paste (NCCL's, nccl-tests', PyTorch's, ncclras' and the tools' own format
strings, invented values) and checks the verdict and what it says."""

from __future__ import annotations

import json

from ncdoc.cli.main import main
from triage_helpers import named, triage


def _files(tmp_path, capsys, files: dict[str, str], *argv: str) -> dict:
    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    rc = main(["triage", *paths, "--json", *argv])
    out, err = capsys.readouterr()
    assert rc in (0, 1) and err == "", err
    return json.loads(out)


# ---------------------------------------------------------------- class 1: causes with a rule of their own

def test_watchdog_desync_is_named_as_the_application_not_the_network(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys,
                       "    [rank2]:[E816 01:45:40.183 ProcessGroupNCCL.cpp:607] [Rank 2] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=5001, OpType=BROADCAST, NumelIn=128, NumelOut=128, "
                       "Timeout(ms)=600000) ran for 600026 milliseconds before timing out.\n"
                       "    [rank5]:[E816 01:45:40.212 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=5001, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
                       "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n")
    v = doc["verdict"]
    assert v["name"] == "framework-watchdog-timeout" and v["severity"] == "error"
    assert "application desync" in v["message"] and "not a network fault" in v["message"]
    assert doc["inputs"][0]["kind"] == "framework_log"
    assert [e["where"] for e in v["evidence"]][:2] == [f"{path}:1", f"{path}:2"]


def test_watchdog_after_an_nccl_error_leaves_the_verdict_to_that_error(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "g4:12:19 [3] transport/net_ib.cc:1341 NCCL WARN NET/IB : Got completion from peer "
                    "10.0.0.7<43213> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) len=0 vendor err 129\n"
                    "[rank3]:[E1108 14:02:11.2 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
                    "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=64, NumelOut=64, Timeout(ms)=600000) ran for "
                    "600058 milliseconds before timing out.\n")
    assert doc["verdict"]["name"] == "ib-completion-error"
    (w,) = named(doc, "framework-watchdog-timeout")
    assert w["severity"] == "warning" and "follows from that error" in w["message"]


def test_ras_report_names_the_dead_process(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "Communicators... (0.004s)\n=============\n\nNo communicator data collected!\n\nErrors\n======\n\n"
                    "DEAD\n  1 job process is considered dead (unreachable via the RAS network)\n"
                    "  Process 90177 on node gpu-21 managing GPU 2\n\nWarnings\n========\n")
    v = doc["verdict"]
    assert v["name"] == "ras-ranks-missing" and "process 90177 on gpu-21 (GPU 2)" in v["message"]
    assert "not a healthy empty report" in v["message"]
    assert doc["inputs"][0]["kind"] == "ras_report"


def test_a_healthy_ras_report_and_diagnostics_raise_nothing(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "NCCL version 2.30.7 compiled with CUDA 12.8\nCUDA runtime version 12080, driver version 13000\n\n"
                    "Communicators... (0.002s)\n=============\n\n"
                    "Group     Comms      Nodes     Ranks     Ranks     Ranks   Status  Errors\n"
                    "    #  in group   per comm  per node  per comm  in group\n"
                    "    0         1          2         4         8         8  RUNNING      OK\n\nErrors\n======\n\n\n"
                    "Warnings\n========\n"
                    "n1:77 NCCL DIAG [OK]   NCCL environment: NCCL_* env vars consistent across 8 ranks in comm 0x12\n")
    assert doc["verdict"] is None and not [f for f in doc["findings"] if f["severity"] != "info"]


def test_a_one_operation_gap_is_a_warning_that_says_to_query_again(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "#0-0 (27a0c1d2e3f40516) MISMATCH\n  Communicator ranks have different collective operation counts\n"
                    "  26 ranks have launched up to operation 700\n  6 ranks have launched up to operation 699\n"
                    "  Rank 0 -- GPU 0 managed by process 100 on node n1\n")
    (f,) = named(doc, "ras-collective-mismatch")
    assert f["severity"] == "warning" and "normal while collectives run" in f["message"]
    assert "behind: rank 0" in f["message"]


def test_diag_reports_become_findings(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "NCCL DIAG [INFO] p2p: only 50/56 GPU-to-GPU peer accesses passed verification\n"
                    "n0:5 NCCL DIAG [INFO] net bw: cross-nic rank 6 (n0): 201.5 Gbit/s, >30% off median 390.2 Gbit/s in "
                    "comm 0x7a3f\n"
                    "n0:5 NCCL DIAG [INFO] NCCL environment: mismatch across 8 ranks in comm 0x7a3f for NCCL_IB_HCA\n")
    by = {f["name"]: f for f in doc["findings"]}
    assert by["diag-p2p-failed"]["severity"] == "error" and "only 50 of 56" in by["diag-p2p-failed"]["message"]
    assert "rank 6 on n0 at 201.5 Gbit/s" in by["diag-net-bw-outlier"]["message"]
    assert by["diag-config-mismatch"]["severity"] == "error"


def test_driver_too_old_names_the_driver_and_what_it_runs(tmp_path, capsys):
    doc = _files(tmp_path, capsys, {
        "run.txt": "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20\n"
                   "node1: Test CUDA failure common.cu:891 'CUDA driver version is insufficient for CUDA runtime "
                   "version'\n",
        "smi.txt": "| NVIDIA-SMI 470.141.03   Driver Version: 470.141.03   CUDA Version: 11.4     |\n"})
    v = doc["verdict"]
    assert v["name"] == "cuda-driver-too-old"         # not only "nccl-tests failed"
    assert "driver 470.141.03 runs CUDA up to 11.4" in v["message"]
    assert named(doc, "nccl-tests-failed")             # still said, after the named cause


def test_missing_gpu_arch_says_which_cuda_builds_for_the_gpu(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "#  Rank  0 Group  0 Pid   4100 on     ws01 device  0 [0x01] NVIDIA GeForce RTX 5090\n"
                    "ws01:4100:4100 [0] NCCL INFO NCCL version 2.18.5+cuda11.8\n"
                    "ws01:4100:4120 [0] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'\n")
    (f,) = named(doc, "nccl-missing-gpu-arch")
    assert "compute capability 12.0" in f["message"] and "needs CUDA 12.8 or newer" in f["message"]


def test_memlock_from_ulimit_and_a_registration_failure(tmp_path, capsys):
    doc = _files(tmp_path, capsys, {
        "job.log": "n1:40:60 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot "
                   "allocate memory\n",
        "limits.txt": "max locked memory       (kbytes, -l) 65536\nopen files                      (-n) 1024\n"})
    v = doc["verdict"]
    assert v["name"] == "memlock-limit-too-low" and "65536 KiB" in v["message"]
    assert {e["where"].rsplit(":", 1)[1] for e in v["evidence"]} == {"1"}


# ---------------------------------------------------------------- class 2: one finding whatever the input form

def test_fabric_manager_from_nccl_tests_as_from_a_log(tmp_path, capsys):
    tests, _ = triage(tmp_path, capsys, "gpu1: Test CUDA failure common.cu:941 'system not yet initialized'\n")
    log, _ = triage(tmp_path, capsys, "gpu1:1:2 [0] init.cc:133 NCCL WARN Cuda failure 'system not yet initialized'\n")
    assert tests["verdict"]["name"] == log["verdict"]["name"] == "fabric-manager"
    assert "reported by nccl-tests" in tests["verdict"]["message"]


def test_nvls_bind_message_split_over_lines(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 4194304:\n"
                    "CUDA error 401 'the operation cannot be performed in the present state'.\n")
    assert doc["verdict"]["name"] == "fabric-manager" and "NVLS" in doc["verdict"]["message"]


def test_gpu_out_of_memory_from_nccl_tests(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "node01: Test CUDA failure common.cu:1124 'out of memory'\n")
    assert doc["verdict"]["name"] == "gpu-out-of-memory" and "nccl-tests allocated" in doc["verdict"]["message"]


def test_topology_file_wording_without_the_variable(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys,
                       "h:1:2 [1] graph/xml.h:101 NCCL WARN Attribute vendor of node cpu not found\n"
                       "h:1:2 [1] NCCL INFO graph/topo.cc:493 -> 3\n")
    assert doc["verdict"]["name"] == "topology-file-mismatch"
    assert "/var/run/nvidia-topologyd/virtualTopology.xml" in doc["verdict"]["message"]


def test_a_nic_attribute_alone_is_not_blamed_on_a_file(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "h:1:2 [1] graph/xml.h:101 NCCL WARN Attribute busid of node nic not found\n")
    assert not named(doc, "topology-file-mismatch")


def test_roce_mtu_from_ibv_devinfo(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys,
                       "hca_id:\tmlx5_2\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n"
                       "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n"
                       "\t\t\tactive_mtu:\t\t1024 (3)\n\t\t\tlink_layer:\t\tEthernet\n")
    (f,) = named(doc, "roce-mtu-mismatch")
    assert "MTU 1024 (the NIC supports 4096)" in f["message"]
    assert f["evidence"][0]["where"] == f"{path}:7"          # the active_mtu line


# ---------------------------------------------------------------- class 4: GPUDirect RDMA and transport statements

def test_plugin_net_names_with_spaces_and_gdr(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "ip-10-0-1-5:40:90 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA\n"
                    "ip-10-0-1-5:40:90 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/1/GDRDMA\n")
    assert doc["facts"]["transport"] == "AWS Libfabric" and doc["facts"]["gdr"] == "enabled"


def test_per_hca_gdr_lines_of_plugins(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "t1:5:9 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_0\n"
                    "t1:5:9 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [RO]; OOB eno1:192.168.0.11<0>\n"
                    "t1:5:9 [0] NCCL INFO Using network IBext_v8\n")
    f = doc["facts"]
    assert f["gdr"] == "enabled" and f["transport"] == "IB" and f["sources"][0]["facts"]["network"] == "IBext_v8"
    assert f["net_devices"] == ["mlx5_0:1"]


def test_nccl_decision_beats_the_plugin_claim(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "t1:5:9 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'rocep1s0f0\n"
                    "t1:5:9 [0] NCCL INFO NET/RDMA Plugin v10 : GPU Direct RDMA Disabled for HCA 0 'rocep1s0f0'\n"
                    "t1:5:9 [0] NCCL INFO Using network RDMA Plugin v10\n")
    assert doc["facts"]["gdr"] == "disabled"


# ---------------------------------------------------------------- class 5: platforms

def test_efa_plugin_failure_is_the_cause_and_ib_disable_is_routine(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "  | 2024-11-28T07:42:11.527Z | algo-1:1:2 [5] nccl_ofi_create_plugin:259 NCCL WARN NET/OFI "
                    "aws-ofi-nccl initialization failed\n"
                    "  | 2024-11-28T07:42:11.527Z | algo-1:1:2 [5] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
                    "  | 2024-11-28T07:42:11.528Z | algo-1:1:2 [5] NCCL INFO NET/Socket : Using [0]eth0:10.0.2.7<0>\n"
                    "  | 2024-11-28T07:42:11.528Z | algo-1:1:2 [5] NCCL INFO Using network Socket\n")
    v = doc["verdict"]
    assert v["name"] == "socket-fallback" and v["message"].startswith("aws-ofi-nccl failed to initialise")
    (ib,) = named(doc, "ib-disabled-by-env")
    assert ib["severity"] == "info" and "routine on AWS EFA" in ib["message"]


# ---------------------------------------------------------------- class 6: what a verdict rests on

def test_no_nic_rate_is_inconclusive_with_the_flag_that_decides(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "#  Rank  0 Group  0 Pid  1 on n1 device  0 [0x18] NVIDIA A100-SXM4-80GB\n"
                    "#  Rank  1 Group  0 Pid  2 on n2 device  0 [0x18] NVIDIA A100-SXM4-80GB\n"
                    "  4294967296    1073741824     float     sum      -1  90420.0   47.50   47.50      0  90400.0   "
                    "47.51   47.51      0\n")
    c = doc["conclusion"]
    assert doc["verdict"] is None and c["state"] == "inconclusive"
    assert any("--nic-gbps" in n for n in c["needs"])
    rc = main(["triage", str(tmp_path / "job.log")])
    assert rc == 0 and capsys.readouterr().out.startswith("Verdict: inconclusive: busbw was not compared")


def test_small_sizes_only_are_inconclusive(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "     1048576        262144     float     sum      -1    98.70   10.62   19.92      0    97.71   "
                    "10.73   20.12      0\n", "--nic-gbps", "400", "--nics", "8", "--nodes", "2")
    assert doc["conclusion"]["state"] == "inconclusive" and any("-e 8G" in n for n in doc["conclusion"]["needs"])


def test_a_gid_choice_on_a_presumed_nccl_version_is_no_verdict(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  "
                    "\t---\t---\nmlx5_0\t1\t0\tfe80:0000:0000:0000:a288:c2ff:fe01:0a10\t\t\tv1\teth2\n"
                    "mlx5_0\t1\t1\tfe80:0000:0000:0000:a288:c2ff:fe01:0a10\t\t\tv2\teth2\n")
    assert doc["verdict"] is None
    gid = [f for f in doc["findings"] if f["name"].startswith("roce-gid")]
    assert gid and all(f["severity"] == "info" and f["message"].startswith("inconclusive:") for f in gid)


def test_bootstrap_peer_at_loopback_is_named(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "n2:10:10 [0] NCCL INFO comm 0x1 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0\n"
                    "n2:10:30 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 127.0.1.1<53211> failed "
                    ": Connection refused\n")
    v = doc["verdict"]
    assert v["name"] == "bootstrap-unreachable" and "127.0.1.1, is a loopback address" in v["message"]
    assert "/etc/hosts" in v["fix"]


def test_gpus_shared_by_processes_are_oversubscription(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys,
                    "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n"
                    "[1,0]<stdout>:#  Rank  0 Group  0 Pid  10 on  n1 device  0 [0x18] NVIDIA H100 80GB HBM3\n"
                    "[1,0]<stdout>:#  Rank  1 Group  0 Pid  11 on  n1 device  0 [0x18] NVIDIA H100 80GB HBM3\n")
    assert doc["verdict"]["name"] == "gpu-oversubscription" and "2 processes on n1" in doc["verdict"]["message"]
