"""The NCCL log parser against real logs (../shared/corpus) and fixtures in exact NCCL formats."""

from __future__ import annotations

import json

import pytest

from ncdoc.errors import InputError
from ncdoc.evidence import parse_nccl_log, parse_nccl_log_file
from ncdoc.evidence.nccl_log_scan import LogScanner
from ncdoc.evidence.textfile import iter_file_blocks, iter_line_blocks
from paths import SHARED, TESTS

CORPUS = SHARED / "corpus"
FIXTURES = TESTS / "fixtures" / "logs"


def _expect() -> dict:
    path = CORPUS / "EXPECT.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _cases(kind: str) -> list[str]:
    return sorted(c for c, e in _expect().items() if e.get("kind") == kind)


def _matches(expected, found) -> bool:
    """The corpus-check comparison: strings case-insensitive, numbers within 2 %, lists as subsets."""
    if isinstance(expected, str):
        return isinstance(found, (str, int, float)) and str(found).strip().lower() == expected.lower()
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return found is not None and abs(float(found) - expected) <= 0.02 * max(abs(expected), 1e-9)
    if isinstance(expected, list):
        return isinstance(found, list) and all(any(_matches(e, f) for f in found) for e in expected)
    if isinstance(expected, dict):
        return isinstance(found, dict) and all(k in found and _matches(v, found[k]) for k, v in expected.items())
    return expected == found


def log(name: str):
    return parse_nccl_log_file(FIXTURES / name)


# ---------------------------------------------------------------- the real corpus

@pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")
@pytest.mark.parametrize("case", _cases("nccl_log"))
def test_corpus_expected_facts(case):
    facts = parse_nccl_log_file(CORPUS / case / "artifact.txt").to_facts()
    json.dumps(facts)                                   # the triage command prints it as is
    for key, value in _expect()[case].get("facts", {}).items():
        assert _matches(value, facts.get(key)), f"{case}: {key} = {facts.get(key)!r}, expected {value!r}"


@pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")
def test_corpus_healthy_log_in_detail():
    f = parse_nccl_log_file(CORPUS / "slurmv4-hgx-roce-16rank-gdrdma-init-complete" / "artifact.txt")
    assert (f.nccl_version, f.transport, f.gdr.state, f.gdr.basis) == ("2.27.5", "IB", "enabled", "channels")
    assert f.channels.net_gdr == 64 and f.channels.net_no_gdr == 0
    assert f.link_layer == "RoCE" and f.relaxed_ordering is True
    assert (f.nranks, f.nnodes, f.local_ranks, f.init_complete) == (16, 2, 8, 8)
    assert f.comms[0].missing_ranks == () and f.warn_lines == 0
    assert f.env["NCCL_NET_GDR_LEVEL"] == "PIX" and f.env["NCCL_IB_GID_INDEX"] == "3"
    assert f.plugin.loaded == ("AWS Libfabric",) and f.plugin.assigned == ("IB",)   # the plugin fell back
    assert not f.plugin.missing and not f.ib_no_device
    assert [s.classification for s in f.socket_ifaces] == ["ok", "ok"]   # RAS's 127.0.0.1 is no interface
    assert f.nccl_result_sources == {"ncclSystemError": {"plugin/net.cc": 8}}
    assert f.transports == {"IB": 8} and f.rank_count == 8


@pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")
def test_corpus_failure_facts():
    def parse(case):
        return parse_nccl_log_file(CORPUS / case / "artifact.txt")

    f = parse("hkproj-1-socket-no-route-to-host-ifname")
    (p,) = f.problems_of("socket_connect_error")
    assert (p.code_name, p.level, p.details["address"]) == ("EHOSTUNREACH", "last_error", "192.168.19.14<52822>")
    assert f.nccl_results == {"ncclSystemError": 1}
    f = parse("horovod-584-socket-lo-and-linklocal-ifaces")
    net = {(s.name, s.classification) for s in f.socket_ifaces if s.role == "net"}
    assert net == {("lo", "loopback"), ("eth0", "ok"), ("eth1", "link_local")}
    assert all(p.details.get("phase") == "bootstrap" for p in f.problems_of("socket_connect_error"))
    f = parse("nccl-709-roce-error12-mtu")
    assert {(p.code, p.code_name, p.details["vendor_err"]) for p in f.problems_of("ib_completion_error")} == {
        (12, "IBV_WC_RETRY_EXC_ERR", "129")}
    assert f.transport == "IB"
    f = parse("nccl-2013-rail-fabric-cross-nic-qp-timeout")
    (p,) = f.problems_of("qp_connect_timeout")
    assert (p.code, p.details["state"], p.details["next_state"], p.details["gid_index"]) == (110, "INIT", "RTR", "3")
    f = parse("nccl-226-aws-no-ib-socket")
    assert f.ib_no_device and f.plugin.missing and f.cloud["aws"] and f.transport == "Socket"
    f = parse("nccl-451-docker-ibv-open-device-failed")
    assert f.problems_of("ibv_open_device_failed")[1].details["device"] == "mlx5_bond_0"
    assert f.env == {"NCCL_IB_DISABLE": "0"} and [d.name for d in f.net_devices] == ["bond0"]
    f = parse("nccl-941-container-ib-nodev-socket")
    assert ("virbr0", "virtual") in {(s.name, s.classification) for s in f.socket_ifaces}
    assert "IBext" in f.plugin.loaded and f.transport == "Socket"
    f = parse("nccl-tests-276-h200-nvls-fabric-manager-999")
    (p,) = f.problems_of("cuda_failure")
    assert (p.code, p.code_name, p.source_file) == (999, "cudaErrorUnknown", "transport/nvls.cc:223")
    assert f.nvswitch_context
    f = parse("nccl-1537-roce-gdr-disabled-peermem-loaded")
    assert f.gdr.hcas_off == ("mlx5_0", "mlx5_1") and "peermem" in f.gdr.reason
    f = parse("moc-roce-h100-single-hca-init-log")
    assert ("eno7np0", "link_local") in {(s.name, s.classification) for s in f.socket_ifaces}
    assert f.gdr.dma_buf is True and f.plugin.internal is True


# ---------------------------------------------------------------- fixtures: what the corpus lacks

def test_gdr_partial_across_hosts_names_the_rank_and_direction():
    f = log("gdr_partial_2_27.log")
    assert (f.gdr.state, f.gdr.basis) == ("partial", "channels")
    assert (f.gdr.channels_on, f.gdr.channels_off) == (2, 2)
    assert f.gdr.ranks_off == ("gpu-b02:4201:0",) and f.gdr.directions_off == ("receive",)
    assert f.gdr.pairs_on == 1 and f.gdr.pairs_off == 1
    assert "SYS" in f.gdr.reason and "PXB" in f.gdr.reason          # 2.27 path numbering: 9 SYS, 5 PXB
    assert f.channels.nchannels == 2 and f.channels.kinds["P2P/CUMEM"] == 2
    assert (f.nnodes, f.init_start, f.init_complete) == (2, 2, 2)
    assert f.gdr.ring_flags == {"GDR 0": 1}


def test_gdr_pairs_in_the_2_29_format():
    f = log("gdr_pairs_2_29.log")
    assert (f.gdr.state, f.gdr.basis, f.gdr.pairs_on, f.gdr.pairs_off) == ("partial", "gpu_nic_pairs", 1, 2)
    assert "SYS" in f.gdr.reason and "P2C" in f.gdr.reason
    assert f.link_layer == "RoCE" and f.relaxed_ordering is False


def test_gdr_disabled_in_the_2_4_format_and_old_lines():
    f = log("legacy_2_4.log")
    assert (f.nccl_version, f.transport, f.gdr.state) == ("2.4.8", "IB", "disabled")
    assert "no module" in f.gdr.reason
    assert f.channels.by_transport == {"NET": 1, "P2P": 1, "SHM": 1}
    assert (f.nranks, f.init_complete) == (16, 1)
    assert f.plugin.missing


