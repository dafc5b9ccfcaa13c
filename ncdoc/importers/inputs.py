"""One input as ncdoc holds it (Source), and what reading it gave (Imported for node evidence,
Reading for an input of any kind).

A file is read once: whole when it is small (a paste, a short log), else only its head (to tell its
kind), the rest streamed in one pass by the parsers that want it (ncdoc.evidence.run_scan), and the
few lines a report quotes read again by their number.
"""

from __future__ import annotations

import os

from ncdoc.errors import InputError
from ncdoc.snapshot import Snapshot
from ncdoc.startup.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Above this size a file is streamed through the parsers instead of read whole (NCCL INFO logs of
# large jobs reach gigabytes); its kind is told from its head. Streaming costs the same per byte at any
# size, so the threshold is where holding the text stops being cheaper: a few hundred ranks' init.
STREAM_BYTES = 1 << 20
HEAD_BYTES = 1 << 20


class Source:
    """One input: its path ("-": standard input), its text (None: too large to hold, read as a stream)
    and the head its kind is told from (the text itself when held whole)."""

    __slots__ = ("path", "text", "head", "plan", "_lines", "_sample")

    def __init__(self, path: str, text: str | None, head: str, plan=None):
        self.path, self.text, self.head = path, text, head
        self.plan = plan                      # how a streamed file is read (ncdoc.evidence.run_scan.ScanPlan)
        self._lines: tuple[str, ...] | None = None
        self._sample = None

    @classmethod
    def of_text(cls, text: str, path: str = "<text>") -> "Source":
        return cls(path, text, text)

    @property
    def streamed(self) -> bool:
        return self.text is None

    @property
    def lines(self) -> tuple[str, ...]:
        """The held text's lines (the head's when streamed), as line numbers count them."""
        if self._lines is None:
            self._lines = tuple((self.head if self.text is None else self.text).splitlines())
        return self._lines

    @property
    def sample(self):
        """What detection looks at (ncdoc.importers.detect.Sample), made once."""
        if self._sample is None:
            from ncdoc.importers.detect import Sample
            self._sample = Sample(self.head)
        return self._sample

    def lines_at(self, numbers) -> dict[int, str]:
        """The lines at these 1-based numbers: from the held text, or read again from the streamed file."""
        if self.text is None:
            from ncdoc.evidence.textfile import BLOCK_BYTES, lines_at
            return lines_at(self.path, numbers, getattr(self.plan, "block_bytes", 0) or BLOCK_BYTES)
        lines = self.lines
        return {n: lines[n - 1] for n in numbers if 1 <= n <= len(lines)}

    def whole_text(self) -> str:
        """The whole text, read now when it was streamed (kinds that cannot be streamed)."""
        if self.text is None:
            from ncdoc.readers.textfile import read_user_text
            self.text = read_user_text(self.path, "evidence")
        return self.text


def open_source(path: str, plan=None) -> Source:
    """The input at `path`, read once; InputError (one line naming it) when it cannot be used:
    missing, a directory, unreadable, empty, binary. `plan`: how it is streamed when it is (run_scan.ScanPlan)."""
    from ncdoc.readers.textfile import binary_reason, decode_text, read_user_bytes, read_user_text
    path = str(path)
    try:
        big = path != "-" and os.stat(path).st_size > STREAM_BYTES
    except OSError:
        big = False                 # the reader below says why it cannot be used
    if not big:
        text = read_user_text(path, "evidence")
        return Source(path, text, text, plan)
    head = read_user_bytes(path, HEAD_BYTES)
    reason = binary_reason(head[:65536])
    if reason:
        raise InputError(f"cannot be read as evidence: {reason}", path=path)
    # the head ends at its last whole line
    return Source(path, None, decode_text(head, path, "evidence").rsplit("\n", 1)[0], plan)


@record
class Imported:
    """One node-evidence text read: the Snapshot parts it gave, and how the reading went."""
    snapshot: Snapshot
    kind: str                      # a node kind (ncdoc.importers.kinds.NODE_KINDS)
    tool: str | None = None        # for ibv_devinfo: "ibv_devinfo" | "ibstat" | "ibstatus" | "show_gids"
    truncated: bool = False        # the text stopped mid-table/record; what was there is kept
    notes: tuple[str, ...] = ()
    source: str = ""               # "import:<kind>:<path>"


@record
class Reading:
    """What one input gave, whatever its kind: node evidence (Snapshot parts), NCCL logs, nccl-tests
    results, launch settings; the parsers that found something in it; notes for the user."""
    kind: str
    read_as: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    nodes: tuple[Imported, ...] = ()
    logs: tuple[Any, ...] = ()         # ncdoc.evidence LogFacts
    tests: tuple[Any, ...] = ()        # ncdoc.evidence NcclTestsFacts
    launch: tuple[Any, ...] = ()       # ncdoc.evidence LaunchEnv
    ras: tuple[Any, ...] = ()          # ncdoc.evidence.ras_model RasReport (ncclras output, RAS log lines)
    diag: tuple[Any, ...] = ()         # ncdoc.evidence.nccl_diag DiagReport (NCCL DIAG lines)
    host: tuple[Any, ...] = ()         # ncdoc.evidence.host_output HostOutput (ulimit -a, nvidia-smi, ...)
    detected: str = ""                 # why the input was taken for its kind (ncdoc.importers.kinds.Detection)
    node_lines: tuple = ()             # (line, text) a run file's node listings were read from (() : all lines)

    @property
    def run_evidence(self) -> bool:
        """Whether any run parser found something in it."""
        return bool(self.logs or self.tests or self.ras or self.diag or self.host)


def named(exc: InputError, path: str) -> InputError:
    """`exc` naming `path` (unless it already names a file)."""
    if exc.path or path in exc.message:
        return exc
    return InputError(exc.message, path=path, cause=exc.cause)


__all__ = ["STREAM_BYTES", "HEAD_BYTES", "Source", "open_source", "Imported", "Reading", "named"]
