"""One pass over a run file, cut into byte ranges read by other processes, gives what one reader gives.

The block reader's blocks do not depend on where reading starts (any block boundary), and the ranges
classified apart (block_scan.classify_block, made ready to travel, pickled, applied in order by one
RunScanner, blocks read again from the file when a worker left out a first line) give the facts, line
numbers and evidence of the serial scan: over the real corpus (../shared/corpus), the fixture logs,
generated logs of thousands of ranks and generated logs of every kind of line, with ranges and blocks
small enough that every input is really cut, in worker processes started by fork and by spawn.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncdoc.evidence import textfile
from ncdoc.evidence.parallel_scan import classify_range, plan_ranges
from ncdoc.evidence.run_scan import RunScanner, ScanPlan, scan_file
from paths import FIXTURES, SHARED
from scaled_logs import write_ranks_log
from test_parsers_any_input import LINE

CORPUS = SHARED / "corpus"
LOGS = sorted(p for p in (FIXTURES / "logs").iterdir() if p.suffix in (".log", ".txt"))
CORPUS_FILES = sorted(CORPUS.glob("*/artifact.txt")) if CORPUS.is_dir() else []
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


def digest(run) -> str:
    """Everything a RunFacts holds, as one comparable string."""
    return json.dumps({
        "lines": run.lines, "log": run.log.to_facts() if run.log else None,
        "tests": run.tests.to_facts() if run.tests else None, "launch": run.launch.to_facts(),
        "reports": run.report_lines, "other": run.other_lines, "cut": run.listing_cut}, sort_keys=True, default=str)


def serial(path, block_bytes: int) -> str:
    return digest(scan_file(str(path), ScanPlan(jobs=1, block_bytes=block_bytes)))


def ranges_apart(path, block_bytes: int, range_bytes: int) -> str:
    """The ranges classified one by one as a worker does, sent through pickle, applied in order."""
    path = str(path)
    size = os.path.getsize(path)
    rereads = []

    def reread(offset, _size):
        rereads.append(offset)
        return textfile.block_at(path, offset, block_bytes)

    scanner = RunScanner(path, reread=reread)
    for start, end in plan_ranges(path, size, range_bytes, block_bytes):
        scanner.merge(pickle.loads(pickle.dumps(classify_range(path, start, end, block_bytes))))
    return digest(scanner.result())


# ---------------------------------------------------------------- the blocks

@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 5, 20, 49, 50, 51, 120, 300]), max_size=25), st.booleans(),
       st.sampled_from([7, 16, 64, 100, 4096]))
def test_blocks_do_not_depend_on_where_reading_starts(lengths, end_newline, block_bytes):
    old = textfile.MAX_LINE_BYTES
    textfile.MAX_LINE_BYTES = 50                    # over-long lines too, cut to their head
    try:
        data = b"\n".join(b"x" * n for n in lengths) + (b"\n" if end_newline else b"")
        full = list(textfile.read_blocks(io.BytesIO(data), 0, None, block_bytes))
        assert all(b.endswith(b"\n") and len(b) <= max(block_bytes, 51) + 51 for _, b in full)
        for offset, block in full:                  # a block read again from its offset is the same block
            assert next(iter(textfile.read_blocks(io.BytesIO(data), offset, None, block_bytes))) == (offset, block)
        for k in range(1, len(data) // block_bytes + 2):
            cut = textfile.block_start(io.BytesIO(data), k * block_bytes, len(data))
            head = list(textfile.read_blocks(io.BytesIO(data), 0, cut, block_bytes))
            rest = list(textfile.read_blocks(io.BytesIO(data), cut, None, block_bytes))
            assert head + rest == full
    finally:
        textfile.MAX_LINE_BYTES = old


def test_lines_are_read_again_by_number(tmp_path):
    path = tmp_path / "x.log"
    lines = [f"line {i} " + "y" * (i % 7) for i in range(1, 3000)]
    path.write_text("\n".join(lines) + "\n")
    assert textfile.lines_at(path, [1, 2, 1500, 2999, 3000, 0]) == {1: lines[0], 2: lines[1], 1500: lines[1499],
                                                                    2999: lines[2998]}


# ---------------------------------------------------------------- ranges apart = one pass

# (block bytes, range bytes): cuts inside every fixture, and at the size a real run uses
CUTS = [(97, 97), (256, 1024), (4096, 4096), (4096, 3 * 4096)]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_fixture_logs_read_in_ranges_give_the_serial_facts(path):
    for block_bytes, range_bytes in CUTS:
        assert ranges_apart(path, block_bytes, range_bytes) == serial(path, block_bytes), (block_bytes, range_bytes)


def test_corpus_read_in_ranges_gives_the_serial_facts():
    if not CORPUS_FILES:
        pytest.skip("the real-evidence corpus (../shared/corpus) is not there")
    for path in CORPUS_FILES:
        for block_bytes, range_bytes in ((512, 2048), (4096, 8192)):
            assert ranges_apart(path, block_bytes, range_bytes) == serial(path, block_bytes), (path, block_bytes)


@pytest.fixture(scope="module")
def many_ranks(tmp_path_factory):
    """A log of 5,000 ranks' init (past the scanner's 4,096-rank bound), trimmed to a tenth of each rank's
    lines so the test stays fast, with a few WARN, framework and pasted lines among them."""
    path = tmp_path_factory.mktemp("ranks") / "ranks.log"
    write_ranks_log(path, 5000, keep=0.1)
    rnd = random.Random(3)
    lines = path.read_text().splitlines(keepends=True)
    extra = ["h200-00007:10063:10063 [7] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.9<4> "
             "failed : Software caused connection abort\n",
             "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system "
             "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9\n", "ncclSystemError: System call failed.\n",
             "Last error:\n", "socketStartConnect: Connect to 10.0.0.9<4> failed : Software caused connection abort\n",
             "INFO NET/IB : No device found.\n", "export NCCL_IB_HCA=mlx5_0 \\\n", "  NCCL_SOCKET_IFNAME=eth0\n",
             "max locked memory       (kbytes, -l) 64\n"]
    for at in sorted(rnd.sample(range(len(lines)), 40), reverse=True):
        lines[at:at] = extra[at % len(extra):at % len(extra) + 3]
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("block_bytes, range_bytes", [(65536, 65536), (65536, 5 * 65536), (1 << 20, 1 << 20)])
def test_thousands_of_ranks_read_in_ranges_give_the_serial_facts(many_ranks, block_bytes, range_bytes):
    assert ranges_apart(many_ranks, block_bytes, range_bytes) == serial(many_ranks, block_bytes)


@SETTINGS
@given(st.lists(LINE, min_size=1, max_size=60), st.sampled_from([(64, 64), (97, 300), (1024, 1024)]))
def test_generated_logs_read_in_ranges_give_the_serial_facts(tmp_path_factory, lines, cut):
    path = tmp_path_factory.mktemp("gen") / "gen.log"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert ranges_apart(path, *cut) == serial(path, cut[0])


# ---------------------------------------------------------------- worker processes

_IN_A_FRESH_PROCESS = """
import sys
sys.path[:0] = sys.argv[3:]
from test_scan_ranges import digest
from ncdoc.evidence.run_scan import ScanPlan, scan_file
plan = ScanPlan(jobs=2, block_bytes=65536, range_bytes=3 * 65536, parallel_from=0, start_method=sys.argv[2])
print(digest(scan_file(sys.argv[1], plan)))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_processes_give_the_serial_facts(many_ranks, method):
    # in a process of its own: this one may run other threads (Ray's), which a fork must not copy
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, "-c", _IN_A_FRESH_PROCESS, str(many_ranks), method, here,
                        os.path.dirname(here)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == serial(many_ranks, 65536)


