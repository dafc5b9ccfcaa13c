"""Every reader over a seeded set of hostile and broken inputs (the suite's share of benchmarks/fuzz.py).

Each reader gets its own inputs (random bytes and text, mutations of its real samples: byte flips, dropped
and repeated lines, truncation, huge numbers, deep nesting, unicode digits and line separators, NUL, CRLF,
YAML bombs, markup and shell metacharacters), the same ones on every run. An input passes when the reader
returns or raises ncdoc's own one-line error; anything else escaping fails the test, naming the input so
`benchmarks/fuzz.py --replay` can rerun it. Inputs run in a worker process: one that gives no answer within
LIMIT_S is reported as a hang (a failure detector, generous on a loaded machine; nothing here measures speed).
"""

from __future__ import annotations

import pytest

import fuzz_runner
import fuzz_targets

SEED = 17
INPUTS = 100                  # per reader (fewer where one input runs a whole command); benchmarks/fuzz.py: 10k
FEWER = {"triage": 50, "detect": 50, "machine_spec": 12, "snapshot": 50, "policy": 50, "config": 50,
         "env_file": 50, "cluster_file": 50, "env_generate": 50}
LIMIT_S = 120.0
TARGETS = fuzz_targets.targets()


def _report(tally) -> str:
    return "\n".join(f"#{f.index} [{f.label}, {f.size} B] {f.status}: {f.detail}" for f in tally.failures[:10])


@pytest.mark.parametrize("name", list(TARGETS))
def test_reader_fails_cleanly_on_hostile_input(worker, name, tmp_path):
    target = TARGETS[name]
    if not target.seed_samples():
        pytest.fail(f"{name} has no seed sample here")
    tally = fuzz_runner.run_reader(worker, target, n=FEWER.get(name, INPUTS), seed=SEED, limit_s=LIMIT_S,
                                   keep_dir=str(tmp_path))
    assert tally.inputs == FEWER.get(name, INPUTS)
    assert not tally.failures, f"{name}: {len(tally.failures)} bad input(s), kept in {tmp_path}:\n" + _report(tally)


def test_the_harness_sees_an_uncaught_exception_and_a_hang(worker, tmp_path):
    """The detector itself: an input that raises something other than ncdoc's error, and one that never
    answers, are both reported (so a green run above means something); the worker is replaced after a hang."""
    path = tmp_path / "in.txt"
    for text, status in (("ok", "ok"), ("raise", "uncaught"), ("ncdoc", "ok"), ("hang", "hang"), ("ok", "ok")):
        path.write_text(text)
        got = worker.run("harness_probe", str(path), str(tmp_path), 0, limit_s=2.0 if text == "hang" else LIMIT_S)
        assert got[0] == status, (text, got)
    path.write_text("raise")
    assert "KeyError at" in worker.run("harness_probe", str(path), str(tmp_path), 0, LIMIT_S)[1]
