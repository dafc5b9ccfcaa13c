"""The Optuna study: storage, baseline, screening, combination, refinement, the joint search, resume.

The objective of a trial is exp(weighted mean over workload buckets of log(busbw / baseline
busbw)): 1.0 is the baseline (the environment jobs run with today), 1.10 is 10 % better. Each
repeat of a trial is one job; per size the median over repeats counts.

The search runs in stages, all of them Optuna trials in the one study (so a killed driver
resumes where it stopped):

1. NCCL's defaults (both runs: every screened value is read against them), then the space's
   known-good starting points.
2. Screening: each variable's values alone from the baseline (the values its `screen:` names,
   else every value); a value gets its second run when its first did at least as well as the
   defaults, and stops when clearly worse. A variable whose values all stay within noise of the
   baseline is not a survivor; its children (conditional variables) go with it. A value that
   failed alone is not run again on top of anything else.
3. The combination: each variable at the value screening estimates best for it, all together.
   The values of a variable are read together (ncdoc.tuner.effects: a smooth curve along ordered
   values such as QPs and buffer sizes), so an effect the size of the noise, invisible in one run
   of one value, can show in the trend of several.
4. Refinement: single changes to the point with the best estimate. A conditional variable no
   trial has set yet (screening skips it; adaptive routing's threshold) comes first, its screened
   values on that point; then the change the model (ncdoc.tuner.model) expects most from
   (expected improvement over that point), a variable not yet tried on that point (or on one a
   change from it) before another value of one that was (each side of an ordered variable's value
   counts as its own look), one at a time or as many as there are node groups, until no single
   change is expected to gain.
5. The joint search over the survivors: their unmeasured combinations, best-looking first, when
   they fit the budget, else the sampler (TPE by default) over the survivors only; then the close
   contenders are measured again with new runs.
6. The sampler over the whole space; a configuration that takes the lead on fewer runs than the
   recommendation is measured again before it takes over.
Early stopping throughout (an Optuna pruner with the repeat as its step): a trial clearly worse
than the incumbent after its first run stops there, and one with nothing to gain (no better than
the point it was tried on) is not repeated; one too close to the best to tell apart gets up to
RACE_RUNS runs more than --repeats. Every `rebaseline_every` trials the baseline is measured
again; a drift beyond three standard errors is taken out of later scores.

The incumbent (what the study would recommend now) is chosen by the model's estimates, which pool
every run of a configuration and what related configurations measured (a variable's effect is
learned from every configuration that sets it), not by the single luckiest score; a challenger
takes over only when the model puts it ahead by a quarter of a standard deviation of the
difference (see `incumbent`). Without a space (or with fewer than three configurations) each configuration's
mean is shrunk towards the average (ncdoc.tuner.stats.shrunk).

Failures the setting itself causes (NCCL refused it, crashed, hung) are stored as PRUNED with
the reason in the user attribute ncdoc.failed: Optuna's samplers ignore FAIL trials and would
keep proposing the same broken values, while PRUNED ones count as bad without a fake score.
Failures that say nothing about the setting (a lost node, an interrupted driver, a backend
error) are stored as FAIL.

Resume: a study whose driver died keeps its RUNNING trials forever (Optuna cannot know the
driver is gone). On --resume they are marked FAIL ("interrupted") and their parameters are
enqueued again, so the next asks re-run exactly them; completed trials stay as they are.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner.backends import Measurement
from ncdoc.tuner.dispatch import Executor, Job, JobResult, Step, env_tuple
from ncdoc.tuner.profiles import Profile
from ncdoc.tuner.samplers import SAMPLERS, check_sampler, make_sampler  # noqa: F401  (re-exported)
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.stats import shrunk
from ncdoc.tuner.storage import storage_for  # noqa: F401  (re-exported)

A_FAILED, A_KIND, A_BUCKETS, A_SIZES, A_DUP, A_REQUEUED = (
    "ncdoc.failed", "ncdoc.fail_kind", "ncdoc.buckets", "ncdoc.sizes", "ncdoc.duplicate_of", "ncdoc.requeued_from")
A_STAGE, A_SCORES, A_STOPPED, A_CENTER = "ncdoc.stage", "ncdoc.scores", "ncdoc.stopped", "ncdoc.center"
INTERRUPTED = "interrupted"
# Failure kinds that are evidence against the setting (see the module docstring).
SETTING_FAILURES = ("init", "call", "crash", "hang", "timeout")
METRIC_NAME = "busbw_vs_baseline"   # a trial's score: its busbw over the baseline's, weighted by the profile
MIN_EI = 0.02                 # ... until no single change is expected to gain this share of the noise
FRESH_EI = 0.01               # a variable's first look at the best point needs this share (see _refine_plan)
SWITCH_Z = 0.25               # the recommendation changes for a challenger this many sd ahead (model)
# Refinement exploits what the model knows: its spread for an unmeasured single change is mostly the
# prior's allowance for interactions, the same for every variable (flat or not), so at full width the
# expected improvement chases variables screening found flat. Exploring is the later stages' job.
REFINE_SD = 0.25              # share of the model's standard deviation refinement's expected improvement uses
RACE_RUNS = 2                 # runs beyond --repeats a trial too close to the best to call may take
DEFAULT_NOISE = 0.02          # log-score spread assumed until the baseline's own repeats say otherwise
_STAGE_OF = {"joint": "joint", "joint-search": "joint", "refine": "refine", "remeasure": "remeasure",
             "explore": "search", "joint-start": "joint", "combine": "combine"}


def _is_failure(t: Any) -> bool:
    """A measured trial that failed (either storage state), not a constraint reject or duplicate."""
    kind = t.user_attrs.get(A_KIND)
    return kind is not None and kind != INTERRUPTED


def _is_measured(t: Any) -> bool:
    from optuna.trial import TrialState
    if A_DUP in t.user_attrs:
        return False
    return t.state == TrialState.COMPLETE or (t.state in (TrialState.FAIL, TrialState.PRUNED)
                                              and (_is_failure(t) or A_STOPPED in t.user_attrs))


def _screen_score(t: Any) -> float | None:
    """A trial's mean log-score over its runs, stopped early or not (None: it failed)."""
    from optuna.trial import TrialState
    scores = t.user_attrs.get(A_SCORES)
    if scores and (t.state == TrialState.COMPLETE or A_STOPPED in t.user_attrs):
        return statistics.fmean(scores)
    if t.state == TrialState.COMPLETE and t.value:
        return math.log(t.value)
    return None


