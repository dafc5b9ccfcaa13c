"""`ncdoc --version` and `ncdoc triage --verbose` say which NCCL log scanner runs: the native one
(ncdoc_fast) when it is installed and not turned off with NCDOC_NATIVE=0, else the Python one."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT, TESTS

LOG = TESTS / "fixtures" / "logs" / "ib_errors_2_30.log"


def _ncdoc(*args: str, native: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NCDOC_NATIVE"}
    if native is not None:
        env["NCDOC_NATIVE"] = native
    p = subprocess.run([sys.executable, "-m", "ncdoc", *args], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=env)
    assert p.returncode in (0, 1), p.stderr
    return p.stdout


def _installed() -> bool:
    try:
        import ncdoc_fast  # noqa: F401
    except ImportError:
        return False
    return True


def test_version_names_the_scanner_and_the_switch_turns_the_native_one_off():
    first, second = _ncdoc("--version").splitlines()[:2]
    assert first.startswith("ncdoc ")
    if _installed():
        assert second.startswith("log scanner: native (ncdoc_fast ")
    else:
        assert second == "log scanner: python (ncdoc_fast is not installed)"
    assert _ncdoc("--version", native="0").splitlines()[1] == "log scanner: python (NCDOC_NATIVE=0)"


def test_triage_verbose_names_the_scanner_that_read_the_log():
    out = _ncdoc("triage", "--verbose", "--color", "never", str(LOG), native="0")
    assert f"{LOG.name}: nccl log" in out and "log scanner: python (NCDOC_NATIVE=0)" in out
    assert "log scanner" not in _ncdoc("triage", "--color", "never", str(LOG))
