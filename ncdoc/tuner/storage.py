"""Where a study lives: Optuna storage from the --storage value (SQLite by default, journal files, RDB URLs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def storage_for(storage: str | None, out_dir: Path) -> Any:
    """What optuna takes: the default SQLite file in out_dir, a URL, or a JournalStorage for *.log/*.journal."""
    if not storage:
        return f"sqlite:///{(out_dir / 'study.db').resolve()}"
    if storage.endswith((".log", ".journal")) and "://" not in storage:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend
        Path(storage).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(storage))
    if "://" in storage:
        return storage
    return f"sqlite:///{Path(storage).resolve()}"
