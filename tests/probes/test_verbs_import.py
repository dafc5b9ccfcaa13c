"""Why the live capture has no pyverbs, in words: not installed, or installed and broken (the two
failures pyverbs.md found: built against another rdma-core, built for another Python). Fake
pyverbs packages on PYTHONPATH stand for the broken installs; no real pyverbs is needed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from ncdoc.probes import live
from ncdoc.probes.hcas import NOT_INSTALLED
from ncdoc.probes.sysfs import SysfsReader
from paths import TESTS

_ASK = "import json; from ncdoc.probes.live import _import_verbs; m, why = _import_verbs(); print(json.dumps([m is None, why]))"


def _fake_pyverbs(tmp_path, device_py: str | None) -> str:
    pkg = tmp_path / "pyverbs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    if device_py is not None:
        (pkg / "device.py").write_text(device_py)
    return str(tmp_path)


def _ask(path: str) -> tuple[bool, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", _ASK], capture_output=True, text=True, timeout=120,
                       cwd=TESTS.parent, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    none, why = json.loads(p.stdout)
    return none, why


def test_built_against_another_rdma_core_says_so(tmp_path):
    error = ("/lib/x86_64-linux-gnu/libibverbs.so.1: version `IBVERBS_PRIVATE_59' not found "
             "(required by /venv/lib/python3.11/site-packages/pyverbs/device.cpython-311-x86_64-linux-gnu.so)")
    assert _ask(_fake_pyverbs(tmp_path, f"raise ImportError({error!r})\n")) == (
        True, f"pyverbs failed to import (ImportError: {error})")


def test_built_for_another_python_says_so(tmp_path):
    # a distribution's pyverbs reached through a .pth: the package, but no extension for this Python
    assert _ask(_fake_pyverbs(tmp_path, None)) == (
        True, "pyverbs failed to import (ModuleNotFoundError: No module named 'pyverbs.device')")


def test_not_installed_says_which_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyverbs" else real(name, *a))
    assert live._import_verbs() == (None, NOT_INSTALLED)
    assert NOT_INSTALLED == "pyverbs is not installed (the 'verbs' extra)"


def test_a_copied_tree_is_not_asked(tmp_path):
    assert live._verbs_for(SysfsReader(str(tmp_path)), None, True) == (
        None, f"pyverbs asks this machine's devices, not the tree under {tmp_path}")


def test_a_node_without_rdma_devices_does_not_import_pyverbs(no_rdma_here):
    code = ("import sys; from ncdoc.probes.live import capture; s = capture(environ={}, home=None); "
            "print(s.hcas.status.state, 'pyverbs' in sys.modules, [n for n in s.notes if 'pyverbs' in n])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=TESTS.parent)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["absent", "False", "[]"]
