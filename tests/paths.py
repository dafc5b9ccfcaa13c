"""Where the suite's files are, wherever a test module sits in tests/.

TESTS is this folder, ROOT the repository, SHARED the third-party material beside it
(../shared: the real-evidence corpus, sysfs captures, topologies, reference tables), which
the project never copies in. A test that needs it skips with a reason naming ../shared, and
CI (NCDOC_REQUIRE_SHARED=1) turns such a skip into a failure (see conftest.py).
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
FIXTURES = TESTS / "fixtures"
