"""Early stopping with the repeat as the step: an Optuna pruner that stops a trial after a run
when it is clearly worse than the incumbent, by more than the noise of that many runs allows."""

from __future__ import annotations

import math
from typing import Any, Callable

import optuna

Z = 3.0          # "clearly": three standard errors below the incumbent's estimate


class RepeatPruner(optuna.pruners.BasePruner):
    """`best()` -> (incumbent's shrunk estimate or None, noise): the study keeps both in memory."""

    def __init__(self, best: Callable[[], tuple[float | None, float]]):
        self.best = best

    def prune(self, study: Any, trial: Any) -> bool:
        step = trial.last_step
        if step is None:
            return False
        best, noise = self.best()
        if best is None or best <= 0:
            return False                          # nothing better than the baseline yet to fall short of
        return trial.intermediate_values[step] < best - Z * noise / math.sqrt(step + 1)
