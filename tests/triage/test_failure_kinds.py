"""`ncdoc triage` on failures reported in the wild that no rule named before: NCCL 2.27+ NVLS multicast
binds ("CUDA error N '...'"), NCCL's advice text that names a variable, GPU out of memory seen from the
peers, aws-ofi-nccl (EFA) errors, a one-rank nccl-tests run whose topology detection failed, and a device
list that only mixes link layers.

Every log here is written for the test from NCCL's, aws-ofi-nccl's, nccl-tests' and PyTorch's format
strings (hosts, addresses, pointers and sizes invented); each test reads what a user reads: the verdict,
its message, evidence and fix, and the facts.
"""

from __future__ import annotations

import json

from ncdoc.nccl import variables as nccl_vars
from triage_helpers import named, triage


def wheres(finding: dict) -> list[str]:
    return [e["where"] for e in finding["evidence"]]


# ---------------------------------------------------------------- NVLS multicast binds (NCCL 2.27+)

NVLS_BIND_WARN = """\
hgx-d4:7731:7731 [5] NCCL INFO NCCL version 2.28.3+cuda12.9
hgx-d4:7731:7790 [5] NCCL INFO NVLS multicast support is available on dev 5 (NVLS_NCHANNELS 16)
hgx-d4:7731:7790 [5] transport/nvls.cc:155 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of \
size 2097152 at MC group 7f3a2c000000 offset 0 : CUDA error {code} '{text}'.
This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.
Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.
hgx-d4:7731:7790 [5] NCCL INFO transport/nvls.cc:171 -> 1
"""

NVLS_BIND_PYTORCH = """\
[rank2]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/\
NCCLUtils.cpp:93, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.2
[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.
{last}[rank2]: Failed to bind NVLink SHARP (NVLS) Multicast memory of size 8388608 : CUDA error {code} '{text}'.
[rank2]: This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.
[rank2]: Disable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.
"""
ILLEGAL_STATE = "the operation cannot be performed in the present state"


def test_nvls_bind_illegal_state_is_the_fabric_manager(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, NVLS_BIND_WARN.format(code=401, text=ILLEGAL_STATE))
    v = doc["verdict"]
    assert v["name"] == "fabric-manager" and v["severity"] == "error"
    assert "CUDA error 401" in v["message"] and "NVLS" in v["message"] and "Fabric Manager" in v["message"]
    assert f"{path}:3" in wheres(v)
    assert "nvidia-fabricmanager" in v["fix"] and "reset the GPUs" in v["fix"] and "NCCL_NVLS_ENABLE=0" in v["fix"]
    assert not named(doc, "unexplained-nccl-warning") and not named(doc, "nvls-multicast-exhausted")


def test_nvls_bind_illegal_state_from_pytorch_last_error(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, NVLS_BIND_PYTORCH.format(last="[rank2]: Last error:\n", code=401,
                                                                  text=ILLEGAL_STATE))
    v = doc["verdict"]
    assert v["name"] == "fabric-manager" and "401" in v["message"]
    assert f"{path}:4" in wheres(v)


def test_nvls_bind_out_of_memory_is_exhausted_multicast_not_the_fabric_manager(tmp_path, capsys):
    # pasted without its "Last error:" line: the message follows the ncclUnhandledCudaError line directly
    doc, path = triage(tmp_path, capsys, NVLS_BIND_PYTORCH.format(last="", code=2, text="out of memory"))
    v = doc["verdict"]
    assert v["name"] == "nvls-multicast-exhausted" and v["severity"] == "error"
    assert "multicast" in v["message"] and "not a Fabric Manager fault" in v["message"]
    assert "communicators" in v["message"] and "communicators" in v["fix"]
    assert "NCCL_NVLS_ENABLE=0" in v["fix"] and v["env_patch"] == {"NCCL_NVLS_ENABLE": "0"}
    assert f"{path}:3" in wheres(v)
    assert not named(doc, "fabric-manager") and not named(doc, "gpu-out-of-memory")


def test_nvls_fix_names_only_variables_the_catalog_knows():
    from ncdoc.engine import ruleset
    rule = ruleset.load(from_sources=True).get("nvls-multicast-exhausted")
    for name in ("NCCL_NVLS_ENABLE", "NCCL_NVLS_CHUNKSIZE"):
        assert name in rule.fix and nccl_vars.lookup(name) is not None


def test_nvls_out_of_memory_warn_from_nvls_cc(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, NVLS_BIND_WARN.format(code=2, text="out of memory"))
    assert doc["verdict"]["name"] == "nvls-multicast-exhausted"
    assert not named(doc, "fabric-manager")


# ---------------------------------------------------------------- NCCL's advice text is not a setting

def test_advice_naming_a_variable_sets_nothing(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, NVLS_BIND_WARN.format(code=401, text=ILLEGAL_STATE))
    assert "NCCL_NVLS_ENABLE" not in doc["facts"]["env"]
    assert "env" not in doc["inputs"][0]["read_as"]
    assert not [f for f in doc["findings"] if "NCCL_NVLS_ENABLE" in json.dumps(f["evidence"])]


