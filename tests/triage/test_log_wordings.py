"""`ncdoc triage` on log shapes the corpus does not hold: older NCCL formats, other frameworks' error
lines, graph/topology files, NVLS after a Fabric Manager restart, and WARNs no specific rule knows.

Every log here is written for the test from NCCL's and the frameworks' format strings (hosts,
addresses and paths invented); each test reads what a user reads: the verdict, its message, its
evidence lines and its fix.
"""

from __future__ import annotations

import pytest

from ncdoc.engine import ruleset
from ncdoc.evidence import nccl_log_patterns as P
from triage_helpers import named, triage


# ---------------------------------------------------------------- ibv_modify_qp before 2.24

QP_OLD = """\
gpu-a07:5120:5120 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
gpu-a07:5120:5166 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.20.0.7<0>
gpu-a07:5120:5166 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error {err}
gpu-a07:5120:5166 [0] NCCL INFO transport/net_ib.cc:579 -> 2
gpu-a07:5120:5166 [0] NCCL INFO transport/net_ib.cc:786 -> 2
"""


def test_old_modify_qp_timeout_is_the_qp_timeout_verdict(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, QP_OLD.format(err="Connection timed out"))
    v = doc["verdict"]
    assert v["name"] == "qp-connect-timeout" and v["severity"] == "error"
    assert "ETIMEDOUT" in v["message"]
    assert "INIT -> RTR" not in v["message"]            # the old format does not say which transition
    assert f"{path}:3" in [e["where"] for e in v["evidence"]]
    assert v["env_patch"] == {"NCCL_CROSS_NIC": "0"}
    assert not named(doc, "unexplained-nccl-warning")


@pytest.mark.parametrize("err, code", [("Network is unreachable", "ENETUNREACH"),
                                       ("No such device errno 19", "ENODEV"),
                                       ("Invalid argument errno 22", "EINVAL")])
def test_old_modify_qp_other_errors_are_qp_setup_failures(tmp_path, capsys, err, code):
    doc, path = triage(tmp_path, capsys, QP_OLD.format(err=err))
    v = doc["verdict"]
    assert v["name"] == "ib-qp-setup-failed" and code in v["message"]
    assert f"{path}:3" in [e["where"] for e in v["evidence"]]
    assert not named(doc, "qp-connect-timeout")


def test_unreachable_qp_says_route_and_gid(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, QP_OLD.format(err="Network is unreachable"), "--env", "NCCL_IB_GID_INDEX=1")
    v = doc["verdict"]
    assert "no route to the remote GID" in v["message"] and "NCCL_IB_GID_INDEX" in v["fix"]
    assert any("NCCL_IB_GID_INDEX=1" in e["text"] for e in v["evidence"])


def test_modify_qp_without_any_prefix(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "ibvwrap.c:160 NCCL WARN Call to ibv_modify_qp failed with error "
                                      "Connection timed out errno 110\n")
    assert doc["verdict"]["name"] == "qp-connect-timeout"


def test_a_retried_transition_is_not_a_failure(tmp_path, capsys):
    # 2.24+: the INFO line says NCCL retries; only a final WARN means the QP did not connect
    doc, _ = triage(tmp_path, capsys, "n1:7:9 [0] NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed "
                                      "out, on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 3, "
                                      "retrying 1/7 after 1000 msec of sleep\n")
    assert not named(doc, "qp-connect-timeout") and doc["verdict"] is None


# ---------------------------------------------------------------- other frameworks' "Last error:"

JAX_EMPTY_ADDRESS = """\
[trainer2]:tpl-node9:2230:2230 [2] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens9f1
[trainer2]:tpl-node9:2230:2230 [2] NCCL INFO NCCL_SOCKET_IFNAME set to ens9f1
...
[trainer0|0]:ncclInternalError: Internal check failed.
[trainer0|0]:Last error:
[trainer0|0]:ncclSocketInit: connecting to address  with family 48213 is neither AF_INET(2) nor AF_INET6(10)
"""


def test_last_error_of_a_non_pytorch_framework_is_read(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, JAX_EMPTY_ADDRESS)
    v = doc["verdict"]
    assert v["name"] == "bootstrap-unreachable"
    assert "NCCL_SOCKET_IFNAME=ens9f1" in v["message"] and "matches no usable interface" in v["message"]
    wheres = [e["where"] for e in v["evidence"]]
    assert f"{path}:6" in wheres                              # the ncclSocketInit message
    assert f"{path}:1" in wheres                              # where the log says NCCL_SOCKET_IFNAME was set
    assert "NCCL_SOCKET_IFNAME" in v["fix"]


def test_last_error_on_the_same_line(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "n1:4410:4410 [0] NCCL INFO NCCL version 2.18.6+cuda12.1\n\n"
                                      "ncclSystemError: System call (e.g. socket, malloc) or external library "
                                      "call failed or device error.\nLast error: socketStartConnect: Connect to "
                                      "172.31.9.4<41233> failed : No route to host\n")
    v = doc["verdict"]
    assert v["name"] == "bootstrap-unreachable" and "172.31.9.4<41233>" in v["message"]


