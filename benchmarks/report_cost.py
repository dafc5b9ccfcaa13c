"""What the HTML report costs: the import time of its libraries and the size of each report kind.

Import cost is measured as start-up of `python -c "import X"` against `python -c pass`, interleaved
(N runs each, medians), for Jinja2 and matplotlib's SVG path, and for the whole `ncdoc report` of a
bundled node against `ncdoc triage` of the same node (what the report adds to the use case it
draws). Sizes are the bytes of each report kind written here: a node (dgx-h100-port-down), a
triage with an nccl-tests curve, and, with --tune DIR, a tune folder.

    python benchmarks/report_cost.py [--runs 9] [--tune DIR] [--json]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "triage"


def _ncdoc() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "ncdoc")
    return [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "ncdoc"]


def _run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def interleaved(cmds: dict[str, list[str]], runs: int) -> dict[str, float]:
    for cmd in cmds.values():           # warm-up: bytecode and page cache
        _run(cmd)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            times[k].append(_run(cmd))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--tune", help="a tune output folder to report on as well")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    py = sys.executable
    out = tempfile.mkdtemp(prefix="ncdoc-report-bench-")
    node = os.path.join(out, "node.html")
    imports = interleaved({
        "python -c pass": [py, "-c", "pass"],
        "import jinja2": [py, "-c", "import jinja2"],
        "import matplotlib (svg)": [py, "-c", "import matplotlib; matplotlib.use('svg'); "
                                              "import matplotlib.figure, matplotlib.backends.backend_svg"],
        "ncdoc triage --example dgx-h100-port-down": _ncdoc() + ["triage", "--example", "dgx-h100-port-down"],
        "ncdoc report --example dgx-h100-port-down": _ncdoc() + ["report", "--example", "dgx-h100-port-down",
                                                                 "-o", node],
        "ncdoc check --example dgx-h100": _ncdoc() + ["check", "--example", "dgx-h100"],
    }, a.runs)
    base = imports["python -c pass"]
    kinds = {"node (dgx-h100-port-down)": ["--example", "dgx-h100-port-down"],
             "triage + nccl-tests (h100-roce)": [str(FIX / "launch.sh"), str(FIX / "all_reduce_2x8.txt"),
                                                 "--example", "h100-roce", "--nodes", "2"]}
    if a.tune:
        kinds[f"tune ({a.tune})"] = ["--tune", a.tune]
    sizes = {}
    for name, argv in kinds.items():
        path = os.path.join(out, "k.html")
        subprocess.run(_ncdoc() + ["report", *argv, "-o", path], stdout=subprocess.DEVNULL, check=True)
        sizes[name] = os.path.getsize(path)
    res = {"seconds": {k: round(v, 4) for k, v in imports.items()},
           "ratio_to_empty_python": {k: round(v / base, 2) for k, v in imports.items()},
           "report_over_triage": round(imports["ncdoc report --example dgx-h100-port-down"]
                                       / imports["ncdoc triage --example dgx-h100-port-down"], 2),
           "bytes": sizes}
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"medians of {a.runs} interleaved runs (this machine, now)")
    for k, v in imports.items():
        print(f"  {k:45s} {v * 1000:8.0f} ms  x{v / base:5.1f} of an empty python")
    print(f"  report / triage of the same node: x{res['report_over_triage']}")
    for k, v in sizes.items():
        print(f"  {k:45s} {v / 1024:8.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
