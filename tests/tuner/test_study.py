"""The study machinery (in process, with a tiny deterministic objective): baseline, screening, the joint
search, early stopping, failures, resume after a dead driver, samplers, storage, confirmation and
leave-one-out."""

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.confirm import confirm_and_reduce
from ncdoc.tuner.dispatch import InProcessExecutor
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.run import TuneOptions, run_tune
from ncdoc.tuner.space import UNSET
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import RACE_RUNS, StudyConfig, TuneStudy, incumbent, refine_order, storage_for
from tuner_toy import SPACE, ToyBackend

optuna = pytest.importorskip("optuna")


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(SPACE)
    backend = ToyBackend()
    profile = get_profile("dp-allreduce")
    space = load_space(str(path)).for_hardware(backend.hardware(), profile.collectives)
    return backend, profile, space, tmp_path


def _study(toy, trials=12, sampler="tpe", resume=False, name="s", storage=None, seed=0, repeats=2, rebaseline=10):
    backend, profile, space, tmp = toy
    store = storage_for(storage, tmp)
    cfg = StudyConfig(name, str(storage or tmp / "study.journal"), sampler, seed, trials, repeats, 30.0, resume,
                      rebaseline_every=rebaseline)
    return TuneStudy(cfg, space, profile, InProcessExecutor(backend), storage=store,
                     base_env=backend.baseline_env(), describe=backend.describe())


def test_defaults_then_screening_then_refinement_finds_the_optimum(toy):
    st = _study(toy, trials=16)
    st.open()
    base = st.measure_baseline()
    assert base["buckets"] and all(v == pytest.approx(100.0, rel=0.01) for v in base["buckets"].values())
    st.optimize()
    recs = sorted(st.records(), key=lambda r: r.number)
    assert all(v == UNSET for v in recs[0].params.values()) and recs[0].stage == "start"   # NCCL's defaults first
    screened = [r for r in recs if r.stage == "screen"]
    assert {tuple(r.changes().items()) for r in screened} == {
        (("NCCL_IB_QPS_PER_CONNECTION", "2"),), (("NCCL_IB_QPS_PER_CONNECTION", "4"),),
        (("NCCL_BUFFSIZE", "8388608"),), (("NCCL_CROSS_NIC", "0"),), (("NCCL_CROSS_NIC", "1"),),
        (("NCCL_IB_TC", "1"),)}                                           # each value alone
    optimum = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608"}
    combined = [r for r in recs if r.stage == "combine"]          # each variable's best screened value together
    assert len(combined) == 1 and combined[0].changes() in (optimum, {**optimum, "NCCL_CROSS_NIC": "1"})
    refined = [r for r in recs if r.stage == "refine"]
    moved = {k for k, v in refined[0].params.items() if v != combined[0].params[k]}
    assert len(moved) == 1                                         # a single change to the best point
    again = [r for r in recs if r.stage == "remeasure"]
    first = {tuple(r.changes().items()): r.scores for r in recs if r.stage != "remeasure"}
    assert again and all(r.scores != first[tuple(r.changes().items())] for r in again)   # new runs, not a copy
    later = [r for r in recs if r.stage != "screen" and r.params["NCCL_IB_TC"] == "1"]
    assert later and all(r.state == "pruned" and "failed alone in screening" in r.reason for r in later)
    best, est = incumbent(recs, st.noise, st.space)
    assert best.changes() in (optimum, {**optimum, "NCCL_CROSS_NIC": "1"})   # (that one changes nothing)
    assert est == pytest.approx(__import__("math").log(1.43), abs=0.01)
    failed = [r for r in recs if r.state == "failed"]
    assert failed and all("traffic class 1 refused" in r.reason for r in failed)   # failed, with NCCL's reason


