"""The nccl-tests parser against real outputs (../shared/corpus) and fixtures in the exact printf formats."""

from __future__ import annotations

import json

import pytest

from paths import SHARED, TESTS
from ncdoc.errors import InputError
from ncdoc.evidence.nccl_tests import parse_nccl_tests, parse_nccl_tests_file, parse_nccl_tests_json
from ncdoc.evidence.nccl_tests_derive import nccl_version_from_code

CORPUS = SHARED / "corpus"
FIXTURES = TESTS / "fixtures" / "logs"


def _expect() -> dict:
    path = CORPUS / "EXPECT.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def corpus(case: str):
    return parse_nccl_tests_file(CORPUS / case / "artifact.txt")


def fixture(name: str):
    return parse_nccl_tests_file(FIXTURES / name)


needs_corpus = pytest.mark.skipif(not _expect(), reason="../shared/corpus not present")


@needs_corpus
@pytest.mark.parametrize("case", sorted(c for c, e in _expect().items() if e.get("kind") == "nccl_tests"))
def test_corpus_expected_facts(case):
    facts = corpus(case).to_facts()
    json.dumps(facts)
    for key, value in _expect()[case].get("facts", {}).items():
        assert abs(facts[key] - value) <= 0.02 * value, f"{case}: {key} = {facts[key]}, expected {value}"


@needs_corpus
def test_corpus_peak_is_the_best_row_never_the_average():
    f = corpus("nccl-tests-119-healthy-4x200g-96GBps")
    assert (f.peak_busbw_gbps, f.peak_size, f.peak_group) == (96.69, 132120584, "ip")
    assert f.avg_busbw_gbps == 84.8558 and f.wrong_total == 0 and f.out_of_bounds_ok is True
    assert f.header_missing and not f.truncated
    f = corpus("moc-roce-h100-4gpu-sendrecv-5.8GBps")
    assert f.peak_busbw_gbps == 5.86 and f.avg_busbw_gbps == 5.80752
    assert f.nccl_lines == 17 and len(f.rows) == 13 and f.bus_factor == 1.0
    assert f.rows[0].oop.wrong == 0 and f.rows[0].ip.wrong is None        # "N/A" in-place


@needs_corpus
def test_corpus_old_formats_and_cut_tables():
    f = corpus("nccl-644-mpirun-slow-7GBps-plateau")               # no redop, no root, `error` column
    assert f.peak_busbw_gbps == 7.32 and f.rows[0].redop is None and f.rows[0].root is None
    assert f.wrong_kind == "max_error" and f.max_error == 0.0 and f.wrong_total is None
    assert f.truncated and len(f.rows) == 13                        # the cut row "... floa" has no values
    assert f.n_implied == {"all_gather/reduce_scatter/alltoall": 8}
    f = corpus("aws-ofi-nccl-65-efa-16rank-33GBps")                 # header with redop, no root
    assert f.rows[0].redop == "sum" and f.rows[0].root is None and f.max_error == 5e-07
    assert f.n_implied == {"all_reduce": 16} and f.nccl_lines == 3 and f.truncated
    f = corpus("nccl-1291-gh200-ib-protocol-jump")
    last = f.rows[-1]
    assert (last.size, last.root, last.oop.busbw, last.ip, last.complete) == (4194304, -1, 29.34, None, False)
    assert f.peak_busbw_gbps == 29.34 and [r.busbw for r in f.rows[8:11]] == [5.48, 5.8, 5.41]


@needs_corpus
def test_corpus_separate_runs_are_counted():
    f = corpus("nccl-tests-213-separate-runs-duplicated-header")
    assert (f.headers, f.runs, f.device_listings, f.summaries) == (2, 2, 2, 0)
    assert f.hosts == ("hw14",) and (f.nthread, f.ngpus) == (1, 8)
    assert f.truncated and f.rows == ()


def test_mpirun_tags_and_interleaved_info_lines():
    f = fixture("nccl_tests_all_reduce_mpirun_tags.txt")
    assert (f.collective, f.collective_source, f.nccl_version, f.tests_version) == (
        "all_reduce", "header", "2.27.3", "2.19.6")
    assert f.nranks == 16 and f.hosts == ("gpu-a01", "gpu-a02") and f.nccl_lines == 2
    assert f.peak_busbw_gbps == 228.38 and f.peak_size == 8589934592
    assert f.devices[8].bus_id == "0000:18:00" and f.devices[8].name == "NVIDIA H100 80GB HBM3"
    assert f.config["maxbytes"] == 8589934592 and f.config["step_kind"] == "factor"
    assert f.n_implied == {"all_reduce": 16} and not f.truncated and len(f.rows) == 5


def test_per_iteration_and_timestamp_columns():
    f = fixture("nccl_tests_all_gather_per_iter_timestamps.txt")
    assert f.per_iter_timing and f.timestamps and not f.cputime
    r = f.rows[0]
    assert (r.oop.busbw, r.ip.busbw, r.timestamp) == (26.13, 26.39, "2026-06-11 10:22:33")
    assert r.oop.per_iter == {"i_min": 27.09, "i_max": 39.13, "i_p99": 36.12, "i_cv%": 4.2}
    assert f.peak_busbw_gbps == 50.82 and f.wrong_total == 0