def test_socket_fallback_on_aws_without_the_ofi_plugin():
    f = log("aws_socket_no_plugin_2_30.log")
    assert (f.transport, f.transports) == ("Socket", {"Socket": 2})
    assert f.ib_no_device and f.ib_no_device_hosts == ("ip-172-31-3-4", "ip-172-31-9-77")
    assert f.plugin.missing and not f.plugin.loaded and f.cloud["aws"]
    assert f.gdr.state == "unknown"                    # sockets never do GDR: no verdict from them
    assert f.channels.net_names == {"Socket": 2} and [d.name for d in f.net_devices] == ["ens32"]
    (w,) = f.problems
    assert w.source_file == "transport/net_socket.cc:476" and w.evidence.line == 16


def test_ib_errors_with_mpirun_tags_and_crlf():
    f = log("ib_errors_mpirun_crlf_2_21.log")
    assert f.hosts == ("node03", "node04") and f.nccl_version == "2.21.5"
    (c,) = f.problems_of("ib_completion_error")
    assert (c.code, c.host, c.details["hca"], c.details["peer"]) == (12, "node03", "mlx5_0", "192.168.1.4<51022>")
    (q,) = f.problems_of("qp_connect_timeout")
    assert (q.host, q.rank, q.details["device"], q.evidence.line) == ("node04", "node04:7202:1", "mlx5_1:1", 8)
    assert not q.message.endswith("\r") and not q.evidence.text.endswith("\r")
    assert f.nccl_results == {"ncclRemoteError": 1, "ncclSystemError": 1}


def test_ib_errors_in_the_2_30_format_keep_the_hint():
    f = log("ib_errors_2_30.log")
    retry, prot = f.problems_of("ib_completion_error")
    assert retry.code_name == "IBV_WC_RETRY_EXC_ERR"
    assert retry.details["status_text"] == "transport retry counter exceeded"
    assert "NCCL_IB_TIMEOUT" in retry.details["hint"]
    assert (prot.code, prot.code_name, prot.details["opcode"]) == (4, "IBV_WC_LOC_PROT_ERR", "RDMA_READ")


def test_bootstrap_refused_over_virtual_and_loopback_interfaces():
    f = log("bootstrap_refused_srun_2_30.log")
    boot = {(s.name, s.classification, s.kind) for s in f.socket_ifaces if s.role == "bootstrap"}
    assert boot == {("docker0", "virtual", "docker"), ("lo", "loopback", "loopback")}
    (p,) = f.problems_of("socket_connect_error")
    assert (p.code_name, p.details["phase"], p.details["before_init_complete"]) == ("ECONNREFUSED", "bootstrap", True)
    assert p.details["address"] == "172.17.0.1<43211>" and p.host == "node02"


def test_fabric_manager_not_ready_on_nvswitch():
    f = log("fabric_manager_802.log")
    codes = {(p.code, p.code_name) for p in f.problems_of("cuda_failure")}
    assert codes == {(802, "cudaErrorSystemNotReady")}
    assert f.nvls_available is True and f.channels.nvls_channels == 16
    assert any("nvls.cc" in c for c in f.nvswitch_context)


def test_algorithm_facts_for_two_node_tree():
    f = log("tuning_tree_two_nodes_2_30.log")
    assert f.nnodes == 2 and f.env["NCCL_ALGO"] == "Tree"
    assert f.algorithms["NCCL_ALGO"] == "Tree" and f.algorithms["matrix_printed"] is True
    assert f.algorithms["selections"] == {"AllReduce/Tree/Simple": 3, "Broadcast/Ring/LL": 1}


def test_framework_errors_and_last_error():
    f = log("torchrun_remote_error_2_21.log")
    assert f.problems_of("nccl_error")[0].code_name == "ncclRemoteError"
    (last,) = f.problems_of("ib_completion_error")
    assert (last.level, last.code, last.details["hca"]) == ("last_error", 12, "mlx5_3")
    assert f.problems_of("collective_timeout") and f.hosts == ("node07",)


def test_misuse_warnings_are_named():
    f = log("misuse_shm_dup_gpu.log")
    assert f.nccl_versions == ("2.17.1", "2.18.6") and f.nccl_version == "2.18.6"
    for kind in ("shm_error", "duplicate_gpu", "version_mismatch", "p2p_disabled_nvlink", "ibv_call_failed",
                 "ib_async_event", "bootstrap_no_interface", "net_plugin_init_failed", "socket_no_listen_interface"):
        assert f.problem_counts.get(kind) == 1, kind
    assert f.problems_of("ibv_call_failed")[0].code_name == "ENOMEM"
    assert f.warn_lines == 9


