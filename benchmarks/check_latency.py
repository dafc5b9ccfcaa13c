"""How long `ncdoc check --snapshot FILE` takes against an empty Python start, on this machine.

Runs `python -c pass` and `ncdoc check --snapshot <file>` interleaved (N times each, after a
warm-up), with the same interpreter, and prints the medians and their ratio. The target is
a ratio of at most 2: cheap enough to run in every job script.

    python benchmarks/check_latency.py [--runs 30] [--snapshot FILE] [--json]

Without --snapshot, the bundled example dgx-h100 is written to a temporary snapshot file.
The interpreter is sys.executable (a `python3` on PATH may be a shim such as pyenv's, which
adds its own start-up time to both sides). Bytecode is cached for both sides (in a private
PYTHONPYCACHEPREFIX), as in an installed ncdoc, even where PYTHONDONTWRITEBYTECODE is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _ncdoc_command() -> list[str]:
    """The console script next to this interpreter (what users run), else `python -m ncdoc`."""
    script = os.path.join(os.path.dirname(sys.executable), "ncdoc")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "ncdoc"]


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0, p.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="runs of each command (default 30)")
    ap.add_argument("--snapshot", help="snapshot file to check (default: the dgx-h100 example)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    tmp = None
    snapshot = args.snapshot
    if not snapshot:
        from ncdoc.examples.machines import load_example
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        tmp.write(load_example("dgx-h100").to_json())
        tmp.close()
        snapshot = tmp.name
    env = dict(os.environ)
    env.pop("NCDOC_RULES", None)
    # Measure the installed state: bytecode cached. Some environments set PYTHONDONTWRITEBYTECODE,
    # which makes every run recompile ncdoc from source; cache into a private folder instead.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    pycache = tempfile.mkdtemp(prefix="ncdoc-bench-pycache-")
    env["PYTHONPYCACHEPREFIX"] = pycache
    baseline = [sys.executable, "-c", "pass"]
    check = _ncdoc_command() + ["check", "--snapshot", snapshot, "--no-config"]
    try:
        _, rc = _time(check, env)
        if rc not in (0, 1):
            print(f"ncdoc check failed (exit {rc}): {' '.join(check)}", file=sys.stderr)
            return 2
        for _ in range(3):                      # warm the page cache and .pyc files
            _time(baseline, env)
            _time(check, env)
        base_t, check_t = [], []
        for _ in range(args.runs):
            base_t.append(_time(baseline, env)[0])
            check_t.append(_time(check, env)[0])
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
        import shutil
        shutil.rmtree(pycache, ignore_errors=True)
    b, c = statistics.median(base_t) * 1000, statistics.median(check_t) * 1000
    result = {"runs": args.runs, "python_pass_ms": round(b, 1), "ncdoc_check_ms": round(c, 1),
              "ratio": round(c / b, 2), "target_ratio": 2.0, "interpreter": sys.executable}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"python -c pass        median {b:6.1f} ms  ({args.runs} runs)")
        print(f"ncdoc check --snapshot median {c:6.1f} ms")
        print(f"ratio                 {c / b:6.2f}  (target <= 2.0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
