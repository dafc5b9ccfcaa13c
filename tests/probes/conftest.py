"""The real pyverbs for the verbs tests, when the 'verbs' extra is installed.

Without it those tests skip with a reason naming the extra. CI installs the extra in its
default-Python venv and sets NCDOC_REQUIRE_VERBS=1 there, where a skip would hide that the real
module was never imported: so it fails instead (the 3.10 venv runs without the extra).
"""

from __future__ import annotations

import os

import pytest

NEEDS_EXTRA = "needs pyverbs, the 'verbs' extra (README: \"pyverbs, for the HCA probe\")"


@pytest.fixture(scope="session")
def real_verbs():
    """pyverbs.device, as the probe would import it."""
    try:
        import pyverbs.device as device
    except ModuleNotFoundError as exc:
        reason = f"{NEEDS_EXTRA}: {exc}"
    except ImportError as exc:        # a broken build says so, in CI and here alike
        reason = f"{NEEDS_EXTRA}; the installed one does not import: {exc}"
    else:
        return device
    if os.environ.get("NCDOC_REQUIRE_VERBS") == "1":
        pytest.fail(f"NCDOC_REQUIRE_VERBS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def no_rdma_here():
    """Skip when this machine has RDMA devices: the no-device behaviour cannot be seen there."""
    try:
        present = os.listdir("/sys/class/infiniband")
    except OSError:
        present = []
    if present:
        pytest.skip(f"this machine has RDMA devices ({', '.join(sorted(present))})")
