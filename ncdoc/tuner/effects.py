"""What screening says about one variable: the effect of each of its values, read together.

Screening runs each value alone, once or twice, so a single value's score carries the full noise
of a run; effects an expert cares about (a bigger buffer, +1 %) are the size of that noise. Values
on an ordered scale (queue pairs, buffer and chunk sizes, channel counts: numbers, compared in
octaves) are not unrelated guesses: a buffer of 16 MiB behaves much like one of 8 MiB. The values
of such a variable are read as one smooth curve through their scores (a Gaussian process along
log2 of the value, its scale and wiggle chosen by the likelihood of what was measured), so each
value's estimate leans on its neighbours' runs; values without an order (a traffic class, a GDR
level) are shrunk towards NCCL's default independently. Pure Python: a handful of values per
variable, no numpy needed.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable, Sequence

from ncdoc.tuner.space import UNSET

# Prior scales tried (times the run-to-run noise) and curve lengths (octaves) tried.
_SCALES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
_LENGTHS = (0.75, 1.5, 3.0)


def _cholesky(a: list[list[float]]) -> list[list[float]] | None:
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                if s <= 0.0:
                    return None
                low[i][i] = math.sqrt(s)
            else:
                low[i][j] = s / low[j][j]
    return low


def _solve(low: list[list[float]], b: Sequence[float]) -> list[float]:
    """(L L^T)^-1 b."""
    n = len(b)
    y = [0.0] * n
    for i in range(n):
        y[i] = (b[i] - sum(low[i][k] * y[k] for k in range(i))) / low[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return x


def smoothed(levels: Sequence[float | None], means: Sequence[float], runs: Sequence[int], noise: float,
             prior: float) -> list[float]:
    """Posterior mean of each level's score.

    `levels`: log2 of each value (all numbers: an ordered variable), or None (no order);
    `means`, `runs`: each level's mean score and how many runs it rests on; `noise`: the spread of
    one run; `prior`: what a value is expected to score before it is measured (NCCL's default)."""
    n = len(means)
    if n == 0:
        return []
    ordered = all(x is not None for x in levels)
    noise2 = max(noise, 1e-6) ** 2
    resid = [m - prior for m in means]
    best: tuple[float, list[float]] | None = None
    for scale in _SCALES:
        tau2 = (scale * max(noise, 1e-6)) ** 2
        for length in (_LENGTHS if ordered else (None,)):
            def k(i: int, j: int) -> float:
                if length is None:
                    return tau2 if i == j else 0.0
                d = float(levels[i]) - float(levels[j])       # type: ignore[arg-type]
                return tau2 * math.exp(-d * d / (2.0 * length * length))
            prior_cov = [[k(i, j) for j in range(n)] for i in range(n)]
            cov = [[prior_cov[i][j] + (noise2 / max(1, runs[i]) if i == j else 0.0) for j in range(n)]
                   for i in range(n)]
            low = _cholesky(cov)
            if low is None:
                continue
            alpha = _solve(low, resid)
            loglik = -0.5 * sum(r * a for r, a in zip(resid, alpha)) - sum(math.log(low[i][i]) for i in range(n))
            if best is None or loglik > best[0]:
                best = (loglik, [prior + sum(prior_cov[i][j] * alpha[j] for j in range(n)) for i in range(n)])
    return best[1] if best else list(means)


def alone(records: Iterable[Any]) -> tuple[list[float], dict[str, dict[str, list[float]]]]:
    """The runs of NCCL's defaults, and per variable and value the runs of that value alone: every
    known-good start or screening trial (ncdoc.tuner.study.TrialRecord) that changed one variable."""
    ref: list[float] = []
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if r.stage not in ("screen", "start") or r.duplicate_of is not None or r.state not in ("complete", "stopped") \
                or not r.scores:
            continue
        changed = [(k, v) for k, v in r.params.items() if v != UNSET]
        if not changed:
            ref.extend(r.scores)
        elif len(changed) == 1:
            out.setdefault(changed[0][0], {}).setdefault(changed[0][1], []).extend(r.scores)
    return ref, out


def screen_effects(records: Iterable[Any], space: Any, noise: float) -> dict[str, dict[str, float]]:
    """Per variable screened alone, each value's estimated effect against NCCL's defaults (log),
    every value of the variable read together (`smoothed`); unset is 0."""
    ref, data = alone(records)
    if not ref:
        return {}
    prior = statistics.fmean(ref)
    out: dict[str, dict[str, float]] = {}
    for var in space.variables:
        got = data.get(var.name)
        if var.when or not got:
            continue
        values = [UNSET] + [v for v in var.values if v in got]
        means = [prior] + [statistics.fmean(got[v]) for v in values[1:]]
        runs = [len(ref)] + [len(got[v]) for v in values[1:]]
        nums = [space.numeric(var.name, v) for v in values]
        levels = [math.log2(x) if x is not None and x > 0 else None for x in nums]
        if any(x is None for x in levels):
            levels = [None] * len(values)
        est = smoothed(levels, means, runs, noise, prior)
        out[var.name] = {v: e - est[0] for v, e in zip(values, est)}
    return out


def effect_scales(effects: dict[str, dict[str, float]], noise: float) -> dict[str, float]:
    """How far each screened variable moves the score (root mean square of its values' effects), at
    least a quarter of the noise: the prior spread of that variable's effect in ncdoc.tuner.model."""
    return {name: max(noise / 4, math.sqrt(statistics.fmean(e * e for v, e in eff.items() if v != UNSET)))
            for name, eff in effects.items() if len(eff) > 1}
