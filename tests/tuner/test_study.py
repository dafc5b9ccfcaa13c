"""The study machinery (in process, with a tiny deterministic objective): baseline, trials, failures,
resume after a dead driver, samplers, storage, confirmation and the minimal env."""

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.confirm import confirm, minimal_env
from ncdoc.tuner.dispatch import InProcessExecutor
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.run import TuneOptions, run_tune
from ncdoc.tuner.space import UNSET
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import StudyConfig, TuneStudy, storage_for
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


def _study(toy, trials=12, sampler="tpe", resume=False, name="s", storage=None, seed=0):
    backend, profile, space, tmp = toy
    store = storage_for(storage, tmp)
    cfg = StudyConfig(name, str(store), sampler, seed, trials, 2, 30.0, resume)
    return TuneStudy(cfg, space, profile, InProcessExecutor(backend), storage=store,
                     base_env=backend.baseline_env(), describe=backend.describe())


def test_study_measures_baseline_first_then_finds_the_optimum(toy):
    st = _study(toy, trials=16)
    st.open()
    base = st.measure_baseline()
    assert base["buckets"] and all(v == pytest.approx(100.0, rel=0.01) for v in base["buckets"].values())
    st.optimize()
    recs = st.records()
    first = min(recs, key=lambda r: r.number)
    assert all(v == UNSET for v in first.params.values())           # NCCL's defaults are trial 0
    best = max((r for r in recs if r.state == "complete"), key=lambda r: r.value)
    assert best.params["NCCL_IB_QPS_PER_CONNECTION"] == "4" and best.params["NCCL_BUFFSIZE"] == "8388608"
    assert best.value == pytest.approx(1.43, rel=0.01)
    failed = [r for r in recs if r.state == "failed"]
    assert failed and all("LL refused" in r.reason for r in failed)  # recorded as failed, with the reason
    measured = [r for r in recs if r.state in ("complete", "failed") and r.duplicate_of is None]
    assert len(measured) == 16


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
    again = _study(toy, trials=6, resume=True)
    again.open()
    assert again.requeued == [orphan.number]
    t = again.study.trials[orphan.number]
    assert t.state.name == "FAIL" and t.user_attrs["ncdoc.failed"].startswith("interrupted")
    again.measure_baseline()
    again.optimize()
    trials = again.study.trials
    assert {t.number: t.value for t in trials if t.number in done_before} == done_before
    rerun = [t for t in trials if t.user_attrs.get("ncdoc.requeued_from") == orphan.number]
    assert len(rerun) == 1 and rerun[0].params == params and rerun[0].state.name in ("COMPLETE", "FAIL")
    assert rerun[0].number == orphan.number + 1                      # it runs first


def test_grid_sampler_exhausts_a_small_space_without_error(toy):
    st = _study(toy, trials=100, sampler="grid")
    st.open()
    st.measure_baseline()
    st.optimize()
    complete = {tuple(sorted(r.params.items())) for r in st.records() if r.state in ("complete", "failed")}
    assert len(complete) == 3 * 2 * 3 * 2


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


@pytest.mark.parametrize("sampler,module", [("cmaes", "cmaes"), ("qmc", "scipy")])
def test_optional_samplers_say_what_is_missing(toy, sampler, module):
    try:
        __import__(module)
        pytest.skip(f"{module} is installed")
    except ImportError:
        pass
    with pytest.raises(UsageError, match=f"{sampler} is not available"):
        _study(toy, sampler=sampler).open()


def test_confirmation_and_minimal_env_drop_what_does_not_matter(toy):
    backend, profile, space, tmp = toy
    st = _study(toy, trials=1)
    st.open()
    base = st.measure_baseline()["buckets"]
    common = dict(base_env={}, profile=profile, baseline_buckets=base, pairs=4, timeout_s=30.0, min_gain=0.01)
    cand = {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608", "NCCL_CROSS_NIC": "1",
            "NCCL_PROTO": UNSET}
    same = {"NCCL_IB_QPS_PER_CONNECTION": UNSET, "NCCL_BUFFSIZE": UNSET, "NCCL_CROSS_NIC": "0", "NCCL_PROTO": UNSET}
    good, flat = confirm(st.run_jobs, [cand, same], **common)
    assert good.recommended and good.comparison.pct(good.comparison.gain) == pytest.approx(43, abs=1.5)
    assert not flat.recommended and "does not clear the floor" in flat.why
    final, effects = minimal_env(st.run_jobs, cand, space=space, **common)
    assert final == {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608"}
    by = {e.name: e for e in effects}
    assert not by["NCCL_CROSS_NIC"].kept and "within noise" in by["NCCL_CROSS_NIC"].why
    assert by["NCCL_IB_QPS_PER_CONNECTION"].kept and by["NCCL_IB_QPS_PER_CONNECTION"].cost > 0.2
    assert by["NCCL_BUFFSIZE"].kept and by["NCCL_BUFFSIZE"].n == 4


def test_run_tune_in_process_writes_everything(tmp_path):
    space = tmp_path / "toy.yaml"
    space.write_text(SPACE)
    out = tmp_path / "out"
    res = run_tune(TuneOptions(space=str(space), trials=14, repeats=2, executor="inprocess", out=str(out),
                               formats=("json", "nccl.conf")), backend=ToyBackend(base_env={"NCCL_CROSS_NIC": "1"}))
    assert res.env == {"NCCL_CROSS_NIC": "1", "NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "8388608"}
    assert res.final is not None and res.final.lcb > 0.3
    names = sorted(p.name for p in out.iterdir())
    assert names == ["EXPLAIN.md", "nccl.conf", "nccl.env", "nccl.env.json", "nccl_tuner.conf", "study.db",
                     "summary.json"]
    summary = res.to_json()
    assert summary["schema_version"] == 1 and summary["recommended_env"]["NCCL_IB_QPS_PER_CONNECTION"] == "4"
    explain = (out / "EXPLAIN.md").read_text()
    for want in ("NCCL_IB_QPS_PER_CONNECTION", "queue pairs", f"n={TuneOptions().confirm_pairs}",
                 "Bus bandwidth by size", "What was tried",
                 "LL refused"):
        assert want in explain, want