def test_cputime_and_validation_off_with_srun_labels():
    f = fixture("nccl_tests_sendrecv_cputime_srun.txt")
    assert f.cputime and f.validation_off and f.wrong_total is None
    assert f.hosts == ("node01", "node02") and f.peak_busbw_gbps == 49.16


def test_wrong_results_and_errors():
    f = fixture("nccl_tests_reduce_scatter_wrong.txt")
    assert f.wrong_total == 2 * (1048580 + 2097150) and f.wrong_rows == 2      # "%6g": 1.04858e+06
    assert (f.out_of_bounds, f.out_of_bounds_ok) == (6291456, False)
    assert f.errors == ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)",)


def test_two_jobs_on_one_host():
    f = fixture("nccl_tests_two_jobs_one_host.txt")
    assert (f.runs, f.headers, f.summaries, f.device_listings) == (2, 2, 2, 2)
    assert f.duplicate_ranks == tuple(range(8)) and f.hosts == ("hw14",) and f.nranks == 8
    assert {r.run for r in f.rows} == {0, 1} and {d.pid for d in f.devices} == {798, 799}


def test_json_output():
    f = fixture("nccl_tests_alltoall.json")
    assert (f.format, f.collective, f.nccl_version) == ("json", "alltoall", "2.27.3")
    assert f.peak_busbw_gbps == pytest.approx(16.99425) and f.peak_size == 67108864
    assert f.avg_busbw_gbps == pytest.approx(16.251306) and f.wrong_total == 0
    assert f.hosts == ("node01", "node02") and f.nranks == 4 and f.rows[0].root == -1
    assert f.env == {"NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring", "NCCL_IB_HCA": "mlx5_0,mlx5_1"}
    assert f.config["iters"] == 20 and not f.truncated


def test_json_cut_short_and_from_text():
    text = (FIXTURES / "nccl_tests_alltoall.json").read_text()
    data = json.loads(text)
    del data["end_time"], data["average_bus_bandwidth"]
    f = parse_nccl_tests_json(data)
    assert f.truncated and f.avg_busbw_gbps is None and f.peak_busbw_gbps is not None
    assert parse_nccl_tests_json(text).peak_size == 67108864
    assert parse_nccl_tests_json("{not json").rows == ()


def test_nccl_version_codes():
    assert nccl_version_from_code(23007) == "2.30.7"
    assert nccl_version_from_code(2708) == "2.7.8"
    assert nccl_version_from_code(0) is None


def test_rows_without_any_header_use_the_row_shape():
    f = parse_nccl_tests(["  1048576   262144  float  sum  -1  181.3  5.79  5.79  0  180.7  5.80  5.80  0",
                          "  2097152   524288  float  sum  -1  389.4  5.39  5.39  0"])
    assert [r.root for r in f.rows] == [-1, -1] and f.rows[1].ip is None and f.truncated
    assert f.peak_busbw_gbps == 5.8


def test_file_entry_point_errors(tmp_path):
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(InputError, match="empty"):
        parse_nccl_tests_file(tmp_path / "e.txt")
    (tmp_path / "b.json").write_text("{ broken")
    with pytest.raises(InputError, match="JSON"):
        parse_nccl_tests_file(tmp_path / "b.json")
    (tmp_path / "bin").write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(InputError, match="binary"):
        parse_nccl_tests_file(tmp_path / "bin")


# ---------------------------------------------------------------- failure lines (src/common.h printf formats)

def test_cudacheck_failure_line():
    f = parse_nccl_tests(["# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 "
                          "iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0",
                          "node01: Test CUDA failure common.cu:892 'out of memory'",
                          " .. node01 pid 4012: Test failure common.cu:1190"])
    cuda, relay = f.failures
    assert (cuda.kind, cuda.host, cuda.pid, cuda.location, cuda.error, cuda.line) == (
        "cuda", "node01", None, "common.cu:892", "out of memory", 2)
    assert cuda.error_name == "cudaErrorMemoryAllocation" and cuda.meaning == "the GPU ran out of memory"
    assert (relay.kind, relay.host, relay.pid, relay.location) == ("test", "node01", 4012, "common.cu:1190")
    assert f.failures_seen == 2 and f.failure_note is None and f.rows == ()