@dataclass(frozen=True)
class StudyConfig:
    study_name: str
    storage: str                   # an Optuna storage URL, or a journal file path (.log/.journal)
    sampler: str = "tpe"
    seed: int = 0
    trials: int = 40               # measured trials (constraint rejects and duplicates do not count)
    repeats: int = 2               # runs per trial at most; early stopping may take fewer
    timeout_s: float = 120.0
    resume: bool = False
    min_gain: float = 0.01
    screen: bool | None = None     # None: screen with the TPE sampler, not with grid/random/...
    rebaseline_every: int = 10     # 0: never re-measure the baseline during the study

    @property
    def screening(self) -> bool:
        return self.sampler == "tpe" if self.screen is None else self.screen


@dataclass(frozen=True)
class TrialRecord:
    number: int
    params: dict[str, str]
    state: str                     # complete | failed | pruned | stopped
    value: float | None            # score: 1.0 = baseline
    buckets: dict[str, float]
    sizes: dict[str, list]         # collective -> [[size, busbw, algo, proto, nchannels], ...]
    reason: str = ""
    duplicate_of: int | None = None
    scores: tuple[float, ...] = ()  # log-score of each run
    stage: str = ""

    def changes(self) -> dict[str, str]:
        return {k: v for k, v in self.params.items() if v != UNSET}

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else (math.log(self.value) if self.value else None)


def summarise(profile: Profile, measurements: list[Measurement],
              baseline: Mapping[str, float] | None,
              workload: Any = None) -> tuple[dict[str, float], dict[str, list], float | None]:
    """Median busbw per size over repeats, bucket busbw, and the score against `baseline`."""
    sizes: dict[str, list] = {}
    med: dict[str, dict[int, float]] = {}
    for collective, wanted in (workload or profile.workload()):
        rows = []
        for s in wanted:
            vals = [r for m in measurements for r in m.results(collective) if r.size == s]
            if not vals:
                continue
            bw = statistics.median(r.busbw for r in vals)
            ref = min(vals, key=lambda r: abs(r.busbw - bw))
            rows.append([s, round(bw, 4), ref.algo, ref.proto, ref.nchannels])
            med.setdefault(collective, {})[s] = bw
        sizes[collective] = rows
    buckets = profile.bucket_busbw(med)
    value = None
    if baseline is not None:
        value = math.exp(profile.log_score(buckets, baseline))
    return buckets, sizes, value


def incumbent(records: list[TrialRecord], noise: float,
              space: SearchSpace | None = None) -> tuple[TrialRecord, float] | None:
    """The configuration the study would recommend now, and its estimate (log-ratio).

    Replayed in trial order, so a late lucky run does not displace a configuration that more runs
    support (the winner's curse of a long noisy study). With the `space` (the model's estimates), a
    challenger takes over when the model gives it a 60 % chance of being better (ahead by a quarter
    of a standard deviation of the difference: the model's estimates are shrunk already, and a
    stricter bar keeps an early incumbent against points later runs favour); without, when its estimate is ahead and it has had at
    least as many runs, or when it is ahead by one standard error of their difference."""
    ordered = sorted(records, key=lambda r: r.number)
    model = fit_model(ordered, noise, space) if space is not None else None   # one covariance for the replay
    current = None
    done: list[TrialRecord] = []
    for r in ordered:
        done.append(r)
        if r.state != "complete" or r.duplicate_of is not None:
            continue
        now = _conditioned(model, done) if model is not None else None
        ranked = ranked_trials(done, noise, space, now, conditioned=True)
        est = {tuple(sorted(x.params.items())): (x, e) for x, e in ranked}
        top, top_est = ranked[0]
        if current is None or current not in est:
            current = tuple(sorted(top.params.items()))
            continue
        cur, cur_est = est[current]
        top_key = tuple(sorted(top.params.items()))
        if top_key == current:
            continue
        if now is not None:
            diff, sd = now.difference(top.params, cur.params)
            if diff > SWITCH_Z * sd:
                current = top_key
            continue
        runs = {k: len(v) for k, v in runs_per_config(done).items()}
        se = noise * math.sqrt(1.0 / runs.get(top_key, 1) + 1.0 / runs.get(current, 1))
        if top_est - cur_est > se or (top_est > cur_est and runs.get(top_key, 1) >= runs.get(current, 1)):
            current = top_key
    if current is None:
        return None
    final = {tuple(sorted(x.params.items())): (x, e) for x, e in
             ranked_trials(ordered, noise, space, _conditioned(model, ordered) if model is not None else None,
                           conditioned=True)}
    return final[current]


def runs_per_config(records: list[TrialRecord]) -> dict[tuple, list[float]]:
    """Every run (log-score) of each configuration, pooled over the trials that measured it."""
    out: dict[tuple, list[float]] = {}
    for r in records:
        if r.state == "complete" and r.duplicate_of is None and r.mean is not None:
            out.setdefault(tuple(sorted(r.params.items())), []).extend(r.scores or [r.mean])
    return out


def _pooled(records: list[TrialRecord]) -> tuple[list[tuple[TrialRecord, list[float]]],
                                                 list[tuple[TrialRecord, list[float]]]]:
    """Per configuration, its first trial and every run: the complete ones, then those only ever
    stopped early."""
    pooled: dict[tuple, tuple[TrialRecord, list[float]]] = {}
    stopped: dict[tuple, tuple[TrialRecord, list[float]]] = {}
    for r in records:
        if r.duplicate_of is not None or r.mean is None or r.state not in ("complete", "stopped"):
            continue
        key = tuple(sorted(r.params.items()))
        first, runs = (pooled if r.state == "complete" else stopped).setdefault(key, (r, []))
        runs.extend(r.scores or [r.mean])
    return list(pooled.values()), [v for k, v in stopped.items() if k not in pooled]


def fit_model(records: list[TrialRecord], noise: float, space: SearchSpace) -> Any:
    """The model of every measured configuration (ncdoc.tuner.model), with each variable's prior
    spread from screening; None with fewer than three complete configurations."""
    from ncdoc.tuner.effects import effect_scales, screen_effects
    from ncdoc.tuner.model import Model

    items, stopped = _pooled(records)
    if len(items) < 3:
        return None
    every = items + stopped
    scales = effect_scales(screen_effects(records, space, noise), noise)
    return Model(space, [r.params for r, _ in every], [statistics.fmean(x) for _, x in every],
                 [len(x) for _, x in every], noise, scales)


def _conditioned(model: Any, records: list[TrialRecord]) -> Any:
    """`model`'s covariance, given the measurements of `records`."""
    items, stopped = _pooled(records)
    every = items + stopped
    if not every:
        return None
    return model.condition([r.params for r, _ in every], [statistics.fmean(x) for _, x in every],
                           [len(x) for _, x in every])


