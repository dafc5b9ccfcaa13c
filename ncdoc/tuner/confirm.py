"""Before anything is recommended: interleaved re-measurement, noise, and the minimal env.

A study's best trial is partly luck: among many noisy trials, the maximum is biased upward.
So the top candidates are measured again against the baseline, interleaved in rounds
(A B0 B1 ... A B0 B1 ...) in one job on one node group, so that drift hits every side alike.
The gain is the mean of the paired log-ratios; a change is recommended only when the gain's
lower confidence bound (one-sided 95 %, Bonferroni-corrected for the number of candidates, so
that picking the best of k does not pick luck) is above the noise floor, --min-gain. The
baseline's own run-to-run spread is reported with it.

Then the minimal env: each recommended variable is reverted in turn and measured against the
current set, interleaved; it stays only when removing it costs something beyond noise.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ncdoc.tuner.backends import Measurement
from ncdoc.tuner.dispatch import Job, Step, env_tuple
from ncdoc.tuner.profiles import Profile
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.study import summarise

REPEAT_BASE = 1000      # repeat indexes of confirmation runs: fresh noise, not the study's
CONFIDENCE = 0.95


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


def loss_pct(cost: float) -> float:
    """A log-ratio cost as the percentage lost: 0.5 -> 39.3 (% of the score)."""
    return 100.0 * (1.0 - math.exp(-cost))


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in (0.5, 1), by bisection on the CDF (no scipy needed)."""
    def cdf(t: float) -> float:
        return 1.0 - 0.5 * _ibeta(df / 2.0, 0.5, df / (df + t * t))
    lo, hi = 0.0, 1e4
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class Comparison:
    """B against A, from n interleaved pairs. Effects are log-ratios (0.05 ~ +5 %)."""
    label: str
    env_a: dict[str, str]
    env_b: dict[str, str]
    n: int
    gain: float                              # mean of log(score B) - log(score A)
    sd: float                                # of the paired differences
    lcb: float                               # one-sided lower confidence bound of the gain
    noise: float                             # run-to-run spread of A: sd of its log scores
    buckets: dict[str, tuple[float, float]]  # per bucket: (mean log-ratio, lower bound)
    sizes_a: dict[str, list] = field(default_factory=dict)
    sizes_b: dict[str, list] = field(default_factory=dict)
    failed: str = ""

    @property
    def ucb(self) -> float:
        return self.gain + (self.gain - self.lcb)

    def pct(self, x: float) -> float:
        return 100.0 * (math.exp(x) - 1.0)


def _stats(diffs: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    n = len(diffs)
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs) if n > 1 else float("inf")
    lcb = mean - t_quantile(confidence, n - 1) * sd / math.sqrt(n) if n > 1 else float("-inf")
    return mean, sd, lcb


def interleaved_job(key: str, envs: Sequence[tuple[str, Mapping[str, str]]], rounds: int, workload: Any,
                    timeout_s: float, offset: int = 0) -> Job:
    """Rounds of one run per labelled env, in the same order each round: A B A B ... or A B0 B1 A B0 B1 ..."""
    steps = []
    for i in range(rounds):
        r = REPEAT_BASE + offset + i
        steps += [Step(label, env_tuple(env), r) for label, env in envs]
    return Job(key, tuple(steps), workload, timeout_s, keep_going=True)


def compare(label: str, result: Any, profile: Profile, baseline_buckets: Mapping[str, float],
            env_a: Mapping[str, str], env_b: Mapping[str, str], a: str = "A", b: str = "B",
            confidence: float = CONFIDENCE) -> Comparison:
    """Steps `b` against steps `a` of an interleaved job, paired by round (a failed run fails the comparison)."""
    runs_a = [m for lab, m in result.measurements if lab == a]
    runs_b = [m for lab, m in result.measurements if lab == b]
    bad = [r for lab, r in getattr(result, "step_failures", ()) if lab in (a, b)]
    if not result.ok or bad or not runs_a or len(runs_a) != len(runs_b):
        why = bad[0] if bad else (result.reason or "no runs")
        return Comparison(label, dict(env_a), dict(env_b), 0, 0.0, 0.0, float("-inf"), 0.0, {}, failed=why)

    def score(m: Measurement) -> tuple[float, dict[str, float]]:
        buckets, _, _ = summarise(profile, [m], None)
        return profile.log_score(buckets, baseline_buckets), buckets

    sa, sb = [score(m) for m in runs_a], [score(m) for m in runs_b]
    mean, sd, lcb = _stats([y[0] - x[0] for x, y in zip(sa, sb)], confidence)
    noise = statistics.stdev(x[0] for x in sa) if len(sa) > 1 else 0.0
    per_bucket = {}
    for bk in profile.buckets:
        diffs = [math.log(max(y[1][bk.key], 1e-9)) - math.log(max(x[1][bk.key], 1e-9)) for x, y in zip(sa, sb)]
        bm, _, bl = _stats(diffs)
        per_bucket[bk.key] = (bm, bl)
    _, sizes_a, _ = summarise(profile, runs_a, None)
    _, sizes_b, _ = summarise(profile, runs_b, None)
    return Comparison(label, dict(env_a), dict(env_b), len(sa), mean, sd, lcb, noise, per_bucket,
                      sizes_a, sizes_b)


