"""The suite's own rule: in CI (NCDOC_REQUIRE_SHARED=1) a test that skips for lack of ../shared fails the run."""

import os
import subprocess
import sys

import pytest

from paths import TESTS


def test_probe_skips_for_lack_of_shared():
    if os.environ.get("NCDOC_GUARD_PROBE") == "1":
        pytest.skip("needs ../shared/corpus (probe for test_a_skip_for_lack_of_shared_fails_ci)")


@pytest.mark.parametrize("require,rc", [("1", 1), ("0", 0)])
def test_a_skip_for_lack_of_shared_fails_ci(require, rc):
    env = dict(os.environ, NCDOC_GUARD_PROBE="1", NCDOC_REQUIRE_SHARED=require)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{TESTS / 'test_suite_guard.py'}::test_probe_skips_for_lack_of_shared"],
                       capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=120)
    assert p.returncode == rc, p.stdout[-2000:]
    if rc:
        assert "skipped for lack of ../shared" in p.stdout
