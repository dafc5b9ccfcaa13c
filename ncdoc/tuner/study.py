"""The Optuna study: storage, sampler, baseline, the ask/tell loop over an executor, resume.

The objective of a trial is exp(weighted mean over workload buckets of log(busbw / baseline
busbw)): 1.0 is the baseline (the environment jobs run with today), 1.10 is 10 % better. Each
trial runs `repeats` times; per size the median counts. A trial that fails (NCCL refused,
hung, crashed, its worker died) is stored as FAIL with the reason, never as a slow result.

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

import json
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner.backends import Measurement
from ncdoc.tuner.dispatch import Executor, Job, JobResult, Step, env_tuple
from ncdoc.tuner.profiles import Profile
from ncdoc.tuner.samplers import SAMPLERS, check_sampler, make_sampler  # noqa: F401  (re-exported)
from ncdoc.tuner.space import UNSET, SearchSpace, apply_params
from ncdoc.tuner.storage import storage_for  # noqa: F401  (re-exported)

A_FAILED, A_KIND, A_BUCKETS, A_SIZES, A_DUP, A_REQUEUED = (
    "ncdoc.failed", "ncdoc.fail_kind", "ncdoc.buckets", "ncdoc.sizes", "ncdoc.duplicate_of", "ncdoc.requeued_from")
INTERRUPTED = "interrupted"
# Failure kinds that are evidence against the setting (see the module docstring).
SETTING_FAILURES = ("init", "call", "crash", "hang", "timeout")


def _is_failure(t: Any) -> bool:
    """A measured trial that failed (either storage state), not a constraint reject or duplicate."""
    kind = t.user_attrs.get(A_KIND)
    return kind is not None and kind != INTERRUPTED


def _is_measured(t: Any) -> bool:
    from optuna.trial import TrialState
    if A_DUP in t.user_attrs:
        return False
    return t.state == TrialState.COMPLETE or (t.state in (TrialState.FAIL, TrialState.PRUNED) and _is_failure(t))


@dataclass(frozen=True)
class StudyConfig:
    study_name: str
    storage: str                   # an Optuna storage URL, or a journal file path (.log/.journal)
    sampler: str = "tpe"
    seed: int = 0
    trials: int = 50               # measured trials (constraint rejects and duplicates do not count)
    repeats: int = 3
    timeout_s: float = 120.0
    resume: bool = False


@dataclass(frozen=True)
class TrialRecord:
    number: int
    params: dict[str, str]
    state: str                     # complete | failed | pruned
    value: float | None            # score: 1.0 = baseline
    buckets: dict[str, float]
    sizes: dict[str, list]         # collective -> [[size, busbw, algo, proto, nchannels], ...]
    reason: str = ""
    duplicate_of: int | None = None

    def changes(self) -> dict[str, str]:
        return {k: v for k, v in self.params.items() if v != UNSET}


def summarise(profile: Profile, measurements: list[Measurement],
              baseline: Mapping[str, float] | None) -> tuple[dict[str, float], dict[str, list], float | None]:
    """Median busbw per size over repeats, bucket busbw, and the score against `baseline`."""
    sizes: dict[str, list] = {}
    med: dict[str, dict[int, float]] = {}
    for collective, wanted in profile.workload():
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
        import math
        value = math.exp(profile.log_score(buckets, baseline))
    return buckets, sizes, value


class TuneStudy:
    """One study: open or resume it, measure the baseline, run the trials."""

    def __init__(self, config: StudyConfig, space: SearchSpace, profile: Profile, executor: Executor, *,
                 storage: Any, base_env: Mapping[str, str], describe: Mapping[str, Any],
                 on_progress: Callable[[dict], None] | None = None, log: Callable[[str], None] | None = None):
        self.cfg = config
        self.space = space
        self.profile = profile
        self.executor = executor
        self.storage = storage
        self.base_env = dict(base_env)
        self.describe = dict(describe)
        self.on_progress = on_progress or (lambda info: None)
        self.log = log or (lambda msg: None)
        self.workload = tuple((c, tuple(s)) for c, s in profile.workload())
        self.study: Any = None
        self.baseline: dict[str, Any] = {}
        self.requeued: list[int] = []
        self._mine: dict[int, Any] = {}          # trials asked by this driver: Ctrl-C must close them

    # ---------------------------------------------------------------- opening
    def identity(self) -> dict[str, Any]:
        return {"space": self.space.fingerprint(), "profile": self.profile.to_dict(),
                "base_env": self.base_env, "backend": self.describe}

    def open(self) -> None:
        import optuna

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
                                         direction="maximize", load_if_exists=True)
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
        return self.storage if isinstance(self.storage, str) else "the journal file"

    def _requeue_stale(self) -> None:
        from optuna.trial import TrialState

        storage = self.study._storage
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            storage.set_trial_user_attr(t._trial_id, A_FAILED, "interrupted: the driver stopped while it ran")
            storage.set_trial_user_attr(t._trial_id, A_KIND, INTERRUPTED)
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            if t.params:
                self.study.enqueue_trial(dict(t.params), user_attrs={A_REQUEUED: t.number})
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
                    self.executor.submit(todo.pop(0))
                for res in self.executor.wait():
                    out[res.key] = res
        except BaseException:
            self.executor.cancel_all()
            raise
        return out

    def measure_baseline(self) -> dict[str, Any]:
        if self.baseline:
            self.log("baseline: reusing the measurement stored with the study")
            return self.baseline
        env = env_tuple(self.base_env)
        job = Job("baseline", tuple(Step("baseline", env, r) for r in range(self.cfg.repeats)), self.workload,
                  self.cfg.timeout_s)
        res = self.run_jobs([job])["baseline"]
        if not res.ok:
            raise RunnerError("the baseline (the current environment) could not be measured", cause=res.reason)
        buckets, sizes, _ = summarise(self.profile, [m for _, m in res.measurements], None)
        self.baseline = {"env": self.base_env, "buckets": buckets, "sizes": sizes}
        self.study.set_user_attr("ncdoc.baseline", self.baseline)
        if not self.study.trials:
            # NCCL's own defaults are the first point worth knowing, whatever the sampler would pick;
            # then the space's known-good starting points (vendor platform defaults and the like).
            self.study.enqueue_trial({v.name: UNSET for v in self.space.variables})
            for start in self.space.starts:
                self.study.enqueue_trial({**{v.name: UNSET for v in self.space.variables}, **dict(start)})
        return self.baseline

    # ---------------------------------------------------------------- the loop
    def _measured(self) -> int:
        return sum(1 for t in self.study.get_trials(deepcopy=False) if _is_measured(t))

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

    def _known(self) -> dict[str, Any]:
        from optuna.trial import TrialState
        out = {}
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL,
                                                                   TrialState.PRUNED)):
            if t.state == TrialState.COMPLETE or _is_failure(t):
                out.setdefault(json.dumps(self.space.complete(t.params), sort_keys=True), t)
        return out

    def optimize(self) -> None:
        from optuna.trial import TrialState

        base_buckets = self.baseline["buckets"]
        pending: dict[str, Any] = {}
        known = self._known()
        asks, cap, started, exhausted = 0, 20 * self.cfg.trials + 50, time.monotonic(), False
        repeats_in_a_row = 0
        rng = random.Random(f"{self.cfg.seed}:{len(self.study.trials)}")
        try:
            while True:
                done = self._measured()
                while (not exhausted and len(pending) < self.executor.slots
                       and done + len(pending) < self.cfg.trials and asks < cap):
                    if self.cfg.sampler == "grid" and self.study.sampler.is_exhausted(self.study):
                        exhausted = True
                        break
                    asks += 1
                    trial = self.study.ask()
                    self._mine[trial.number] = trial
                    params = self.space.suggest(trial)
                    bad = self.space.violations(params)
                    if bad:
                        trial.set_user_attr(A_FAILED, "constraint: " + "; ".join(bad))
                        self._tell(trial, state=TrialState.PRUNED)
                        continue
                    key = json.dumps(self.space.complete(params), sort_keys=True)
                    if key in known or any(k == key for _, k in pending.values()):
                        # Measured (or running) already: reuse the result, spend no run. A sampler that
                        # keeps returning to known points gets an unmeasured one queued next.
                        if key in known:
                            self._copy(trial, known[key])
                        else:
                            trial.set_user_attr(A_FAILED, "duplicate of a running trial")
                            self._tell(trial, state=TrialState.PRUNED)
                        repeats_in_a_row += 1
                        if repeats_in_a_row >= 2 and self.cfg.sampler != "grid":
                            fresh = self._unmeasured(rng, set(known) | {k for _, k in pending.values()})
                            if fresh is None:
                                self.log("every point of the search space has been measured")
                                exhausted = True
                            else:
                                self.study.enqueue_trial(fresh)
                        continue
                    repeats_in_a_row = 0
                    env = env_tuple(apply_params(self.base_env, params))
                    job = Job(f"trial-{trial.number}", tuple(Step("trial", env, r) for r in range(self.cfg.repeats)),
                              self.workload, self.cfg.timeout_s)
                    self.executor.submit(job)
                    pending[job.key] = (trial, key)
                if not pending:
                    break
                for res in self.executor.wait():
                    trial, key = pending.pop(res.key)
                    self._record(trial, res, base_buckets)
                    known.setdefault(key, self.study._storage.get_trial(trial._trial_id))
                    self._report(started)
        except BaseException:
            self.executor.cancel_all()
            self._interrupt_open_trials()
            raise

    def _interrupt_open_trials(self) -> None:
        """Every trial this driver asked for and did not finish (running, or stopped inside the
        storage commit of its result) is stored as interrupted and queued for --resume."""
        from optuna.trial import TrialState

        storage = self.study._storage
        for number, trial in list(self._mine.items()):
            if storage.get_trial(trial._trial_id).state == TrialState.RUNNING:
                self._interrupt(trial)
            del self._mine[number]

    def _unmeasured(self, rng: random.Random, seen: set[str], tries: int = 200) -> dict[str, str] | None:
        """A random point of the space that is valid and not measured yet, or None."""
        for _ in range(tries):
            params: dict[str, str] = {}
            for var in self.space.variables:
                if self.space.active(var, params):
                    params[var.name] = rng.choice(var.values)
            if not self.space.violations(params) and \
                    json.dumps(self.space.complete(params), sort_keys=True) not in seen:
                return params
        return None

    def _record(self, trial: Any, res: JobResult, base_buckets: Mapping[str, float]) -> None:
        from optuna.trial import TrialState

        if not res.ok:
            trial.set_user_attr(A_FAILED, res.reason)
            trial.set_user_attr(A_KIND, res.kind)
            self._tell(trial, state=TrialState.PRUNED if res.kind in SETTING_FAILURES else TrialState.FAIL)
            self.log(f"trial {trial.number} failed ({res.kind}): {res.reason}")
            return
        buckets, sizes, value = summarise(self.profile, [m for _, m in res.measurements], base_buckets)
        trial.set_user_attr(A_BUCKETS, buckets)
        trial.set_user_attr(A_SIZES, sizes)
        self._tell(trial, value=value)

    def _copy(self, trial: Any, prev: Any) -> None:
        from optuna.trial import TrialState

        trial.set_user_attr(A_DUP, prev.number)
        for k in (A_BUCKETS, A_SIZES, A_FAILED, A_KIND):
            if k in prev.user_attrs:
                trial.set_user_attr(k, prev.user_attrs[k])
        if prev.state == TrialState.COMPLETE:
            self._tell(trial, value=prev.value)
        else:
            self._tell(trial, state=prev.state)

    def _interrupt(self, trial: Any) -> None:
        """Ctrl-C: the trial did not finish; store it as interrupted and queue it for --resume."""
        from optuna.trial import TrialState

        trial.set_user_attr(A_FAILED, "interrupted: stopped by the user")
        trial.set_user_attr(A_KIND, INTERRUPTED)
        self._tell(trial, state=TrialState.FAIL)
        if trial.params:
            self.study.enqueue_trial(dict(trial.params), user_attrs={A_REQUEUED: trial.number})

    def _report(self, started: float) -> None:
        recs = self.records()
        ok = [r for r in recs if r.state == "complete" and r.duplicate_of is None]
        failed = [r for r in recs if r.state == "failed" and r.duplicate_of is None
                  and not r.reason.startswith("interrupted")]
        best = max((r.value for r in ok if r.value is not None), default=None)
        self.on_progress({"done": len(ok) + len(failed), "failed": len(failed), "total": self.cfg.trials,
                          "best": best, "running": len(self.executor.in_flight()),
                          "elapsed": time.monotonic() - started})

    # ---------------------------------------------------------------- results
    def records(self) -> list[TrialRecord]:
        from optuna.trial import TrialState

        state = {TrialState.COMPLETE: "complete", TrialState.FAIL: "failed", TrialState.PRUNED: "pruned"}
        out = []
        for t in self.study.get_trials(deepcopy=False):
            if t.state not in state:
                continue
            st = "failed" if t.state == TrialState.PRUNED and _is_failure(t) else state[t.state]
            out.append(TrialRecord(number=t.number, params=self.space.complete(t.params), state=st,
                                   value=t.value if t.state == TrialState.COMPLETE else None,
                                   buckets=t.user_attrs.get(A_BUCKETS, {}), sizes=t.user_attrs.get(A_SIZES, {}),
                                   reason=t.user_attrs.get(A_FAILED, ""), duplicate_of=t.user_attrs.get(A_DUP)))
        return out