def test_clearly_worse_trials_stop_after_their_first_run(toy):
    st = _study(toy, trials=16, repeats=3)
    st.open()
    st.measure_baseline()
    st.optimize()
    recs = {tuple(sorted(r.changes().items())): r for r in st.records() if r.duplicate_of is None}
    worse = recs[(("NCCL_CROSS_NIC", "0"),)]
    assert worse.state == "stopped" and len(worse.scores) == 1 and "clearly worse than NCCL's defaults" in worse.reason
    defaults = recs[()]
    assert len(defaults.scores) == 3                   # what every screened value is read against: every run
    ref = sum(defaults.scores) / 3
    for r in recs.values():                            # a screened value runs again when its first run did
        if r.stage == "screen" and r.scores:           # at least as well as the defaults, else not
            assert (len(r.scores) == 3) == (r.scores[0] >= ref), r
    later = [r for r in recs.values() if r.stage not in ("screen", "start") and "clearly worse" in r.reason]
    assert later and all(len(r.scores) == 1 and "than the best so far" in r.reason for r in later)
    best = recs[(("NCCL_BUFFSIZE", "8388608"), ("NCCL_IB_QPS_PER_CONNECTION", "4"))]
    # ... and a contender too close to the best to tell apart gets up to RACE_RUNS more
    assert best.state == "complete" and 3 <= len(best.scores) <= 3 + RACE_RUNS
    assert all(len(r.scores) <= 3 + RACE_RUNS for r in recs.values())
    assert st.measurements < 16 * 3


def test_existing_study_needs_resume_and_same_settings(toy):
    st = _study(toy, trials=2)
    st.open()
    st.measure_baseline()
    st.optimize()
    with pytest.raises(UsageError, match="already exists.*--resume"):
        _study(toy).open()
    backend, profile, space, tmp = toy
    other = TuneStudy(StudyConfig("s", "x", "tpe", 0, 2, 2, 30.0, True), space, get_profile("latency"),
                      InProcessExecutor(backend), storage=storage_for(None, tmp), base_env={}, describe={})
    with pytest.raises(UsageError, match="cannot resume.*profile"):
        other.open()


def test_resume_marks_running_trials_failed_and_requeues_them(toy):
    st = _study(toy, trials=4)
    st.open()
    st.measure_baseline()
    st.optimize()
    # A driver that dies mid-trial leaves the trial RUNNING forever.
    orphan = st.study.ask()
    params = st.space.suggest(orphan)
    done_before = {t.number: t.value for t in st.study.trials if t.state.name == "COMPLETE"}
    again = _study(toy, trials=12, resume=True)
    again.open()
    assert again.requeued == [orphan.number]
    t = again.study.trials[orphan.number]
    assert t.state.name == "FAIL" and t.user_attrs["ncdoc.failed"].startswith("interrupted")
    again.measure_baseline()
    again.optimize()
    trials = again.study.trials
    assert {t.number: t.value for t in trials if t.number in done_before} == done_before
    rerun = [t for t in trials if t.user_attrs.get("ncdoc.requeued_from") == orphan.number]
    assert len(rerun) == 1 and rerun[0].params == params and rerun[0].state.name in ("COMPLETE", "FAIL", "PRUNED")


def test_ctrl_c_just_after_a_value_was_stored_queues_the_trial_with_that_value(toy):
    # Optuna stores a suggested value, then caches it in the Trial object: a Ctrl-C between the two
    # leaves a trial whose storage holds a value its Trial does not show. It is queued again with
    # what the storage holds, as --resume after a SIGKILL would do.
    st = _study(toy, trials=12)
    st.open()
    st.measure_baseline()
    storage = st.study._storage
    real, calls = storage.set_trial_param, []

    def set_then_interrupt(trial_id, name, value, distribution):
        real(trial_id, name, value, distribution)
        calls.append(trial_id)
        if len(calls) == 9:
            raise KeyboardInterrupt

    storage.set_trial_param = set_then_interrupt
    with pytest.raises(KeyboardInterrupt):
        st.optimize()
    trials = st.study.get_trials(deepcopy=False)
    hit = next(t for t in trials if t._trial_id == calls[-1])
    assert hit.state.name == "FAIL" and hit.user_attrs["ncdoc.fail_kind"] == "interrupted" and hit.params
    queued = [t for t in trials if t.user_attrs.get("ncdoc.requeued_from") == hit.number]
    assert len(queued) == 1 and queued[0].state.name == "WAITING"
    assert queued[0].system_attrs["fixed_params"] == hit.params


