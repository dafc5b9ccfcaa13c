"""Running fuzz inputs in a worker process: an input that does not come back within the limit is a hang.

The worker is a separate Python (multiprocessing, spawn) so a hang can be stopped (the worker is killed
and a fresh one started), a blow-up in memory is bounded (RLIMIT_AS) and measured (its peak RSS), and what
one input leaves behind in a module cannot hide behind another. Timing is only a failure detector here:
the per-input limit is generous, and the CPU seconds an input took are reported, not asserted on.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

import fuzz_inputs
import fuzz_targets


def _worker(conn, memory_limit: int | None) -> None:
    import resource
    import traceback
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    table = {**fuzz_targets.targets(), **fuzz_targets.probes()}
    while True:
        job = conn.recv()
        if job is None:
            return
        name, path, tmp, index = job
        before = resource.getrusage(resource.RUSAGE_SELF)
        status, detail = "ok", ""
        try:
            fuzz_targets.call(table[name], path, tmp, index)
        except fuzz_targets.Uncaught as exc:
            status, detail = "uncaught", str(exc)[:600]
        except BaseException as exc:       # noqa: BLE001 - every escape is the finding
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/ncdoc/" in f.filename]
            where = f"{frames[-1].filename.split('/ncdoc/')[-1]}:{frames[-1].lineno}" if frames else "?"
            status, detail = "uncaught", f"{type(exc).__name__} at ncdoc/{where}: {str(exc)[:300]}"
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        conn.send((status, detail, cpu, _peak_rss()))


def _peak_rss() -> int:
    """This process's peak resident set, bytes: VmHWM (ru_maxrss would carry the parent's peak over exec)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Worker:
    """One worker process; `run` sends it an input and waits at most `limit_s` for the answer."""

    def __init__(self, memory_limit: int | None = 3 << 30):
        self.memory_limit = memory_limit
        self.proc = None
        self.conn = None

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.memory_limit), daemon=True)
        self.proc.start()
        child.close()

    def run(self, name: str, path: str, tmp: str, index: int, limit_s: float) -> tuple[str, str, float, int]:
        """(status, detail, CPU seconds, peak RSS bytes so far); status "hang" when no answer came in time
        (the worker is then replaced), "crash" when the worker died."""
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send((name, path, tmp, index))
        if self.conn.poll(limit_s):
            try:
                return self.conn.recv()
            except EOFError:
                pass
            self.stop()
            return "crash", "the worker died", 0.0, 0
        self.stop()
        return "hang", f"no answer within {limit_s:.0f} s", limit_s, 0

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
                self.proc.join(0.5)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        self.proc = None


@dataclass
class Failure:
    reader: str
    index: int
    label: str
    status: str
    detail: str
    size: int
    saved: str = ""


@dataclass
class Tally:
    reader: str
    inputs: int = 0
    uncaught: int = 0
    hangs: int = 0
    peak_rss: int = 0
    max_cpu: float = 0.0
    cpu: float = 0.0
    failures: list[Failure] = field(default_factory=list)


def run_reader(worker: Worker, target, *, n: int, seed: int, large_every: int = 0, limit_s: float = 120.0,
               hang_cpu_s: float | None = None, keep_dir: str | None = None, start: int = 0) -> Tally:
    """Inputs `start`..`start+n` for `target` through `worker`; every `large_every`-th may hold 1-10 MB lines
    (0: none). A hang: no answer within `limit_s`, or (with `hang_cpu_s`) more CPU seconds than that.
    Failing inputs are copied to `keep_dir` when given."""
    tally = Tally(target.name)
    seeds = target.seed_samples()
    base = tempfile.mkdtemp(prefix=f"ncdoc-fuzz-{target.name}-")
    try:
        for index in range(start, start + n):
            label, seed_name, data = fuzz_inputs.one_input(
                seeds, seed, target.name, index, "large" if large_every and index % large_every == 0 else "small")
            tmp = os.path.join(base, str(index))
            os.mkdir(tmp)
            path = os.path.join(tmp, fuzz_targets.input_name(target, seed_name))
            with open(path, "wb") as fh:
                fh.write(data)
            status, detail, cpu, rss = worker.run(target.name, path, tmp, index, limit_s)
            tally.inputs += 1
            tally.cpu += cpu
            tally.max_cpu = max(tally.max_cpu, cpu)
            tally.peak_rss = max(tally.peak_rss, rss)
            if status == "ok" and hang_cpu_s is not None and cpu > hang_cpu_s:
                status, detail = "hang", f"{cpu:.1f} s of CPU"
            if status != "ok":
                if status in ("hang",):
                    tally.hangs += 1
                else:
                    tally.uncaught += 1
                fail = Failure(target.name, index, label, status, detail, len(data))
                if keep_dir:
                    os.makedirs(keep_dir, exist_ok=True)
                    fail.saved = os.path.join(keep_dir, f"{target.name}-{index}-{os.path.basename(path)}")
                    shutil.copyfile(path, fail.saved)
                tally.failures.append(fail)
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return tally


def elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.0f} s"


__all__ = ["Worker", "Failure", "Tally", "run_reader", "elapsed"]
