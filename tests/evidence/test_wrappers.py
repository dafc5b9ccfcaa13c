"""Launcher, log-shipper and viewer prefixes in front of every kind of line: the kind is told and the facts are
read as without them. The prefixes are the launchers' and shippers' own formats (Open MPI --tag-output, Intel
MPI / MPICH -prepend-rank, srun --label, torchrun, Ray, CloudWatch, journald, kubectl logs --prefix
--timestamps, CI step prefixes, viewer line numbers, ANSI colours); the lines behind them are NCCL's,
nccl-tests' and PyTorch's format strings with invented values."""

from __future__ import annotations

import pytest

from ncdoc.evidence.nccl_log import parse_nccl_log
from ncdoc.evidence.nccl_tests import parse_nccl_tests
from ncdoc.evidence.wrappers import strip_wrappers
from ncdoc.importers.kinds import detect_kind, detection
from ncdoc.importers.detect import Sample

WRAPPERS = {
    "mpirun --tag-output": "[1,{r}]<stdout>:",
    "mpirun short form (Intel MPI, MPICH -prepend-rank)": "[{r}] ",
    "srun --label": " {r}: ",
    "test runner": "{r}: ",
    "torchrun": "[rank{r}]:",
    "torchrun default": "[default{r}]:",
    "ray worker": "(RayWorkerWrapper pid=40{r}) ",
    "ray actor with ip": "(TrainActor pid=77{r}, ip=10.0.0.{r}) ",
    "ray with a colour remnant": "\x1b[36m(RayWorkerWrapper pid=40{r}) ",
    "colour remnant without escape": "[36m(pid=40{r}) ",
    "cloudwatch": "  | 2024-11-28T07:42:11.52{r}Z | ",
    "journald": "Nov 09 15:39:3{r} gpu-node python3[4242]: ",
    "kubectl --prefix --timestamps": "[pod/worker-{r}/main] 2025-03-01T10:00:00.00000000{r}Z ",
    "ci step": "[task 2025-07-01T05:06:30.00{r}+00:00] [train] ",
    "collector timestamp and nccl timestamp": "2025-11-09 15:39:31.04{r} +08:00 [2025-11-09 07:39:3{r}] ",
    "viewer line number": "[8074{r}] ",
}


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_wrappers_are_seen_past(name):
    w = WRAPPERS[name]
    assert strip_wrappers(w.format(r=3) + "node01:4012:4050 [3] NCCL INFO Using network IB") == \
        "node01:4012:4050 [3] NCCL INFO Using network IB"
    assert strip_wrappers(w.format(r=0) + "# nThread 1 nGpus 8 minBytes 8") == "# nThread 1 nGpus 8 minBytes 8"


def test_what_programs_print_themselves_is_kept():
    for line in ("node01:4012:4050 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]",
                 "    33554432       8388608     float     sum      -1   1210.4",
                 "node03: Test CUDA failure common.cu:1045 'out of memory'",
                 "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100",
                 "[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout"):
        assert strip_wrappers(line).strip() == line.strip()


TABLE = ["# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 2147483648 step: 2(factor) warmup iters: 5 iters: 20 "
         "agg iters: 1 validation: 1 graph: 0",
         "#",
         "# Using devices",
         "#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3",
         "#  Rank  1 Group  0 Pid  12346 on     node02 device  0 [0000:18:00] NVIDIA H100 80GB HBM3",
         "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
         "busbw #wrong",
         "  1073741824     268435456     float     sum      -1  21840.0   49.16   92.18      0  22058.4   48.68   91.27      0",
         "  2147483648     536870912     float     sum      -1  43160.0   49.76   93.30      0  43100.2   49.82   93.42      0",
         "# Out of bounds values : 0 OK",
         "# Avg bus bandwidth    : 92.54"]
LOG = ["node01:4012:4012 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
       "node01:4012:4050 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.11<0>",
       "node01:4012:4050 [0] NCCL INFO Using network IB",
       "node01:4012:4050 [0] transport/net_ib.cc:840 NCCL WARN NET/IB : Got completion from peer 10.0.0.12<51002> "
       "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) len=0 vendor err 129 (Send)"]


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_an_nccl_tests_table_behind_a_wrapper_reads_as_without(name):
    w = WRAPPERS[name]
    wrapped = [w.format(r=i % 2) + line for i, line in enumerate(TABLE)]
    assert detect_kind("\n".join(wrapped)) == "nccl_tests"
    plain, got = parse_nccl_tests(TABLE), parse_nccl_tests(wrapped)
    assert got.peak_busbw_gbps == plain.peak_busbw_gbps == 93.42
    assert [d.host for d in got.devices] == ["node01", "node02"]


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_an_nccl_log_behind_a_wrapper_reads_as_without(name):
    w = WRAPPERS[name]
    wrapped = [w.format(r=0) + line for line in LOG]
    assert detect_kind("\n".join(wrapped)) == "nccl_log"
    got = parse_nccl_log(wrapped)
    assert got.nccl_version == "2.21.5" and got.transport == "IB"
    assert [p.code for p in got.problems_of("ib_completion_error")] == [12]


