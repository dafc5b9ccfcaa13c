"""The bundled example machines as stored snapshots: what `--example NAME` reads.

Each example is specified in specs/<name>.yaml and built by ncdoc.examples.machines into a fake
sysfs tree that the real probes read (`capture_example`). Doing that on every `ncdoc check
--example` cost about nine empty Python start-ups (YAML, a tree of ~1500 files, the probes), so
the result is stored as snapshots/<name>.json and `load_example` reads only that file, the way
`--snapshot FILE` does. The stored files are generated, never edited by hand:

    python -m ncdoc.examples.stored --write     # after changing a spec, a probe or the model
    python -m ncdoc.examples.stored --check     # exit 1 when a stored file differs from a capture

tests/examples/test_stored_examples.py fails when one is stale, so the fast path cannot drift
from what the probes see.
"""

from __future__ import annotations

import os

from ncdoc.errors import UsageError

_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapshots")


def stored_dir() -> str:
    return _DIR


def names() -> list[str]:
    """The stored examples, sorted."""
    try:
        return sorted(n[:-5] for n in os.listdir(_DIR) if n.endswith(".json"))
    except OSError:
        return []


def path_of(name: str) -> str:
    return os.path.join(_DIR, f"{name}.json")


def load_example(name: str):
    """The Snapshot of bundled example `name`, from its stored file (UsageError for an unknown name)."""
    if not name or "/" in name or name.startswith(".") or not os.path.isfile(path_of(name)):
        raise UsageError(f"unknown example {name!r} (known: {', '.join(names()) or 'none in this install'})")
    from ncdoc.snapshot import Snapshot
    return Snapshot.load(path_of(name))


def stored_form(snapshot):
    """What is stored for a capture: the run-specific parts (time, probe timings) left out."""
    from ncdoc.snapshot import ProbeRun
    return snapshot.replace(created="", probes=ProbeRun())


def capture_text(name: str) -> str:
    """The stored file's text as a fresh capture of the example's tree gives it."""
    from ncdoc.examples.machines import capture_example
    return stored_form(capture_example(name)).to_json(indent=1) + "\n"


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def stale() -> list[str]:
    """Examples whose stored file is missing or differs from a fresh capture."""
    from ncdoc.examples.machines import list_examples
    out = []
    for name, _ in list_examples():
        try:
            with open(path_of(name), encoding="utf-8") as fh:
                current = fh.read()
        except OSError:
            current = None
        if current != capture_text(name):
            out.append(name)
    return out


def write_all() -> list[str]:
    """Capture every example and store it; returns the names written. Stored files of examples
    that no longer exist are removed."""
    from ncdoc.examples.machines import list_examples
    os.makedirs(_DIR, exist_ok=True)
    wanted = [name for name, _ in list_examples()]
    for name in wanted:
        _write_atomic(path_of(name), capture_text(name))
    for name in set(names()) - set(wanted):
        os.unlink(path_of(name))
    return wanted


def main(argv=None) -> int:
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python -m ncdoc.examples.stored",
                                 description="Store the bundled example machines as snapshots (what --example reads).")
    ap.add_argument("--write", action="store_true", help="capture every example and write snapshots/<name>.json")
    ap.add_argument("--check", action="store_true", help="exit 1 when a stored snapshot differs from a capture")
    args = ap.parse_args(argv)
    if args.write:
        done = write_all()
        print(f"wrote {len(done)} example snapshots to {_DIR}", file=sys.stderr)
        return 0
    bad = stale()
    if bad:
        print(f"stale example snapshots: {', '.join(bad)} (run python -m ncdoc.examples.stored --write)",
              file=sys.stderr)
        return 1
    print("example snapshots are up to date", file=sys.stderr)
    return 0


__all__ = ["load_example", "names", "stored_dir", "capture_text", "stale", "write_all", "stored_form"]

if __name__ == "__main__":
    raise SystemExit(main())
