"""NVML in a child process that is stopped at the deadline: a hung nvmlInit cannot hang the gate.

nvmlInit is known to hang on some driver/GPU combinations (H200 with 570-series drivers, a GPU
that fell off the bus, a driver stuck in reset), and then `nvidia-smi` hangs too. A check run
by a Slurm prolog must answer anyway. NVML is therefore asked in a forked child:

- the parent keeps probing the node (PCI, RDMA, network, ...) while the child talks to NVML,
  then waits for the child's answer only until the deadline;
- at the deadline the child is killed (SIGKILL) and the GPU section says NVML did not answer,
  which a rule reports as an error; the gate never waits for the child to exit (a process
  stuck in the driver may not die at once), it only reaps it if it already has;
- pynvml and libnvidia-ml are loaded in the child only, so the gate's own process stays small.

Why not a thread with a bounded wait: a thread blocked inside nvmlInit cannot be stopped. It
would keep the process alive past the check (or hang its exit), and its half-initialised NVML
state would stay in the process. A child can be killed, costs one fork on GPU nodes only, and
answers with marshal (built in: no json, no pickle imports).

Where fork is not available the NVML query runs in this process, without a deadline.
"""

from __future__ import annotations

import os

from ncdoc.probes.gpus import NvmlAnswer, import_and_ask
from ncdoc.probes.sysfs import SysfsReader

_READ = 1 << 16


class Pending:
    """An NVML query under way in a child process (or already answered, where fork is missing)."""

    __slots__ = ("pid", "fd", "answer", "module")

    def __init__(self, pid: int | None, fd: int | None, answer: NvmlAnswer | None, module: str):
        self.pid, self.fd, self.answer, self.module = pid, fd, answer, module


def start(fs: SysfsReader, module: str = "pynvml") -> Pending:
    """Fork a child that imports `module` (pynvml, or a stand-in in tests), asks NVML and writes
    the answer to a pipe. Returns at once."""
    if not hasattr(os, "fork"):
        return Pending(None, None, import_and_ask(fs, module), module)
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return Pending(None, None, import_and_ask(fs, module), module)
    if pid == 0:                                   # the child: answer, then leave without cleanup
        code = 0
        try:
            os.close(r)
            import marshal
            try:
                data = import_and_ask(fs, module).to_data()
            except BaseException as exc:  # noqa: BLE001 - the parent must get an answer, whatever happened
                data = {"section": None, "error_kind": "ProbeFailed", "error_text": f"{type(exc).__name__}: {exc}",
                        "reason": f"the NVML probe failed: {type(exc).__name__}: {exc}"}
                code = 1
            payload = marshal.dumps(data)
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(code)
    os.close(w)
    return Pending(pid, r, None, module)


def _reap(pid: int) -> int | None:
    """The child's wait status if it has ended, without blocking; None while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return 0
    return status if done == pid else None


def finish(pending: Pending, timeout_s: float | None) -> tuple[NvmlAnswer, bool]:
    """(the answer, whether the child was stopped for running past `timeout_s` seconds; None: wait)."""
    if pending.answer is not None:
        return pending.answer, False
    import select
    import time
    chunks: list[bytes] = []
    deadline = None if timeout_s is None else time.monotonic() + max(0.0, timeout_s)
    timed_out = done = False
    try:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([pending.fd], [], [], wait)
            if not ready:
                timed_out = True
                break
            data = os.read(pending.fd, _READ)
            if not data:
                done = True
                break
            chunks.append(data)
    finally:
        # stopped at the deadline, or interrupted (the whole check's own deadline, Ctrl-C): the
        # child must not outlive the answer it can no longer give
        os.close(pending.fd)
        if not done:
            try:
                os.kill(pending.pid, 9)            # SIGKILL; the signal module (and its enum) is not needed
            except ProcessLookupError:
                pass
            _reap(pending.pid)
    if timed_out:
        text = f"NVML did not answer within {timeout_s:.1f} s (nvmlInit or a GPU query hung); the probe was stopped"
        return NvmlAnswer(error_kind="Timeout", error_text=text, reason=text), True
    status = None
    for _ in range(100):                            # it has closed the pipe: it is exiting
        status = _reap(pending.pid)
        if status is not None:
            break
        time.sleep(0.001)
    import marshal
    try:
        data = marshal.loads(b"".join(chunks))
        return NvmlAnswer.from_data(data), False
    except (EOFError, ValueError, TypeError, KeyError) as exc:
        how = _how_it_ended(status)
        text = f"the NVML probe process ended without an answer ({how})"
        return NvmlAnswer(error_kind="Crashed", error_text=text, reason=text if how else f"{text}: {exc}"), False


def _how_it_ended(status: int | None) -> str:
    if status is None:
        return "still running"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    if os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


__all__ = ["Pending", "start", "finish"]
