"""Before anything is recommended: re-measurement against the baseline, two tests, leave-one-out, the guard sweep.

A study's best trial is partly luck: among many noisy trials, the maximum is biased upward. So the
candidates are measured again, best first, one job each on one node group, in rounds (each round
runs every side once, in an order shuffled per round, so neither drift nor position favours a
side): the baseline, the candidate, and the candidate without each of its variables in turn. The
candidate against the baseline must clear the floor (--min-gain) by both the one-sided t bound
and Wilcoxon's signed-rank test (Bonferroni-corrected over the candidates), and no size of the
guard workload (the profile's, 8 B - 1 MiB, every collective the job runs) may be slower beyond
noise: that comparison is the confirmation and the guard sweep at once. A variable whose removal
costs nothing beyond noise is dropped and the rest measured again, until nothing drops, so the
figures EXPLAIN.md gives per variable come from the environment it recommends.
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
                out.append(f"{collective} {size_label(s)}: {pct(mean):+.1f} %")
    return out


def size_label(n: int) -> str:
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


@dataclass(frozen=True)
class Outcome:
    verdicts: tuple[Verdict, ...]            # each candidate tried, with its first measurement
    changes: dict[str, str]                  # what is recommended (empty: nothing)
    effects: tuple[VariableEffect, ...]      # leave-one-out, all passes (the last ones in the final env)
    final: Comparison | None                 # the recommended env against the baseline, guard sweep included
    passes: int


def confirm_and_reduce(run_jobs: Callable[[list[Job]], dict], candidates: Sequence[Mapping[str, str]], *,
                       space: SearchSpace, trial_base: Mapping[str, str], base_env: Mapping[str, str],
                       profile: Profile, baseline_buckets: Mapping[str, float], pairs: int, timeout_s: float,
                       min_gain: float, seed: int = 0, log: Callable[[str], None] | None = None) -> Outcome:
    """Candidates in turn, best first, until one holds, then leave-one-out in it.

    Confirmation: one job over the profile and the guard workload, rounds of [baseline, candidate]
    in shuffled order; both tests must clear the floor and no size be slower (the guard sweep).
    Leave-one-out (two variables or more): rounds of [all, all but v1, all but v2, ...]; a variable
    worth nothing beyond noise is dropped, and the reduced env is confirmed again with the rest
    left out in turn, until nothing drops: the last figures are the recommended env's own."""
    log = log or (lambda msg: None)
    floor = math.log1p(min_gain)
    alpha = (1.0 - CONFIDENCE) / max(1, len(candidates))        # Bonferroni over the candidates tried
    verdicts: list[Verdict] = []
    effects: list[VariableEffect] = []
    passes = 0

    def run(sides: list[Side], tests: int) -> tuple[Any, Job]:
        nonlocal passes
        passes += 1
        key = f"confirm-{passes}"
        job = final_job(sides, profile, rounds_for(pairs, tests), timeout_s, key=key, offset=100 * passes, seed=seed)
        return run_jobs([job])[key], job

    def holds(current: Mapping[str, str], extra: list[str]) -> tuple[Comparison, Any]:
        sides = [Side("A", env_tuple(base_env)), Side("all", env_tuple(apply_params(trial_base, current)))]
        sides += [Side(f"-{n}", env_tuple(apply_params(trial_base, {**current, n: trial_base.get(n, UNSET)})))
                  for n in extra]
        res, job = run(sides, max(len(candidates), len(extra)))
        return compare(job.key, res, profile, baseline_buckets, "A", "all", confidence=1.0 - alpha, floor=floor,
                       guard=job.workload), res

    def worth(res: Any, current: Mapping[str, str], names: list[str]) -> list[VariableEffect]:
        conf = 1.0 - (1.0 - CONFIDENCE) / max(1, len(names))
        out = []
        for n in names:
            cmp = compare("loo", res, profile, baseline_buckets, f"-{n}", "all", confidence=conf, floor=floor / 2)
            matters = bool(cmp.failed) or cmp.clears(floor / 2, 1.0 - conf)
            if cmp.failed:
                why = f"kept: the run without it failed ({cmp.failed})"
            elif matters:
                why = (f"kept: without it the score drops {loss_pct(cmp.gain):.1f} % (at least {loss_pct(cmp.lcb):.1f} % "
                       f"at {100 * conf:.1f} % confidence, Wilcoxon p={cmp.p_wilcoxon:.3f}, {cmp.n} rounds)")
            else:
                why = f"dropped: without it the score changes {pct(-cmp.gain):+.1f} %, within noise ({cmp.n} rounds)"
            out.append(VariableEffect(n, current[n], matters, cmp.gain, cmp.sd, cmp.lcb, cmp.n, cmp.buckets, why))
            log(f"leave-one-out: {n}={current[n]}: {why}")
        return out

    def removable(current: Mapping[str, str]) -> list[str]:
        return [n for n in sorted(current) if len(current) > 1
                and not space.violations({**current, n: trial_base.get(n, UNSET)})]

    for i, cand in enumerate(candidates):
        current = changes(cand, trial_base)
        whole, _ = holds(current, [])
        verdicts.append(_verdict(cand, whole, floor, alpha))
        log(f"candidate {i + 1}: {'accepted' if verdicts[-1].recommended else 'rejected'}: {verdicts[-1].why}")
        if not verdicts[-1].recommended:
            continue
        names = removable(current)
        if not names:
            return Outcome(tuple(verdicts), current, tuple(effects), whole, passes)
        sides = [Side("all", env_tuple(apply_params(trial_base, current)))]
        sides += [Side(f"-{n}", env_tuple(apply_params(trial_base, {**current, n: trial_base.get(n, UNSET)})))
                  for n in names]
        res, _ = run(sides, len(names))
        while True:
            now = worth(res, current, names)
            drop = [e.name for e in now if not e.kept]
            if len(drop) == len(names):
                # None matters alone, yet together they do: keep the one whose removal costs most.
                drop.remove(max(now, key=lambda e: e.cost).name)
            if not drop:
                effects += [VariableEffect(**{**e.__dict__, "final": True}) for e in now]
                return Outcome(tuple(verdicts), current, tuple(effects), whole, passes)
            effects += now
            reduced = {k: v for k, v in current.items() if k not in drop}
            names = removable(reduced)
            again, res = holds(reduced, names)
            if not (again.clears(floor, alpha) and not again.regressions):
                # Without what was dropped it no longer holds: the previous set is the smallest that does.
                log("leave-one-out: the reduced env does not hold on its own; keeping the previous one")
                effects[-len(now):] = [VariableEffect(**{**e.__dict__, "final": True}) for e in now]
                return Outcome(tuple(verdicts), current, tuple(effects), whole, passes)
            current, whole = reduced, again
            if not names:
                return Outcome(tuple(verdicts), current, tuple(effects), whole, passes)
    return Outcome(tuple(verdicts), {}, tuple(effects), None, passes)


