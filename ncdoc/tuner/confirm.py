"""Before anything is recommended: interleaved re-measurement, two tests, leave-one-out, the guard sweep.

A study's best trial is partly luck: among many noisy trials, the maximum is biased upward. So
candidates are measured again against the baseline in one job on one node group, in rounds
(each round runs every side once, in an order shuffled per round, so neither drift nor position
favours a side). A side's gain is the mean of its paired log-ratios against the baseline; it is
accepted only when both the one-sided t bound (Bonferroni-corrected over the candidates) and
Wilcoxon's signed-rank test (on the pairs, against the floor --min-gain) clear the floor: one odd
round cannot carry a verdict.

Then leave-one-out in the final environment: rounds of [all, all but v1, all but v2, ...]; a
variable whose removal costs nothing beyond noise is dropped, and it is measured again until
nothing drops, so the figures EXPLAIN.md gives per variable come from the environment it
recommends. Last, the guard sweep: the final env (and its tuner table) against the baseline on
the profile's workload, small sizes and every collective the job runs; a regression beyond noise
at any size rejects it.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ncdoc.tuner.backends import Measurement
from ncdoc.tuner.dispatch import Job, Step, env_tuple
from ncdoc.tuner.profiles import Profile
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.stats import paired_t, wilcoxon_greater
from ncdoc.tuner.study import summarise

REPEAT_BASE = 1000      # repeat indexes of confirmation runs: fresh noise, not the study's
CONFIDENCE = 0.95
GUARD_TOLERANCE = 0.02  # a size is a regression when it is slower by more than this, beyond noise


def rounds_for(pairs: int, tests: int) -> int:
    """At least `pairs` rounds, and enough for Wilcoxon's test to reach 95 % over `tests` Bonferroni-
    corrected comparisons at all (its smallest one-sided p with n rounds is 2^-n)."""
    return max(pairs, math.floor(math.log2(max(1, tests) / (1.0 - CONFIDENCE))) + 1)


def loss_pct(cost: float) -> float:
    """A log-ratio cost as the percentage lost: 0.5 -> 39.3 (% of the score)."""
    return 100.0 * (1.0 - math.exp(-cost))


def pct(x: float) -> float:
    return 100.0 * (math.exp(x) - 1.0)


@dataclass(frozen=True)
class Side:
    label: str
    env: tuple[tuple[str, str], ...]
    table: tuple = ()


def interleaved_job(key: str, sides: Sequence[Side], rounds: int, workload: Any, timeout_s: float,
                    offset: int = 0, seed: int = 0) -> Job:
    """`rounds` rounds of one run per side, each round in its own shuffled order."""
    rng = random.Random(f"{key}:{seed}:{offset}")
    steps = []
    for i in range(rounds):
        r = REPEAT_BASE + offset + i
        order = list(sides)
        rng.shuffle(order)
        steps += [Step(s.label, s.env, r, s.table) for s in order]
    return Job(key, tuple(steps), workload, timeout_s, keep_going=True)


@dataclass(frozen=True)
class Comparison:
    """B against A, from n paired rounds. Effects are log-ratios (0.05 ~ +5 %)."""
    label: str
    n: int
    gain: float                              # mean of log(score B) - log(score A)
    sd: float
    lcb: float                               # one-sided t lower bound
    p_wilcoxon: float                        # one-sided p that the gain is above the floor
    noise: float                             # run-to-run spread of A's log score
    buckets: dict[str, tuple[float, float]]  # per bucket: (mean log-ratio, t lower bound)
    sizes_a: dict[str, list] = field(default_factory=dict)
    sizes_b: dict[str, list] = field(default_factory=dict)
    regressions: tuple[str, ...] = ()        # sizes where B is slower beyond noise
    failed: str = ""

    @property
    def ucb(self) -> float:
        return self.gain + (self.gain - self.lcb)

    def pct(self, x: float) -> float:
        return pct(x)

    def clears(self, floor: float, alpha: float) -> bool:
        return not self.failed and self.lcb > floor and self.p_wilcoxon < alpha


def compare(label: str, result: Any, profile: Profile, baseline_buckets: Mapping[str, float], a: str, b: str,
            *, confidence: float = CONFIDENCE, floor: float = 0.0, guard: Any = None) -> Comparison:
    """Side `b` against side `a` of an interleaved job, paired by round (a failed run fails it).
    With `guard` (a workload), every size of it is checked for a regression of `b`."""
    bad = [r for lab, r in getattr(result, "step_failures", ()) if lab in (a, b)]
    runs_a, runs_b = _pairs(result, a, b)
    if not result.ok or bad or not runs_a:
        return Comparison(label, 0, 0.0, 0.0, float("-inf"), 1.0, 0.0, {}, failed=bad[0] if bad else
                          (result.reason or "no runs"))

    def score(m: Measurement) -> tuple[float, dict[str, float]]:
        buckets, _, _ = summarise(profile, [m], None)
        return profile.log_score(buckets, baseline_buckets), buckets

    sa, sb = [score(m) for m in runs_a], [score(m) for m in runs_b]
    diffs = [y[0] - x[0] for x, y in zip(sa, sb)]
    mean, sd, lcb = paired_t(diffs, confidence)
    noise = statistics.stdev(x[0] for x in sa) if len(sa) > 1 else 0.0
    per_bucket = {}
    for bk in profile.buckets:
        d = [math.log(max(y[1][bk.key], 1e-9)) - math.log(max(x[1][bk.key], 1e-9)) for x, y in zip(sa, sb)]
        bm, _, bl = paired_t(d, confidence)
        per_bucket[bk.key] = (bm, bl)
    regressions = tuple(guard_regressions(runs_a, runs_b, guard, confidence)) if guard else ()
    _, sizes_a, _ = summarise(profile, runs_a, None, guard)
    _, sizes_b, _ = summarise(profile, runs_b, None, guard)
    return Comparison(label, len(sa), mean, sd, lcb, wilcoxon_greater(diffs, floor), noise, per_bucket,
                      sizes_a, sizes_b, regressions)


def _pairs(result: Any, a: str, b: str) -> tuple[list[Measurement], list[Measurement]]:
    """A's and B's runs of the same rounds (a round where either failed is left out)."""
    by_round: dict[int, dict[str, Measurement]] = {}
    for (lab, m), r in zip(result.measurements, result.indexes):
        by_round.setdefault(r, {})[lab] = m
    runs = [(v[a], v[b]) for _, v in sorted(by_round.items()) if a in v and b in v]
    return [x for x, _ in runs], [y for _, y in runs]


def guard_regressions(runs_a: Sequence[Measurement], runs_b: Sequence[Measurement], workload: Any,
                      confidence: float = CONFIDENCE) -> list[str]:
    """Sizes where B is slower than A by more than GUARD_TOLERANCE, confidently (paired by round;
    Bonferroni over the sizes, so that many sizes do not make noise look like a regression)."""
    out = []
    confidence = 1.0 - (1.0 - confidence) / max(1, sum(len(s) for _, s in workload))
    for collective, sizes in workload:
        for s in sizes:
            d = []
            for ma, mb in zip(runs_a, runs_b):
                ra = next((r.busbw for r in ma.results(collective) if r.size == s), None)
                rb = next((r.busbw for r in mb.results(collective) if r.size == s), None)
                if ra and rb and ra > 0 and rb > 0:
                    d.append(math.log(rb) - math.log(ra))
            if len(d) < 2:
                continue
            mean, sd, lcb = paired_t(d, confidence)
            ucb = mean + (mean - lcb)
            if mean < -math.log1p(GUARD_TOLERANCE) and ucb < 0:
                out.append(f"{collective} {_size(s)}: {pct(mean):+.1f} %")
    return out


def _size(n: int) -> str:
    for unit, mult in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"


@dataclass(frozen=True)
class Verdict:
    params: dict[str, str]                   # the candidate's searched values
    comparison: Comparison
    noise_floor: float
    recommended: bool
    why: str


def _bounds(cmp: Comparison, conf: float) -> str:
    return (f"{100 * conf:.1f} % lower bound {pct(cmp.lcb):+.1f} %, Wilcoxon p={cmp.p_wilcoxon:.3f}, "
            f"{cmp.n} rounds")


def confirm(run_jobs: Callable[[list[Job]], dict], candidates: Sequence[Mapping[str, str]], *,
            trial_base: Mapping[str, str], base_env: Mapping[str, str], profile: Profile,
            baseline_buckets: Mapping[str, float], pairs: int, timeout_s: float, min_gain: float,
            seed: int = 0) -> list[Verdict]:
    """Re-measure the candidates against the baseline in one job: rounds of A B0 B1 ..., shuffled,
    over the guard workload too, so a candidate that slows any size is rejected here."""
    sides = [Side("A", env_tuple(base_env))] + [Side(f"B{i}", env_tuple(apply_params(trial_base, p)))
                                                 for i, p in enumerate(candidates)]
    job = final_job(sides, profile, rounds_for(pairs, len(candidates)), timeout_s, key="confirm", offset=0, seed=seed)
    res = run_jobs([job])["confirm"]
    conf = 1.0 - (1.0 - CONFIDENCE) / max(1, len(candidates))       # Bonferroni over the candidates
    floor = math.log1p(min_gain)
    out = []
    for params, side in zip(candidates, sides[1:]):
        cmp = compare(f"confirm-{side.label}", res, profile, baseline_buckets, "A", side.label, confidence=conf,
                      floor=floor, guard=job.workload)
        if cmp.failed:
            ok, why = False, f"re-measurement failed: {cmp.failed}"
        elif cmp.regressions:
            ok, why = False, (f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}), but slower beyond noise at "
                              + "; ".join(cmp.regressions))
        elif cmp.clears(floor, 1.0 - conf):
            ok, why = True, f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}) clears the floor {pct(floor):.1f} %"
        else:
            ok, why = False, (f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}) does not clear the floor "
                              f"{pct(floor):.1f} %")
        out.append(Verdict(dict(params), cmp, floor, ok, why))
    return out


@dataclass(frozen=True)
class VariableEffect:
    name: str
    value: str
    kept: bool
    cost: float            # mean log loss when the variable is reverted (> 0: it matters)
    sd: float
    lcb: float             # lower bound of the cost
    n: int
    buckets: dict[str, tuple[float, float]]
    why: str
    final: bool = False    # measured in the environment that is recommended


def changes(params: Mapping[str, str], trial_base: Mapping[str, str]) -> dict[str, str]:
    """The searched values that differ from what trials start from."""
    return {k: v for k, v in params.items() if trial_base.get(k, UNSET) != v and not (v == UNSET and k not in trial_base)}


def leave_one_out(run_jobs: Callable[[list[Job]], dict], params: Mapping[str, str], *, space: SearchSpace,
                  trial_base: Mapping[str, str], profile: Profile, baseline_buckets: Mapping[str, float],
                  pairs: int, timeout_s: float, min_gain: float, log: Callable[[str], None] | None = None,
                  seed: int = 0) -> tuple[dict[str, str], list[VariableEffect], int]:
    """Drop every variable whose removal costs nothing beyond noise; repeat in the reduced env until
    nothing drops. Returns the final changes, the effects (the last round's are in the final env)
    and how many rounds of leave-one-out ran."""
    log = log or (lambda msg: None)
    workload = tuple((c, tuple(s)) for c, s in profile.workload())
    current = changes(params, trial_base)
    history: list[VariableEffect] = []
    passes = 0
    while len(current) > 1:
        passes += 1
        full = apply_params(trial_base, current)
        sides = [Side("all", env_tuple(full))]
        names = []
        for name in sorted(current):
            reduced = {**current, name: trial_base.get(name, UNSET)}
            if space.violations(reduced):
                continue
            names.append(name)
            sides.append(Side(f"-{name}", env_tuple(apply_params(trial_base, reduced))))
        if not names:
            break
        key = f"loo-{passes}"
        res = run_jobs([interleaved_job(key, sides, rounds_for(pairs, len(names)), workload, timeout_s,
                                        offset=5000 + 100 * passes, seed=seed)])[key]
        conf = 1.0 - (1.0 - CONFIDENCE) / max(1, len(names))   # Bonferroni over the variables
        floor = math.log1p(min_gain) / 2
        effects, drop = [], []
        for name in names:
            cmp = compare(key, res, profile, baseline_buckets, f"-{name}", "all", confidence=conf, floor=floor)
            cost, lcb = cmp.gain, cmp.lcb
            matters = bool(cmp.failed) or cmp.clears(floor, 1.0 - conf)
            if cmp.failed:
                why = f"kept: the run without it failed ({cmp.failed})"
            elif matters:
                why = (f"kept: without it the score drops {loss_pct(cost):.1f} % (at least {loss_pct(lcb):.1f} % at "
                       f"{100 * conf:.1f} % confidence, Wilcoxon p={cmp.p_wilcoxon:.3f}, {cmp.n} rounds)")
            else:
                why = f"dropped: without it the score changes {pct(-cost):+.1f} %, within noise ({cmp.n} rounds)"
            effects.append(VariableEffect(name, current[name], matters, cost, cmp.sd, lcb, cmp.n, cmp.buckets, why))
            log(f"leave-one-out {passes}: {name}={current[name]}: {why}")
            if not matters:
                drop.append(name)
        if not drop:
            history += [VariableEffect(**{**e.__dict__, "final": True}) for e in effects]
            return current, history, passes
        history += effects
        current = {k: v for k, v in current.items() if k not in drop}
    return current, history, passes


def final_job(sides: Sequence[Side], profile: Profile, pairs: int, timeout_s: float, *, key: str = "final",
              offset: int = 9000, seed: int = 0) -> Job:
    """The guard sweep: every side over the profile's workload and the guard workload."""
    merged: dict[str, set[int]] = {}
    for c, sizes in tuple(profile.workload()) + tuple(profile.guard_workload()):
        merged.setdefault(c, set()).update(sizes)
    workload = tuple((c, tuple(sorted(s))) for c, s in merged.items())
    return interleaved_job(key, sides, pairs, workload, timeout_s, offset=offset, seed=seed)
