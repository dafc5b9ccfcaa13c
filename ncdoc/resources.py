"""Where the shipped data lives: rules/, tuners/ and bundled examples.

A wheel carries rules/ and tuners/ as ncdoc/_bundled/{rules,tuners}; an editable or
source checkout has them at the repository root beside the package. Both are tried,
wheel layout first, so the same code works for either install.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory holding shipped data `name` ("rules" or "tuners")."""
    for candidate in (_PKG / "_bundled" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"ncdoc data folder {name!r} is missing from this install")


def examples_dir() -> Path:
    return _PKG / "examples" / "specs"