# ---------------------------------------------------------------- NCCL_GRAPH_FILE / NCCL_TOPO_FILE

GRAPH_FILE = """\
vm-ax2:6101:6101 [0] NCCL INFO NCCL version 2.19.3+cuda12.3
vm-ax2:6101:6150 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/vendor/sku4/topo.xml
vm-ax2:6101:6150 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/vendor/sku4/graph.xml

vm-ax2:6101:6150 [0] graph/search.cc:719 NCCL WARN XML Import Channel : dev 3 not found.
vm-ax2:6101:6150 [0] NCCL INFO graph/search.cc:749 -> 2
"""


def test_graph_file_from_another_machine_is_the_verdict(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, GRAPH_FILE)
    v = doc["verdict"]
    assert v["name"] == "topology-file-mismatch" and v["severity"] == "error"
    assert "NCCL_GRAPH_FILE=/opt/vendor/sku4/graph.xml" in v["message"]
    assert "XML Import Channel : dev 3 not found." in v["message"]
    assert "/etc/nccl.conf" in v["fix"] and "~/.nccl.conf" in v["fix"]
    assert v["env_patch"] == {"NCCL_GRAPH_FILE": None, "NCCL_TOPO_FILE": None}
    wheres = [e["where"] for e in v["evidence"]]
    assert f"{path}:5" in wheres and f"{path}:3" in wheres and f"{path}:2" in wheres
    assert not named(doc, "unexplained-nccl-warning")


def test_topology_file_names_the_topology_variable_first(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "vm-ax2:6101:6150 [0] NCCL INFO NCCL_TOPO_FILE set by environment to "
                                      "/etc/nccl/topo-8gpu.xml\nvm-ax2:6101:6150 [0] graph/topo.cc:820 NCCL WARN "
                                      "Add NVLink error : could not find DEV for GPU 0000:c1:00.0\n")
    v = doc["verdict"]
    assert v["name"] == "topology-file-mismatch" and v["env_patch"] == {"NCCL_TOPO_FILE": None}
    assert v["message"].startswith("NCCL could not use NCCL_TOPO_FILE=/etc/nccl/topo-8gpu.xml")


def test_xml_warning_without_a_file_variable_is_not_blamed_on_one(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, GRAPH_FILE.replace("NCCL_TOPO_FILE", "NCCL_DEBUG_FILE")
                    .replace("NCCL_GRAPH_FILE", "NCCL_DEBUG_SUBSYS"))
    assert not named(doc, "topology-file-mismatch")
    assert doc["verdict"]["name"] == "unexplained-nccl-warning"


# ---------------------------------------------------------------- what no rule explains

def test_unexplained_warn_becomes_the_verdict_and_quotes_it(tmp_path, capsys):
    doc, path = triage(tmp_path, capsys, "node04:9120:9120 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                                         "node04:9120:9160 [0] NCCL INFO Using network IB\n"
                                         "node04:9120:9160 [0] transport/p2p.cc:275 NCCL WARN Cuda failure "
                                         "'peer mapping resources exhausted'\n"
                                         "node04:9120:9160 [0] NCCL INFO transport/p2p.cc:312 -> 1\n")
    v = doc["verdict"]
    assert v["name"] == "unexplained-nccl-warning" and v["severity"] == "warning"
    assert "peer mapping resources exhausted" in v["message"] and "transport/p2p.cc:275" in v["message"]
    assert v["evidence"][0]["where"] == f"{path}:3"
    assert "NCCL_DEBUG=INFO" not in v["fix"]                  # the log has INFO lines already


def test_unexplained_without_info_lines_asks_for_them(tmp_path, capsys):
    # NCCL_DEBUG=WARN: the version banner, then only what the framework prints
    doc, _ = triage(tmp_path, capsys, "NCCL version 2.19.3+cuda12.3\n[w3|0]:ncclInvalidUsage: This usually "
                                      "reflects invalid usage of NCCL library.\n[w3|0]:Last error:\n"
                                      "[w3|0]:Invalid config blocking attribute value -2147483648\n")
    v = doc["verdict"]
    assert v["name"] == "unexplained-nccl-warning"
    assert "Invalid config blocking attribute" in v["message"] and "ncclInvalidUsage" in v["message"]
    assert "NCCL_DEBUG=INFO" in v["fix"]


@pytest.mark.parametrize("text", [
    "n1:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ab (size 9)\n",
    QP_OLD.format(err="Connection timed out"),
    JAX_EMPTY_ADDRESS,
])
def test_an_explained_log_gets_no_unexplained_finding(tmp_path, capsys, text):
    doc, _ = triage(tmp_path, capsys, text)
    assert doc["verdict"] and doc["verdict"]["name"] != "unexplained-nccl-warning"
    assert not named(doc, "unexplained-nccl-warning")


