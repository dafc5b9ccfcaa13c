"""NCCL's own reports and what a host says, read as facts: the ncclras text and JSON reports and RAS log lines,
2.31's NCCL DIAG lines, PyTorch's watchdog lines, ulimit -a / nvidia-smi / driver version output. Inputs are
written from the format strings of NCCL's client_support.cc, diagnostics code, ProcessGroupNCCL.cpp and the
tools' own output layouts, with invented values."""

from __future__ import annotations

import json

from ncdoc.evidence.host_output import parse_host_output
from ncdoc.evidence.nccl_diag import env_var_of, net_outlier, p2p_counts, parse_nccl_diag
from ncdoc.evidence.nccl_log import parse_nccl_log
from ncdoc.evidence.ras_report import has_ras, parse_ras_json, parse_ras_text
from paths import FIXTURES

RAS_TEXT = (FIXTURES / "triage" / "ncclras_incomplete.txt").read_text().splitlines()


def test_ras_text_report_sections():
    r = parse_ras_text(RAS_TEXT, "ras.txt")
    assert (r.nccl_version, r.cuda_build, r.cuda_runtime, r.cuda_driver) == ("2.27.7", "12.9", 12090, 12080)
    assert (r.nodes, r.processes, r.gpus) == (2, 16, 16)
    assert r.query_seconds == 2.31 and r.timeouts == 1
    (row,) = r.comm_rows
    assert (row.ranks_per_node, row.ranks_per_comm, row.status, row.errors) == ("7-8", 16, "RUNNING", "INCOMPLETE")
    (proc,) = r.missing_processes
    assert (proc.pid, proc.node, proc.gpus, r.missing_count) == (20817, "10.40.0.22", "6", 1)
    (issue,) = r.comm_issues
    assert (issue.comm, issue.comm_hash, issue.kind, issue.missing) == ("#0-0", "3c9a51e07d28b4f6", "INCOMPLETE", 1)
    assert [(x.rank, x.gpu, x.pid, x.node) for x in issue.ranks] == [(14, "6", 20817, "10.40.0.22")]
    assert r.evidence["missing"][0].line == 23


def test_ras_per_node_tables_and_outliers():
    lines = ["Job summary", "===========", "",
             "  Nodes  Processes         GPUs", "          per node  per process", "      3          8            1",
             "      1          4            1", "",
             "  Nodes  Processes         GPUs", "(total)    (total)      (total)", "      4         28           28", "",
             "The outlier node:", "  Node 10.1.1.9 running processes 501,502,503,504"]
    r = parse_ras_text(lines)
    assert (r.nodes, r.processes, r.gpus) == (4, 28, 28)
    assert [(p.pid, p.node) for p in r.outlier_nodes] == [(501, "10.1.1.9"), (502, "10.1.1.9"), (503, "10.1.1.9"),
                                                         (504, "10.1.1.9")]


def test_ras_mismatch_groups_members_and_single_ranks():
    lines = ["#2-1 (00ff00ff00ff00ff) MISMATCH", "  Communicator ranks have different Broadcast operation counts",
             "  6 ranks have launched up to operation 12", "  2 ranks have launched up to operation 13",
             "  Rank 3 -- GPU 3 managed by process 71 on node a", "  Rank 7 -- GPU 7 managed by process 75 on node a",
             "#2-2 (00ff00ff00ff00fe) MISMATCH", "  Communicator ranks have different AllReduce operation counts",
             "  7 ranks have launched up to operation 90",
             "  Rank 5 has launched up to operation 81 -- GPU 5 managed by process 80 on node b"]
    a, b = parse_ras_text(lines).comm_issues
    assert a.what == "Broadcast operation counts" and [(g.count, g.value) for g in a.groups] == [(6, "12"), (2, "13")]
    assert [m.rank for m in a.groups[1].members] == [3, 7] and a.ranks == ()
    assert [(x.rank, x.value, x.node) for x in b.ranks] == [(5, "81", "b")]