def test_workers_are_not_forked_from_a_process_with_threads(monkeypatch):
    import threading
    from ncdoc.evidence import parallel_scan
    monkeypatch.setattr(threading, "active_count", lambda: 3)
    import multiprocessing
    if (multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]) == "fork":
        assert parallel_scan._start_method() == "spawn"
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    assert parallel_scan._start_method() is None


def test_a_small_file_is_read_here(tmp_path, monkeypatch):
    import ncdoc.evidence.parallel_scan as ps

    def no_workers(*_a, **_k):
        raise AssertionError("workers started for a small file")
    monkeypatch.setattr(ps, "scan_parallel", no_workers)
    path = LOGS[0]
    assert digest(scan_file(str(path), ScanPlan(jobs=8))) == serial(path, textfile.BLOCK_BYTES)


def test_a_block_read_again_gives_what_a_worker_left_out(many_ranks, monkeypatch):
    """A worker sends the first lines only of what is new to its range; when the reader needs one it was not
    sent (its message cache was emptied, say), it reads the block again from the file: same facts."""
    from ncdoc.evidence import block_scan
    monkeypatch.setattr(block_scan.TransferMemo, "new_msg", lambda self, msg: False)
    monkeypatch.setattr(block_scan.TransferMemo, "new_tail", lambda self, tail: False)
    monkeypatch.setattr(block_scan.TransferMemo, "gdr_keys", 1 << 30, raising=False)
    assert ranges_apart(many_ranks, 65536, 65536) == serial(many_ranks, 65536)
    for path in LOGS:
        assert ranges_apart(path, 256, 256) == serial(path, 256), path.name


# ---------------------------------------------------------------- the log scanner alone

@pytest.mark.parametrize("path", LOGS[::2], ids=lambda p: p.name)
def test_the_log_scanners_own_classification_is_the_whole_ones_log_part(path):
    """LogScanner.feed classifies only what it reads (block_scan.classify_log): the same values as the
    classification every reader shares."""
    from ncdoc.evidence import block_scan as B
    with path.open("rb") as fh:
        for _, block in textfile.read_blocks(fh, 0, None, 4096):
            mine, whole = B.classify_log(block), B.classify_block(block)
            for name in ("nlines", "head", "tail", "short", "tails", "agg", "events", "block", "bare", "size"):
                assert getattr(mine, name) == getattr(whole, name), name
