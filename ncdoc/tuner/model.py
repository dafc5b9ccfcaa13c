"""A model of a study's measurements, for estimates that pool what related configurations measured.

A configuration's own mean rests on one to four noisy runs, and the effects a tuner is after near
the optimum (a bigger buffer, a QP count one step off) are the size of that noise: ranking by own
means crowns the luckiest of several near-equal points. But the points a study measures are
related: most differ from the best point in one variable, and most variables, most of the time,
add up. The model is a Gaussian process over configurations whose covariance is

    s_add^2 * (1/d) * sum_v k_v(a_v, b_v)  +  s_int^2 * prod_v (rho + (1 - rho) * k_v(a_v, b_v))

with k_v = 1 for the same value and, for values that are numbers (QPs, sizes, counts), a smooth
decay in octaves between them (a 16 MiB buffer is much like an 8 MiB one), else 0. The first term
is a sum of per-variable effects (each value's effect is learned from every configuration that
has it); the second lets configurations differ from the sum, more alike the fewer variables they
differ in (interactions: adaptive routing makes QPs moot). The scales are chosen by the marginal
likelihood of the measurements, over a small grid; the mean is estimated with them. With
s_add = 0 and rho = 0 the model is the empirical-Bayes shrinkage of each mean towards the average
(ncdoc.tuner.stats.shrunk).

numpy is imported here only (Optuna depends on it): a study of 50 trials solves 50x50 systems.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ncdoc.tuner.space import SearchSpace

# Grid of (octave length, multiplier of the per-variable scales, interaction variance / data variance, rho).
_GRID = tuple((length, mult, inter, rho) for length in (1.0, 2.0) for mult in (0.25, 0.5, 1.0, 2.0)
              for inter in (0.03, 0.1, 0.3, 1.0) for rho in (0.3, 0.85))


def _encoding(space: SearchSpace) -> list[tuple[str, dict[str, float] | None]]:
    """Per variable, log2 of each value where every value (unset: NCCL's default) is a number."""
    out = []
    for var in space.variables:
        nums: dict[str, float] | None = {}
        for value in var.values:
            x = space.numeric(var.name, value)
            if x is None or x <= 0:
                nums = None
                break
            nums[value] = math.log2(x)            # type: ignore[index]
        out.append((var.name, nums))
    return out


class Model:
    """Posterior of the log-score at any configuration of `space`, given measured means."""

    def __init__(self, space: SearchSpace, configs: Sequence[Mapping[str, str]], means: Sequence[float],
                 runs: Sequence[int], noise: float, scales: Mapping[str, float] | None = None):
        """`scales`: the prior spread (log) of each variable's effects, where screening measured it;
        the others get the largest of them."""
        import numpy as np

        self._np = np
        self.enc = _encoding(space)
        self.noise = noise
        y = np.asarray(means, dtype=float)
        nvar = self._noise_var(runs)
        scale = max(float(np.var(y)) if len(y) > 1 else 0.0, float(nvar.mean()) if len(y) else 1e-6, 1e-8)
        # Each variable's share of the additive variance: its screening spread, else (none known) equal.
        known = [max(0.0, float(v)) for v in (scales or {}).values()]
        fallback = max(known) if known else None
        w = [(scales or {}).get(name, fallback) for name, _ in self.enc]
        self.weights = np.asarray([x * x if x is not None else scale / max(1, len(self.enc)) for x in w])
        configs = [dict(c) for c in configs]
        parts = {length: self._parts(configs, configs, length) for length in {g[0] for g in _GRID}}
        best = None
        for length, mult, inter, rho in _GRID:
            fit = self._condition(parts[length], y, nvar, mult, inter * scale, rho)
            if fit is not None and (best is None or fit[0] > best[0]):
                best = (fit[0], (length, mult, inter * scale, rho))
        if best is None:
            raise ValueError("no covariance of the grid fits these measurements")
        self.length, self.s_add, self.s_int, self.rho = best[1]
        self._set(configs, y, nvar, parts[self.length])

    def condition(self, configs: Sequence[Mapping[str, str]], means: Sequence[float], runs: Sequence[int]) -> "Model":
        """The same covariance, given other measurements (a replay of the study up to some trial)."""
        other = object.__new__(Model)
        other.__dict__.update({k: v for k, v in self.__dict__.items()})
        configs = [dict(c) for c in configs]
        other._set(configs, self._np.asarray(means, dtype=float), self._noise_var(runs),
                   self._parts(configs, configs, self.length))
        return other

    def _noise_var(self, runs: Sequence[int]) -> Any:
        return self._np.asarray([max(self.noise, 1e-6) ** 2 / max(1, n) for n in runs])

    def _set(self, configs: list[dict[str, str]], y: Any, nvar: Any, parts: Any) -> None:
        fit = self._condition(parts, y, nvar, self.s_add, self.s_int, self.rho)
        if fit is None:
            raise ValueError("the covariance does not fit these measurements")
        _, self.mu, self.alpha, self.low = fit
        self.configs = configs

    def _condition(self, parts: Any, y: Any, nvar: Any, s_add: float, s_int: float,
                   rho: float) -> tuple[float, float, Any, Any] | None:
        """(log marginal likelihood, mean, weights, Cholesky factor), the mean estimated with them."""
        np = self._np
        k = self._gram(parts, s_add, s_int, rho)
        try:
            low = np.linalg.cholesky(k + np.diag(nvar))
        except np.linalg.LinAlgError:
            return None
        one = np.ones(len(y))
        k1 = self._solve(low, one)
        mu = float(one @ self._solve(low, y)) / float(one @ k1)
        alpha = self._solve(low, y - mu)
        loglik = -0.5 * float((y - mu) @ alpha) - float(np.log(np.diag(low)).sum()) - 0.5 * math.log(float(one @ k1))
        return loglik, mu, alpha, low

    def _solve(self, low: Any, b: Any) -> Any:
        np = self._np
        return np.linalg.solve(low.T, np.linalg.solve(low, b))

    def _parts(self, a: Sequence[Mapping[str, str]], b: Sequence[Mapping[str, str]], length: float) -> Any:
        """Per-variable similarity of each pair: an (len(a), len(b), d) array in [0, 1]."""
        np = self._np
        out = np.zeros((len(a), len(b), len(self.enc)))
        for j, (name, nums) in enumerate(self.enc):
            if nums is not None:
                x = np.asarray([nums[c[name]] for c in a])
                z = np.asarray([nums[c[name]] for c in b])
                out[:, :, j] = np.exp(-(x[:, None] - z[None, :]) ** 2 / (2.0 * length * length))
            else:
                x = [c[name] for c in a]
                z = [c[name] for c in b]
                out[:, :, j] = np.asarray([[1.0 if p == q else 0.0 for q in z] for p in x])
        return out

    def _gram(self, parts: Any, s_add: float, s_int: float, rho: float) -> Any:
        np = self._np
        return s_add * (parts * self.weights).sum(axis=2) + s_int * np.prod(rho + (1.0 - rho) * parts, axis=2)

    def predict(self, configs: Sequence[Mapping[str, str]]) -> tuple[list[float], list[float]]:
        """Posterior mean and standard deviation of each configuration's log-score."""
        np = self._np
        kq = self._gram(self._parts(configs, self.configs, self.length), self.s_add, self.s_int, self.rho)
        mean = self.mu + kq @ self.alpha
        v = np.linalg.solve(self.low, kq.T)
        var = (self.s_add * float(self.weights.sum()) + self.s_int) - (v * v).sum(axis=0)
        return [float(m) for m in mean], [math.sqrt(max(0.0, float(x))) for x in var]

    def difference(self, a: Mapping[str, str], b: Mapping[str, str]) -> tuple[float, float]:
        """Posterior mean and standard deviation of score(a) - score(b)."""
        np = self._np
        pair = [dict(a), dict(b)]
        kq = self._gram(self._parts(pair, self.configs, self.length), self.s_add, self.s_int, self.rho)
        kab = self._gram(self._parts(pair, pair, self.length), self.s_add, self.s_int, self.rho)
        mean = self.mu + kq @ self.alpha
        v = np.linalg.solve(self.low, kq.T)
        cov = kab - v.T @ v
        var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
        return float(mean[0] - mean[1]), math.sqrt(max(0.0, var))