def test_grid_sampler_exhausts_a_small_space_without_screening(toy):
    st = _study(toy, trials=100, sampler="grid")
    st.open()
    st.measure_baseline()
    st.optimize()
    measured = {tuple(sorted(r.params.items())) for r in st.records() if r.state != "pruned"}
    assert len(measured) == 3 * 2 * 3 * 2
    assert not [r for r in st.records() if r.stage == "screen"]


def test_the_baseline_is_measured_again_during_a_long_study(toy):
    st = _study(toy, trials=14, rebaseline=4)
    st.open()
    st.measure_baseline()
    st.optimize()
    runs = st.study.user_attrs["ncdoc.rebaseline"]
    assert len(runs) >= 2 and all(abs(r) < 0.01 for r in runs)    # no drift here, so nothing is taken out
    assert st.drift() == 0.0


class _SlowingToy(ToyBackend):
    """The toy, 15 % slower for everything from its 6th measurement on (the fabric got busier)."""

    def measure(self, env, workload, repeat_index, **kw):
        m = super().measure(env, workload, repeat_index, **kw)
        if self.calls <= 5:
            return m
        return type(m)(tuple((c, tuple(type(r)(size=r.size, busbw=r.busbw * 0.85, algo=r.algo, proto=r.proto,
                                               nchannels=r.nchannels) for r in rows)) for c, rows in m.rows))


def test_a_drifting_baseline_is_taken_out_of_later_scores(toy):
    backend, profile, space, tmp = toy
    slowing = _SlowingToy()
    cfg = StudyConfig("s", str(tmp / "study.journal"), "tpe", 0, 14, 2, 30.0, False, rebaseline_every=3)
    st = TuneStudy(cfg, space, profile, InProcessExecutor(slowing), storage=storage_for(None, tmp),
                   base_env={}, describe={})
    st.open()
    st.measure_baseline()
    st.optimize()
    assert st.drift() == pytest.approx(__import__("math").log(0.85), abs=0.01)
    best, _ = incumbent(st.records(), st.noise)
    assert best.changes().get("NCCL_IB_QPS_PER_CONNECTION") == "4"     # later trials were not penalised


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_journal_storage(toy, sampler):
    backend, profile, space, tmp = toy
    st = _study(toy, trials=3, sampler=sampler, storage=str(tmp / "shared" / "study.journal"))
    st.open()
    st.measure_baseline()
    st.optimize()
    assert (tmp / "shared" / "study.journal").stat().st_size > 0
    loaded = optuna.load_study(study_name="s", storage=storage_for(str(tmp / "shared" / "study.journal"), tmp))
    assert len([t for t in loaded.trials if t.state.name == "COMPLETE"]) >= 2


def test_sqlite_storage_still_works(toy):
    backend, profile, space, tmp = toy
    st = _study(toy, trials=3, storage=str(tmp / "study.db"))
    st.open()
    st.measure_baseline()
    st.optimize()
    loaded = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp / 'study.db'}")
    assert [t for t in loaded.trials if t.state.name == "COMPLETE"]


@pytest.mark.parametrize("sampler,module", [("cmaes", "cmaes"), ("qmc", "scipy")])
def test_optional_samplers_say_what_is_missing(toy, sampler, module):
    try:
        __import__(module)
        pytest.skip(f"{module} is installed")
    except ImportError:
        pass
    with pytest.raises(UsageError, match=f"{sampler} is not available"):
        _study(toy, sampler=sampler).open()


