"""Progress of a study on stderr: one live line on a terminal (\\r updates), plain lines otherwise."""

from __future__ import annotations

import sys
from typing import IO, Any


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    def __init__(self, stream: IO[str] | None = None, *, tty: bool | None = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.quiet = quiet
        self._live = False
        self._last_done = -1

    def _clear(self) -> None:
        if self._live:
            self.stream.write("\r\033[K")
            self._live = False

    def note(self, message: str) -> None:
        if self.quiet:
            return
        self._clear()
        self.stream.write(f"ncdoc tune: {message}\n")
        self.stream.flush()

    def line(self, info: dict[str, Any]) -> str:
        done, total = info["done"], info["total"]
        best = info.get("best")
        per = info["elapsed"] / done if done else None
        eta = per * max(0, total - done) / max(1, info.get("slots", 1)) if per is not None else None
        parts = [f"trial {done} of {total}"]
        if info.get("failed"):
            parts.append(f"{info['failed']} failed")
        parts.append(f"best x{best:.3f} vs baseline" if best is not None else "best -")
        parts.append(f"ETA {_eta(eta)}")
        return ", ".join(parts)

    def update(self, info: dict[str, Any]) -> None:
        if self.quiet:
            return
        text = self.line(info)
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self._live = True
        elif info["done"] != self._last_done:
            self.stream.write(f"ncdoc tune: {text}\n")
        self._last_done = info["done"]
        self.stream.flush()

    def finish(self) -> None:
        if self._live:
            self.stream.write("\n")
            self.stream.flush()
            self._live = False
