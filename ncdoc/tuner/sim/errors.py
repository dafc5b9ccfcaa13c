"""The one way a simulated trial fails: NCCL would reject the configuration, crash or hang."""

from __future__ import annotations

class SimTrialError(Exception):
    """A configuration NCCL would refuse, crash on or hang with.

    `message` is the line NCCL would WARN where it has one (e.g. `No algorithm/protocol available
    for function AllGather with datatype ncclFloat32. NCCL_ALGO was set to Tree.`); `kind` says how
    the trial ends: "init" (communicator init fails), "call" (the collective returns an error),
    "crash" or "hang". A tuner records such a trial as failed, never as a slow one.
    """

    def __init__(self, message: str, *, kind: str = "init"):
        super().__init__(message)
        self.message = message
        self.kind = kind

    def __reduce__(self):
        # Keep `kind` when the error crosses a process boundary (Ray pickles task exceptions).
        return (_rebuild, (self.message, self.kind))


def _rebuild(message: str, kind: str) -> SimTrialError:
    return SimTrialError(message, kind=kind)