def test_confirmation_guard_and_leave_one_out_drop_what_does_not_matter(toy):
    backend, profile, space, tmp = toy
    st = _study(toy, trials=1)
    st.open()
    base = st.measure_baseline()["buckets"]
    common = dict(space=space, trial_base={}, base_env={}, profile=profile, baseline_buckets=base, pairs=6,
                  timeout_s=30.0, min_gain=0.01)
    flat = {"NCCL_IB_QPS_PER_CONNECTION": UNSET, "NCCL_BUFFSIZE": UNSET, "NCCL_CROSS_NIC": "1", "NCCL_IB_TC": UNSET}
    cand = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608", "NCCL_CROSS_NIC": "1", "NCCL_IB_TC": UNSET}
    out = confirm_and_reduce(st.run_jobs, [flat, cand], **common)
    first, second = out.verdicts
    assert not first.recommended and "does not clear the floor" in first.why       # tried first, rejected
    assert second.recommended and second.comparison.pct(second.comparison.gain) == pytest.approx(43, abs=1.5)
    assert second.comparison.p_wilcoxon <= 1 / 64 and not second.comparison.regressions
    assert out.changes == {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608"}
    last = {e.name: e for e in out.effects if e.final}
    assert set(last) == {"NCCL_IB_QPS_PER_CONNECTION", "NCCL_BUFFSIZE"}      # figures from the final env
    assert last["NCCL_IB_QPS_PER_CONNECTION"].cost > 0.2 and last["NCCL_BUFFSIZE"].n == 6
    dropped = [e for e in out.effects if not e.kept]
    assert [e.name for e in dropped] == ["NCCL_CROSS_NIC"] and "within noise" in dropped[0].why
    assert out.final.regressions == () and out.final.n == 6
    # A candidate that slows a size of the guard workload is rejected, however large its gain
    worse = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": UNSET, "NCCL_CROSS_NIC": "0", "NCCL_IB_TC": UNSET}
    rejected = confirm_and_reduce(st.run_jobs, [worse], **common)
    assert not rejected.changes and not rejected.verdicts[0].recommended


def test_run_tune_in_process_writes_everything(tmp_path):
    space = tmp_path / "toy.yaml"
    space.write_text(SPACE)
    out = tmp_path / "out"
    res = run_tune(TuneOptions(space=str(space), trials=14, out=str(out), formats=("json", "nccl.conf")),
                   backend=ToyBackend(base_env={"NCCL_CROSS_NIC": "1"}))
    assert res.env == {"NCCL_CROSS_NIC": "1", "NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608"}
    assert res.final is not None and res.final.lcb > 0.3 and not res.final.regressions
    names = sorted(p.name for p in out.iterdir())
    assert names == ["EXPLAIN.md", "nccl.conf", "nccl.env", "nccl.env.json", "study.journal", "study.journal.driver",
                     "summary.json"]
    summary = res.to_json()
    assert summary["schema_version"] == 2 and summary["changes"]["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    assert summary["simulated"] is False and summary["backend"] == "toy"
    explain = (out / "EXPLAIN.md").read_text()
    for want in ("NCCL_IB_QPS_PER_CONNECTION", "queue pairs", "Bus bandwidth by size", "What was tried",
                 "traffic class 1 refused", "No nccl_tuner.conf was written", "cannot load a tuner plugin"):
        assert want in explain, want
    assert "SIMULATED" not in explain


def _rec(number, scores, **changes):
    from ncdoc.tuner.study import TrialRecord
    params = {"NCCL_IB_QPS_PER_CONNECTION": UNSET, "NCCL_BUFFSIZE": UNSET, **changes}
    return TrialRecord(number=number, params=params, state="complete", value=None, buckets={}, sizes={},
                       scores=tuple(scores))


def test_candidates_prefer_the_smaller_change_when_measurements_cannot_tell(toy):
    from ncdoc.tuner.run import _candidates
    from ncdoc.tuner.study import ranked_trials
    space = toy[2]
    close = [_rec(1, [0.130, 0.128], NCCL_IB_QPS_PER_CONNECTION="4"),
             _rec(2, [0.134, 0.132], NCCL_IB_QPS_PER_CONNECTION="16")]
    cands = _candidates(ranked_trials(close, 0.01), {}, 2, records=close, noise=0.01, space=space)
    assert [c["NCCL_IB_QPS_PER_CONNECTION"] for c in cands] == ["4", "16"]     # 4 QPs: nearer NCCL's 1
    clear = [close[0], _rec(2, [0.200, 0.198], NCCL_IB_QPS_PER_CONNECTION="16")]
    cands = _candidates(ranked_trials(clear, 0.01), {}, 2, records=clear, noise=0.01, space=space)
    assert [c["NCCL_IB_QPS_PER_CONNECTION"] for c in cands] == ["16", "4"]     # a clear lead still wins
    # Reduced to the variables that showed an effect, a configuration measured alone speaks for itself.
    lucky = [close[0], _rec(2, [0.130, 0.128], NCCL_IB_QPS_PER_CONNECTION="16"),
             _rec(3, [0.170, 0.168], NCCL_IB_QPS_PER_CONNECTION="16", NCCL_BUFFSIZE="8388608")]
    cands = _candidates(ranked_trials(lucky, 0.01), {}, 1, {"NCCL_IB_QPS_PER_CONNECTION"}, records=lucky,
                        noise=0.01, space=space)
    assert cands[0]["NCCL_IB_QPS_PER_CONNECTION"] == "4" and cands[0]["NCCL_BUFFSIZE"] == UNSET


def test_a_child_no_trial_has_set_is_read_on_the_best_point_before_anything_else():
    """Adaptive routing's threshold is conditional (screening skips it) and the model knows nothing of
    it: refinement's first trials are its screened values on top of the best point, which has AR on."""
    from pathlib import Path

    from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
    from ncdoc.tuner.safety import safe_space

    profile = get_profile("fsdp")
    backend = SimBackend(sim_cluster(preset="h100-roce-8node-ar"), seed=1)
    root = Path(__file__).resolve().parents[2]
    space = safe_space(load_space(str(root / "tuners" / "spaces" / "roce.yaml")), backend.hardware(),
                       profile.collectives)
    cfg = StudyConfig("child", "memory", "tpe", 1, 18, 2, 60.0, False)
    st = TuneStudy(cfg, space, profile, InProcessExecutor(backend), storage=optuna.storages.InMemoryStorage(),
                   base_env={}, describe={})
    st.open()
    st.measure_baseline()
    st.optimize()
    recs = sorted(st.records(), key=lambda r: r.number)
    before = [r for r in recs if r.stage in ("start", "screen", "combine")]
    assert all(r.params["NCCL_IB_AR_THRESHOLD"] == UNSET for r in before)
    refined = [r for r in recs if r.stage == "refine"][:2]
    assert {r.params["NCCL_IB_AR_THRESHOLD"] for r in refined} == {"65536", "262144"}
    assert all(r.params["NCCL_IB_ADAPTIVE_ROUTING"] == "1" for r in refined)
    assert refined[0].params == {**refined[1].params, "NCCL_IB_AR_THRESHOLD": refined[0].params["NCCL_IB_AR_THRESHOLD"]}



def test_refinement_reads_each_variable_and_side_once_on_the_best_point_before_a_second_value():
    center = {"A": "8", "C": "x", "B": "unset"}

    def side(name, value, ref):                 # A is ordered (numbers), C is not
        return (int(value) > int(ref)) - (int(value) < int(ref)) if name == "A" else 0
    below, above, beyond = {**center, "A": "2"}, {**center, "A": "16"}, {**center, "A": "32"}
    other_c, first_b = {**center, "C": "y"}, {**center, "B": "1"}
    noise = 0.01
    scored = [(0.009, below), (0.008, other_c), (0.006, beyond), (0.003, above), (0.002, first_b)]
    assert refine_order(scored, center, set(), noise, side) == [below, other_c, beyond, above, first_b]
    # A looked at below 8 and C at another value: the side above 8 and B still get their first look
    looked = {("A", -1), ("C", 0)}
    assert refine_order(scored, center, looked, noise, side) == [beyond, above, first_b]
    # once every variable and side has had its look, the rest by expected improvement, down to MIN_EI's share
    looked |= {("A", 1), ("B", 0)}
    assert refine_order(scored + [(0.00005, {**center, "C": "z"})], center, looked, noise, side) == \
        [below, other_c, beyond, above, first_b]