@pytest.mark.parametrize("msg, kind, code_name", [
    # ibv_modify_qp before 2.24 (strerror only, or with the errno) and since (number first, QP details)
    ("Call to ibv_modify_qp failed with error Connection timed out", "qp_connect_timeout", "ETIMEDOUT"),
    ("Call to ibv_modify_qp failed with error Connection timed out errno 110", "qp_connect_timeout", "ETIMEDOUT"),
    ("Call to ibv_modify_qp failed with error Network is unreachable", "ib_qp_modify_failed", "ENETUNREACH"),
    ("Call to ibv_modify_qp failed with error No such device errno 19", "ib_qp_modify_failed", "ENODEV"),
    ("Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_5:1, curr state INIT, next state RTR",
     "qp_connect_timeout", "ETIMEDOUT"),
    ("Call to ibv_reg_mr failed with error Cannot allocate memory errno 12", "ibv_call_failed", "ENOMEM"),
    ("Cuda failure 'invalid argument'", "cuda_failure", "cudaErrorInvalidValue"),
    ("ncclSocketInit: connecting to address  with family 48213 is neither AF_INET(2) nor AF_INET6(10)",
     "bootstrap_no_interface", None),
    ("XML Import Channel : dev 1 not found.", "topo_xml_error", None),
    ("Could not open XML topology file /opt/t.xml : No such file or directory", "topo_xml_error", None),
])
def test_warn_messages_are_named(msg, kind, code_name):
    f = parse_nccl_log([f"gpu9:77:79 [0] misc/ibvwrap.cc:187 NCCL WARN {msg}"])
    (p,) = f.problems
    assert (p.kind, p.code_name, p.level, p.source_file) == (kind, code_name, "WARN", "misc/ibvwrap.cc:187")


def test_qp_details_and_topology_file_side_are_kept():
    f = parse_nccl_log(["a:1:2 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection "
                        "timed out, on dev mlx5_5:1, curr state INIT, next state RTR, local GID index 3",
                        "a:1:2 [0] graph/search.cc:719 NCCL WARN XML Import Channel : dev 1 not found.",
                        "a:1:2 [0] graph/xml.cc:394 NCCL WARN XML Topology has wrong version 1, 2 needed",
                        "a:1:2 [0] bootstrap.cc:90 NCCL WARN ncclSocketInit: connecting to address  with family "
                        "59936 is neither AF_INET(2) nor AF_INET6(10)"])
    qp = f.problems_of("qp_connect_timeout")[0].details
    assert (qp["state"], qp["next_state"], qp["device"], qp["gid_index"]) == ("INIT", "RTR", "mlx5_5:1", "3")
    assert [p.details["file"] for p in f.problems_of("topo_xml_error")] == ["graph", "topology"]
    assert f.problems_of("bootstrap_no_interface")[0].details["family"] == "59936"


# Frameworks' error text around NCCL's: PyTorch c10d ("NCCL error" line first), and the same message
# with launcher tags and without that line (JAX-style pastes), where only "Last error:" marks it.
FRAMEWORK_LINES = [
    "n1:4410:4410 [0] NCCL INFO NCCL version 2.18.6+cuda12.1",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6",
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
    "Last error:",
    "socketStartConnect: Connect to 192.168.19.14<52822> failed : No route to host",
    "n1:4410:4410 [0] NCCL INFO Using network IB",        # ends what follows the "NCCL error" line
    "[trainer0|0]:ncclInternalError: Internal check failed.",
    "[trainer0|0]:Last error:",
    "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)",
    "[w3|0]:ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
    "[w3|0]:Last error: Invalid config blocking attribute value -2147483648",
]


