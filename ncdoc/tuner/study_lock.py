"""One tune per study: a lock beside the study's storage, taken before anything is measured.

Two drivers on one study would each enqueue, requeue and finish the other's trials (a --resume
marks every RUNNING trial as interrupted: the other driver's live ones too). So `ncdoc tune`
holds `<storage file>.<study>.lock` while it runs, and a second tune of the same study stops at
once with one line naming the holder (exit 2).

The lock is an flock on that file, held for the driver's life: when the holder dies on this host
(kill -9, a crash) the kernel releases it and the next tune takes it over at once. The file also
says who holds it (host, pid) and its modification time is a heartbeat, refreshed every
HEARTBEAT_S: on shared storage seen from several hosts, where an flock may not reach across, a
holder on another host counts as alive while its heartbeat is younger than STALE_S, and is taken
over after that. Studies in a database server (postgresql://, mysql://) are locked in the
output folder, which only keeps out tunes using the same folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
import time
from pathlib import Path

from ncdoc.errors import UsageError

HEARTBEAT_S = 15.0
STALE_S = 90.0


def lock_path(storage: str | None, out_dir: Path, study_name: str) -> Path | None:
    """Where the lock of `study_name` in `storage` lives (the --storage forms of ncdoc.tuner.storage);
    None for in-memory studies, which no other process can reach."""
    from ncdoc.tuner.storage import DEFAULT_NAME

    if storage == "memory":
        return None
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", study_name)[:80] or "study"
    if not storage:
        base = Path(out_dir) / DEFAULT_NAME
    elif storage.startswith("sqlite:///"):
        base = Path(storage[len("sqlite:///"):])
    elif "://" in storage:
        digest = hashlib.sha256(f"{storage}\0{study_name}".encode()).hexdigest()[:12]
        return Path(out_dir) / f".ncdoc-study-{digest}.lock"
    else:
        base = Path(storage)
    return base.resolve().parent / f"{base.name}.{safe}.lock"


def _holder(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict) -> str:
    since = holder.get("since")
    when = time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) \
        else ""
    return f"pid {holder.get('pid', '?')} on {holder.get('host', 'an unknown host')}{when}"


class StudyLock:
    """with StudyLock(path, study_name): ...   (UsageError when another live tune holds it)"""

    def __init__(self, path: Path | None, study_name: str, *, log=None):
        self.path = path
        self.study = study_name
        self.log = log or (lambda msg: None)
        self._fd: int | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self) -> None:
        if self.path is None:
            return
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _holder(_read(fd))
                os.close(fd)
                raise UsageError(self._refusal(holder)) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:                # the holder removed it as we opened it
                same = False
            if not same:
                os.close(fd)
                continue
            holder = _holder(_read(fd))
            if holder and holder.get("host") != socket.gethostname():
                age = time.time() - os.fstat(fd).st_mtime
                if age < STALE_S:
                    os.close(fd)
                    raise UsageError(self._refusal(holder))
                self.log(f"study {self.study!r}: taking over the lock of {_describe(holder)} (no heartbeat for "
                         f"{age:.0f} s)")
            elif holder and holder.get("pid") != os.getpid():
                self.log(f"study {self.study!r}: the tune that held it ({_describe(holder)}) is gone; taking it over")
            self._fd = fd
            self._write()
            self._beat = threading.Thread(target=self._heartbeat, name="ncdoc-study-lock", daemon=True)
            self._beat.start()
            return
        raise UsageError(f"cannot take the lock of study {self.study!r} ({self.path}): it keeps changing")

    def _refusal(self, holder: dict) -> str:
        who = f" ({_describe(holder)})" if holder else ""
        return (f"study {self.study!r} is being tuned by another ncdoc tune{who}; wait for it to finish, or use "
                f"another --study-name (lock: {self.path})")

    def _write(self) -> None:
        text = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time(),
                           "study": self.study}) + "\n"
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, text.encode(), 0)
        os.fsync(self._fd)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                pass

    def release(self) -> None:
        if self._fd is None:
            return
        self._stop.set()
        try:
            os.unlink(self.path)                       # while still holding it: see acquire's inode check
        except OSError:
            pass
        os.close(self._fd)                            # releases the flock
        self._fd = None

    def __enter__(self) -> "StudyLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return ""


__all__ = ["StudyLock", "lock_path", "HEARTBEAT_S", "STALE_S"]
