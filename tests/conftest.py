"""Suite-wide fixtures and the rule that CI never silently skips the real evidence.

Tests that read ../shared (third-party evidence the project never copies in) skip with a
reason naming ../shared when it is absent. With NCDOC_REQUIRE_SHARED=1 (set by .ci/run, where
../shared is present) such a skip fails the run instead, so a moved folder cannot quietly turn
the real-evidence tests off.
"""

import os

import pytest

from conftest_ray import ray_runtime  # noqa: F401  (one Ray runtime per pytest process)
from ncdoc.probes.job import VARIABLES as _JOB_VARIABLES

# The suite judges the jobs its tests describe, never the one it may itself run in: a CI step inside a
# Slurm allocation or a container sets SLURM_NNODES, CUDA_VISIBLE_DEVICES, ..., which ncdoc reads as
# the claims of the job about to start (and so would change what `ncdoc check --example` reports).
for _name in _JOB_VARIABLES:
    os.environ.pop(_name, None)

_SHARED_SKIPS: list[str] = []


def _about_shared(reason: str) -> bool:
    return "../shared" in reason or "shared/" in reason or "shared corpus" in reason


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("NCDOC_REQUIRE_SHARED") == "1":
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if _about_shared(reason):
            _SHARED_SKIPS.append(f"{item.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _SHARED_SKIPS and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _SHARED_SKIPS:
        terminalreporter.write_line(f"NCDOC_REQUIRE_SHARED=1 but {len(_SHARED_SKIPS)} test(s) skipped for lack of "
                                    "../shared:", red=True)
        for line in _SHARED_SKIPS[:20]:
            terminalreporter.write_line("  " + line)