def test_framework_result_names_and_last_errors_are_read():
    f = parse_nccl_log(FRAMEWORK_LINES)
    assert f.nccl_results == {"ncclSystemError": 1, "ncclInternalError": 1, "ncclInvalidUsage": 1}
    assert [e.line for e in f.evidence["nccl_result"]] == [3, 7, 10]
    last = [(p.kind, p.evidence.line) for p in f.problems if p.level == "last_error"]
    assert last == [("socket_connect_error", 5), ("bootstrap_no_interface", 9), ("warn", 11)]
    assert f.problems_of("bootstrap_no_interface")[0].message.startswith("ncclSocketInit:")   # tag dropped


@pytest.mark.parametrize("size", [1, 13, 97, 300, 4096])
def test_framework_lines_read_alike_at_any_block_size(size):
    whole = parse_nccl_log(FRAMEWORK_LINES).to_facts()
    scanner = LogScanner()
    for block in iter_line_blocks(FRAMEWORK_LINES, block_bytes=size):
        scanner.feed(block)
    assert scanner.result().to_facts() == whole


# ---------------------------------------------------------------- streaming, blocks, entry points

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_same_facts_from_lines_files_and_any_block_size(name):
    path = FIXTURES / name
    whole = parse_nccl_log_file(path).to_facts()
    assert parse_nccl_log(path.read_text().splitlines(), source=str(path)).to_facts() == whole
    with path.open() as fh:                             # lines that keep their newline
        assert parse_nccl_log(fh, source=str(path)).to_facts() == whole
    for size in (1, 97, 4096):
        scanner = LogScanner()
        for block in iter_file_blocks(path, block_bytes=size):
            scanner.feed(block)
        assert scanner.result(str(path)).to_facts() == whole, size


def test_evidence_is_bounded_and_memory_flat():
    line = "n{h:03d}:{p}:{p} [{d}] NCCL INFO NET/IB : No device found.\n"
    lines = (line.format(h=i % 700, p=1000 + i, d=i % 8) for i in range(20000))
    f = parse_nccl_log(lines)
    assert f.lines == 20000 and f.ib_no_device
    assert len(f.evidence["ib_no_device"]) == 5 and f.host_count == 700


def test_merged_lines_from_two_writers_are_both_read():
    f = parse_nccl_log(["a:1:1 [0] NCCL INFO Using network IB b:2:2 [1] NCCL INFO NCCL version 2.21.5+cuda12.4"])
    assert (f.nccl_version, f.transport, f.hosts) == ("2.21.5", "IB", ("a", "b"))
    # glued without a space, the first line's tail and the second host cannot be told apart
    f = parse_nccl_log(["a:1:1 [0] NCCL INFO Using network IBb:2:2 [1] NCCL INFO NCCL version 2.21.5+cuda12.4"])
    assert f.nccl_version == "2.21.5" and f.recognised_lines == 2