def ranked_trials(records: list[TrialRecord], noise: float, space: SearchSpace | None = None,
                  model: Any = None, conditioned: bool = False) -> list[tuple[TrialRecord, float]]:
    """Configurations by estimate, best first: every run of a configuration counts (its first
    complete trial stands for it, re-measurements add their runs). With the `space`, the estimate
    is the model's (`fit_model`: what related configurations measured counts too, trials stopped
    early included; a `model` given lends its covariance, or is used as it is when `conditioned`
    on these records already), else each mean shrunk towards the average."""
    items, _ = _pooled(records)
    if model is not None and not conditioned:
        model = _conditioned(model, records)
    elif model is None and space is not None and not conditioned:
        model = fit_model(records, noise, space)
    if model is not None:
        est = model.predict([r.params for r, _ in items])[0]
    else:
        est = shrunk([statistics.fmean(runs) for _, runs in items], [len(runs) for _, runs in items], noise)
    return sorted(((r, e) for (r, _), e in zip(items, est)), key=lambda x: -x[1])


def refine_order(scored: list[tuple[float, dict[str, str]]], center: Mapping[str, str],
                 tried: set[tuple[str, int]], noise: float,
                 side: Callable[[str, str, str], int] = lambda name, value, ref: 0) -> list[dict[str, str]]:
    """Refinement's single changes to `center` in the order they are measured, from (expected
    improvement, change) each; `tried`: the (variable, side) looks changes on `center` (or a point
    one change from it) have had already, `side(name, value, ref)` the side of `ref` a value lies on
    along an ordered variable (-1 below, +1 above, 0 for a variable without order). Empty when none
    is worth a run.

    One look per variable and side on this point before a second: the model's spread for a variable
    with a big effect elsewhere (QPs, before adaptive routing made them moot) keeps its other values
    ahead of every small lever until each has been read against this point. A look below an ordered
    variable's value says nothing of the slope above it (a buffer size smaller than the best point's
    found worse leaves the larger one open), so each side gets its own look."""
    ranked = sorted(scored, key=lambda x: -x[0])
    fresh = [c for ei, c in ranked if ei > FRESH_EI * noise and
             not any((k, side(k, c[k], v)) in tried for k, v in center.items() if c.get(k) != v)]
    return fresh or [c for ei, c in ranked if ei > MIN_EI * noise]


@dataclass
class _Open:
    trial: Any
    key: str
    env: tuple
    first_repeat: int = 0          # a remeasured configuration's runs continue after its earlier ones
    floor: float = 0.0             # a mean below this after one run is not worth a second run
    measurements: list = field(default_factory=list)
    scores: list = field(default_factory=list)


