"""Jobs on Ray: a fresh process per job only for backends whose NCCL lives in the worker, reused workers
otherwise, concurrency only across node groups, time limits counted from when a job started, hung
trials killed, crashed workers recorded as failed, and the study going on."""

import os

import pytest

from ncdoc.tuner import dispatch
from ncdoc.tuner.backends import RunContext
from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
from ncdoc.tuner.dispatch import InProcessExecutor, Job, RayExecutor, Step, apply_process_env, env_tuple, make_executor
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import StudyConfig, TuneStudy, storage_for
import tuner_toy
from tuner_toy import BarrierBackend, EnvEchoBackend, ToyBackend, drain

WORKLOAD = (("all_reduce", (1 << 20,)),)


@pytest.fixture
def toy_by_value(ray_runtime):
    # Ray workers do not have tests/ on their path: ship the test backends by value.
    ray_runtime.cloudpickle.register_pickle_by_value(tuner_toy)
    return ray_runtime


def _job(key, env, timeout=30.0, steps=1):
    env = env_tuple(env)
    return Job(key, tuple(Step("trial", env, r) for r in range(steps)), WORKLOAD, timeout)


def _row(res):
    return res.measurements[0][1].results("all_reduce")[0]


@pytest.mark.ray
def test_fresh_process_backends_get_one_worker_per_job_with_its_env(toy_by_value):
    ex = RayExecutor(EnvEchoBackend(), groups=2)
    assert ex.slots == 2
    ex.submit(_job("a", {"NCCL_TOY_BW": "11"}))
    ex.submit(_job("b", {"NCCL_TOY_BW": "22"}))
    with pytest.raises(RuntimeError, match="no free node group"):
        ex.submit(_job("c", {}))
    res = drain(ex)
    ex.submit(_job("c", {"NCCL_TOY_BW": "11"}))
    res.update(drain(ex))
    ex.close()
    assert [_row(res[k]).busbw for k in "abc"] == [11.0, 22.0, 11.0]    # NCCL saw its env in the process
    assert len({_row(res[k]).algo for k in "abc"}) == 3                   # three worker processes
    assert {res["a"].group, res["b"].group} == {"ncdoc_nodegroup_0", "ncdoc_nodegroup_1"}


@pytest.mark.ray
def test_other_backends_reuse_workers_and_get_the_env_as_an_argument(toy_by_value):
    be = EnvEchoBackend(fresh=False)
    ex = RayExecutor(be, groups=1)
    res = {}
    for i in range(6):
        ex.submit(_job(f"j{i}", {"NCCL_TOY_BW": "11"}))
        res.update(drain(ex))
    ex.close()
    rows = [_row(res[f"j{i}"]) for i in range(6)]
    assert all(r.busbw == 1.0 for r in rows)                # the worker's own environment is left alone
    assert all(r.proto == "11" for r in rows)               # the step's env reached measure() itself
    assert len({r.algo for r in rows}) < 6                  # not a process per job


@pytest.mark.ray
def test_groups_run_concurrently(toy_by_value, tmp_path):
    # Each job waits for the other to arrive: they finish only if they run at the same time.
    ex = RayExecutor(BarrierBackend(str(tmp_path), parties=2), groups=2)
    ex.submit(_job("a", {}, timeout=60.0))
    ex.submit(_job("b", {}, timeout=60.0))
    res = drain(ex)
    ex.close()
    assert res["a"].ok and res["b"].ok, (res["a"].reason, res["b"].reason)


@pytest.mark.ray
def test_the_time_limit_counts_from_the_start_not_from_submission(toy_by_value):
    ray = toy_by_value
    group = "ncdoc_nodegroup_0"
    blocker = ray.remote(lambda: __import__("time").sleep(4.0)).options(resources={group: 1}, num_cpus=0).remote()
    ex = RayExecutor(ToyBackend(delay_s=0.2), groups=1)
    # The job cannot start before the blocker frees the group (4 s), longer than its own limit:
    ex.submit(_job("late", {}, timeout=0.5))
    assert dispatch.limit_s(_job("late", {}, timeout=0.5)) < 4.0
    res = drain(ex)["late"]
    ex.close()
    ray.get(blocker)
    assert res.ok, res.reason