def test_file_entry_point_refuses_empty_and_binary(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("\n \n")
    with pytest.raises(InputError, match="empty"):
        parse_nccl_log_file(empty)
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    with pytest.raises(InputError, match="binary"):
        parse_nccl_log_file(binary)
    with pytest.raises(InputError, match="no such file"):
        parse_nccl_log_file(tmp_path / "missing.log")
    with pytest.raises(InputError, match="directory"):
        parse_nccl_log_file(tmp_path)


def test_a_giant_line_is_cut_not_held(tmp_path):
    path = tmp_path / "giant.log"
    with path.open("w") as fh:
        fh.write("x" * (3 << 20) + "\n")
        fh.write("h:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n")
    f = parse_nccl_log_file(path)
    assert f.lines == 2 and f.nccl_version == "2.19.3"


def test_a_log_without_nccl_lines_gives_empty_facts():
    f = parse_nccl_log(["hello", "world"])
    assert f.lines == 2 and f.recognised_lines == 0 and f.transport is None and f.gdr.state == "unknown"
    assert f.to_facts()["net_devices"] == []


# ---------------------------------------------------------------- shortcuts give the long way's answer

@pytest.mark.parametrize("pre", [
    "gpu00001-00:415002:415002 [0] ", "a:1:1 [0] ", "h.x_y-z:123:456 [12]  ", "h:1:1 [0]\t", "0:1:1 [0] ",
    "h:p_q:t-r [7] ", "h:1:1 [\u0663] ", "h:1:1 [0] x", "[1,0]<stdout>:h:1:1 [0] ", "h:1 [0] ", "h [0] ",
    "h:1:1 [0] transport/net_ib.cc:840 ", "h:1:1 [0] net.cc:1 (ncclIbConnect) ", "h:1:1:1 [0] ", "h:1:1 [0]",
    "2024-01-01 h:1:1 [0] ", "h:1:1\u00e9 [0] ", ":1:1 [0] ", "h:1:1 [] ", "h:1:1 [01] ",
])
def test_plain_prefix_shortcut_agrees_with_the_long_way(pre):
    from ncdoc.evidence.nccl_log_patterns import parse_prefix, parse_prefix_long
    assert parse_prefix(pre) == parse_prefix_long(pre)


def test_error_traces_are_read_for_each_process_once_cached():
    # every process prints the same trace message; the (host, pid, tid, code) dedup must still count each
    lines = [f"n{i}:{100 + i}:{100 + i} [0] NCCL INFO transport/net_socket.cc:139 -> 2" for i in range(5)]
    lines += [f"n{i}:{100 + i}:{100 + i} [0] NCCL INFO transport/net_socket.cc:139 -> 2" for i in range(2)]
    f = parse_nccl_log(lines)
    assert f.nccl_results == {"ncclSystemError": 5}
    assert f.nccl_result_sources == {"ncclSystemError": {"transport/net_socket.cc": 5}}


def test_l_info_without_nccl_before_it_is_not_a_prefix_and_never_loops():
    # Random text once sent the block scanner into an endless loop: "L INFO"/"L WARN" not
    # preceded by "NCC" looked like the end of an NCCL prefix. It must be skipped, the same
    # way whatever the block size.
    import signal

    from ncdoc.evidence.nccl_log_scan import LogScanner
    from ncdoc.evidence.textfile import iter_line_blocks

    lines = ["node01:4012:4012 [0] NCCL INFO ", "L INFO NCCL version 2.27.5+cuda12.9",
             "x L WARN a [ b NCCL INFO c", "L WARN  NCCL WARN  [0] NCCL INFO "]
    old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(TimeoutError("scanner loops")))
    signal.alarm(20)
    try:
        whole = json.dumps(parse_nccl_log(lines).to_facts(), sort_keys=True)
        for size in (1, 7, 1 << 20):
            scanner = LogScanner()
            for block in iter_line_blocks(lines, block_bytes=size):
                scanner.feed(block)
            assert json.dumps(scanner.result("").to_facts(), sort_keys=True) == whole
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# NCCL 2.27+ NVLS binds, aws-ofi-nccl's errors, sysfs paths topology detection could not resolve
@pytest.mark.parametrize("msg, kind, code, details", [
    ("Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot "
     "be performed in the present state'.", "cuda_failure", 401, {"error": "the operation cannot be performed in "
                                                                          "the present state"}),
    ("Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 at MC group 7f00 offset 0 : CUDA error 2 "
     "'out of memory'.", "cuda_failure", 2, {"error": "out of memory"}),
    ("Failed to CUDA calloc 6291456 bytes", "cuda_alloc_failed", 2, {"bytes": "6291456"}),
    ("NET/OFI Unable to insert remote address into address vector for device 1. RC: 0", "ofi_av_insert_failed",
     None, {"device": "1", "rc": "0"}),
    ("NET/OFI Request 0x7f00aa01 completed with error. RC: 20. Error: unknown error. Completed length: 0, "
     "Request: { buffer_index: 255, dev: 1, size: 0, state: CREATED, direction: SEND }", "ofi_completion_error", 20,
     {"error": "unknown error", "device": "1", "direction": "SEND"}),
    ("NET/OFI Request 0x7f00aa01 seq 12 completed with error. RC: 103. Error: 4126 (Unresponsive receiver "
     "(reachable by EFA device but handshake failed)). Completed length: 0, Request: { dev: 0 }",
     "ofi_completion_error", 103, {"prov_errno": "4126", "error": "Unresponsive receiver (reachable by EFA device "
                                                                 "but handshake failed)"}),
    ("Could not find real path of /sys/class/pci_bus/0000:21/../../0000:21:00.0", "topo_sysfs_path_missing", None,
     {"what": "gpu", "device": "0000:21:00.0", "path": "/sys/class/pci_bus/0000:21/../../0000:21:00.0"}),
    ("Could not find real path of mlx5_3 (/sys/class/infiniband/mlx5_3/device)", "topo_sysfs_path_missing", None,
     {"what": "nic", "device": "mlx5_3", "path": "/sys/class/infiniband/mlx5_3/device"}),
])
def test_more_warn_messages_are_named(msg, kind, code, details):
    f = parse_nccl_log([f"gpu9:77:79 [3] transport/nvls.cc:155 NCCL WARN {msg}"])
    (p,) = f.problems
    assert (p.kind, p.code, p.level) == (kind, code, "WARN")
    assert {k: p.details.get(k) for k in details} == details


