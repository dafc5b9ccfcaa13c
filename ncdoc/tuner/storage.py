"""Where a study lives: Optuna storage from the --storage value (a journal file by default, SQLite, RDB URLs).

The default is Optuna's journal file, OUT/study.journal: an append-only log that a killed
driver leaves readable (an incomplete last line is skipped), and several times cheaper per
trial than SQLite, whose every commit is a database transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from ncdoc.readers.numbers import is_digits

DEFAULT_NAME = "study.journal"


def _sqlite(path: Path) -> Any:
    """SQLite in write-ahead-log mode with NORMAL sync: a trial's commit no longer waits for the disk
    (a study is hundreds of commits), while a killed driver still leaves every committed trial."""
    import sqlite3

    from optuna.storages import RDBStorage

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    path.parent.mkdir(parents=True, exist_ok=True)
    return RDBStorage(f"sqlite:///{path}", engine_kwargs={"creator": connect})


def _alive(pid: int) -> bool:
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _journal(path: Path) -> Any:
    """A journal file, and its lock freed at once when the driver that held it died on this host.

    Optuna's file lock is a symlink next to the journal; a driver killed while appending (kill -9,
    a lost node) leaves it behind, and the next driver would wait out Optuna's grace period for it.
    Each driver notes its host and pid beside the journal, so a resumed study can tell a dead
    holder from a live one (on another host, or alive: the lock is left alone)."""
    import os
    import socket

    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

    path.parent.mkdir(parents=True, exist_ok=True)
    lock, driver = Path(f"{path}.lock"), Path(f"{path}.driver")
    host = socket.gethostname()
    try:
        held_by = driver.read_text().split()
    except OSError:
        held_by = []
    if lock.is_symlink() and len(held_by) == 2 and held_by[0] == host and is_digits(held_by[1]) and \
            not _alive(int(held_by[1])):
        lock.unlink(missing_ok=True)
    from ncdoc.envfiles.formats import write_atomic
    write_atomic(driver, f"{host} {os.getpid()}\n")
    return JournalStorage(JournalFileBackend(str(path), lock_obj=JournalFileSymlinkLock(str(path), grace_period=10)))


def storage_for(storage: str | None, out_dir: Path) -> Any:
    """What optuna takes: a JournalStorage for *.log/*.journal (the default: out_dir/study.journal), SQLite for
    other paths and sqlite:/// URLs, other URLs as they are,
    or "memory" (nothing kept: no --resume; for quick runs and benchmarks)."""
    if storage == "memory":
        import optuna
        return optuna.storages.InMemoryStorage()
    if not storage:
        storage = str(out_dir / DEFAULT_NAME)
    if storage.endswith((".log", ".journal")) and "://" not in storage:
        return _journal(Path(storage))
    if storage.startswith("sqlite:///"):
        return _sqlite(Path(storage[len("sqlite:///"):]).resolve())
    if "://" in storage:
        return storage
    return _sqlite(Path(storage).resolve())