def test_old_nccl_lines_behind_a_tag():
    # NCCL 2.3 and older: no "NCCL" token before INFO/WARN, here behind mpirun's tag
    lines = ["[1,0]<stdout>:node01:4012:4012 [0] INFO NCCL version 2.3.7+cuda9.2",
             "[1,0]<stdout>:node01:4012:4050 [0] misc/ibvwrap.cu:63 WARN Failed to open libibverbs.so[.1]"]
    from ncdoc.evidence.run_scan import scan_lines
    log = scan_lines(lines, "old.log").log
    assert log.nccl_version == "2.3.7" and log.problems_of("ibverbs_missing")


def test_a_short_rank_tag_is_not_broken_json():
    # "[0] # nThread ..." starts like a JSON array; it is a tagged table
    text = "\n".join("[0] " + x for x in TABLE)
    sample = Sample(text)
    assert not sample.is_json and sample.json_error is None
    assert detection(sample).kind.name == "nccl_tests"


def test_a_launch_line_above_a_table_does_not_make_an_env_file():
    text = "\n".join(["$ mpirun -np 2 -H node01,node02 -x NCCL_IB_HCA=mlx5_0 -x NCCL_DEBUG=INFO \\",
                      "    ./build/all_reduce_perf -b 1G -e 2G -f 2 -g 1", *("[1,0]<stdout>:" + x for x in TABLE)])
    found = detection(Sample(text))
    assert found.kind.name == "nccl_tests"
    assert "env file or launch script" in found.why and "nccl-tests output" in found.why


def test_detection_says_why():
    found = detection(Sample("\n".join(LOG)))
    assert found.kind.name == "nccl_log" and found.why.startswith("4 NCCL lines of an NCCL log")
    # one stray table header among many NCCL lines: still a log, not nccl-tests output
    found = detection(Sample("\n".join(LOG * 5 + [TABLE[5]])))
    assert found.kind.name == "nccl_log" and "nccl-tests output (1 table or preamble line)" in found.why


# Ray's log deduplication appends how many workers printed the same line; on a terminal the count is
# dimmed with ANSI codes, and the first one carries Ray's note on how to turn deduplication off.
RAY_REPEATS = {
    "plain": " [repeated 15x across cluster]",
    "dimmed": "\x1b[2m [repeated 7x across cluster]\x1b[0m",
    "first, with ray's note": " [repeated 3x across cluster] (Ray deduplicates logs by default. Set "
                              "RAY_DEDUP_LOGS=0 to disable log deduplication, or see https://docs.ray.io/en/"
                              "master/ray-observability/user-guides/configure-logging.html#log-deduplication "
                              "for more options.)",
}


@pytest.mark.parametrize("name", sorted(RAY_REPEATS))
def test_ray_deduplication_counts_are_not_part_of_the_line(name):
    tail = RAY_REPEATS[name]
    wrapped = [f"(RayWorkerWrapper pid=40{i}, ip=10.0.0.{i}) " + line + tail for i, line in enumerate(LOG)]
    got = parse_nccl_log(wrapped)
    assert got.nccl_version == "2.21.5" and got.transport == "IB"
    assert [(d.name, d.transport) for d in got.net_devices] == [("mlx5_0:1", "IB")]
    assert [p.code for p in got.problems_of("ib_completion_error")] == [12]
    table = [line if line.startswith("#") else line + tail for line in TABLE]
    assert parse_nccl_tests(table).peak_busbw_gbps == 93.42
    assert strip_wrappers("(pid=4012) node01:4012:4050 [0] NCCL INFO Using network Socket" + tail) == \
        "node01:4012:4050 [0] NCCL INFO Using network Socket"


def test_a_bracket_a_program_prints_at_the_end_is_kept():
    line = "node01:4012:4050 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]"
    assert strip_wrappers(line) == line