@dataclass(frozen=True)
class Verdict:
    params: dict[str, str]                   # the candidate's searched values
    comparison: Comparison
    noise_floor: float
    recommended: bool
    why: str


def noise_floor(cmp: Comparison, min_gain: float) -> float:
    """The smallest gain worth recommending (log-ratio). Noise is in the lower bound already:
    it widens with the spread of the paired differences and shrinks with more pairs."""
    return math.log1p(min_gain)


def confirm(run_jobs: Callable[[list[Job]], dict], candidates: Sequence[Mapping[str, str]], *,
            base_env: Mapping[str, str], profile: Profile, baseline_buckets: Mapping[str, float], pairs: int,
            timeout_s: float, min_gain: float) -> list[Verdict]:
    """Re-measure the candidates (searched params) against the baseline in one interleaved job:
    rounds of A B0 B1 ..., so every candidate is paired with the same baseline runs."""
    workload = tuple((c, tuple(s)) for c, s in profile.workload())
    envs = [(f"B{i}", apply_params(base_env, p)) for i, p in enumerate(candidates)]
    res = run_jobs([interleaved_job("confirm", [("A", base_env)] + envs, pairs, workload, timeout_s)])["confirm"]
    conf = 1.0 - (1.0 - CONFIDENCE) / max(1, len(candidates))       # Bonferroni over the candidates
    out = []
    for params, (lab, env_b) in zip(candidates, envs):
        cmp = compare(f"confirm-{lab}", res, profile, baseline_buckets, base_env, env_b, b=lab, confidence=conf)
        floor = noise_floor(cmp, min_gain)
        bound = f"{100 * conf:.1f} % lower bound {cmp.pct(cmp.lcb):+.1f} %, {cmp.n} rounds"
        if cmp.failed:
            ok, why = False, f"re-measurement failed: {cmp.failed}"
        elif cmp.lcb > floor:
            ok, why = True, f"gain {cmp.pct(cmp.gain):+.1f} % ({bound}) clears the floor {cmp.pct(floor):.1f} %"
        else:
            ok, why = False, f"gain {cmp.pct(cmp.gain):+.1f} % ({bound}) does not clear the floor {cmp.pct(floor):.1f} %"
        out.append(Verdict(dict(params), cmp, floor, ok, why))
    return out


@dataclass(frozen=True)
class VariableEffect:
    name: str
    value: str
    kept: bool
    cost: float            # mean log loss when the variable is reverted (> 0: it matters)
    sd: float
    lcb: float
    n: int
    buckets: dict[str, tuple[float, float]]
    why: str


def minimal_env(run_jobs: Callable[[list[Job]], dict], params: Mapping[str, str], *, space: SearchSpace,
                base_env: Mapping[str, str], profile: Profile, baseline_buckets: Mapping[str, float], pairs: int,
                timeout_s: float, min_gain: float, log: Callable[[str], None] | None = None
                ) -> tuple[dict[str, str], list[VariableEffect]]:
    """Drop each changed variable in turn; keep it only when dropping it measurably costs."""
    log = log or (lambda msg: None)
    workload = tuple((c, tuple(s)) for c, s in profile.workload())
    current = {k: v for k, v in params.items() if base_env.get(k, UNSET) != v and not (v == UNSET and k not in base_env)}
    effects: list[VariableEffect] = []
    for n, name in enumerate(sorted(current)):
        reduced = dict(current)
        reduced[name] = base_env.get(name, UNSET)      # back to what jobs run with today
        if space.violations({**reduced}):
            effects.append(VariableEffect(name, current[name], True, 0.0, 0.0, 0.0, 0, {},
                                          "kept: reverting it alone breaks a constraint of the space"))
            continue
        env_full, env_red = apply_params(base_env, current), apply_params(base_env, reduced)
        key = f"minimal-{name}"
        res = run_jobs([interleaved_job(key, [("A", env_full), ("B", env_red)], pairs, workload, timeout_s,
                                        offset=5000 + 100 * n)])
        # Bonferroni over the variables tested: with many of them, one would look useful by luck.
        conf = 1.0 - (1.0 - CONFIDENCE) / max(1, len(current))
        cmp = compare(key, res[key], profile, baseline_buckets, env_full, env_red, confidence=conf)
        cost, lcb = -cmp.gain, -cmp.ucb
        matters = not cmp.failed and lcb > 0 and cost > math.log1p(min_gain) / 2
        if cmp.failed:
            why = f"kept: the run without it failed ({cmp.failed})"
        elif matters:
            why = (f"kept: without it the score drops {loss_pct(cost):.1f} % "
                   f"(at least {loss_pct(lcb):.1f} % at {100 * conf:.1f} % confidence)")
        else:
            why = f"dropped: without it the score changes {cmp.pct(cmp.gain):+.1f} %, within noise"
        kept = matters or bool(cmp.failed)
        buckets = {k: (-m, -(m + (m - l))) for k, (m, l) in cmp.buckets.items()}
        effects.append(VariableEffect(name, current[name], kept, cost, cmp.sd, lcb, cmp.n, buckets, why))
        log(f"minimal env: {name}={current[name]}: {why}")
        if not kept:
            current = reduced
    final = {k: v for k, v in current.items() if base_env.get(k, UNSET) != v and not (v == UNSET and k not in base_env)}
    return final, effects
