"""The wheel carries everything a user without the source tree needs."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    assert "ncdoc/_bundled/rules/compiled.json" in names and "ncdoc/_bundled/rules/compiled_docs.json" in names
    for pack in (ROOT / "rules").glob("*.yaml"):
        assert f"ncdoc/_bundled/rules/{pack.name}" in names
    for space in (ROOT / "tuners" / "spaces").glob("*.yaml"):
        assert f"ncdoc/_bundled/tuners/spaces/{space.name}" in names
    for example in (ROOT / "ncdoc" / "examples").glob("*.yaml"):
        assert f"ncdoc/examples/{example.name}" in names
    assert "ncdoc/nccl/data/nccl_vars.json" in names
    for template in (ROOT / "ncdoc" / "report" / "templates").iterdir():      # the HTML report's pages
        assert f"ncdoc/report/templates/{template.name}" in names
    assert any(n.endswith(".data/scripts/ncdoc-prelaunch") for n in names)
    # rules/ and tuners/ are data inside the package, never top-level import packages
    assert not any(n.startswith(("rules/", "tuners/")) for n in names)


def test_wheel_ships_the_lean_ncdoc_launcher(wheel):
    # `ncdoc` is a plain script (installers rewrite `#!python`), not an entry point whose
    # generated launcher imports `re`: `ncdoc check` has a start-up budget (benchmarks/check_latency.py).
    (script,) = [n for n in wheel.namelist() if n.endswith(".data/scripts/ncdoc")]
    text = wheel.read(script).decode()
    assert text.startswith("#!python\n")
    code = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert code == ["from ncdoc.cli.main import entry", "if __name__ == \"__main__\":", "    entry()"]
    entry_points = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert not any("ncdoc =" in wheel.read(n).decode() for n in entry_points)


def test_launcher_runs_like_python_m_ncdoc(tmp_path):
    script = ROOT / "bin" / "ncdoc"
    p = subprocess.run([sys.executable, str(script), "--version"], capture_output=True, text=True, timeout=60)
    q = subprocess.run([sys.executable, "-m", "ncdoc", "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == q.returncode == 0 and p.stdout == q.stdout and p.stdout.startswith("ncdoc ")
