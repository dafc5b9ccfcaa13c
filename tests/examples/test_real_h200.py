"""Evidence captured on a real machine: one NVIDIA H200 in a Firecracker VM, driver 580.159.04,
PyTorch 2.11 with NCCL 2.28.9 (tests/capture/device_capture.sh; see tests/fixtures/nodes/h200-vm/README.md).

The node fixture is what gather_node.py recorded there: the files the probes read and NVML's
answers. Replaying them must give the very snapshot ncdoc took live, so every rule run on a
captured tree sees what it would have seen on the node. The logs are NCCL's own output under
settings that fail the same way on any node.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from ncdoc.cli.main import main
from paths import TESTS

FIX = TESTS / "fixtures"
NODE = FIX / "nodes" / "h200-vm"
LOGS = FIX / "logs"


def _triage(capsys, *paths: Path):
    rc = main(["triage", *map(str, paths), "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out)


def _by_name(doc) -> dict[str, str]:
    return {f["name"]: f["severity"] for f in doc["findings"]}


# ---------------------------------------------------------------- the node

def test_replayed_capture_is_the_live_snapshot(tmp_path):
    pytest.importorskip("pynvml")
    from ncdoc.examples.nvml_replay import RecordedNvml
    from ncdoc.probes.live import capture

    # a tarball, because the empty folders (/sys/class/infiniband) are facts and git drops them
    with tarfile.open(NODE / "root.tar.gz") as tar:
        tar.extractall(tmp_path, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
    live = json.loads((NODE / "snapshot.json").read_text())
    env = {v["name"]: v["value"] for v in live["env"]["values"]}
    replay = capture(sysfs_root=str(tmp_path / "root"), nvml=RecordedNvml(str(NODE / "nvml.json")), environ=env,
                     home="/root", use_verbs=False).to_dict()
    for key in ("origin", "created"):
        live.pop(key), replay.pop(key)
    # The rdma-core version is looked up only where there are RDMA devices (this node has none).
    assert replay["hcas"]["status"]["state"] == "absent" and replay["versions"]["rdma_core"] is None
    live["versions"]["rdma_core"] = None
    assert _as_recorded(replay, live) == live


def _as_recorded(value, recorded):
    """`value` cut to the fields `recorded` has: facts ncdoc learnt to read after the capture was taken
    (the job section, probe timings, /dev/nvidia*) are not in it, and the tree holds no source for them."""
    if isinstance(value, dict) and isinstance(recorded, dict):
        return {k: _as_recorded(value[k], recorded[k]) for k in recorded if k in value}
    if isinstance(value, list) and isinstance(recorded, list) and len(value) == len(recorded):
        return [_as_recorded(v, r) for v, r in zip(value, recorded)]
    return value


def test_live_snapshot_facts():
    snap = json.loads((NODE / "snapshot.json").read_text())
    (gpu,) = snap["gpus"]["gpus"]
    assert (gpu["name"], gpu["compute_capability"], gpu["memory_mib"]) == ("NVIDIA H200", "9.0", 143771)
    assert gpu["pci_bus_id"] == "0000:00:06.0" and gpu["nvlinks"] == []
    assert snap["gpus"]["fabric_manager"] == "not_supported"
    # the wheel PyTorch loads, found in a venv under /opt, and the image's system copy
    assert [(lib["version"], lib["origin"]) for lib in snap["versions"]["nccl_libs"]] == \
        [("2.28.9", "pip:nvidia-nccl-cu13"), ("2.28.3", "system")]
    assert snap["hcas"]["status"]["state"] == "absent"
    # no iproute2 in the image: IPv4 from the kernel's routing tables, IPv6 from if_inet6
    eth0 = next(i for i in snap["net"]["interfaces"] if i["name"] == "eth0")
    assert eth0["addresses"][0] == "192.0.2.2/24" and "fe80::fc:ff:fe00:1/64" in eth0["addresses"]
    assert snap["net"]["status"]["source"].endswith("/proc/net/fib_trie+route+if_inet6")


def test_check_on_the_captured_node_has_no_warning(capsys):
    rc = main(["check", "--snapshot", str(NODE / "snapshot.json"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    found = {f["name"]: f["severity"] for f in doc["findings"]}
    # NCCL_VERSION=2.28.3-1 is the CUDA image's record of its libnccl package, not an NCCL variable
    assert "unknown-nccl-var" not in found
    assert found == {"multiple-nccl-libraries": "info", "no-rdma-devices": "info"}


def test_single_gpu_topo_matrix_imports(capsys):
    rc = main(["topo", str(NODE / "nvidia-smi-topo-m.txt"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    # nvidia-smi underlines the header with terminal escapes, even into a file: still a whole matrix
    assert doc["truncated"] is False
    assert doc["facts"]["matrix"] == {"GPU0": {"GPU0": "X"}}


# ---------------------------------------------------------------- NCCL logs

def test_one_rank_job_on_sockets_is_healthy(capsys):
    rc, doc = _triage(capsys, LOGS / "h200_torchrun_1rank_2_28.log")
    assert rc == 0
    assert not [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    facts = doc["facts"]
    assert (facts["nccl_version"], facts["transport"]) == ("2.28.9", "Socket")
    assert facts["net_devices"] == ["eth0"]


def test_net_limited_to_ib_without_devices(capsys):
    rc, doc = _triage(capsys, LOGS / "h200_torchrun_net_ib_only_2_28.log")
    assert rc == 1
    assert doc["verdict"]["name"] == "net-plugin-missing"
    assert "NCCL_NET=IB" in doc["verdict"]["message"] and "never tried its Socket" in doc["verdict"]["message"]


def test_socket_ifname_matching_nothing(capsys):
    rc, doc = _triage(capsys, LOGS / "h200_torchrun_ifname_missing_2_28.log")
    assert rc == 1
    assert doc["verdict"]["name"] == "bootstrap-unreachable"
    assert "NCCL_SOCKET_IFNAME=ib0" in doc["verdict"]["message"]
    assert doc["facts"]["env"]["NCCL_SOCKET_IFNAME"] == "ib0"


def test_two_ranks_on_one_gpu_names_the_duplicate_not_the_network(capsys):
    rc, doc = _triage(capsys, LOGS / "h200_torchrun_two_ranks_one_gpu_2_28.log")
    assert rc == 1
    assert doc["verdict"]["name"] == "duplicate-gpu"
    found = _by_name(doc)
    # both ranks logged Init START from one host: a one-node job, where sockets carry nothing
    assert found.get("no-rdma-devices") == "info" and found.get("socket-fallback", "info") == "info"


def test_loopback_interface_on_one_node_is_not_a_fault(capsys):
    rc, doc = _triage(capsys, LOGS / "h200_torchrun_ifname_lo_2_28.log")
    assert rc == 0
    assert doc["facts"]["net_devices"] == ["lo"]


def test_per_collective_lines_are_skipped_cheaply(capsys):
    from ncdoc.evidence import parse_nccl_log_file

    facts = parse_nccl_log_file(LOGS / "h200_torchrun_coll_lines_2_28.log")
    assert facts.nccl_version == "2.28.9" and facts.transport == "Socket"
    assert facts.init_complete == 1
