"""The dispatcher of the launched backends (nccl-tests, torch): one job per node group at a time, from
threads of this process; jobs pinned to a group or to every node; a group's results scaled by its
baseline factors; Ctrl-C (cancel_all) stops what the launcher runs in every thread."""

import threading
from types import SimpleNamespace

import pytest

from ncdoc.tuner.backends import Measurement, SizeResult
from ncdoc.tuner.dispatch import FULL, Job, LaunchExecutor, NodeGroup, Step, env_tuple, make_executor
from tuner_toy import drain

WORKLOAD = (("all_reduce", (1 << 20,)),)
GROUPS = [NodeGroup("g0", ("n1", "n2")), NodeGroup("g1", ("n3", "n4"))]


class Launched:
    """A backend that launches (it has a launcher): measure() reports where it ran."""

    name = "fake-launched"

    def __init__(self, barrier=None, block=False):
        self.cancel = threading.Event()
        self.barrier, self.block = barrier, block
        self.closed = False

    def launcher(self):
        return SimpleNamespace(cancel=self.cancel, nodes=lambda: ["n1", "n2", "n3", "n4"])

    def close(self):
        self.closed = True

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        if self.barrier is not None:
            self.barrier.wait()               # breaks (an error) unless the other job runs at the same time
        if self.block:
            self.cancel.wait(30)              # a launch in flight until the launcher is cancelled
            raise KeyboardInterrupt           # what processes.run_all raises on cancel
        return Measurement((("all_reduce", (SizeResult(size=1 << 20, busbw=100.0, algo=",".join(context.hosts),
                                                       proto=context.log_key),)),))


def _job(key, hint=""):
    return Job(key, (Step("trial", env_tuple({}), 0),), WORKLOAD, 30.0, group_hint=hint)


def _where(res):
    return res.measurements[0][1].results("all_reduce")[0].algo


def test_jobs_on_two_groups_run_at_the_same_time_each_on_its_nodes():
    be = Launched(barrier=threading.Barrier(2, timeout=20))
    ex = make_executor(be, node_groups=GROUPS)
    assert isinstance(ex, LaunchExecutor) and ex.slots == 2
    ex.submit(_job("a"))
    ex.submit(_job("b"))
    res = drain(ex)
    assert res["a"].ok and res["b"].ok, (res["a"].reason, res["b"].reason)
    assert {_where(res["a"]), _where(res["b"])} == {"n1,n2", "n3,n4"} and {res["a"].group, res["b"].group} == {"g0", "g1"}
    assert res["a"].measurements[0][1].results("all_reduce")[0].proto == "a/00-trial-r0"    # the step's log key
    ex.close()
    assert be.closed


def test_a_pinned_job_waits_for_its_group_and_a_full_scale_job_for_every_group():
    ex = LaunchExecutor(Launched(), GROUPS, full=("n1", "n2", "n3", "n4", "n5"))
    ex.submit(_job("x", "g1"))
    ex.submit(_job("y", "g1"))                  # g1 is busy: y waits although g0 is free
    ex.submit(_job("z", FULL))
    res = drain(ex)
    assert _where(res["x"]) == _where(res["y"]) == "n3,n4"
    assert _where(res["z"]) == "n1,n2,n3,n4,n5" and res["z"].group == FULL


def test_a_groups_results_are_scaled_by_its_baseline_factors_full_scale_ones_not():
    ex = LaunchExecutor(Launched(), GROUPS)
    ex.set_factors({"g0": {("all_reduce", 1 << 20): 0.5}, "g1": {("all_reduce", 1 << 20): 2.0}})
    for key, hint in (("a", "g0"), ("b", "g1"), ("c", FULL)):
        ex.submit(_job(key, hint))
    res = drain(ex)
    bw = {k: r.measurements[0][1].results("all_reduce")[0].busbw for k, r in res.items()}
    assert bw == {"a": 50.0, "b": 200.0, "c": 100.0}


def test_cancel_all_stops_the_launches_in_every_thread():
    be = Launched(block=True)
    ex = LaunchExecutor(be, GROUPS)
    ex.submit(_job("a"))
    ex.submit(_job("b"))
    assert sorted(ex.cancel_all()) == ["a", "b"]
    assert not ex.in_flight() and not be.cancel.is_set()       # cleared for what comes next
    be.block = False
    ex.submit(_job("c"))                                       # the groups are free again
    assert drain(ex)["c"].ok


def test_a_group_left_out_is_not_used_again():
    ex = LaunchExecutor(Launched(), GROUPS)
    ex.drop("g0")
    assert ex.slots == 1
    ex.submit(_job("a"))
    assert _where(drain(ex)["a"]) == "n3,n4"
    with pytest.raises(Exception, match="no node group"):
        LaunchExecutor(Launched(), [])