def test_ras_log_lines_and_monitor_events():
    lines = ["n1:10:20 [0] NCCL INFO RAS declaring peer 10.0.0.12<28028> as DEAD; rasDeadPeersHash 0xabc",
             "[2026-01-04 10:11:12] PEER_DEAD: Process 4410 on node 10.0.0.31 managing GPU 6",
             "n1:10:20 [0] NCCL INFO RAS collective BCAST:42 timeout error (5s) -- giving up on 3 missing responses"]
    r = parse_ras_text(lines)
    assert r.format == "log" and [(e.kind, e.peer) for e in r.events] == [
        ("peer_dead", "10.0.0.12<28028>"), ("peer_dead", "Process 4410 on node 10.0.0.31 managing GPU 6"),
        ("collective_timeout", "BCAST:42")]
    assert has_ras("\n".join(lines)) and not has_ras("n1:1:1 [0] NCCL INFO Using network IB")


def test_ras_json_missing_ranks_and_count_mismatch():
    data = json.loads((FIXTURES / "triage" / "ncclras.json").read_text())
    r = parse_ras_json(data, "ras.json")
    assert r.format == "json" and r.nccl_version == "2.29.2" and r.timeouts == 1 and r.query_seconds == 5.004
    assert [(p.pid, p.state) for p in r.missing_processes] == [(7004, "unresponsive")] and r.dead_count == 0
    kinds = {i.kind: i for i in r.comm_issues}
    assert kinds["INCOMPLETE"].missing == 1 and kinds["INCOMPLETE"].ranks[0].value == "unresponsive"
    mismatch = kinds["MISMATCH"]
    assert mismatch.what == "AllReduce operation counts"
    assert [(g.count, g.value) for g in mismatch.groups] == [(2, "310"), (1, "304")]


def test_ras_json_of_another_shape_is_an_empty_report():
    assert parse_ras_json(["not", "a", "report"]).empty
    assert parse_ras_json({"communicators": "x"}).comm_issues == ()


# ---------------------------------------------------------------- NCCL DIAG

def test_diag_lines_get_their_category():
    lines = ["h:1 NCCL DIAG === NCCL Diagnostics ===",
             "h:1 NCCL DIAG [INFO] p2p: 54/56 directed GPU P2P edges verified (skipped indirect=2)",
             "h:1 NCCL DIAG [OK]   net bw: 380.1/390.0/395.2 Gbit/s min/median/max same-nic bw (across 16 ranks) in comm 0x1",
             "h:1 NCCL DIAG [INFO] net bw: cross-nic rank 9 (h2): 190.0 Gbit/s, >30% off median 388.0 Gbit/s in comm 0x1",
             "h:1 NCCL DIAG [INFO] GPU inventory: model mismatch across 16 ranks in comm 0x1, rank(s) {8,...} (N=8) "
             "differ from rank 0 (NVIDIA H100 80GB HBM3)",
             "h:1 NCCL DIAG [INFO] ECC: uncorrected volatile errors on rank(s) {3} (worst=2) across 16 ranks in comm 0x1",
             "h:1 NCCL DIAG [INFO] NVLink: diagnostics incomplete, gathered 12/16 ranks in comm 0x1/0x2/0x3 (RAS overlay "
             "may not be ready)",
             "h:1 NCCL DIAG NCCL diagnostics completed in 301.4 ms across 16 ranks"]
    d = parse_nccl_diag(lines, "diag.log")
    cats = [(x.check, x.category) for x in d.lines]
    assert cats == [("p2p", "p2p_failed"), ("net bw", "ok"), ("net bw", "net_outlier"),
                    ("GPU inventory", "config_mismatch"), ("ECC", "hardware"), ("NVLink", "incomplete")]
    assert d.kinds == ("active",) and d.ranks == 16
    assert p2p_counts(d.lines[0]) == (54, 56)
    assert net_outlier(d.lines[2]) == ("cross-nic", 9, "h2", 190.0, 388.0)
    assert d.lines[3].ranks == (8,) and d.lines[3].rank_total == 8
    assert d.lines[0].host == "h" and d.lines[0].line == 2