def _verdict(params: Mapping[str, str], cmp: Comparison, floor: float, alpha: float) -> Verdict:
    conf = 1.0 - alpha
    if cmp.failed:
        return Verdict(dict(params), cmp, floor, False, f"re-measurement failed: {cmp.failed}")
    if cmp.regressions:
        return Verdict(dict(params), cmp, floor, False, f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}), but "
                       f"slower beyond noise at {'; '.join(cmp.regressions)}")
    if cmp.clears(floor, alpha):
        return Verdict(dict(params), cmp, floor, True, f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}) clears "
                       f"the floor {pct(floor):.1f} %; no size slower")
    return Verdict(dict(params), cmp, floor, False, f"gain {pct(cmp.gain):+.1f} % ({_bounds(cmp, conf)}) does not "
                   f"clear the floor {pct(floor):.1f} %")


def final_job(sides: Sequence[Side], profile: Profile, pairs: int, timeout_s: float, *, key: str = "final",
              offset: int = 9000, seed: int = 0) -> Job:
    """The guard sweep: every side over the profile's workload and the guard workload."""
    merged: dict[str, set[int]] = {}
    for c, sizes in tuple(profile.workload()) + tuple(profile.guard_workload()):
        merged.setdefault(c, set()).update(sizes)
    workload = tuple((c, tuple(sorted(s))) for c, s in merged.items())
    return interleaved_job(key, sides, pairs, workload, timeout_s, offset=offset, seed=seed)
