"""Triage of a run file gives the same answer however it is read: held whole, streamed by one process, or
cut into byte ranges read by worker processes (--jobs) - the same facts, findings, evidence and line
numbers. Inputs are streamed from 100 bytes here and cut into small blocks and ranges, so every input
really is split."""

from __future__ import annotations

import json

import pytest

import ncdoc.importers.inputs as inputs
from ncdoc.cli.main import main
from ncdoc.evidence.run_scan import ScanPlan
from ncdoc.triage.run import triage
from paths import FIXTURES, SHARED
from scaled_logs import write_ranks_log

CORPUS = sorted((SHARED / "corpus").glob("*/artifact.txt")) if (SHARED / "corpus").is_dir() else []
FIXTURE_RUNS = sorted(p for d in ("logs", "triage") for p in (FIXTURES / d).iterdir()
                      if p.suffix in (".log", ".txt") and not p.name.endswith(".facts.json"))
STREAMED = ScanPlan(jobs=1, block_bytes=512)
PARALLEL = ScanPlan(jobs=2, block_bytes=512, range_bytes=1024, parallel_from=0)


def answer(path, plan=None) -> dict:
    """The whole triage answer, without the note that says the file was streamed."""
    doc = json.loads(json.dumps(triage([str(path)], plan=plan).to_dict(), default=str))
    for i in doc["inputs"]:
        i["notes"] = [n for n in i["notes"] if n != "large file: read as a stream"]
    return doc


def same_three_ways(path, monkeypatch) -> None:
    held = answer(path)
    monkeypatch.setattr(inputs, "STREAM_BYTES", 100)
    assert answer(path, STREAMED) == held, f"{path.name}: streamed differs from held"
    assert answer(path, PARALLEL) == held, f"{path.name}: read in ranges by workers differs"


@pytest.mark.parametrize("path", FIXTURE_RUNS, ids=lambda p: p.name)
def test_fixtures_read_held_streamed_or_in_ranges_give_one_answer(path, monkeypatch):
    same_three_ways(path, monkeypatch)


def test_the_corpus_read_held_streamed_or_in_ranges_gives_one_answer(monkeypatch):
    if not CORPUS:
        pytest.skip("the real-evidence corpus (../shared/corpus) is not there")
    for path in CORPUS:
        same_three_ways(path, monkeypatch)


def test_thousands_of_ranks_by_workers_give_the_serial_answer(tmp_path):
    path = tmp_path / "ranks.log"
    write_ranks_log(path, 4500, keep=0.02)
    serial = answer(path, ScanPlan(jobs=1, block_bytes=1 << 16))
    assert serial == answer(path, ScanPlan(jobs=2, block_bytes=1 << 16, range_bytes=3 << 16, parallel_from=0))
    assert serial["facts"]["nodes"] == 4500 // 8 and serial["inputs"][0]["read_as"] == ["nccl_log", "env"]
    lines = path.read_text().split("\n")
    quoted = [e for f in serial["findings"] for e in f["evidence"] if e.get("line")]
    assert quoted and all(e["text"] == lines[e["line"] - 1].strip() for e in quoted)   # read again by number


def test_jobs_is_a_count_of_processes(capsys):
    log = str(FIXTURE_RUNS[0])
    assert main(["triage", log, "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "ncdoc: error: --jobs must be at least 1"
    assert main(["triage", log, "--jobs", "2", "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["inputs"][0]["path"] == log


def test_without_jobs_a_large_file_is_read_by_as_many_processes_as_pay(tmp_path, monkeypatch):
    # one per core for the Python scanner; this process alone for the native one (workers only cost it time)
    import ncdoc.evidence.nccl_log_native as native
    import ncdoc.evidence.parallel_scan as parallel
    from ncdoc.evidence import run_scan

    path = tmp_path / "ranks.log"
    write_ranks_log(path, 64, keep=0.05)
    used = []
    real = parallel.scan_parallel
    monkeypatch.setattr(parallel, "scan_parallel", lambda scanner, p, size, plan, bb: (
        used.append(plan.jobs), real(scanner, p, size, plan, bb))[1])
    monkeypatch.setattr(ScanPlan, "cores", staticmethod(lambda: 2))
    auto = ScanPlan(jobs=0, block_bytes=1 << 14, range_bytes=1 << 15, parallel_from=0)
    for loaded, workers in ((None, [2]), (object(), [])):
        monkeypatch.setattr(native, "NATIVE", loaded)
        used.clear()
        facts = run_scan.scan_file(str(path), auto)
        serial = run_scan.scan_file(str(path), ScanPlan())
        assert used == workers
        assert (facts.lines, facts.log.nranks) == (serial.lines, serial.log.nranks) and facts.log.nranks == 64
    small = ScanPlan(jobs=0, parallel_from=1 << 40)
    monkeypatch.setattr(native, "NATIVE", None)
    used.clear()
    run_scan.scan_file(str(path), small)
    assert used == []                       # below the size that is cut, it is read here whatever the cores