def test_a_launch_line_in_the_same_paste_still_counts(tmp_path, capsys):
    text = ("NCCL_NVLS_ENABLE=1 torchrun --nproc-per-node 8 train.py\n"
            + NVLS_BIND_PYTORCH.format(last="[rank2]: Last error:\n", code=401, text=ILLEGAL_STATE))
    doc, _ = triage(tmp_path, capsys, text)
    assert doc["facts"]["env"].get("NCCL_NVLS_ENABLE") == "1"
    assert doc["inputs"][0]["read_as"] == ["nccl_log", "env"]


# ---------------------------------------------------------------- GPU out of memory, seen from the peers first

GPU_OOM = """\
trn-r2:4101:4190 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer trn-r2<52114>
trn-r2:4101:4190 [0] NCCL INFO misc/socket.cc:749 -> 6

trn-r2:4101:4190 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for opId=0x5611aa02c0
trn-r2:4101:4190 [0] NCCL INFO transport/p2p.cc:438 -> 3

trn-r2:4104:4205 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'

trn-r2:4104:4205 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes
trn-r2:4104:4205 [3] NCCL INFO transport/p2p.cc:204 -> 1
trn-r2:4104:4205 [3] proxy.cc:1519 NCCL WARN [Proxy Service 3] Failed to execute operation Setup from rank 3, \
retcode 1
"""


def test_gpu_out_of_memory_is_the_verdict_not_the_peer_that_closed(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, GPU_OOM)
    v = doc["verdict"]
    assert v["name"] == "gpu-out-of-memory" and v["severity"] == "error"
    assert "6 MiB" in v["message"] and "trn-r2 GPU 3" in v["message"]
    assert "Connection closed by remote peer" in v["message"]          # named as the consequence
    assert wheres(v)[:2] == [f"{path}:7", f"{path}:9"]
    assert "gpu_memory_utilization" in v["fix"] and "NCCL_BUFFSIZE" in v["fix"] and "destroy" in v["fix"]
    assert not named(doc, "unexplained-nccl-warning")


def test_unexplained_warning_cites_the_failing_rank_not_its_peers(tmp_path, capsys):
    # no rule knows this CUDA failure: the WARN to quote is the one that failed, not the ones that saw a peer go
    text = GPU_OOM.replace("include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
                           "transport/p2p.cc:275 NCCL WARN Cuda failure 'peer mapping resources exhausted'")
    text = "\n".join(line for line in text.splitlines() if "calloc" not in line) + "\n"
    doc, path = triage(tmp_path, capsys, text)
    v = doc["verdict"]
    assert v["name"] == "unexplained-nccl-warning"
    assert "peer mapping resources exhausted" in v["message"] and "transport/p2p.cc:275" in v["message"]
    assert v["evidence"][0]["where"] == f"{path}:7"


def test_a_peer_that_closed_alone_is_still_cited(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, "\n".join(GPU_OOM.splitlines()[:5]) + "\n")
    v = doc["verdict"]
    assert v["name"] == "unexplained-nccl-warning" and "Connection closed by remote peer" in v["message"]
    assert v["evidence"][0]["where"] == f"{path}:1"


# ---------------------------------------------------------------- EFA (aws-ofi-nccl)

EFA_AV = """\
[rank4]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, \
internal error - please report this issue to the NCCL developers, NCCL version 2.20.5
[rank4]: ncclInternalError: Internal check failed.
[rank4]: Last error:
[rank4]: NET/OFI Unable to insert remote address into address vector for device 2. RC: 0
"""

EFA_CQ = """\
ip-10-7-3-11:2210:2260 [3] NCCL INFO NET/OFI Using aws-ofi-nccl 1.11.0
ip-10-7-3-11:2210:2260 [3] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)
ip-10-7-3-11:2210:2260 [3] NCCL INFO Using network Libfabric
ip-10-7-3-11:2210:2301 [3] rdma_process_error_entry:1220 NCCL WARN NET/OFI Request 0x7fe5d8012a40 completed with \
error. RC: 103. Error: 4126 (Unresponsive receiver (reachable by EFA device but handshake failed)). Completed length: \
0, Request: {{ dev: 3, size: 0, state: CREATED, direction: {direction} }}
"""


def test_efa_address_vector_failure_is_unreachable_peers(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, EFA_AV)
    v = doc["verdict"]
    assert v["name"] == "efa-peer-unreachable" and v["severity"] == "error"
    assert "address vector" in v["message"] and "device 2" in v["message"] and "cannot reach" in v["message"]
    assert "security group" in v["fix"] and "0.0.0.0/0" in v["fix"] and "placement group" in v["fix"]
    assert f"{path}:4" in wheres(v)
    assert not named(doc, "unexplained-nccl-warning")


