"""The tuner: search spaces, studies, trial dispatch and benchmark backends.

Use case: `run_tune(TuneOptions(...)) -> TuneResult` (ncdoc.tuner.run). Nothing here imports
Ray or Optuna at import time; they load inside the functions that run a study.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TuneOptions", "TuneResult", "run_tune"]


def __getattr__(name: str) -> Any:      # lazy: `import ncdoc.tuner.sim` must not pull in the study code
    if name in __all__:
        from ncdoc.tuner import run
        return getattr(run, name)
    raise AttributeError(f"module 'ncdoc.tuner' has no attribute {name!r}")