def test_diag_env_values():
    lines = ["n:1 NCCL DIAG [INFO] NCCL environment: mismatch across 4 ranks in comm 0x9 for NCCL_PROTO",
             "n:1 NCCL DIAG [INFO] NCCL environment: NCCL_PROTO=Simple on rank(s) {0,1}",
             "n:1 NCCL DIAG [INFO] NCCL environment: NCCL_PROTO=(unset) on rank(s) {2,3}"]
    d = parse_nccl_diag(lines)
    assert d.env_values == {"NCCL_PROTO": {"Simple": (0, 1), "(unset)": (2, 3)}}
    assert {env_var_of(x) for x in d.lines} == {"NCCL_PROTO"}


# ---------------------------------------------------------------- the watchdog

def test_watchdog_records_across_versions_and_prefixes():
    lines = ["[rank3]:[E1108 14:02:11.203 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=12, OpType=_ALLGATHER_BASE, NumelIn=64, NumelOut=512, Timeout(ms)=600000) ran "
             "for 600058 milliseconds before timing out.",
             "(RayWorkerWrapper pid=88) [E ProcessGroupNCCL.cpp:458] [Rank 1] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=9, OpType=GATHER, Timeout(ms)=1800000) ran for 1800100 milliseconds before "
             "timing out.",
             "[rank1]:[E ProcessGroupNCCL.cpp:1537] [PG 1 Rank 1] Timeout at NCCL work: 9, last enqueued NCCL work: 9, "
             "last completed NCCL work: 8.",
             "[rank0]:[E1108 14:12:40.100 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
             "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
             "collectives."]
    fw = parse_nccl_log(lines).framework
    assert [(t.rank, t.seq, t.op, t.numel_in, t.timeout_ms) for t in fw.timeouts] == [
        (3, 12, "_ALLGATHER_BASE", 64, 600000), (1, 9, "GATHER", None, 1800000)]
    assert [(p.rank, p.pg, p.seq, p.last_enqueued, p.last_completed) for p in fw.progress] == [(1, "1", 9, 9, 8)]
    assert fw.stuck_s == 480 and fw.timeouts[0].evidence.line == 1


# ---------------------------------------------------------------- host output

def test_host_output_limits_nvml_and_versions():
    h = parse_host_output((FIXTURES / "triage" / "host_limits_driver.txt").read_text().splitlines(), "host.txt")
    assert (h.memlock_kib, h.memlock_unlimited) == (8192, False)
    assert h.nvml_error == "Driver/library version mismatch" and h.nvml_library == "560.35.03"
    assert h.kernel_module == "560.28.03" and h.userspace_versions == {"NVML library": "560.35.03"}
    assert h.evidence["memlock"][0].line == 8


def test_host_output_smi_header_packages_nvcc_and_other_libraries():
    lines = ["| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |",
             "ii  libnvidia-compute-535:amd64   535.183.01-0ubuntu0.22.04.1   amd64   NVIDIA libcompute package",
             "Cuda compilation tools, release 12.4, V12.4.131",
             "NVRM: API mismatch: the client has the version 535.183.01, but",
             "NVRM: this kernel module has the version 535.161.08.  Please",
             "[1652739463.05] [cn1:40:0]   ib_md.c:1112 UCX  ERROR ibv_reg_mr(address=0x7f, length=4096) failed: "
             "Cannot allocate memory",
             "max locked memory       (kbytes, -l) unlimited"]
    h = parse_host_output(lines)
    assert (h.smi_version, h.driver_version, h.smi_cuda, h.nvcc) == ("535.161.08", "535.161.08", "12.2", "12.4")
    assert h.packages == {"libnvidia-compute-535": "535.183.01"}
    assert h.memlock_unlimited is True and h.memlock_kib is None
    assert [r.call for r in h.registrations] == ["ibv_reg_mr"]
