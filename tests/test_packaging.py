"""The wheel carries everything a user without the source tree needs."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no build backend reachable?): {p.stderr.strip()[-300:]}")
    (whl,) = out.glob("ncdoc-*.whl")
    return zipfile.ZipFile(whl)


def test_wheel_ships_rules_tuners_examples_and_the_prelaunch_script(wheel):
    names = set(wheel.namelist())
    assert "ncdoc/_bundled/rules/compiled.json" in names
    for pack in (ROOT / "rules").glob("*.yaml"):
        assert f"ncdoc/_bundled/rules/{pack.name}" in names
    for space in (ROOT / "tuners" / "spaces").glob("*.yaml"):
        assert f"ncdoc/_bundled/tuners/spaces/{space.name}" in names
    for example in (ROOT / "ncdoc" / "examples").glob("*.yaml"):
        assert f"ncdoc/examples/{example.name}" in names
    assert "ncdoc/data/nccl_vars.json" in names
    assert any(n.endswith(".data/scripts/ncdoc-prelaunch") for n in names)
    # rules/ and tuners/ are data inside the package, never top-level import packages
    assert not any(n.startswith(("rules/", "tuners/")) for n in names)
