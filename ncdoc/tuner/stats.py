"""The statistics behind a recommendation, without scipy: paired t bounds, Wilcoxon's signed-rank
test, and the shrunk estimate that keeps the luckiest of many noisy trials from looking best.

Effects are log-ratios (0.05 ~ +5 %), one per interleaved round.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def _ibeta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in (0.5, 1), by bisection on the CDF."""
    def cdf(t: float) -> float:
        return 1.0 - 0.5 * _ibeta(df / 2.0, 0.5, df / (df + t * t))
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2.0


def paired_t(diffs: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """(mean, sd, one-sided lower confidence bound) of paired differences."""
    n = len(diffs)
    if n == 0:
        return 0.0, 0.0, float("-inf")
    mean = statistics.fmean(diffs)
    if n == 1:
        return mean, float("inf"), float("-inf")
    sd = statistics.stdev(diffs)
    return mean, sd, mean - t_quantile(confidence, n - 1) * sd / math.sqrt(n)


def wilcoxon_greater(diffs: Sequence[float], shift: float = 0.0) -> float:
    """One-sided p-value of Wilcoxon's signed-rank test that the differences are centred above
    `shift` (exact: the null distribution of the rank sum by dynamic programming; zeros dropped,
    ties given mid-ranks). Robust where one odd round would carry a t-test."""
    d = [x - shift for x in diffs if abs(x - shift) > 1e-12]
    n = len(d)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(abs(d[order[j + 1]]) - abs(d[order[i]])) < 1e-12:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    w = sum(r for r, x in zip(ranks, d) if x > 0)
    # Counting in half-ranks keeps mid-ranks integral: counts[s] = sign patterns with rank sum s/2.
    doubled = [int(round(2 * r)) for r in ranks]
    counts = [1] + [0] * sum(doubled)
    for r in doubled:
        for s in range(len(counts) - 1, r - 1, -1):
            counts[s] += counts[s - r]
    target = int(round(2 * w))
    return sum(counts[target:]) / 2 ** n


def shrunk(means: Sequence[float], counts: Sequence[int], noise: float) -> list[float]:
    """Empirical-Bayes estimates of each trial's true score from its mean of `counts` noisy runs:
    pulled towards the average trial by how little its own runs say (noise^2 / n against the spread
    the trials really have), so the top of many one-run trials is not taken at face value."""
    if not means:
        return []
    prior = statistics.fmean(means)
    var_noise = [noise * noise / max(1, n) for n in counts]
    spread = statistics.pvariance(means) if len(means) > 1 else 0.0
    tau2 = max(1e-8, spread - statistics.fmean(var_noise))
    return [prior + (m - prior) * tau2 / (tau2 + v) for m, v in zip(means, var_noise)]
