#!/usr/bin/env python3
"""The fuzz campaign: every reader fed >= 10k hostile and broken inputs, in process and a sample through the CLI.

Inputs (tests/fuzz/fuzz_inputs.py, seeded): random bytes and text, and mutations of the project's own samples
and of ../shared/corpus (read here, never copied): byte flips, line drops and duplication, truncation, huge
numbers, deep nesting, unicode digits and separators, NUL, CRLF, YAML alias and complex-key bombs, markup and
shell metacharacters, and every --large-every-th input a 1-10 MB line. Each reader runs in its own worker
process (tests/fuzz/fuzz_runner.py) capped at --memory GB of address space; per reader it prints

    inputs  uncaught  hangs(>5 s CPU or no answer in --limit s)  peak RSS  max CPU s/input  CLI: runs, bad

A CLI run is bad when it exits other than 0/1/2, prints "internal error" or a traceback, writes an error
longer than 2000 characters, or does not finish within --limit seconds. Failing inputs are saved under
--keep (default: a temporary folder, printed) to be minimised into tests/fuzz/test_fuzz_regressions.py.

    nice .venv/bin/python benchmarks/fuzz.py                         # 10k per reader, all readers
    .venv/bin/python benchmarks/fuzz.py --inputs 500 --readers triage,snapshot --cli 20
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import fuzz_inputs  # noqa: E402
import fuzz_runner  # noqa: E402
import fuzz_targets  # noqa: E402


def cli_sample(target, *, n: int, seed: int, limit_s: float, keep: str) -> tuple[int, list[str]]:
    """`n` inputs of `target` through `python -m ncdoc` (its own command line); (runs, what went wrong)."""
    if target.cli is None or n <= 0:
        return 0, []
    seeds = target.seed_samples()
    bad: list[str] = []
    env = dict(os.environ, NO_COLOR="1")
    env.pop("NCDOC_DEBUG", None)
    with tempfile.TemporaryDirectory(prefix=f"ncdoc-fuzz-cli-{target.name}-") as base:
        for k in range(n):
            index = 1_000_000 + k          # inputs of their own, not the in-process ones again
            label, seed_name, data = fuzz_inputs.one_input(seeds, seed, target.name, index,
                                                           "large" if k % 10 == 0 else "small")
            tmp = os.path.join(base, str(k))
            os.mkdir(tmp)
            path = os.path.join(tmp, fuzz_targets.input_name(target, seed_name))
            Path(path).write_bytes(data)
            argv = [sys.executable, "-m", "ncdoc"] + target.cli(path, tmp)
            try:
                p = subprocess.run(argv, capture_output=True, cwd=tmp, env=env, timeout=limit_s)
            except subprocess.TimeoutExpired:
                bad.append(f"#{index} {label}: no answer within {limit_s:.0f} s")
                _keep(keep, target, index, path)
                continue
            err = p.stderr.decode("utf-8", "replace")
            why = None
            if p.returncode not in (0, 1, 2):
                why = f"exit {p.returncode}"
            elif "internal error" in err or "Traceback" in err:
                why = err.strip().splitlines()[-1][:300]
            elif p.returncode == 2 and len(err) > fuzz_targets.MAX_MESSAGE:
                why = f"an error of {len(err)} characters"
            if why:
                bad.append(f"#{index} {label}: {why}")
                _keep(keep, target, index, path)
    return n, bad


def _keep(keep: str, target, index: int, path: str) -> None:
    os.makedirs(keep, exist_ok=True)
    dest = os.path.join(keep, f"{target.name}-cli-{index}-{os.path.basename(path)}")
    with open(path, "rb") as src, open(dest, "wb") as out:
        out.write(src.read())


def replay(table, files, profile: bool) -> int:
    """Each saved input through its reader, here: its outcome, CPU seconds, and (profile) where they went."""
    import shutil
    import traceback
    bad = 0
    for f in files:
        name = os.path.basename(f)
        reader = next((r for r in sorted(table, key=len, reverse=True) if name.startswith(r + "-")), None)
        if reader is None:
            print(f"{f}: no reader named in the file name")
            bad += 1
            continue
        rest = name[len(reader) + 1:].split("-", 1)
        index = int(rest[0]) if rest[0].isdigit() else 0
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, rest[-1].split("-", 1)[-1] if rest[0] == "cli" else rest[-1])
            shutil.copyfile(f, path)
            t0 = time.process_time()
            prof = None
            if profile:
                import cProfile
                prof = cProfile.Profile()
                prof.enable()
            try:
                fuzz_targets.call(table[reader], path, tmp, index)
                outcome = "ok"
            except BaseException as exc:  # noqa: BLE001
                bad += 1
                outcome = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:400]
                tb = [fr for fr in traceback.extract_tb(exc.__traceback__) if "/ncdoc/" in fr.filename][-3:]
                outcome += "".join(f"\n    {fr.filename.split('/ncdoc/')[-1]}:{fr.lineno} {fr.line}" for fr in tb)
            if prof:
                prof.disable()
            print(f"{f} [{reader} #{index}] {time.process_time() - t0:.2f} s CPU: {outcome}", flush=True)
            if prof:
                import pstats
                pstats.Stats(prof).sort_stats("tottime").print_stats(8)
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=10_000, help="in-process inputs per reader (default 10000)")
    ap.add_argument("--cli", type=int, default=100, help="CLI runs per reader that has a command (default 100)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--readers", help="comma-separated reader names (default: all)")
    ap.add_argument("--large-every", type=int, default=50, help="every Nth input may hold a 1-10 MB line")
    ap.add_argument("--limit", type=float, default=60.0, help="seconds without an answer that make a hang")
    ap.add_argument("--hang-cpu", type=float, default=5.0, help="CPU seconds on one input that make a hang")
    ap.add_argument("--memory", type=float, default=3.0, help="address-space cap of a worker, GB")
    ap.add_argument("--keep", help="folder for failing inputs (default: a new temporary folder)")
    ap.add_argument("--list", action="store_true", help="list the readers and their seed counts")
    ap.add_argument("--replay", nargs="+", metavar="FILE",
                    help="run these saved inputs (named READER-INDEX-NAME, as --keep saves them) in this process, "
                         "printing each outcome; with --profile, the top of a cProfile")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    table = fuzz_targets.targets()
    if args.replay:
        return replay(table, args.replay, args.profile)
    if args.list:
        for t in table.values():
            print(f"{t.name:16} {len(t.seed_samples()):3} seeds  cli: {'yes' if t.cli else 'no'}")
        return 0
    names = args.readers.split(",") if args.readers else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown reader(s) {', '.join(unknown)} (known: {', '.join(table)})")
    keep = args.keep or tempfile.mkdtemp(prefix="ncdoc-fuzz-kept-")
    if not fuzz_targets.CORPUS.is_dir():
        print(f"note: {fuzz_targets.CORPUS} is absent: seeds are the project's own samples only", file=sys.stderr)
    print(f"seed {args.seed}, {args.inputs} inputs per reader, a 1-10 MB line in every {args.large_every}th, "
          f"hang = >{args.hang_cpu:.0f} s CPU or no answer in {args.limit:.0f} s; failing inputs kept in {keep}",
          flush=True)
    head = f"{'reader':16} {'inputs':>7} {'uncaught':>8} {'hangs':>6} {'peak RSS':>9} {'max CPU':>8} " \
           f"{'CPU total':>9} {'CLI runs':>8} {'CLI bad':>7}"
    rows, details = [], []
    t0 = time.monotonic()
    for name in names:
        target = table[name]
        worker = fuzz_runner.Worker(memory_limit=int(args.memory * (1 << 30)))
        try:
            tally = fuzz_runner.run_reader(worker, target, n=args.inputs, seed=args.seed,
                                           large_every=args.large_every, limit_s=args.limit,
                                           hang_cpu_s=args.hang_cpu, keep_dir=keep)
        finally:
            worker.stop()
        runs, bad = cli_sample(target, n=args.cli, seed=args.seed, limit_s=args.limit, keep=keep)
        row = (f"{name:16} {tally.inputs:7} {tally.uncaught:8} {tally.hangs:6} {tally.peak_rss / 2**20:7.0f}MB "
               f"{tally.max_cpu:7.2f}s {tally.cpu:8.0f}s {runs:8} {len(bad):7}")
        rows.append(row)
        print(row + f"   ({fuzz_runner.elapsed(t0)})", flush=True)
        for f in tally.failures[:30]:
            details.append(f"  {name} #{f.index} [{f.label}, {f.size} B] {f.status}: {f.detail}  {f.saved}")
        details += [f"  {name} CLI {b}" for b in bad[:30]]
    print("\n" + head)
    print("\n".join(rows))
    if details:
        print("\nfailures (first 30 per reader):")
        print("\n".join(details))
    return 1 if details else 0


if __name__ == "__main__":
    raise SystemExit(main())