@pytest.mark.ray
def test_a_job_that_never_starts_is_reported_as_such(toy_by_value, monkeypatch):
    monkeypatch.setattr(dispatch, "START_LIMIT_S", 2.0)
    ex = RayExecutor(ToyBackend(), groups=1)
    ex._free = ["ncdoc_nodegroup_99"]                       # a node group no Ray node offers
    ex.submit(_job("never", {}))
    res = drain(ex)["never"]
    ex.close()
    assert not res.ok and res.kind == "start" and "did not start within 2 s" in res.reason


def test_apply_process_env_unsets_inherited_nccl_variables(monkeypatch):  # no Ray needed
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NCCL_TOY_BW", "5")
    apply_process_env({"NCCL_TOY_BW": "7"})
    assert os.environ["NCCL_TOY_BW"] == "7" and "NCCL_ALGO" not in os.environ


def test_the_simulator_runs_in_process_unless_it_must_live_through_failures():
    cluster = sim_cluster(preset="h100-ib-2node")
    assert isinstance(make_executor(SimBackend(cluster)), InProcessExecutor)
    assert not SimBackend(cluster, emulate_failures=True).in_process_ok
    assert not EnvEchoBackend().in_process_ok and EnvEchoBackend().needs_fresh_process


def test_in_process_jobs_stay_in_flight_while_they_run():
    # Ctrl-C inside a measurement must find the job it interrupted.
    class Interrupting(ToyBackend):
        def measure(self, *a, **kw):
            raise KeyboardInterrupt

    ex = InProcessExecutor(Interrupting())
    ex.submit(_job("x", {}))
    with pytest.raises(KeyboardInterrupt):
        ex.wait()
    assert ex.cancel_all() == ["x"]
    assert dispatch.run_job(ToyBackend(), _job("y", {}), RunContext()).ok


BAD_SPACE = """\
schema_version: 1
name: bad
variables:
  NCCL_BUFFSIZE: {values: [unset, 0]}
  NCCL_IB_QPS_PER_CONNECTION: {values: [unset, 200]}
"""


@pytest.mark.ray
def test_hung_and_crashed_trials_fail_with_reasons_and_the_study_goes_on(ray_runtime, tmp_path):
    # The simulator says NCCL hangs with a 0-byte buffer and crashes with 200 QPs; emulated, the
    # worker really hangs (killed at the timeout) or really dies.
    backend = SimBackend(sim_cluster(preset="h100-ib-2node"), emulate_failures=True)
    (tmp_path / "bad.yaml").write_text(BAD_SPACE)
    profile = get_profile("dp-allreduce", ["all_reduce"])
    space = load_space(str(tmp_path / "bad.yaml")).for_hardware(backend.hardware(), profile.collectives)
    store = storage_for(None, tmp_path)
    cfg = StudyConfig("bad", str(store), "grid", 0, 4, 1, 3.0, False)
    with RayExecutor(backend, groups=2) as ex:
        st = TuneStudy(cfg, space, profile, ex, storage=store, base_env={}, describe={})
        st.open()
        st.measure_baseline()
        st.optimize()
        recs = {tuple(sorted((k, v) for k, v in r.params.items() if v != "unset")): r for r in st.records()}
    assert len(recs) == 4                                                # every point ran: the study went on
    hung = recs[(("NCCL_BUFFSIZE", "0"),)]
    assert hung.state == "failed" and "no result after 4.3 s of running" in hung.reason and "killed" in hung.reason
    for crash in ((("NCCL_IB_QPS_PER_CONNECTION", "200"),),
                  (("NCCL_BUFFSIZE", "0"), ("NCCL_IB_QPS_PER_CONNECTION", "200"))):
        assert recs[crash].state == "failed" and "WorkerCrashedError" in recs[crash].reason
    assert recs[()].state == "complete" and recs[()].value == pytest.approx(1.0, abs=0.05)
    trial = next(t for t in st.study.trials if t.number == hung.number)
    assert trial.user_attrs["ncdoc.fail_kind"] == "timeout"


@pytest.mark.ray
def test_gang_placement_group_path(toy_by_value):
    ex = RayExecutor(EnvEchoBackend(), groups=1, placement_groups=True)
    try:
        ex.submit(_job("pg", {"NCCL_TOY_BW": "3"}))
        res = drain(ex)["pg"]
        assert res.ok and _row(res).busbw == 3.0
        assert len(ex._hosts["ncdoc_nodegroup_0"]) == 1
    finally:
        ex.close()
    ex2 = RayExecutor(EnvEchoBackend(), groups=1)                         # the group's resource is free again
    ex2.submit(_job("after", {}))
    assert drain(ex2)["after"].ok
    ex2.close()
