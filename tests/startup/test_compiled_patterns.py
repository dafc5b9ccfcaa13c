"""ncdoc.startup.compiled_patterns: patterns read from the table are re.compile's, and anything the table
cannot answer is compiled, so a missing, stale or damaged table never changes an answer."""

from __future__ import annotations

import re
import subprocess
import struct
import sys
import zlib
from binascii import b2a_base64
from pathlib import Path

import pytest

from ncdoc.evidence import nccl_log_patterns as P
from ncdoc.startup import compiled_patterns as cp

TABLE = Path(cp.__file__).with_name(cp.table_module().rsplit(".", 1)[1] + ".py")
needs_table = pytest.mark.skipif(not TABLE.is_file(),
                                 reason=f"no pattern table for {sys.implementation.cache_tag} (only a slower start)")


def _boom(*_a, **_k):
    raise AssertionError("re.compile was called")


@needs_table
def test_table_is_current_for_this_python():
    # every pattern ncdoc's modules register is in the table with re.compile's code, and nothing else is
    got = subprocess.run([sys.executable, "-m", "ncdoc.startup.compiled_patterns"], capture_output=True, text=True,
                         timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.strip().endswith("current")


def _interpreters() -> dict:
    """Each CPython with a table here that this machine has (pyenv's builds or on PATH), by cache tag."""
    import os
    import shutil
    found = {}
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for table in sorted(TABLE.parent.glob("compiled_patterns_cpython_3*.py")):
        minor = table.stem.rsplit("_", 1)[1][1:]                  # "311" -> "11"
        exe = f"python3.{minor}"
        for cand in [*sorted(root.glob(f"3.{minor}.*/bin/{exe}")), shutil.which(exe)]:
            if cand and Path(cand).is_file():
                found[f"cpython-3{minor}"] = str(cand)
                break
    return found


def test_every_table_is_current_for_the_pythons_this_machine_has():
    # the other CPythons' tables (3.12 and 3.13 beside CI's 3.10 and 3.11): each Python checks its own over the
    # patterns of the modules that import without ncdoc's dependencies installed there
    pythons = _interpreters()
    if not pythons:
        pytest.skip("no other CPython 3.10-3.13 on this machine (pyenv or PATH)")
    repo = str(Path(cp.__file__).parents[2])
    for tag, exe in pythons.items():
        got = subprocess.run([exe, "-m", "ncdoc.startup.compiled_patterns"], capture_output=True, text=True,
                             timeout=120, cwd=repo, env={"PYTHONPATH": repo, "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
        assert got.returncode == 0 and got.stdout.strip().endswith("current"), f"{tag}: {got.stdout}{got.stderr}"


@needs_table
def test_log_patterns_come_from_the_table_and_match_as_compiled(monkeypatch):
    cp.reset()
    lazies = (P.AGG, P.SCAN, P.VIA, P.COMM, P.IFACE)
    monkeypatch.setattr(re, "compile", _boom)
    got = [cp.compiled(lazy.pattern, lazy.flags) for lazy in lazies]
    monkeypatch.undo()
    for rx, lazy in zip(got, lazies):
        assert rx == re.compile(lazy.pattern, lazy.flags)        # Pattern == compares the code
    line = "node1:123:456 [0] NCCL INFO comm 0x55d0c1 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0"
    assert got[3].search(line).groups() == ("0x55d0c1", "3", "16")


def test_a_pattern_not_in_the_table_is_compiled():
    rx = cp.compiled(r"no (such)+ pattern \d{3}", re.I)
    assert rx == re.compile(r"no (such)+ pattern \d{3}", re.I)
    assert rx.match("No SUCHsuch pattern 123").group(1) == "such"


def test_code_the_engine_refuses_is_compiled_instead(monkeypatch):
    bad = b2a_base64(zlib.compress(struct.pack("<3I", 9999, 9999, 9999)), newline=False).decode()
    monkeypatch.setattr(cp, "_TABLE", {(r"x+y", 0): (32, 0, (), (None,), bad)})
    rx = cp.compiled(r"x+y")
    assert rx == re.compile(r"x+y") and rx.fullmatch("xxy")


def test_an_entry_of_another_shape_is_compiled_instead(monkeypatch):
    # a table written by another ncdoc (its entries laid out otherwise) costs time, never an answer
    monkeypatch.setattr(cp, "_TABLE", {(r"x+y", 0): (32, 0, {}, (None,), 0, 3)})
    assert cp.compiled(r"x+y") == re.compile(r"x+y")


def test_a_table_made_for_another_engine_is_not_used(monkeypatch):
    monkeypatch.setattr(cp, "engine_key", lambda: ("cpython-0", 0, 0, 0, 0))
    cp.reset()
    try:
        rx = cp.compiled(P.AGG.pattern, P.AGG.flags)
        assert cp._TABLE == {}
        assert rx == re.compile(P.AGG.pattern, P.AGG.flags)
    finally:
        cp.reset()