class TuneStudy:
    """One study: open or resume it, measure the baseline, run the trials."""

    def __init__(self, config: StudyConfig, space: SearchSpace, profile: Profile, executor: Executor, *,
                 storage: Any, base_env: Mapping[str, str], describe: Mapping[str, Any],
                 trial_base: Mapping[str, str] | None = None,
                 on_progress: Callable[[dict], None] | None = None, log: Callable[[str], None] | None = None):
        self.cfg = config
        self.space = space
        self.profile = profile
        self.executor = executor
        self.storage = storage
        self.base_env = dict(base_env)
        # What trials start from: today's env, minus what may not be recommended (ncdoc.tuner.safety).
        self.trial_base = dict(base_env if trial_base is None else trial_base)
        self.describe = dict(describe)
        self.on_progress = on_progress or (lambda info: None)
        self.log = log or (lambda msg: None)
        self.workload = tuple((c, tuple(s)) for c, s in profile.workload())
        self.study: Any = None
        self.baseline: dict[str, Any] = {}
        self.requeued: list[int] = []
        self.measurements = 0                    # backend runs this driver made (the study's cost)
        self._mine: dict[int, Any] = {}          # trials asked by this driver: Ctrl-C must close them
        self._joint_until = 0                    # the sampler's joint search runs until this many trials
        self._center: str | None = None          # the incumbent refinement works around
        self._survived: list[str] = []

    # ---------------------------------------------------------------- opening
    def identity(self) -> dict[str, Any]:
        return {"space": self.space.fingerprint(), "profile": self.profile.to_dict(),
                "base_env": self.base_env, "trial_base": self.trial_base, "backend": self.describe}

    def open(self) -> None:
        import optuna

        from ncdoc.tuner.pruning import RepeatPruner

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        names = optuna.study.get_all_study_names(self.storage)
        exists = self.cfg.study_name in names
        if exists and not self.cfg.resume:
            raise UsageError(f"study {self.cfg.study_name!r} already exists in {self._where()}; pass --resume to "
                             "continue it, or --study-name / --out for a new one")
        if self.cfg.resume and not exists:
            self.log(f"nothing to resume: no study {self.cfg.study_name!r} in {self._where()}; starting one")
        prior = 0
        if exists:
            prior = len(optuna.load_study(study_name=self.cfg.study_name, storage=self.storage).trials)
        startup = max(4, min(10, self.cfg.trials // 4))
        sampler = make_sampler(self.cfg.sampler, self.cfg.seed + prior, self.space, startup)
        self.study = optuna.create_study(storage=self.storage, study_name=self.cfg.study_name, sampler=sampler,
                                         direction="maximize", load_if_exists=True,
                                         pruner=RepeatPruner(lambda: (self.best_estimate(), self.noise)))
        if not self.study.metric_names:
            # optuna-dashboard (and the report) show the objective by this name instead of "Objective 0"
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.set_metric_names([METRIC_NAME])
        attrs = self.study.user_attrs
        ident = self.identity()
        if exists and "ncdoc.identity" in attrs:
            old = attrs["ncdoc.identity"]
            diff = [k for k in ident if json.dumps(old.get(k), sort_keys=True) != json.dumps(ident[k], sort_keys=True)]
            if diff:
                raise UsageError(f"cannot resume study {self.cfg.study_name!r}: its {', '.join(diff)} differ(s) from "
                                 "this run's; use the same options, or a new --study-name")
        else:
            self.study.set_user_attr("ncdoc.identity", ident)
        self.baseline = attrs.get("ncdoc.baseline", {})
        if exists:
            self._requeue_stale()

    def _where(self) -> str:
        return self.cfg.storage

    def _requeue_stale(self) -> None:
        from optuna.trial import TrialState

        storage = self.study._storage
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            storage.set_trial_user_attr(t._trial_id, A_FAILED, "interrupted: the driver stopped while it ran")
            storage.set_trial_user_attr(t._trial_id, A_KIND, INTERRUPTED)
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            if t.params:
                self.study.enqueue_trial(dict(t.params), user_attrs={A_REQUEUED: t.number,
                                                                     A_STAGE: t.user_attrs.get(A_STAGE, "")})
            self.requeued.append(t.number)
        if self.requeued:
            self.log(f"resumed: trial(s) {', '.join(map(str, self.requeued))} were running when the driver "
                     "stopped; marked failed and queued again")

    # ---------------------------------------------------------------- measuring
    def run_jobs(self, jobs: list[Job]) -> dict[str, JobResult]:
        """Run jobs on the executor, as many at once as it has node groups; results by key."""
        todo, out = list(jobs), {}
        try:
            while todo or self.executor.in_flight():
                while todo and len(self.executor.in_flight()) < self.executor.slots:
                    job = todo.pop(0)
                    self.measurements += len(job.steps)
                    self.executor.submit(job)
                for res in self.executor.wait():
                    out[res.key] = res
        except BaseException:
            self.executor.cancel_all()
            raise
        return out

    def _job(self, key: str, env: tuple, repeats: range) -> Job:
        return Job(key, tuple(Step("trial", env, r) for r in repeats), self.workload, self.cfg.timeout_s)

    def measure_baseline(self, runs: list[Measurement] | None = None) -> dict[str, Any]:
        """The baseline's figures and noise, from its own job or from `runs` (the per-group baselines of
        tuning at scale, scaled to the groups' mean: ncdoc.tuner.scale.calibrate)."""
        if self.baseline:
            self.log("baseline: reusing the measurement stored with the study")
            return self.baseline
        if not runs:
            env = env_tuple(self.base_env)
            res = self.run_jobs([self._job("baseline", env, range(self.cfg.repeats))])["baseline"]
            if not res.ok:
                raise RunnerError("the baseline (the current environment) could not be measured", cause=res.reason)
            runs = [m for _, m in res.measurements]
        buckets, sizes, _ = summarise(self.profile, runs, None)
        scores = [self.profile.log_score(summarise(self.profile, [m], None)[0], buckets) for m in runs]
        noise = statistics.stdev(scores) if len(scores) > 1 else DEFAULT_NOISE
        self.baseline = {"env": self.base_env, "buckets": buckets, "sizes": sizes, "noise": max(noise, 0.003),
                         "scores": scores}
        self.study.set_user_attr("ncdoc.baseline", self.baseline)
        if not self.study.trials:
            self._enqueue_first_points()
        return self.baseline

    def _enqueue_first_points(self) -> None:
        """NCCL's defaults, the known-good starting points, then (screening) each value alone."""
        unset = {v.name: UNSET for v in self.space.variables}
        seen = set()

        def add(params: dict[str, str], stage: str) -> None:
            key = json.dumps(self.space.complete(params), sort_keys=True)
            if key in seen or self.space.violations(params):
                return
            seen.add(key)
            self.study.enqueue_trial(params, user_attrs={A_STAGE: stage})

        add(dict(unset), "start")
        for start in self.space.starts:
            add({**unset, **dict(start)}, "start")
        if not self.cfg.screening:
            return
        for var in self.space.variables:
            if var.when:                 # conditional: screened with its parent, in the joint stage
                continue
            for value in var.screened:
                add({**unset, var.name: value}, "screen")

    # ---------------------------------------------------------------- noise, drift, survivors
    def _load_ledger(self) -> None:
        """What the loop needs often, read once from storage and then kept up to date in memory:
        a study's storage is a database, and reading every trial per decision is most of its cost."""
        from optuna.trial import TrialState

        trials = self._trials()
        self._rebase = list(self.study.user_attrs.get("ncdoc.rebaseline", []))
        self._within = [self._var(t.user_attrs.get(A_SCORES) or []) for t in trials
                        if len(t.user_attrs.get(A_SCORES) or []) > 1]
        self._done = [(math.log(t.value), max(1, len(t.user_attrs.get(A_SCORES) or [])))
                      for t in trials if t.state == TrialState.COMPLETE and t.value and A_DUP not in t.user_attrs]
        self._n_measured = sum(1 for t in trials if _is_measured(t))
        self._n_failed = sum(1 for t in trials if _is_failure(t) and t.state != TrialState.COMPLETE)
        self._n_waiting = sum(1 for t in trials if t.state == TrialState.WAITING)
        self._ledger = True

    @staticmethod
    def _var(scores: list[float]) -> float:
        return statistics.pvariance(scores) * len(scores) / (len(scores) - 1)

    @property
    def noise(self) -> float:
        """Run-to-run spread of a log-score: the baseline's, refined by trials run more than once."""
        base = self.baseline.get("noise", DEFAULT_NOISE)
        if not getattr(self, "_ledger", False):
            self._load_ledger()
        if not self._within:
            return base
        return max(0.003, math.sqrt((base * base + sum(self._within)) / (1 + len(self._within))))

    def drift(self) -> float:
        """How far the baseline has moved since it was measured (log), else 0: from two re-measurements
        on, and only beyond three standard errors of the difference. A correction is itself a noisy
        estimate, and it applies to the runs after it only, so a chance one would rank the trials
        after it against the trials before it by the luck of a few baseline runs."""
        if not getattr(self, "_ledger", False):
            self._load_ledger()
        runs = self._rebase
        if len(runs) < 2:
            return 0.0
        first = self.baseline.get("scores") or [0.0]
        d = statistics.fmean(runs) - statistics.fmean(first)
        return d if abs(d) > 3 * self.noise * math.sqrt(1 / len(runs) + 1 / len(first)) else 0.0

    def best_estimate(self) -> float | None:
        """The incumbent's shrunk estimate (log-ratio), for early stopping."""
        if not getattr(self, "_ledger", False):
            self._load_ledger()
        if not self._done:
            return None
        return max(shrunk([m for m, _ in self._done], [n for _, n in self._done], self.noise))

    def _trials(self) -> list[Any]:
        return self.study.get_trials(deepcopy=False)

    def survivors(self) -> list[str] | None:
        """Variables worth the joint search, once screening is over (None while it runs)."""
        from optuna.trial import TrialState

        screened = [t for t in self._trials() if t.user_attrs.get(A_STAGE) == "screen"]
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in screened):
            return None
        keep: set[str] = set()
        for t in self._trials():           # screened values, and what the known-good points set
            if t.user_attrs.get(A_STAGE) not in ("screen", "start"):
                continue
            score = _screen_score(t)
            if score is not None and score > self._beyond_noise(len(t.user_attrs.get(A_SCORES) or [1])):
                keep.update(k for k, v in t.params.items() if v != UNSET)
        for var in self.space.variables:   # conditional variables go with their parent
            if var.when and all(c.var in keep for c in var.when):
                keep.add(var.name)
        return [v.name for v in self.space.variables if v.name in keep]

    # ---------------------------------------------------------------- the loop
    def _measured(self) -> int:
        return self._n_measured

    def _tell(self, trial: Any, value: float | None = None, state: Any = None) -> None:
        try:
            if value is not None:
                self.study.tell(trial, value)
            else:
                self.study.tell(trial, state=state)
        except Exception:
            # GridSampler's last tell() raises after the result is stored; anything else is real.
            from optuna.trial import TrialState
            if self.study._storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                raise
        self._mine.pop(trial.number, None)

    def _known(self) -> dict[str, Any]:
        from optuna.trial import TrialState
        out = {}
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL,
                                                                   TrialState.PRUNED)):
            if t.state == TrialState.COMPLETE or _is_failure(t) or A_STOPPED in t.user_attrs:
                out.setdefault(json.dumps(self.space.complete(t.params), sort_keys=True), t)
        return out

    def _next_stage(self, phase: str, known: Mapping[str, Any], left: int) -> tuple[str, list, SearchSpace]:
        """What to measure next, once the current stage's trials are all in: (phase, points to queue,
        the space the sampler searches).

        screen -> combine: each variable at the value screening estimates best for it, all together
        -> refine: single changes to the best point, the one the model expects most from first, as
        long as one is expected to gain (interactions with what screening found show up here)
        -> joint: the survivors' best-looking combinations, or the sampler over them, for a share of
        what is left -> remeasure: the close contenders run again -> explore: the sampler over all."""
        if phase == "screen":
            keep = self.survivors()
            if not keep:
                self.log("screening: no variable moved the score beyond noise; nothing left to search")
                return "done", [], self.space
            self.log(f"screening: {len(keep)} variable(s) moved the score: {', '.join(keep)}")
            self._survived = keep
            self._center = None
            combo = self._combination(known)
            if combo is not None:
                self.log("screening: the best value of each variable together, "
                         + ", ".join(f"{k}={v}" for k, v in combo.items() if v != UNSET))
                return "combine", [combo], self.space
            phase = "refine"
        if phase in ("combine", "refine"):
            plan = self._refine_plan(known)
            if plan:
                return "refine", plan, self.space
            self.log("refinement: no single change to the best point is expected to gain")
            phase = "joint-start"
        if phase == "joint-start":
            keep = self._survived
            plan = self._joint_plan(keep, known, left)
            if plan:
                self.log(f"joint search: the best-looking combinations of {', '.join(keep)}")
                return "joint", plan[:max(4, left // 3)], self.space
            if plan is None:
                sub = self.space.only(keep)
                self._joint_until = self._measured() + min(max(6, left // 3), 2 * sum(len(v.values) for v in
                                                                                        sub.variables))
                self.log(f"joint search: the sampler over {', '.join(keep)}")
                return "joint-search", [], sub
            phase = "joint"
        if phase in ("joint", "joint-search"):
            plan = self._remeasure()
            if plan:
                self.log(f"{len(plan)} close contender(s) measured again before the sampler searches the whole space")
                return "remeasure", plan, self.space
        return "explore", [], self.space

    def _combination(self, known: Mapping[str, Any]) -> dict[str, str] | None:
        """Each variable at the value screening estimates best for it (ncdoc.tuner.effects: every
        value of a variable read together, so an effect the size of the noise, invisible in one run
        of one value, shows in the trend of several), all together: the optimum of a model in which
        variables add up. None when that point is invalid even without its smallest gains, or measured."""
        from ncdoc.tuner.effects import screen_effects

        gains: dict[str, tuple[str, float]] = {}
        for name, eff in screen_effects(self.records(), self.space, self.noise).items():
            value, gain = max(eff.items(), key=lambda kv: kv[1])
            if value != UNSET and gain > 0:
                gains[name] = (value, gain)
        if not gains:
            return None
        combo = {v.name: UNSET for v in self.space.variables}
        combo.update({k: v for k, (v, _) in gains.items()})
        for name, _ in sorted(gains.items(), key=lambda g: g[1][1]):
            if not self.space.violations(combo) and not self._refused_in(combo):
                break
            combo[name] = UNSET
        if self.space.violations(combo) or self._refused_in(combo):
            return None
        key = json.dumps(self.space.complete(combo), sort_keys=True)
        return None if key in known else combo

    def _refine_plan(self, known: Mapping[str, Any]) -> list[dict[str, str]]:
        """The single changes to the best point the model expects most from (expected improvement
        over that point's estimate, with REFINE_SD of the model's spread), as many as there are node
        groups; none when nothing is expected to gain more than a few hundredths of the noise."""
        records = self.records()
        model = fit_model(records, self.noise, self.space)
        ranked = ranked_trials(records, self.noise, self.space, model, conditioned=True)
        if not ranked or model is None:
            return []
        center, top = ranked[0]
        self._center = json.dumps(center.params, sort_keys=True)
        cands = self._neighbours(center.params, known)
        if not cands:
            return []
        unseen = self._unseen_children(center.params, records, cands)
        if unseen:
            return unseen
        mean, sd = model.predict(cands)
        scored = []
        for c, m, s in zip(cands, mean, sd):
            s *= REFINE_SD
            gain = m - top
            if s <= 1e-9:
                ei = max(0.0, gain)
            else:
                z = gain / s
                ei = gain * 0.5 * (1 + math.erf(z / math.sqrt(2))) + s * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
            scored.append((ei, c))
        return refine_order(scored, center.params, self._tried_on(self._center), self.noise, self._side)[
            :max(1, self.executor.slots)]

    def _side(self, name: str, value: str, ref: str) -> int:
        """-1 or +1: `value` below or above `ref` along `name`, where every value of it (unset: NCCL's
        default) is a number; 0 for a variable without that order."""
        var = next((v for v in self.space.variables if v.name == name), None)
        nums = [self.space.numeric(name, x) for x in (var.values if var else ())]
        a, b = self.space.numeric(name, value), self.space.numeric(name, ref)
        if not nums or any(x is None for x in nums) or a is None or b is None or a == b:
            return 0
        return 1 if a > b else -1

    def _tried_on(self, center: str | None) -> set[tuple[str, int]]:
        """The (variable, side of `center`'s value) looks single changes have had so far, on the
        point `center` or on a point one change from it (the best estimate moves between near-equal
        points, and a variable read on one of them has been read on the other); see refine_order."""
        if center is None:
            return set()
        base = json.loads(center)
        out: set[tuple[str, int]] = set()
        for t in self._trials():
            c = t.user_attrs.get(A_CENTER)
            if c is None:
                continue
            start = json.loads(c)
            if sum(1 for k, v in base.items() if start.get(k) != v) > 1:
                continue
            done = self.space.complete(t.params)
            for k, v in done.items():
                if start.get(k) == v:
                    continue
                s = self._side(k, v, base.get(k, UNSET)) if start.get(k) == base.get(k) else 0
                out.update({(k, s)} if s else {(k, -1), (k, 0), (k, 1)})
        return out

    def _unseen_children(self, center: Mapping[str, str], records: list[TrialRecord],
                         cands: list[dict[str, str]]) -> list[dict[str, str]]:
        """The screening a conditional variable never had: its screened values on top of `center`,
        for the first variable (in the space's order) that `center` makes active and that no measured
        configuration has set yet. Screening skips a child (it means nothing without its parent), and
        the model has nothing to go on for it: its estimate of an unmeasured value is the pull of
        the study's average, so expected improvement would put it after every change it can read,
        and the variable a parent's effect was waiting for (adaptive routing's threshold) would come last."""
        seen = {k for r in records if r.state in ("complete", "stopped") and r.duplicate_of is None
                for k, v in r.params.items() if v != UNSET}
        for var in self.space.variables:
            if not var.when or var.name in seen or not self.space.active(var, center):
                continue
            out = [c for c in cands if c.get(var.name) in var.screened
                   and all(c.get(k) == v for k, v in center.items() if k != var.name)]
            if out:
                return out
        return []

    def _beyond_noise(self, runs: int) -> float:
        """What a score of `runs` runs must exceed to count as an effect: the floor (half of
        --min-gain) and two standard errors of the noise, so that among twenty screened values
        the lucky ones do not pass for effects."""
        return max(math.log1p(self.cfg.min_gain) / 2, 2.0 * self.noise / math.sqrt(max(1, runs)))

    def useful_variables(self, top: int = 3) -> set[str]:
        """Variables that showed an effect: alone in screening (or set by a known-good start that
        helped), or, in one of the `top` configurations by the model, as a value whose removal the
        model expects to cost more than three standard deviations (what rode along in a lucky trial,
        measured or not, is not part of a candidate)."""
        survived = self.survivors()
        if survived is None:                     # screening did not finish: nothing to strip by
            return {v.name for v in self.space.variables}
        keep = set(survived)
        if not self.cfg.screening:
            return keep | {v.name for v in self.space.variables}
        records = self.records()
        model = fit_model(records, self.noise, self.space)
        if model is None:
            return keep
        for r, _ in ranked_trials(records, self.noise, self.space, model, conditioned=True)[:top]:
            for name, value in r.params.items():
                if value == UNSET or name in keep:
                    continue
                diff, sd = model.difference(r.params, self.space.complete({**r.params, name: UNSET}))
                if diff > 3.0 * sd:
                    keep.add(name)
        return keep

    def _remeasure(self, top: int = 3) -> list[dict[str, str]]:
        """The configurations whose estimates are within noise of the incumbent's: one more run each,
        so the recommendation is not the luckiest of them."""
        ranked = ranked_trials(self.records(), self.noise, self.space)
        if len(ranked) < 2:
            return []
        best = ranked[0][1]
        return [dict(r.params) for r, est in ranked[:top] if best - est < 2 * self.noise]

    def _challenger(self) -> dict[str, str] | None:
        """The configuration with the best estimate when it is not the recommendation yet for lack of
        runs: it runs again, so the recommendation is settled by measurements, not by who came first."""
        records = self.records()
        ranked = ranked_trials(records, self.noise, self.space)
        inc = incumbent(records, self.noise, self.space)
        if not ranked or inc is None or ranked[0][0].params == inc[0].params:
            return None
        runs = runs_per_config(records)
        top = tuple(sorted(ranked[0][0].params.items()))
        if len(runs.get(top, ())) >= len(runs.get(tuple(sorted(inc[0].params.items())), ())):
            return None
        return dict(ranked[0][0].params)

    def _neighbours(self, params: Mapping[str, str], known: Mapping[str, Any]) -> list[dict[str, str]]:
        """Every value of every variable on top of `params`: the single changes not measured yet, valid,
        not refused."""
        out, seen = [], set(known)
        center = self.space.complete(params)
        for var in self.space.variables:
            for value in var.values:
                if value == center.get(var.name):
                    continue
                cand = self.space.complete({**center, var.name: value})
                key = json.dumps(cand, sort_keys=True)
                if key in seen or self.space.violations(cand) or cand == center or self._refused_in(cand):
                    continue
                seen.add(key)
                out.append(cand)
        return out

    def _joint_plan(self, survivors: list[str], known: Mapping[str, Any], left: int) -> list[dict[str, str]] | None:
        """All unmeasured combinations of the survivors, best-looking first, when they fit `left`
        trials; None when there are more (the sampler then searches)."""
        sub = self.space.only(survivors)
        if not sub.variables or sub.size > max(left, 0) + len(known):
            return None
        screen: dict[tuple[str, str], float] = {}
        for t in self._trials():
            score = _screen_score(t) if t.user_attrs.get(A_STAGE) == "screen" else None
            if score is not None:
                for k, v in t.params.items():
                    if v != UNSET:
                        screen[(k, v)] = score
        combos = []
        for values in itertools.product(*(v.values for v in sub.variables)):
            params = dict(zip((v.name for v in sub.variables), values))
            full = {**{v.name: UNSET for v in self.space.variables}, **params}
            if self.space.violations(full) or self._refused_in(full):
                continue
            key = json.dumps(self.space.complete(full), sort_keys=True)
            if key in known:
                continue
            combos.append((-sum(screen.get((k, v), 0.0) for k, v in params.items() if v != UNSET), key, full))
        combos.sort(key=lambda c: (c[0], c[1]))
        seen, out = set(), []
        for _, key, full in combos:
            if key not in seen:
                seen.add(key)
                out.append(full)
        return out

    def optimize(self) -> None:
        from optuna.trial import TrialState

        base_buckets = self.baseline["buckets"]
        open_: dict[str, _Open] = {}
        self._load_ledger()
        known = self._known()
        asks, cap, started, exhausted = 0, 20 * self.cfg.trials + 50, time.monotonic(), False
        repeats_in_a_row = 0
        rng = random.Random(f"{self.cfg.seed}:{len(self.study.trials)}")
        phase = "screen" if self.cfg.screening else "explore"
        space = self.space
        rebased = len(self._rebase)
        rebase_key = None
        try:
            while True:
                done = self._measured()
                every = self.cfg.rebaseline_every
                if every and rebase_key is None and done >= every * (rebased + 1) and done < self.cfg.trials and \
                        len(self.executor.in_flight()) < self.executor.slots:
                    rebase_key = f"rebaseline-{rebased}"
                    self.measurements += 1
                    self.executor.submit(self._job(rebase_key, env_tuple(self.base_env), range(9000 + rebased,
                                                                                               9001 + rebased)))
                while (not exhausted and len(self.executor.in_flight()) < self.executor.slots
                       and done + len(open_) < self.cfg.trials and asks < cap):
                    if self.cfg.sampler == "grid" and self.study.sampler.is_exhausted(self.study):
                        exhausted = True
                        break
                    waiting = self._n_waiting > 0
                    if not waiting and phase != "explore" and not (phase == "joint-search" and done < self._joint_until):
                        if open_:
                            break                       # this stage's results decide the next one
                        phase, plan, space = self._next_stage(phase, known, self.cfg.trials - done)
                        if phase == "done":
                            exhausted = True
                            break
                        for params in plan:
                            self._enqueue(params, _STAGE_OF[phase], self._center if phase == "refine" else None)
                        continue
                    asks += 1
                    trial = self.study.ask()
                    self._n_waiting = max(0, self._n_waiting - 1)
                    self._mine[trial.number] = trial
                    if A_STAGE not in trial.user_attrs:
                        trial.set_user_attr(A_STAGE, _STAGE_OF.get(phase, "search"))
                    params = space.suggest(trial) if not waiting else self.space.suggest(trial)
                    bad = self.space.violations(params)
                    if bad:
                        trial.set_user_attr(A_FAILED, "constraint: " + "; ".join(bad))
                        self._tell(trial, state=TrialState.PRUNED)
                        continue
                    key = json.dumps(self.space.complete(params), sort_keys=True)
                    refused = self._refused_in(params)
                    if refused:
                        # NCCL refused this value alone in screening: it fails on top of anything
                        # else as well, so no run is spent on it.
                        trial.set_user_attr(A_FAILED, refused)
                        self._tell(trial, state=TrialState.PRUNED)
                        repeats_in_a_row += 1
                        if repeats_in_a_row >= 2 and self.cfg.sampler != "grid":
                            fresh = self._unmeasured(rng, set(known) | {o.key for o in open_.values()}, space)
                            if fresh is None:
                                exhausted = True
                            else:
                                self._enqueue(fresh, _STAGE_OF.get(phase, "search"))
                        continue
                    again = trial.user_attrs.get(A_STAGE) == "remeasure"
                    if not again and (key in known or any(o.key == key for o in open_.values())):
                        # Measured (or running) already: reuse the result, spend no run. A sampler that
                        # keeps returning to known points gets an unmeasured one queued next.
                        if key in known:
                            self._copy(trial, known[key])
                        else:
                            trial.set_user_attr(A_FAILED, "duplicate of a running trial")
                            self._tell(trial, state=TrialState.PRUNED)
                        repeats_in_a_row += 1
                        if repeats_in_a_row >= 2 and self.cfg.sampler != "grid":
                            fresh = self._unmeasured(rng, set(known) | {o.key for o in open_.values()}, space)
                            if fresh is None:
                                self.log("every point of the search space has been measured")
                                exhausted = True
                            else:
                                self._enqueue(fresh, _STAGE_OF.get(phase, "search"))
                        continue
                    repeats_in_a_row = 0
                    env = env_tuple(apply_params(self.trial_base, params))
                    jk = f"trial-{trial.number}-r0"
                    first = self._runs_of(key) if again else 0
                    open_[jk] = _Open(trial, key, env, first, self._worth_repeating(trial, known))
                    self.measurements += 1
                    self.executor.submit(self._job(jk, env, range(first, first + 1)))
                if not open_ and rebase_key is None:
                    break
                for res in self.executor.wait():
                    if res.key == rebase_key:
                        rebase_key = None
                        rebased += 1
                        if res.ok:
                            b, _, _ = summarise(self.profile, [m for _, m in res.measurements], None)
                            self._rebase.append(self.profile.log_score(b, base_buckets))
                            self.study.set_user_attr("ncdoc.rebaseline", list(self._rebase))
                        continue
                    o = open_.pop(res.key)
                    nxt = self._step(o, res, base_buckets)
                    if nxt is not None:
                        open_[nxt] = o
                        continue
                    known.setdefault(o.key, self.study._storage.get_trial(o.trial._trial_id))
                    self._n_measured += 1
                    if phase == "explore" and self._n_waiting == 0:
                        race = self._challenger()
                        if race is not None:
                            self._enqueue(race, "remeasure")
                    self._report(started)
        except BaseException:
            self.executor.cancel_all()
            self._interrupt_open_trials()
            raise

    def _enqueue(self, params: dict[str, str], stage: str, center: str | None = None) -> None:
        attrs = {A_STAGE: stage}
        if center is not None:
            attrs[A_CENTER] = center            # the incumbent this single change was tried on
        self.study.enqueue_trial(params, user_attrs=attrs)
        self._n_waiting += 1

    def _step(self, o: _Open, res: JobResult, base_buckets: Mapping[str, float]) -> str | None:
        """Record one run of a trial; the key of its next run, or None when the trial is finished."""
        from optuna.trial import TrialState

        trial = o.trial
        if not res.ok:
            self._n_failed += 1
            trial.set_user_attr(A_FAILED, res.reason)
            trial.set_user_attr(A_KIND, res.kind)
            self._tell(trial, state=TrialState.PRUNED if res.kind in SETTING_FAILURES else TrialState.FAIL)
            self.log(f"trial {trial.number} failed ({res.kind}): {res.reason}")
            return None
        m = res.measurements[0][1]
        o.measurements.append(m)
        score = self.profile.log_score(summarise(self.profile, [m], None)[0], base_buckets) - self.drift()
        o.scores.append(score)
        step = len(o.scores) - 1
        trial.report(statistics.fmean(o.scores), step)
        more = len(o.scores) < self.cfg.repeats
        from ncdoc.tuner.pruning import Z as Z_STOP

        # Screening reads a value against NCCL's defaults (its floor), everything else against the best so far.
        screening = trial.user_attrs.get(A_STAGE) == "screen"
        worse = (statistics.fmean(o.scores) < o.floor - Z_STOP * self.noise / math.sqrt(len(o.scores))) if screening \
            else trial.should_prune()
        if more and worse:
            trial.set_user_attr(A_SCORES, list(o.scores))
            trial.set_user_attr(A_STOPPED, f"stopped after {len(o.scores)} run(s): clearly worse than "
                                + ("NCCL's defaults" if screening else "the best so far"))
            self._tell(trial, state=TrialState.PRUNED)
            return None
        if more and statistics.fmean(o.scores) < o.floor:
            more = False                          # nothing to gain: a second run would not change the verdict
        if not more and len(o.scores) < self.cfg.repeats + RACE_RUNS and self._contender(trial, o.scores):
            more = True                           # too close to the best to tell apart yet: run it again
        if more:
            key = f"trial-{trial.number}-r{len(o.scores)}"
            self.measurements += 1
            self.executor.submit(Job(key, (Step("trial", o.env, o.first_repeat + len(o.scores)),), self.workload,
                                     self.cfg.timeout_s))
            return key
        buckets, sizes, value = summarise(self.profile, o.measurements, base_buckets)
        trial.set_user_attr(A_BUCKETS, buckets)
        trial.set_user_attr(A_SIZES, sizes)
        trial.set_user_attr(A_SCORES, list(o.scores))
        value *= math.exp(-self.drift())
        self._tell(trial, value=value)
        self._done.append((math.log(value), len(o.scores)))
        if len(o.scores) > 1:
            self._within.append(self._var(o.scores))
        return None

    def _interrupt_open_trials(self) -> None:
        """Every trial this driver asked for and did not finish (running, or stopped inside the
        storage commit of its result) is stored as interrupted and queued for --resume."""
        from optuna.trial import TrialState

        storage = self.study._storage
        for number, trial in list(self._mine.items()):
            stored = storage.get_trial(trial._trial_id)
            if stored.state == TrialState.RUNNING:
                self._interrupt(trial, stored.params)
            self._mine.pop(number, None)

    def _contender(self, trial: Any, scores: list[float]) -> bool:
        """Is a trial with these runs within one standard error of the best estimate (either side)?"""
        if trial.user_attrs.get(A_STAGE) == "screen" or not self._done:
            return False
        est = shrunk([m for m, _ in self._done], [n for _, n in self._done], self.noise)
        i = max(range(len(est)), key=lambda j: est[j])
        se = self.noise * math.sqrt(1 / len(scores) + 1 / self._done[i][1])
        return abs(statistics.fmean(scores) - est[i]) < se

    def _worth_repeating(self, trial: Any, known: Mapping[str, Any]) -> float:
        """The mean a trial's first run must reach to get a second: half of --min-gain over the
        baseline; for a change tried on top of the best so far, that point's own score less half the
        noise (a small real step up often looks like none after one run); for a screened value, the
        score of NCCL's defaults, whose own trial always gets both runs."""
        if all(v == UNSET for v in trial.params.values()):
            return -math.inf                      # NCCL's defaults: what every screened value is read against
        if trial.user_attrs.get(A_STAGE) == "screen":
            # Screening measures an effect against NCCL's defaults, not a contender against the best:
            # a value gets its second run when its first did at least as well as the defaults.
            from ncdoc.tuner.effects import alone
            ref, _ = alone(self.records())
            return statistics.fmean(ref) if ref else 0.0
        floor = math.log1p(self.cfg.min_gain) / 2
        center = trial.user_attrs.get(A_CENTER)
        if center is not None and center in known:
            score = _screen_score(known[center])
            if score is not None:
                floor = max(floor, score - self.noise / 2)
        return floor

    def _runs_of(self, key: str) -> int:
        """How many runs the configuration `key` has had so far (its next run's repeat index)."""
        n = 0
        for t in self._trials():
            if A_DUP not in t.user_attrs and _is_measured(t) and \
                    json.dumps(self.space.complete(t.params), sort_keys=True) == key:
                n += len(t.user_attrs.get(A_SCORES) or ())
        return n

    def _refused(self) -> dict[tuple[str, str], int]:
        """(variable, value) -> the screening trial in which that value alone failed."""
        out: dict[tuple[str, str], int] = {}
        for t in self._trials():
            if t.user_attrs.get(A_STAGE) == "screen" and _is_failure(t) and \
                    t.user_attrs.get(A_KIND) in SETTING_FAILURES:
                changed = [(k, v) for k, v in t.params.items() if v != UNSET]
                if len(changed) == 1:
                    out.setdefault(changed[0], t.number)
        return out

    def _refused_in(self, params: Mapping[str, str]) -> str:
        """Why `params` need no run (a value that failed alone in screening), or ''."""
        if not self.cfg.screening:
            return ""
        refused = self._refused()
        for k, v in params.items():
            if (k, v) in refused and len([1 for x in params.values() if x != UNSET]) > 1:
                return f"not measured: {k}={v} failed alone in screening (trial {refused[(k, v)]})"
        return ""

    def _unmeasured(self, rng: random.Random, seen: set[str], space: SearchSpace,
                    tries: int = 200) -> dict[str, str] | None:
        """A random point of `space` that is valid and not measured yet, or None."""
        for _ in range(tries):
            params: dict[str, str] = {v.name: UNSET for v in self.space.variables}
            for var in space.variables:
                if space.active(var, params):
                    params[var.name] = rng.choice(var.values)
            if not self.space.violations(params) and not self._refused_in(params) and \
                    json.dumps(self.space.complete(params), sort_keys=True) not in seen:
                return params
        return None

    def _copy(self, trial: Any, prev: Any) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr(A_DUP, prev.number)
        for k in (A_BUCKETS, A_SIZES, A_FAILED, A_KIND, A_SCORES, A_STOPPED):
            if k in prev.user_attrs:
                trial.set_user_attr(k, prev.user_attrs[k])
        if prev.state == TrialState.COMPLETE:
            self._tell(trial, value=prev.value)
        else:
            self._tell(trial, state=prev.state)

    def _interrupt(self, trial: Any, params: Mapping[str, Any]) -> None:
        """Ctrl-C: the trial did not finish; store it as interrupted and queue it for --resume with
        `params`, the values its storage holds. Not trial.params: Optuna stores a suggested value before
        it caches it in the Trial, so a Ctrl-C between the two left a stored value that was never queued
        again (as --resume after a SIGKILL, which reads the storage, would have)."""
        from optuna.trial import TrialState

        trial.set_user_attr(A_FAILED, "interrupted: stopped by the user")
        trial.set_user_attr(A_KIND, INTERRUPTED)
        self._tell(trial, state=TrialState.FAIL)
        if params:
            self.study.enqueue_trial(dict(params), user_attrs={A_REQUEUED: trial.number,
                                                               A_STAGE: trial.user_attrs.get(A_STAGE, "")})

    def _report(self, started: float) -> None:
        best = self.best_estimate()
        self.on_progress({"done": self._n_measured, "failed": self._n_failed, "total": self.cfg.trials,
                          "best": math.exp(best) if best is not None else None,
                          "running": len(self.executor.in_flight()), "elapsed": time.monotonic() - started})

    # ---------------------------------------------------------------- results
    def records(self) -> list[TrialRecord]:
        from optuna.trial import TrialState

        state = {TrialState.COMPLETE: "complete", TrialState.FAIL: "failed", TrialState.PRUNED: "pruned"}
        out = []
        for t in self.study.get_trials(deepcopy=False):
            if t.state not in state:
                continue
            st = state[t.state]
            if t.state == TrialState.PRUNED and A_STOPPED in t.user_attrs:
                st = "stopped"
            elif t.state == TrialState.PRUNED and _is_failure(t):
                st = "failed"
            out.append(TrialRecord(number=t.number, params=self.space.complete(t.params), state=st,
                                   value=t.value if t.state == TrialState.COMPLETE else None,
                                   buckets=t.user_attrs.get(A_BUCKETS, {}), sizes=t.user_attrs.get(A_SIZES, {}),
                                   reason=t.user_attrs.get(A_FAILED) or t.user_attrs.get(A_STOPPED, ""),
                                   duplicate_of=t.user_attrs.get(A_DUP),
                                   scores=tuple(t.user_attrs.get(A_SCORES, ())), stage=t.user_attrs.get(A_STAGE, "")))
        return out
