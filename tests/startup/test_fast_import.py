"""ncdoc.startup.fast_import: ncdoc's modules imported by the lean finder are what importlib makes of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ncdoc

PKG = Path(ncdoc.__file__).parent

# What a module's import leaves on it, as JSON, for a set of modules: packages, plain modules, deep ones.
_DESCRIBE = r"""
import importlib.machinery, json, sys
fast = sys.argv[1] == "fast"
if not fast:
    import ncdoc.startup.fast_import as fi
    sys.meta_path.remove(fi._Finder) if fi._Finder in sys.meta_path else None
    for name in [m for m in sys.modules if m.startswith("ncdoc.") and m != "ncdoc.startup.fast_import"
                 and m != "ncdoc.startup"]:
        del sys.modules[name]
import ncdoc.startup.fast_import as fi
names = ["ncdoc.snapshot", "ncdoc.checks", "ncdoc.checks.node", "ncdoc.cli.commands.check", "ncdoc.engine.rules"]
out = {}
for name in names:
    __import__(name)
    m = sys.modules[name]
    s = m.__spec__
    out[name] = {"file": m.__file__, "cached": m.__cached__, "path": getattr(m, "__path__", None),
                 "package": m.__package__, "origin": s.origin, "spec_cached": s.cached, "parent": s.parent,
                 "locations": s.submodule_search_locations, "has_location": s.has_location,
                 "source_loader": isinstance(m.__loader__, importlib.machinery.SourceFileLoader),
                 "source": m.__loader__.get_source(name) == open(m.__file__, encoding="utf-8").read(),
                 "fast": type(m.__loader__) is getattr(fi, "_Loader", None)}
print(json.dumps(out))
"""


def _describe(mode: str, cwd: Path, env: dict | None = None) -> dict:
    p = subprocess.run([sys.executable, "-c", _DESCRIBE, mode], capture_output=True, text=True, cwd=cwd,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _copy_of_ncdoc(tmp_path: Path) -> Path:
    """ncdoc's sources in a folder of their own, bytecode compiled there (the wheel install's layout)."""
    shutil.copytree(PKG, tmp_path / "ncdoc", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tmp_path / "ncdoc")], check=True, timeout=120)
    return tmp_path


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONOPTIMIZE")}
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_modules_imported_by_the_finder_are_what_importlib_makes(tmp_path):
    root = _copy_of_ncdoc(tmp_path)
    fast, standard = _describe("fast", root, _env(root)), _describe("standard", root, _env(root))
    for name, got in fast.items():
        want = dict(standard[name])
        assert got.pop("fast") is True and want.pop("fast") is False, name
        assert got == want, name
        assert got["source"] and got["file"].startswith(str(root))


def test_a_stale_pyc_is_not_read(tmp_path):
    # a pyc whose recorded mtime is not the source's: the source is compiled, as importlib does
    root = _copy_of_ncdoc(tmp_path)
    src = root / "ncdoc" / "readers" / "numbers.py"
    src.write_text(src.read_text(encoding="utf-8") + "\nSTALE_MARK = 1\n", encoding="utf-8")
    st = src.stat()
    os.utime(src, (st.st_atime, st.st_mtime + 5))
    code = "import ncdoc.readers.numbers as n, sys; print(getattr(n, 'STALE_MARK', 0), type(n.__loader__).__name__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(root), cwd=root,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "_Loader"]


def test_not_installed_where_pycs_are_elsewhere(tmp_path):
    env = _env(tmp_path)
    env["PYTHONPATH"] = str(PKG.parent)
    for extra in ({"PYTHONPYCACHEPREFIX": str(tmp_path / "pyc")}, {"PYTHONOPTIMIZE": "1"}):
        code = "import sys, ncdoc; print(any(type(f).__name__ == 'type' and f.__name__ == '_Finder' for f in sys.meta_path))"
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra},
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == "False", extra


def test_code_read_from_a_pyc_names_the_source_where_it_is_now(tmp_path):
    # bytecode compiled in one folder and moved with its sources (copy2 keeps the mtimes, so the pyc is
    # current): its functions name the source where it now is, as importlib's loader makes them
    built = _copy_of_ncdoc(tmp_path / "built")
    moved = tmp_path / "moved"
    shutil.copytree(built, moved)
    code = ("import ncdoc.readers.numbers as n; "
            "print(n.is_digits.__code__.co_filename == n.__file__, type(n.__loader__).__name__, n.__file__)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(moved), cwd=moved,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    same, loader, where = p.stdout.split()
    assert (same, loader) == ("True", "_Loader") and where.startswith(str(moved))
