"""The whole check's deadline: a check that cannot finish in time says so instead of hanging a prolog.

NVML, the one probe known to hang, runs in a child process with its own share of the time
(ncdoc.probes.nvml_process). Everything else reads files, which can still block (a dead NFS
home holding ~/.nccl.conf, a sysfs attribute of a device stuck in reset). For those, a real-time
timer (setitimer) interrupts the process at the deadline and DeadlineExceeded ends the check:
"ncdoc could not run", exit 2, which ncdoc-prelaunch reports as the gate not having checked the
node. The C-level `_signal` module is used directly: `signal` would import enum.

A read blocked in uninterruptible kernel sleep is out of any process's reach; ncdoc-prelaunch
runs the check under timeout(1) as the last resort.
"""

from __future__ import annotations

import _signal

from ncdoc.errors import NcdocError


class DeadlineExceeded(NcdocError):
    """The check ran past --timeout: ncdoc could not run (exit 2)."""


class Deadline:
    """`with Deadline(seconds):` raises DeadlineExceeded in the block once `seconds` have passed.
    seconds None or 0: no deadline. Outside the main thread (where signals cannot be set) it
    does nothing."""

    def __init__(self, seconds: float | None, what: str = "the check"):
        self.seconds = seconds or None
        self.what = what
        self._previous = None
        self._armed = False

    def _fire(self, signum, frame):
        raise DeadlineExceeded(f"{self.what} did not finish within its deadline of {self.seconds:g} s "
                               "(--timeout); the node was not fully checked")

    def __enter__(self) -> "Deadline":
        if self.seconds is not None:
            try:
                self._previous = _signal.signal(_signal.SIGALRM, self._fire)
            except (ValueError, OSError):        # not the main thread
                return self
            _signal.setitimer(_signal.ITIMER_REAL, self.seconds)
            self._armed = True
        return self

    def __exit__(self, *exc) -> None:
        if self._armed:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, self._previous if self._previous is not None else _signal.SIG_DFL)
            self._armed = False


__all__ = ["Deadline", "DeadlineExceeded"]