def test_log_rules_default_to_loud_severities():
    # unexplained-nccl-warning takes a log check's finding at warning or error as explaining the log: a log
    # rule that defaulted to info would leave the lines it recognises "unexplained"
    for r in ruleset.load(from_sources=True):
        reads_log = any(set(r.needs + r.check_gate(c)[0]) & {"log", "evidence"} for c in r.checks)
        if reads_log and r.name != "unexplained-nccl-warning":
            assert r.severity in ("error", "warning"), (r.name, r.severity)


# ---------------------------------------------------------------- NVLS after a Fabric Manager restart

@pytest.mark.parametrize("text", [
    "hgx-c2:7310:7355 [3] NCCL INFO NCCL version 2.18.5+cuda12.2\n"
    "hgx-c2:7310:7355 [3] transport/nvls.cc:165 NCCL WARN Cuda failure 'invalid argument'\n"
    "hgx-c2:7310:7355 [3] NCCL INFO transport/nvls.cc:324 -> 1\n",
    "NCCL version 2.21.5+cuda12.4\n...\ntransport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'\n"
    "NCCL INFO transport/nvls.cc:330 -> 1\nNCCL INFO init.cc:1277 -> 1\n",
])
def test_nvls_invalid_argument_is_a_fabric_manager_restart(tmp_path, capsys, text):
    doc, _ = triage(tmp_path, capsys, text)
    v = doc["verdict"]
    assert v["name"] == "fabric-manager" and v["severity"] == "error"
    assert "restarted" in v["message"] and "NVLS" in v["message"]
    assert "reset the gpus" in v["fix"].lower() and "NCCL_NVLS_ENABLE=0" in v["fix"]
    assert not named(doc, "unexplained-nccl-warning")


def test_invalid_argument_elsewhere_is_not_blamed_on_the_fabric_manager(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "hgx-c2:7310:7355 [3] transport/p2p.cc:275 NCCL WARN Cuda failure "
                                      "'invalid argument'\n")
    assert not named(doc, "fabric-manager")
    assert doc["verdict"]["name"] == "unexplained-nccl-warning"


# ---------------------------------------------------------------- GPUDirect RDMA disabled per HCA

GDR_OFF = """\
learn07:41377:41399 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.9.0.7<0>
learn07:41377:41399 [3] NCCL INFO Using network IB
learn07:41377:41399 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
learn07:41377:41399 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'
"""


@pytest.mark.parametrize("version", [None, "2.21.5"])
def test_gdr_disabled_with_old_or_unknown_nccl_names_the_detection_bug(tmp_path, capsys, version):
    text = (f"learn07:41377:41377 [3] NCCL INFO NCCL version {version}+cuda12.4\n" if version else "") + GDR_OFF
    doc, _ = triage(tmp_path, capsys, text)
    v = doc["verdict"]
    assert v["name"] == "gdr-disabled"
    assert "did not detect a peer-memory module" in v["message"]
    assert "no nvidia_peermem / nv_peer_mem registration" not in v["message"]   # not stated as fact
    assert "nccl-peermem-detection-bug" in v["message"] and "NC2001" in v["message"]
    assert "2.23.4" in v["fix"]


def test_gdr_disabled_with_a_fixed_nccl_keeps_the_plain_cause(tmp_path, capsys):
    doc, _ = triage(tmp_path, capsys, "learn07:41377:41377 [3] NCCL INFO NCCL version 2.26.2+cuda12.4\n" + GDR_OFF)
    v = doc["verdict"]
    assert v["name"] == "gdr-disabled" and "nccl-peermem-detection-bug" not in v["message"]
    assert "no nvidia_peermem / nv_peer_mem registration" in v["message"]


# ---------------------------------------------------------------- the scanner stays fast

def test_scan_pattern_still_starts_with_one_literal():
    # the regex engine skips ahead to a single leading literal; an alternative at the top level that
    # starts with something else (say "nccl...Error:") makes the whole scan ten times slower
    pattern = P.SCAN.pattern.decode("latin-1")
    assert pattern.startswith("L(")
    depth, escaped = 0, False
    for i, c in enumerate(pattern):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            assert depth > 0 or i == len(pattern) - 1, "SCAN must be L(...) as a whole"
        else:
            assert not (c == "|" and depth == 0), "an alternative outside L(...)"


# ---------------------------------------------------------------- a framework's report alone

def test_framework_error_report_without_nccl_debug_is_read_as_a_log(tmp_path, capsys):
    # JAX/XLA tags every line with its worker; NCCL_DEBUG unset, so no NCCL INFO/WARN line at all
    doc, path = triage(tmp_path, capsys, (
        "[w2|0]:ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "[w2|0]:Last error:\n"
        "[w2|0]:Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 41000\n"))
    assert doc["inputs"][0]["kind"] == "nccl_log"
    assert doc["verdict"]["name"] == "duplicate-gpu"
    assert doc["verdict"]["evidence"][0]["where"] == f"{path}:3"
