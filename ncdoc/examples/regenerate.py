"""Regenerates the stored example snapshots (ncdoc/examples/snapshots/, what `--example` reads) from
fresh captures of the examples' trees by the real probes, and says when one is stale.

    python -m ncdoc.examples.regenerate --write     # after changing a spec, a probe or the model
    python -m ncdoc.examples.regenerate --check     # exit 1 when a stored file differs from a capture
"""

from __future__ import annotations

import os

from ncdoc.examples.machines import capture_example, list_examples
from ncdoc.examples.stored import names, path_of, stored_dir


def stored_form(snapshot):
    """What is stored for a capture: the run-specific parts (time, probe timings) left out."""
    from ncdoc.snapshot import ProbeRun
    return snapshot.replace(created="", probes=ProbeRun())


def capture_text(name: str) -> str:
    """The stored file's text as a fresh capture of the example's tree gives it."""
    return stored_form(capture_example(name)).to_json(indent=1) + "\n"


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def stale() -> list[str]:
    """Examples whose stored file is missing or differs from a fresh capture."""
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
    os.makedirs(stored_dir(), exist_ok=True)
    wanted = [name for name, _ in list_examples()]
    for name in wanted:
        _write_atomic(path_of(name), capture_text(name))
    for name in set(names()) - set(wanted):
        os.unlink(path_of(name))
    return wanted


def main(argv=None) -> int:
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python -m ncdoc.examples.regenerate",
                                 description="Store the bundled example machines as snapshots (what --example reads).")
    ap.add_argument("--write", action="store_true", help="capture every example and write snapshots/<name>.json")
    ap.add_argument("--check", action="store_true", help="exit 1 when a stored snapshot differs from a capture")
    args = ap.parse_args(argv)
    if args.write:
        done = write_all()
        print(f"wrote {len(done)} example snapshots to {stored_dir()}", file=sys.stderr)
        return 0
    bad = stale()
    if bad:
        print(f"stale example snapshots: {', '.join(bad)} (run python -m ncdoc.examples.regenerate --write)",
              file=sys.stderr)
        return 1
    print("example snapshots are up to date", file=sys.stderr)
    return 0


__all__ = ["stored_form", "capture_text", "stale", "write_all", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
