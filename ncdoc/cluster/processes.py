"""Local processes (srun, mpirun, a benchmark) with deadlines, logs on disk and a clean end.

Each process runs in its own session (a Ctrl-C at the terminal reaches ncdoc, which then ends
the children in order) with its output going to files, never to pipes: a chatty rank cannot
block it, and what it printed is there to read when it is killed. At the deadline, or on
KeyboardInterrupt, the process group gets the launcher's escalation: srun needs SIGINT twice
within a second to end its step (and signals the remote tasks itself), mpirun ends its
ranks on SIGTERM; SIGKILL comes last. What was done is written to the log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

# (signal, seconds to wait for the process to go before the next step)
PLAIN = ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0))
SRUN = ((signal.SIGINT, 0.3), (signal.SIGINT, 5.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 2.0))
MPIRUN = ((signal.SIGTERM, 8.0), (signal.SIGKILL, 2.0))


@dataclass
class Proc:
    """One child process: argv, env, where its output goes, and when it must be done."""
    argv: list[str]
    env: dict[str, str] | None
    out_path: str                        # stdout (and stderr, when err_path is None)
    err_path: str | None = None
    timeout_s: float | None = None
    escalation: tuple = PLAIN
    label: str = ""
    popen: subprocess.Popen | None = None
    started: float = 0.0
    ended: float = 0.0
    rc: int | None = None
    killed: str = ""                     # why it was killed: "timeout" | "interrupted" | ""
    cleanup: list[str] = field(default_factory=list)
    start_error: str = ""

    def start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.out_path)), exist_ok=True)
        out = open(self.out_path, "wb")
        err = open(self.err_path, "wb") if self.err_path else subprocess.STDOUT
        self.started = time.monotonic()
        try:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env=self.env, start_new_session=True)
        except OSError as exc:
            self.start_error = f"cannot start {self.argv[0]}: {exc.strerror or exc}"
            self.rc = 127
            self.ended = time.monotonic()
        finally:
            out.close()
            if self.err_path:
                err.close()

    @property
    def deadline(self) -> float | None:
        return None if self.timeout_s is None else self.started + self.timeout_s

    def poll(self) -> bool:
        """True once the process has ended (recording its exit status)."""
        if self.rc is not None:
            return True
        code = self.popen.poll()
        if code is None:
            return False
        self.rc = code
        self.ended = time.monotonic()
        return True

    def stop(self, why: str) -> None:
        """End the process group with the escalation; note each step in the log."""
        if self.poll():
            return
        self.killed = why
        pgid = self.popen.pid
        for sig, wait_s in self.escalation:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            self.cleanup.append(f"sent {signal.Signals(sig).name}")
            end = time.monotonic() + wait_s
            while time.monotonic() < end:
                if self.poll():
                    break
                time.sleep(0.02)
            if self.poll():
                break
        try:
            os.killpg(pgid, signal.SIGKILL)        # anything the launcher left behind in its group
        except (ProcessLookupError, PermissionError):
            pass
        if not self.poll():
            self.popen.wait(5)
            self.poll()
        note = f"\nncdoc: {why}: {', '.join(self.cleanup)}; exit status {self.rc}\n"
        with open(self.err_path or self.out_path, "a", encoding="utf-8") as fh:
            fh.write(note)

    def output(self) -> str:
        return read(self.out_path)

    def errors(self) -> str:
        return read(self.err_path) if self.err_path else ""

    @property
    def elapsed_s(self) -> float:
        return (self.ended or time.monotonic()) - self.started


_LIBC = None


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the process that started it dies (a Ray worker
    force-cancelled on a hung node must not leave its benchmark holding the GPUs)."""
    if _LIBC:
        _LIBC.prctl(1, signal.SIGKILL)          # PR_SET_PDEATHSIG


def load_libc() -> None:
    """Load libc before forking: die_with_parent runs between fork and exec, where it must not import."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes
            _LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            _LIBC = False


def read(path: str | None) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_all(procs: list[Proc], *, poll_s: float = 0.05, on_tick=None, cancel=None) -> None:
    """Start every process, wait for all of them, stop each at its deadline.

    On KeyboardInterrupt every running process is stopped (its remote part with it) and the
    interrupt goes on to the caller; `cancel` (a threading.Event) set from another thread does
    the same. `on_tick()` is called while waiting (progress).
    """
    try:
        for p in procs:
            if cancel is not None and cancel.is_set():
                raise KeyboardInterrupt
            p.start()
        while True:
            running = [p for p in procs if not p.poll()]
            if not running:
                return
            if cancel is not None and cancel.is_set():
                raise KeyboardInterrupt
            now = time.monotonic()
            for p in running:
                if p.deadline is not None and now >= p.deadline:
                    p.stop("timeout")
            if on_tick:
                on_tick()
            time.sleep(poll_s)
    except KeyboardInterrupt:
        for p in procs:
            if p.popen is not None and not p.poll():
                p.stop("interrupted")
        raise


def signal_name(rc: int | None) -> str | None:
    """The signal that ended a process (subprocess reports -N), or None."""
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    if rc is not None and rc > 128:
        try:
            return signal.Signals(rc - 128).name       # a shell's 128+N
        except ValueError:
            return None
    return None


__all__ = ["Proc", "run_all", "read", "signal_name", "die_with_parent", "load_libc", "PLAIN", "SRUN", "MPIRUN"]
