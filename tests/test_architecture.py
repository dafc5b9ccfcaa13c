"""The house plan, enforced: imports point one way, and the fast paths stay light."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "ncdoc"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _modules(sub: str) -> list[Path]:
    base = PKG / sub
    if base.is_file():
        return [base]
    return sorted(base.rglob("*.py")) if base.is_dir() else []


# Rules are pure functions over facts: they never touch the machine nor the tuner.
PURE = ["engine/rules.py", "engine/conditions.py", "findings.py", "snapshot.py", "startup", "topology.py",
        "checks", "nccl/parse.py", "nccl/values.py", "nccl/devices.py", "nccl/bandwidth.py"]
FORBIDDEN_IN_PURE = ("ncdoc.tuner", "ncdoc.probes", "ncdoc.cli", "subprocess", "ray", "optuna",
                     "pynvml", "pyverbs", "socket")


@pytest.mark.parametrize("path", [p for sub in PURE for p in _modules(sub)], ids=lambda p: p.name)
def test_pure_layers_do_not_reach_out(path):
    bad = {m for m in _imports(path) if m.split(".")[0] in {f.split(".")[0] for f in FORBIDDEN_IN_PURE}
           and any(m == f or m.startswith(f + ".") for f in FORBIDDEN_IN_PURE)}
    assert not bad, f"{path.relative_to(PKG.parent)} imports {sorted(bad)}"


def test_only_the_tuner_imports_ray_and_optuna():
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        heavy = {m for m in _imports(path) if m.split(".")[0] in ("ray", "optuna")}
        if heavy:
            assert rel.parts[0] == "tuner", f"{rel} imports {sorted(heavy)}"


@pytest.mark.parametrize("argv", [
    ["check", "--example", "dgx-h100"],
    ["snapshot", "--example", "dgx-h100"],
    ["topo", "--example", "dgx-h100"],
])
def test_fast_paths_never_import_ray_or_optuna(argv):
    code = ("import sys; from ncdoc.cli.main import main; rc = main(%r); "
            "heavy = [m for m in ('ray', 'optuna') if m in sys.modules]; "
            "print('HEAVY', heavy); sys.exit(0 if not heavy and rc in (0, 1) else 3)" % (argv,))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]
