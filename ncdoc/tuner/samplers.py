"""The Optuna samplers a study can use (--sampler), checked before any cluster starts."""

from __future__ import annotations

from typing import Any

from ncdoc.errors import UsageError
from ncdoc.tuner.space import SearchSpace

SAMPLERS = ("tpe", "random", "grid", "cmaes", "qmc")
GRID_MAX = 20000


def check_sampler(name: str) -> None:
    """Raise UsageError now (before any cluster starts) for an unknown or uninstalled sampler."""
    if name not in SAMPLERS:
        raise UsageError(f"unknown sampler {name!r} (expected one of {', '.join(SAMPLERS)})")
    need = {"cmaes": ("cmaes", "the 'cmaes' package"), "qmc": ("scipy", "scipy")}.get(name)
    if need:
        try:
            __import__(need[0])
        except ImportError:
            raise UsageError(f"sampler {name} is not available: it needs {need[1]}, which is not installed") from None


def make_sampler(name: str, seed: int, space: SearchSpace, startup: int) -> Any:
    import optuna

    if name == "tpe":
        import warnings
        with warnings.catch_warnings():         # `group` is marked experimental; it is what conditional spaces need
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, group=True,
                                              constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        if space.size > GRID_MAX:
            raise UsageError(f"the search space has {space.size} points; grid search is for spaces up to "
                             f"{GRID_MAX} (use --sampler tpe or a smaller --space)")
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    check_sampler(name)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    return optuna.samplers.QMCSampler(seed=seed)
