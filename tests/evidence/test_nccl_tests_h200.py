"""Real nccl-tests 2.19.6 outputs captured on one NVIDIA H200 (NCCL 2.28.9), through `ncdoc triage` as a user
runs it: one-rank runs say "one rank" instead of blaming NVLink, and a run that failed is reported as failed.
"""

from __future__ import annotations

import json

import pytest

from ncdoc.checks.evidence_tests import one_rank
from ncdoc.cli.main import main
from ncdoc.evidence.nccl_tests import parse_nccl_tests, parse_nccl_tests_file
from paths import TESTS

LOGS = TESTS / "fixtures" / "logs"
ALL_REDUCE_INFO = LOGS / "h200_nccl_tests_all_reduce_1rank_info.txt"
ALL_REDUCE_JSON = LOGS / "h200_nccl_tests_all_reduce_1rank.json"
ALL_GATHER = LOGS / "h200_nccl_tests_all_gather_1rank.txt"
SENDRECV = LOGS / "h200_nccl_tests_sendrecv_1rank.txt"
FAILED = LOGS / "h200_nccl_tests_g2_one_gpu_failed.txt"
ONE_RANK = [ALL_REDUCE_INFO, ALL_REDUCE_JSON, ALL_GATHER, SENDRECV]


def triage_json(capsys, *argv) -> tuple[int, dict, str]:
    rc = main(["triage", *map(str, argv), "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def loud(doc: dict) -> list[dict]:
    # The JSON capture's environment holds NCCL_TESTS_SRC (set by our capture script); NC1001 reporting it is the
    # env rules' business, not a one-rank one, so it is left out here.
    return [f for f in doc["findings"] if f["severity"] in ("error", "warning")
            and not (f["name"] == "unknown-nccl-var" and "NCCL_TESTS_SRC" in f["message"])]


# ---------------------------------------------------------------- one rank: nothing to compare with a link

@pytest.mark.parametrize("path", ONE_RANK, ids=lambda p: p.name)
def test_one_rank_run_is_no_error_and_says_one_rank_once(capsys, path):
    rc, doc, err = triage_json(capsys, path)
    assert loud(doc) == [] and rc == 0 and err == ""
    bandwidth = [f for f in doc["findings"] if f["name"].startswith(("busbw-", "two-node-"))]
    assert len(bandwidth) == 1, bandwidth
    info = bandwidth[0]
    assert (info["name"], info["severity"]) == ("busbw-below-line-rate", "info")
    assert "one rank in total" in info["message"] and "NVLink or the network" in info["message"]
    assert "% of the" not in info["message"]            # no comparison with the ~480 GB/s of H200 NVLink
    assert "-g N" in info["fix"] and "one process per GPU" in info["fix"]
    assert doc["facts"]["nodes"] == 1 and doc["facts"]["gpus_per_node"] == 1


@pytest.mark.parametrize("path, coll", [(ALL_REDUCE_INFO, "all_reduce"), (ALL_GATHER, "all_gather")],
                         ids=["all_reduce", "all_gather"])
def test_one_rank_reducing_collectives_explain_busbw_zero(capsys, path, coll):
    _, doc, _ = triage_json(capsys, path)
    info = next(f for f in doc["findings"] if f["name"] == "busbw-below-line-rate")
    assert f"{coll} busbw is 0 by definition" in info["message"]
    # the row quoted shows a large size where algbw is high and busbw 0
    assert any(e["text"].startswith(("1073741824", "4294967296")) for e in info["evidence"])


def test_one_rank_sendrecv_is_a_local_copy(capsys):
    _, doc, _ = triage_json(capsys, SENDRECV)
    info = next(f for f in doc["findings"] if f["name"] == "busbw-below-line-rate")
    assert "copies inside one GPU" in info["message"] and "135368" in info["message"]


def test_one_rank_is_not_a_two_node_tree_run_either(capsys):
    _, doc, _ = triage_json(capsys, ALL_REDUCE_INFO, "--nodes", "2")
    names = {f["name"] for f in doc["findings"]}
    assert "two-node-tree-overstates" not in names and "busbw-collapse" not in names


def test_one_rank_is_told_from_the_facts_not_from_the_file():
    assert one_rank(parse_nccl_tests_file(SENDRECV)).startswith("the only device listed is rank 0 on vm")
    assert one_rank(parse_nccl_tests_file(ALL_REDUCE_JSON))
    header = ("# nThread 1 nGpus {} minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
              "validation: 1 graph: 0 unalign: 0")
    dev = "#  Rank {:2d} Group  0 Pid  1234{} on     node01 device {:2d} [0000:18:00] NVIDIA H200"
    row = ("  1073741824     268435456     float     sum      -1   4821.1  222.72  {:>6}      0   4800.2  223.69  "
           "{:>6}      0")
    two = parse_nccl_tests([header.format(2), dev.format(0, 0, 0), dev.format(1, 1, 1), row.format("222.72", "223.69")])
    assert one_rank(two) is None
    cut = parse_nccl_tests([header.format(8), dev.format(0, 0, 0)])     # rank 0's line only: the listing was cut
    assert one_rank(cut) is None
    assert "only n = 1" in one_rank(parse_nccl_tests([row.format("0.00", "0.00")]))   # pasted table, no listing
    assert one_rank(parse_nccl_tests([row.format("413.22", "415.01")])) is None


# ---------------------------------------------------------------- a failed run is a failure

def test_failed_run_is_an_error_that_names_the_cause(capsys):
    rc, doc, err = triage_json(capsys, FAILED)
    assert rc == 1 and err == ""
    verdict = doc["verdict"]
    assert (verdict["name"], verdict["severity"], verdict["code"]) == ("nccl-tests-failed", "error", "NC6505")
    assert verdict["message"] == ("all_reduce_perf stopped before measuring: Invalid number of GPUs: 2 requested "
                                  "but only 1 were found (Test failure common.cu:1454 on vm)")
    wheres = [e["where"] for e in verdict["evidence"]]
    assert wheres[:2] == [f"{FAILED}:6", f"{FAILED}:8"]
    tests = next(s["facts"] for s in doc["facts"]["sources"] if s["kind"] == "nccl_tests")
    assert tests["failures"] == [{"kind": "test", "host": "vm", "pid": 1548, "location": "common.cu:1454",
                                  "error": "", "last_error": "", "error_name": None, "meaning": "", "line": 8}]
    assert tests["failure_note"] == {"line": 6, "text": "Invalid number of GPUs: 2 requested but only 1 were found."}


def test_failed_run_in_text_output(capsys):
    rc = main(["triage", str(FAILED)])
    out, err = capsys.readouterr()
    assert rc == 1 and err == ""
    assert out.startswith("Verdict: ERROR NC6505 nccl-tests-failed")
    assert "Invalid number of GPUs: 2 requested but only 1 were found" in out
    assert "No problems found" not in out


# ---------------------------------------------------------------- the parser on the real captures

def test_json_capture_parses():
    f = parse_nccl_tests_file(ALL_REDUCE_JSON)
    assert (f.format, f.collective, f.nccl_version, f.tests_version) == ("json", "all_reduce", "2.28.9", "json-3")
    assert len(f.rows) == 6 and [r.size for r in f.rows] == [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    assert len(f.devices) == 1 and f.nranks == 1 and f.hosts == ("vm",)
    d = f.devices[0]
    assert (d.rank, d.pid, d.device, d.bus_id, d.name) == (0, 1500, 0, "0000:00:06", "NVIDIA H200")
    assert (f.nthread, f.ngpus) == (1, 1) and f.peak_busbw_gbps == 0 and f.wrong_total == 0
    assert f.rows[-1].oop.algbw == pytest.approx(2123.125874) and not f.truncated and f.failures == ()


def test_text_captures_parse():
    f = parse_nccl_tests_file(ALL_REDUCE_INFO)
    assert (f.collective, f.tests_version, f.nccl_version) == ("all_reduce", "2.19.6", "2.28.9")
    assert len(f.rows) == 30 and f.nccl_lines > 90 and f.nranks == 1 and not f.truncated
    assert f.rows[-1].size == 4294967296 and f.rows[-1].oop.algbw == 2151.3 and f.peak_busbw_gbps == 0
    f = parse_nccl_tests_file(SENDRECV)
    assert f.collective == "sendrecv" and len(f.rows) == 5 and f.peak_busbw_gbps == 135368
    assert f.rows[0].ip.wrong is None and f.failures == ()
    f = parse_nccl_tests_file(FAILED)
    assert (f.ngpus, f.rows, f.devices, f.device_listings) == (2, (), (), 1)


def test_separate_one_rank_jobs_are_one_rank_each():
    header = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
              "validation: 1 graph: 0 unalign: 0")
    dev = "#  Rank  0 Group  0 Pid    {} on     {} device  0 [0x0f] NVIDIA H100 80GB HBM3"
    row = ("           8             2     float     sum      -1    35.12    0.00    0.00      0    34.77    0.00    "
           "0.00      0")
    f = parse_nccl_tests([header, dev.format(798, "node01"), row, header, dev.format(811, "node02"), row])
    assert one_rank(f) == "each of 2 separate processes lists rank 0 alone"
