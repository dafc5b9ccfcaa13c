"""What `ncdoc check` costs against an empty Python start, the way clusters run it.

Builds a wheel of this checkout and installs it into a temporary virtual environment (pip
compiles the bytecode, as any install does), then runs, interleaved, with that environment's
interpreter:

    python -c pass                          the baseline
    ncdoc check --no-config                 the live check (what prologs and job scripts run)
    ncdoc-prelaunch                         the wrapper around it (sh, timeout(1), the check)
    ncdoc check --snapshot FILE             a captured node (the dgx-h100 example as a file)
    ncdoc check --example dgx-h100          a bundled example

and prints, for each, the median CPU time (user + system of the process and its children) and
wall time, and the median of the per-round ratios to the baseline of the same round (paired, so a
busy machine slows both sides alike). Targets on a node without GPUs: live check and prelaunch
<= 3x, --snapshot <= 2x, --example <= 3x. Exit status 0 either way (the figures are the result);
--strict exits 1 when a target is missed.

    python benchmarks/check_latency.py [--runs 30] [--json] [--strict]
    python benchmarks/check_latency.py --in-place    # this environment, bytecode cached in a private
                                                     # PYTHONPYCACHEPREFIX (where a wheel cannot be built)

These machines set PYTHONDONTWRITEBYTECODE=1: an editable install would then compile ncdoc from
source on every run. The wheel install has its bytecode written at install time, which is read
regardless of that setting; --in-place instead caches bytecode in a private folder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"live check": 3.0, "ncdoc-prelaunch": 3.0, "check --snapshot": 2.0, "check --example": 3.0}


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, int]:
    """(CPU seconds of it and its children, wall seconds, exit status)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.returncode


def _install_wheel(work: Path) -> Path:
    """A venv with a wheel of this checkout (no dependencies: the check path needs none); its bin/."""
    out = work / "wheel"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"cannot build a wheel (try --in-place): {p.stderr.strip()[-400:]}")
    (whl,) = out.glob("ncdoc-*.whl")
    env_dir = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "--no-deps",
                    "--no-index", "-q", str(whl)], check=True)
    return env_dir / "bin"


def _commands(bindir: Path | None, snapshot: str) -> dict[str, list[str]]:
    if bindir is None:                      # --in-place: this interpreter, this checkout
        py = sys.executable
        ncdoc = [py, str(ROOT / "bin" / "ncdoc")]
        prelaunch = ["sh", str(ROOT / "bin" / "ncdoc-prelaunch")]
    else:
        py = str(bindir / "python")
        ncdoc = [py, str(bindir / "ncdoc")]
        prelaunch = [str(bindir / "ncdoc-prelaunch")]
    return {"python -c pass": [py, "-c", "pass"],
            "live check": ncdoc + ["check", "--no-config"],
            "ncdoc-prelaunch": prelaunch,
            "check --snapshot": ncdoc + ["check", "--snapshot", snapshot, "--no-config"],
            "check --example": ncdoc + ["check", "--example", "dgx-h100", "--no-config"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="rounds (each runs every command once; default 30)")
    ap.add_argument("--in-place", action="store_true", help="measure this environment instead of a wheel install")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="ncdoc-bench-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NCDOC_", "NCCL_", "SLURM_"))}
        env["HOME"] = str(work)
        if args.in_place:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
            env["PYTHONPATH"] = str(ROOT)
            bindir = None
            how = f"this environment ({sys.executable}), bytecode cached in a private PYTHONPYCACHEPREFIX"
        else:
            bindir = _install_wheel(work)
            how = "a wheel install in a temporary venv, bytecode compiled by pip"
        sys.path.insert(0, str(ROOT))
        from ncdoc.examples.stored import load_example
        snapshot = work / "dgx-h100.json"
        snapshot.write_text(load_example("dgx-h100").to_json())
        cmds = _commands(bindir, str(snapshot))
        cwd = str(work)
        for name, cmd in cmds.items():
            _, _, rc = _run(cmd, env, cwd)
            if rc not in (0, 1):
                print(f"{name} failed (exit {rc}): {' '.join(cmd)}", file=sys.stderr)
                return 2
        for _ in range(3):                   # warm the page cache
            for cmd in cmds.values():
                _run(cmd, env, cwd)
        cpu: dict[str, list[float]] = {n: [] for n in cmds}
        wall: dict[str, list[float]] = {n: [] for n in cmds}
        names = list(cmds)
        for i in range(args.runs):
            order = names[i % len(names):] + names[:i % len(names)]    # rotate: no command always runs first
            for name in order:
                c, w, _ = _run(cmds[name], env, cwd)
                cpu[name].append(c)
                wall[name].append(w)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = "python -c pass"
    result = {"runs": args.runs, "measured": how, "interpreter": sys.executable, "commands": {}}
    for name in cmds:
        cpu_ratio = statistics.median(c / b for c, b in zip(cpu[name], cpu[base]) if b > 0)
        wall_ratio = statistics.median(w / b for w, b in zip(wall[name], wall[base]) if b > 0)
        entry = {"cpu_ms": round(statistics.median(cpu[name]) * 1000, 1),
                 "wall_ms": round(statistics.median(wall[name]) * 1000, 1),
                 "cpu_ratio": round(cpu_ratio, 2), "wall_ratio": round(wall_ratio, 2)}
        if name in TARGETS:
            entry["target_ratio"] = TARGETS[name]
            entry["meets_target"] = cpu_ratio <= TARGETS[name]
        result["commands"][name] = entry
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"measured: {how}; {args.runs} interleaved rounds; ratios are medians of per-round ratios")
        print(f"{'command':<20} {'CPU ms':>8} {'wall ms':>8} {'CPU ratio':>10} {'wall ratio':>11}  target")
        for name, e in result["commands"].items():
            target = f"<= {e['target_ratio']:g}  {'ok' if e['meets_target'] else 'MISSED'}" if "target_ratio" in e else ""
            print(f"{name:<20} {e['cpu_ms']:>8.1f} {e['wall_ms']:>8.1f} {e['cpu_ratio']:>10.2f} "
                  f"{e['wall_ratio']:>11.2f}  {target}")
    missed = [n for n, e in result["commands"].items() if e.get("meets_target") is False]
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
