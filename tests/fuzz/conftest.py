"""The fuzz tests' worker (tests/fuzz/fuzz_runner.py), one per test module: readers run in it under a memory
cap and a time limit, so a reader that regresses fails its test instead of hanging the suite."""

import pytest

import fuzz_runner


@pytest.fixture(scope="module")
def worker():
    w = fuzz_runner.Worker(memory_limit=3 << 30)
    yield w
    w.stop()