def test_pytorch_cuda_error_text_is_not_an_nccl_cuda_failure():
    f = parse_nccl_log(["torch.distributed.DistBackendError: NCCL error in: x.cpp:93, unhandled cuda error, "
                        "NCCL version 2.29.7", "RuntimeError: CUDA error: out of memory"])
    assert not f.problems_of("cuda_failure")


def test_last_error_text_without_its_last_error_line():
    # a paste that dropped the "Last error:" line: the text after the ncclXxxError line is still read
    f = parse_nccl_log(["torch.distributed.DistBackendError: NCCL error in: /x/NCCLUtils.cpp:93, unhandled cuda "
                        "error, NCCL version 2.29.7", "ncclUnhandledCudaError: Call to CUDA function failed.",
                        "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 2 'out of "
                        "memory'.", "This is usually caused by a system or configuration error in the Fabric "
                        "Manager or NVSwitches."])
    (p,) = f.problems_of("cuda_failure")
    assert (p.code, p.level, p.evidence.line) == (2, "last_error", 3)
    assert [x.kind for x in f.problems] == ["nccl_error", "cuda_failure"]


def test_a_plugin_function_where_nccl_puts_its_file_is_not_a_host():
    f = parse_nccl_log(["[1,5]<stdout>:worker-2:41:97 [5] ofi_process_cq:1039 NCCL WARN NET/OFI Request 0x7f00 "
                        "completed with error. RC: 5. Error: unknown error. Completed length: 0"])
    (p,) = f.problems
    assert (p.host, p.source_file) == ("worker-2", "ofi_process_cq:1039")
    assert f.hosts == ("worker-2",)


def test_info_real_path_lines_are_read():
    f = parse_nccl_log(["n1:5:6 [0] NCCL INFO Could not find real path of /sys/class/pci_bus/0000:3b/../../"
                        "0000:3b:00.0", "n1:5:6 [0] NCCL INFO graph/xml.cc:469 -> 2"])
    (p,) = f.problems_of("topo_sysfs_path_missing")
    assert (p.level, p.details["what"]) == ("INFO", "gpu")


def test_an_l_info_line_not_from_nccl_gives_the_same_facts_in_any_block():
    # a hypothesis seed found it: an AGG-shaped "L INFO ..." at a block's start once read the block's
    # tail as its prefix (a negative slice), so facts changed with the block size
    import json

    from ncdoc.evidence.nccl_log_scan import LogScanner
    from ncdoc.evidence.textfile import iter_line_blocks

    lines = ["node01:4012:4012 [0] NCCL INFO ", "L INFO AllReduce: 1048576 Bytes -> Algo 9 proto 7 time 1",
             "node01:4012:4012 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 10.5"]
    whole = json.dumps(parse_nccl_log(lines).to_facts(), sort_keys=True, default=str)
    for size in (1, 23, 1 << 20):
        scanner = LogScanner()
        for block in iter_line_blocks(lines, block_bytes=size):
            scanner.feed(block)
        assert json.dumps(scanner.result("").to_facts(), sort_keys=True, default=str) == whole, size
    facts = json.loads(whole)
    assert facts["hosts"] == ["node01"] and facts["recognised_lines"] == 1
