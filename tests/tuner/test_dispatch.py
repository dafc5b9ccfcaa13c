"""Trials on Ray: a fresh process per trial with its env, concurrency only across node groups, hung
trials killed at their timeout, crashed workers recorded as failed, and the study going on."""

import os

import pytest

from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
from ncdoc.tuner.dispatch import Job, RayExecutor, Step, _ray_job, env_tuple
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.space import load_space
from ncdoc.tuner.study import StudyConfig, TuneStudy, storage_for
import tuner_toy
from tuner_toy import EnvEchoBackend

pytestmark = pytest.mark.ray


@pytest.fixture(autouse=True)
def _toy_by_value(ray_runtime):
    # Ray workers do not have tests/ on their path: ship the test backends by value.
    ray_runtime.cloudpickle.register_pickle_by_value(tuner_toy)
WORKLOAD = (("all_reduce", (1 << 20,)),)


def _job(key, env, timeout=30.0, steps=1):
    env = env_tuple(env)
    return Job(key, tuple(Step("trial", env, r) for r in range(steps)), WORKLOAD, timeout, process_env=env)


def _drain(ex):
    out = {}
    while ex.in_flight():
        for res in ex.wait():
            out[res.key] = res
    return out


def test_each_trial_runs_in_a_fresh_process_with_its_env_and_groups_run_concurrently(ray_runtime):
    ex = RayExecutor(EnvEchoBackend(delay_s=1.0), groups=2)
    assert ex.slots == 2
    ex.submit(_job("a", {"NCCL_TOY_BW": "11"}))
    ex.submit(_job("b", {"NCCL_TOY_BW": "22"}))
    with pytest.raises(RuntimeError, match="no free node group"):
        ex.submit(_job("c", {}))
    res = _drain(ex)
    ex.submit(_job("c", {"NCCL_TOY_BW": "11"}))
    res.update(_drain(ex))
    ex.close()
    row = {k: r.measurements[0][1].results("all_reduce")[0] for k, r in res.items()}
    assert (row["a"].busbw, row["b"].busbw, row["c"].busbw) == (11.0, 22.0, 11.0)
    assert len({row[k].algo for k in "abc"}) == 3                       # three worker processes
    assert {res["a"].group, res["b"].group} == {"ncdoc_nodegroup_0", "ncdoc_nodegroup_1"}
    start = {k: float(row[k].proto) for k in "ab"}
    assert abs(start["a"] - start["b"]) < 0.9                            # a and b overlapped in time


def test_process_env_unsets_inherited_nccl_variables(monkeypatch):  # no Ray needed
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NCCL_TOY_BW", "5")
    res = _ray_job(EnvEchoBackend(), _job("x", {"NCCL_TOY_BW": "7"}), __import__("ncdoc.tuner.backends",
                   fromlist=["RunContext"]).RunContext())
    assert res.ok and res.measurements[0][1].results("all_reduce")[0].busbw == 7.0
    assert "NCCL_ALGO" not in os.environ


BAD_SPACE = """\
schema_version: 1
name: bad
variables:
  NCCL_BUFFSIZE: {values: [unset, 0]}
  NCCL_IB_QPS_PER_CONNECTION: {values: [unset, 200]}
"""


def test_hung_and_crashed_trials_fail_with_reasons_and_the_study_goes_on(ray_runtime, tmp_path):
    # The simulator says NCCL hangs with a 0-byte buffer and crashes with 200 QPs; emulated, the
    # worker really hangs (killed at the timeout) or really dies.
    backend = SimBackend(sim_cluster(preset="h100-ib-2node"), emulate_failures=True)
    (tmp_path / "bad.yaml").write_text(BAD_SPACE)
    profile = get_profile("dp-allreduce", ["all_reduce"])
    space = load_space(str(tmp_path / "bad.yaml")).for_hardware(backend.hardware(), profile.collectives)
    store = storage_for(None, tmp_path)
    cfg = StudyConfig("bad", str(store), "grid", 0, 4, 1, 6.0, False)
    with RayExecutor(backend, groups=2) as ex:
        st = TuneStudy(cfg, space, profile, ex, storage=store, base_env={}, describe={})
        st.open()
        st.measure_baseline()
        st.optimize()
        recs = {tuple(sorted((k, v) for k, v in r.params.items() if v != "unset")): r for r in st.records()}
    assert len(recs) == 4                                                # every point ran: the study went on
    hung = recs[(("NCCL_BUFFSIZE", "0"),)]
    assert hung.state == "failed" and "no result after 8.6 s" in hung.reason and "killed" in hung.reason
    for crash in ((("NCCL_IB_QPS_PER_CONNECTION", "200"),),
                  (("NCCL_BUFFSIZE", "0"), ("NCCL_IB_QPS_PER_CONNECTION", "200"))):
        assert recs[crash].state == "failed" and "WorkerCrashedError" in recs[crash].reason
    assert recs[()].state == "complete" and recs[()].value == pytest.approx(1.0, abs=0.05)
    trial = next(t for t in st.study.trials if t.number == hung.number)
    assert trial.user_attrs["ncdoc.fail_kind"] == "timeout"


def test_gang_placement_group_path(ray_runtime):
    ex = RayExecutor(EnvEchoBackend(), groups=1, placement_groups=True)
    try:
        ex.submit(_job("pg", {"NCCL_TOY_BW": "3"}))
        res = _drain(ex)["pg"]
        assert res.ok and res.measurements[0][1].results("all_reduce")[0].busbw == 3.0
        assert len(ex._hosts["ncdoc_nodegroup_0"]) == 1
    finally:
        ex.close()
    ex2 = RayExecutor(EnvEchoBackend(), groups=1)                         # the group's resource is free again
    ex2.submit(_job("after", {}))
    assert _drain(ex2)["after"].ok
    ex2.close()
