"""A wheel of this checkout, installed in a temporary virtual environment: what a user gets from
`pip install ncdoc`, for the tests that must see the installed layout (scripts beside the
interpreter, bytecode compiled, data inside the package). Built once per test session (the wheel
build takes a while), whichever test module asks first; removed when the session ends.

The environment gets ncdoc alone (--no-deps): the check path needs none of the heavy
dependencies, and the tests prove it. It lives in a world-readable temporary folder, so the
tests can run it as an unprivileged user too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from paths import ROOT

_BUILT: dict[str, object] = {}


class Unavailable(Exception):
    """The wheel cannot be built or installed here (no build backend reachable, no venv module)."""


def _cleanup(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def wheel() -> Path:
    """The ncdoc wheel of this checkout (built on first use)."""
    if "wheel" not in _BUILT:
        out = tempfile.mkdtemp(prefix="ncdoc-wheel-")
        atexit.register(_cleanup, out)
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, str(ROOT)],
                           capture_output=True, text=True, timeout=600)
        wheels = list(Path(out).glob("ncdoc-*.whl"))
        _BUILT["wheel"] = wheels[0] if p.returncode == 0 and wheels else Unavailable(
            f"cannot build a wheel here (no build backend reachable?): {p.stderr.strip()[-300:]}")
    value = _BUILT["wheel"]
    if isinstance(value, Exception):
        raise value
    return value  # type: ignore[return-value]


def venv(interpreter: str | None = None) -> Path:
    """A virtual environment of `interpreter` (default: the suite's own) with the wheel installed
    (bytecode compiled, as pip does); its root. One per interpreter and session."""
    interpreter = interpreter or sys.executable
    key = f"venv:{interpreter}"
    if key not in _BUILT:
        try:
            whl = wheel()
        except Unavailable as exc:
            _BUILT[key] = exc
        else:
            _BUILT[key] = _install(whl, interpreter)
    value = _BUILT[key]
    if isinstance(value, Exception):
        raise value
    return value  # type: ignore[return-value]


def _install(whl: Path, interpreter: str) -> Path | Exception:
    top = tempfile.mkdtemp(prefix="ncdoc-wheel-venv-")
    atexit.register(_cleanup, top)
    os.chmod(top, 0o755)
    env_dir = Path(top) / "venv"
    steps = ([interpreter, "-m", "venv", "--without-pip", str(env_dir)],
             [sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "--no-deps",
              "--no-index", "-q", str(whl)])
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            return Unavailable(f"cannot install the wheel into a venv ({' '.join(cmd[:4])}...): {p.stderr[-300:]}")
    return env_dir


__all__ = ["Unavailable", "wheel", "venv"]