def test_efa_completion_error_quotes_the_provider_error(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, EFA_CQ.format(direction="SEND"))
    v = doc["verdict"]
    assert v["name"] == "efa-peer-unreachable"
    assert "RC 103" in v["message"] and "Unresponsive receiver" in v["message"]
    assert f"{path}:4" in wheres(v)
    # the plugin's "function:line" where NCCL puts its file is not a host
    assert doc["facts"]["nodes"] in (None, 1)


def test_efa_rule_documents_the_aws_setup_page():
    from ncdoc.engine import ruleset
    rule = ruleset.load(from_sources=True).get("efa-peer-unreachable")
    assert "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html" in rule.references


# ---------------------------------------------------------------- one rank, topology detection failed

ONE_RANK_TOPO = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  61220 on  lab-ws3 device  0 [0x65] NVIDIA GeForce RTX 3090
lab-ws3:61220:61220 [0] NCCL INFO Bootstrap : Using eth0:172.24.80.2<0>
lab-ws3:61220:61220 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
lab-ws3:61220:61220 [0] NCCL INFO NET/Socket : Using [0]eth0:172.24.80.2<0>
lab-ws3:61220:61220 [0] NCCL INFO Using network Socket
NCCL version 2.9.9+cuda11.3
lab-ws3:61220:61231 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:65/../../0000:65:00.0
lab-ws3:61220:61231 [0] NCCL INFO graph/xml.cc:469 -> 2
lab-ws3:61220:61231 [0] NCCL INFO graph/topo.cc:522 -> 2
lab-ws3: Test NCCL failure common.cu:891 'unhandled system error'
 .. lab-ws3 pid 61220: Test failure common.cu:1003
"""


def test_one_rank_run_whose_topology_detection_failed(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, ONE_RANK_TOPO)
    v = doc["verdict"]
    assert v["name"] == "topology-detection-failed" and v["severity"] == "error"
    assert "0000:65:00.0" in v["message"] and "sysfs" in v["message"] and "WSL2" in v["message"]
    assert "NCCL 2.9.9 is older than 2.10" in v["message"] and "2.10" in v["fix"]
    assert f"{path}:10" in wheres(v)
    # a whole device list on one host, then a failure: a one-node job, where sockets and no RDMA are fine
    assert doc["facts"]["nodes"] == 1
    assert {f["severity"] for f in named(doc, "no-rdma-devices") + named(doc, "socket-fallback")} == {"info"}


def test_a_newer_nccl_is_not_told_about_wsl2_releases(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, ONE_RANK_TOPO.replace("2.9.9+cuda11.3", "2.21.5+cuda12.4"))
    v = doc["verdict"]
    assert v["name"] == "topology-detection-failed" and "older than" not in v["message"]


def test_a_device_list_cut_short_does_not_make_one_node(tmp_path, capsys):
    # MPI: rank 0 lists every rank; the paste ends inside that list, before any result or failure
    text = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg "
            "iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
            + "".join(f"#  Rank {r:2d} Group  0 Pid {3300 + r:6d} on    gpu-a1 device {r:2d} [0x{16 + r:02x}] "
                      "NVIDIA H100 80GB HBM3\n" for r in range(4)))
    doc, _ = triage(tmp_path, capsys, text)
    assert doc["facts"]["nodes"] is None


def test_a_nic_path_missing_in_sysfs_warns(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, (
        "node07:8811:8811 [0] transport/net_ib.cc:214 NCCL WARN Could not find real path of mlx5_2 "
        "(/sys/class/infiniband/mlx5_2/device)\n"
        "node07:8811:8811 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_2:1/IB [RO]; OOB ib0:10.3.0.7<0>\n"
        "node07:8811:8811 [0] NCCL INFO Using network IB\n"))
    (f,) = named(doc, "topology-detection-failed")
    assert f["severity"] == "warning" and "mlx5_2" in f["message"] and "GPUDirect RDMA" in f["message"]
    assert f"{path}:1" in wheres(f)


# ---------------------------------------------------------------- a device list mixing link layers

MIXED = """\
gpu-e5:3001:3055 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_6:1/RoCE [RO]; OOB ib0:10.8.0.5<0>
gpu-e5:3001:3055 [0] NCCL INFO Using network IB
gpu-e5:3001:3055 [0] NCCL INFO comm 0x5600aa10 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
"""


def test_a_mixed_device_list_alone_is_no_incompatible_devices_error(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, MIXED)
    assert not named(doc, "ib-incompatible-devices")
    assert doc["verdict"] is None or doc["verdict"]["severity"] != "error"


def test_nccl_s_incompatible_devices_warn_still_is(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, MIXED + (
        "gpu-e5:3001:3099 [0] transport/net_ib.cc:1021 NCCL WARN NET/IB : Attempted to connect incompatible "
        "devices: [0]mlx5_0:1/IB and [2]mlx5_6:1/RoCE. Try selecting NICs of only one link type using NCCL_IB_HCA\n"))
    v = doc["verdict"]
    assert v["name"] == "ib-incompatible-devices" and v["severity"] == "error"
    assert f"{path}:4" in wheres(v)