def test_ncclcheck_failure_lines_new_and_old_with_mpirun_tags():
    f = parse_nccl_tests([
        "[1,3]<stdout>:gpu-b7: Test NCCL failure common.cu:1011 'unhandled system error (run with NCCL_DEBUG=INFO "
        "for details) / socketStartConnect: Connect to 10.1.2.3<52313> failed : Software caused connection abort'",
        "[1,3]<stdout>: .. gpu-b7 pid 20417: Test failure common.cu:1114",
        "[1,5]<stdout>:gpu-b9: Test NCCL failure common.cu:742 'unhandled cuda error'",
        "[1,6]<stdout>:gpu-b9: Test NCCL failure common.cu:742 'invalid usage (run with NCCL_DEBUG=WARN for "
        "details) / '"])
    new, relay, old, empty_last = f.failures
    assert (new.kind, new.host, new.location) == ("nccl", "gpu-b7", "common.cu:1011")
    assert new.error == "unhandled system error (run with NCCL_DEBUG=INFO for details)"
    assert new.last_error == "socketStartConnect: Connect to 10.1.2.3<52313> failed : Software caused connection abort"
    assert new.error_name == "ncclSystemError" and not new.text.startswith("[1,3]")
    assert (relay.kind, relay.host, relay.pid) == ("test", "gpu-b7", 20417)
    assert (old.error, old.last_error, old.error_name) == ("unhandled cuda error", "", "ncclUnhandledCudaError")
    assert (empty_last.error_name, empty_last.last_error) == ("ncclInvalidUsage", "")


def test_testcheck_lines_take_the_stderr_message_before_them():
    f = parse_nccl_tests(["$ ./build/all_reduce_perf -g 8",
                          "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 "
                          "agg iters: 1 validation: 1 graph: 0 unalign: 0",
                          "#",
                          "# Using devices",
                          "Invalid number of GPUs: 8 requested but only 2 were found.",
                          "Please check the number of processes and GPUs per process.",
                          " .. 10-0-0-7 pid 311: Test failure common.cu:1454",
                          " .. 10-0-0-7 pid 311: Test failure common.cu:1644"])
    assert [x.location for x in f.failures] == ["common.cu:1454", "common.cu:1644"]
    assert {x.host for x in f.failures} == {"10-0-0-7"} and f.rows == () and not f.truncated
    assert (f.failure_note.line, f.failure_note.text) == (
        5, "Invalid number of GPUs: 8 requested but only 2 were found.")
    facts = f.to_facts()
    json.dumps(facts)
    assert facts["failures"][0] == {"kind": "test", "host": "10-0-0-7", "pid": 311, "location": "common.cu:1454",
                                    "error": "", "last_error": "", "error_name": None, "meaning": "", "line": 7}
    assert facts["failures_seen"] == 2 and facts["failure_note"]["line"] == 5
    assert {"collective", "peak_busbw_gbps", "rows", "errors", "nccl_lines", "truncation"} <= set(facts)


def test_failure_note_is_only_free_text_right_before_the_failure():
    row = ("    33554432       8388608     float     sum      -1   1210.4   27.72   51.98      0   1198.3   28.00   "
           "52.50      0")
    f = parse_nccl_tests(["some earlier warning text", row, "node03: Test NCCL failure common.cu:1011 "
                          "'remote process exited or there was a network error / '"])
    assert f.failure_note is None and len(f.rows) == 1 and f.failures[0].error_name == "ncclRemoteError"
    f = parse_nccl_tests(["$ mpirun -np 2 ./all_reduce_perf", " .. node01 pid 9: Test failure common.cu:1454"])
    assert f.failure_note is None


def test_not_failure_lines_and_the_bound():
    f = parse_nccl_tests(["Test failures: 0 of 12", "node01: Test CUDA failure in the docs, no location",
                          "# Avg bus bandwidth    : 12.5"])
    assert f.failures == () and f.failures_seen == 0
    lines = [f" .. node{i:03d} pid {i}: Test failure common.cu:1454" for i in range(100)]
    f = parse_nccl_tests(lines)
    assert len(f.failures) == 32 and f.failures_seen == 100 and f.failures[-1].host == "node031"


def test_json_output_has_no_failures():
    f = fixture("nccl_tests_alltoall.json")
    assert f.failures == () and f.to_facts()["failures"] == [] and f.to_facts()["failure_note"] is None


def test_a_paste_whose_hash_lines_markdown_turned_into_headings(capsys):
    # copied from a rendered GitHub issue: "# nThread", "#  Rank" and "# Avg bus bandwidth" lose their "#"
    from ncdoc.importers import detect_kind
    text = ("nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0\n\nUsing devices\n"
            "Rank  0 Group  0 Pid  51200 on    ws-07 device  0 [0x01] NVIDIA GeForce RTX 4090\n"
            "Rank  1 Group  0 Pid  51200 on    ws-07 device  1 [0x41] NVIDIA GeForce RTX 4090\n\n"
            "     1048576        262144     float     sum      -1    91.20   11.50   11.50      0    90.80"
            "   11.55   11.55      0\n"
            "Out of bounds values : 0 OK\nAvg bus bandwidth    : 11.52\n")
    assert detect_kind(text) == "nccl_tests"
    f = parse_nccl_tests(text.splitlines())
    assert [(d.rank, d.host) for d in f.devices] == [(0, "ws-07"), (1, "ws-07")]
    assert f.headers == 1 and f.avg_busbw_gbps == 11.52 and f.out_of_bounds == 0
