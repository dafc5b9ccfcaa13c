"""Tuning at scale, piece by piece: node groups placed by leaf switch, the health gate's verdicts, a
baseline per group, the full-scale A/B. End to end through srun in test_tune_cluster.py."""

import math
import sys
import threading
from types import SimpleNamespace

import pytest

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner import scale
from ncdoc.tuner.backends import Measurement, SizeResult, TrialFailed
from ncdoc.tuner.dispatch import FULL, JobResult
from ncdoc.tuner.profiles import get_profile
from paths import TESTS

TOPOLOGY = """\
SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[01-05]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[06-08]   # a comment
"""


def test_the_leaf_switches_of_scontrol_show_topology_or_topology_conf():
    assert scale.read_topology(TOPOLOGY) == {"leaf1": ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"],
                                             "leaf2": ["gpu06", "gpu07", "gpu08"]}
    assert scale.read_topology("No topology information available\n") == {}


def test_groups_stay_under_one_switch_and_leftovers_are_grouped_across():
    nodes = [f"gpu{i:02d}" for i in range(1, 9)]
    groups, rest, notes = scale.place(nodes, 2, scale.read_topology(TOPOLOGY))
    assert groups == [("gpu01", "gpu02"), ("gpu03", "gpu04"), ("gpu06", "gpu07"), ("gpu05", "gpu08")]
    assert rest == [] and "span switches" in notes[0]
    groups, rest, _ = scale.place(nodes, 3, None)            # no topology: the launcher's order
    assert groups == [("gpu01", "gpu02", "gpu03"), ("gpu04", "gpu05", "gpu06")] and rest == ["gpu07", "gpu08"]


def test_scontrol_show_topology_is_read_inside_an_allocation(tmp_path):
    (tmp_path / "topo").write_text(TOPOLOGY)
    env = {"PATH": f"{TESTS / 'fixtures' / 'bin'}:{sys.executable.rsplit('/', 1)[0]}:/usr/bin:/bin",
           "NCDOC_STANDIN_TOPOLOGY": str(tmp_path / "topo")}
    switches, how = scale.topology(None, "slurm", env, print)
    assert set(switches) == {"leaf1", "leaf2"} and "scontrol show topology" in how
    notes = []
    assert scale.topology(None, "slurm", {"PATH": env["PATH"]}, notes.append)[0] is None
    assert "no switch topology" in notes[0]
    with pytest.raises(UsageError, match="no 'SwitchName=... Nodes=...' line"):
        (tmp_path / "empty").write_text("# nothing\n")
        scale.topology(str(tmp_path / "empty"), "local", {}, print)


class FabricBackend:
    """The backend side of the health gate on the fault simulator: measure() answers from
    ncdoc.cluster.fabric_sim for the probe's nodes; bench_run() reports what a node's NCCL read."""

    launcher_kind = "slurm"
    environ = {"PATH": "/nonexistent"}
    log_dir = "/tmp"

    def __init__(self, faults, ignore=None, crash=()):
        from ncdoc.cluster.fabric_sim import Fabric, FabricSpec
        self.spec = FabricSpec.from_dict({"nodes": 8, "faults": faults})
        self.fabric = Fabric(self.spec)
        self.ignore = ignore or {}          # node -> variables its NCCL never reports
        self.crash = set(crash)
        self.runs = 0
        self.nodes_default = ()
        self._cancel = threading.Event()

    def all_nodes(self):
        return list(self.spec.nodes)

    def launcher(self):
        return SimpleNamespace(cancel=self._cancel)

    def measure(self, env, workload, repeat_index, *, timeout_s=None, context=None, table=()):
        self.runs += 1
        nodes = context.hosts
        if set(nodes) & self.crash:
            raise TrialFailed("all_reduce_perf was killed by SIGSEGV", kind="crash")
        bw = self.fabric.busbw(nodes, run=self.runs)
        return Measurement((("all_reduce", (SizeResult(size=workload[0][1][0], busbw=bw),)),))

    def bench_run(self, nodes, env, collective, sizes, *, timeout_s, key):
        missing = {name: tuple(n for n in nodes if name in self.ignore.get(n, ()))
                   for name in env if any(name in self.ignore.get(n, ()) for n in nodes)}
        verdict = SimpleNamespace(env_missing=missing, env_wrong={}, env_uneven={})
        return SimpleNamespace(verdict=verdict, runs=[SimpleNamespace(ok=True)], reason=""), None


WORKLOAD = (("all_reduce", (1 << 28,)),)


def _plan(backend, **kw):
    args = dict(per_group=2, max_groups=None, gate=("node", "pair"), topology_file=None, env={}, workload=WORKLOAD,
                timeout_s=60, log=lambda m: None, reach={"NCCL_IB_QPS_PER_CONNECTION": "4"})
    args.update(kw)
    return scale.plan(backend, **args)


def test_a_group_with_a_node_the_gate_finds_bad_is_not_used_and_says_why():
    be = FabricBackend({"node03": {"net": 0.4}}, ignore={"node06": ("NCCL_IB_QPS_PER_CONNECTION",)})
    p = _plan(be)
    assert [g.nodes for g in p.usable] == [("node01", "node02"), ("node07", "node08")]
    why = {g.name: g.why for g in p.groups if not g.used}
    assert set(why) == {"g1", "g2"}
    assert "node03 (bad-node" in why["g1"]
    assert "node06 (env: its NCCL never reported NCCL_IB_QPS_PER_CONNECTION=4" in why["g2"]
    assert p.healthy == ("node01", "node02", "node04", "node05", "node07", "node08") and p.subsets
    assert be.nodes_default == ("node01", "node02")
    d = p.to_dict()
    assert set(d["health_gate"]["bad_nodes"]) == {"node03", "node06"} and d["health_gate"]["rounds"] >= 2


def test_a_variable_no_node_reports_is_left_out_and_a_failing_node_is_bad():
    quiet = {n: ("NCCL_IB_QPS_PER_CONNECTION",) for n in [f"node{i:02d}" for i in range(1, 9)]}
    p = _plan(FabricBackend({}, ignore=quiet, crash=("node08",)))
    assert p.not_reported == ["NCCL_IB_QPS_PER_CONNECTION"] and not any(b.startswith("env") for b in p.bad.values())
    assert set(p.bad) == {"node08"} and [g.used for g in p.groups] == [True, True, True, False]


def test_no_usable_group_is_a_runner_error():
    be = FabricBackend({}, crash=tuple(f"node{i:02d}" for i in range(1, 9)))
    with pytest.raises(RunnerError, match="no node group to tune on"):
        _plan(be)


def _m(bw, size=1 << 20):
    return Measurement((("all_reduce", (SizeResult(size=size, busbw=bw),)),))


def test_each_group_measures_its_baseline_and_results_are_scaled_to_the_groups_mean():
    p = scale.ScalePlan(("a", "b", "c", "d"), 2, "order", [scale.GroupInfo("g0", ("a", "b")),
                                                           scale.GroupInfo("g1", ("c", "d"))])
    seen = {}

    def run_jobs(jobs):
        out = {}
        for j in jobs:
            seen[j.key] = j.group_hint
            bw = 100.0 if j.group_hint == "g0" else 80.0
            out[j.key] = JobResult(j.key, True, tuple(("baseline", _m(bw)) for _ in j.steps))
        return out

    ex = SimpleNamespace(set_factors=lambda f: seen.setdefault("factors", f), drop=lambda name: None)
    runs = scale.calibrate(run_jobs, ex, p, {}, WORKLOAD, 2, 60, print)
    assert seen["baseline-g0"] == "g0" and seen["baseline-g1"] == "g1"
    mean = math.sqrt(100 * 80)
    f = seen["factors"]
    assert f["g0"][("all_reduce", 1 << 20)] == pytest.approx(mean / 100) and len(runs) == 4
    assert all(m.results("all_reduce")[0].busbw == pytest.approx(mean) for m in runs)
    assert p.groups[0].relative == pytest.approx(100 / mean) and p.groups[1].baseline == {"all_reduce": {1 << 20: 80.0}}


def test_the_full_scale_ab_rejects_a_final_env_that_is_slower_on_every_node():
    profile = get_profile("dp-allreduce")
    base_buckets = profile.bucket_busbw({"all_reduce": {s: 100.0 for c, ss in profile.workload() for s in ss}})
    p = scale.ScalePlan(("a", "b", "c"), 1, "order", [scale.GroupInfo(f"g{i}", (n,)) for i, n in enumerate("abc")])

    def ab(factor):
        def run_jobs(jobs):
            (job,) = jobs
            assert job.group_hint == FULL
            ms = []
            for step in job.steps:
                bw = 100.0 * (factor if step.label == "B" else 1.0)
                ms.append((step.label, Measurement((("all_reduce", tuple(SizeResult(size=s, busbw=bw * (1 + step.repeat_index % 3 / 1000))
                                                                        for c, ss in profile.workload() for s in ss)),))))
            return {job.key: JobResult(job.key, True, tuple(ms), indexes=tuple(s.repeat_index for s in job.steps))}
        return run_jobs

    kw = dict(base_env={}, final_env={"NCCL_BUFFSIZE": "8388608"}, candidates=[], profile=profile,
              baseline_buckets=base_buckets, rounds=3, timeout_s=60, seed=0, log=print)
    good = scale.full_scale_check(ab(1.2), p, **kw)
    assert good["accepted"] and good["nodes"] == 3 and good["sides"]["B"]["gain_pct"] == pytest.approx(20, abs=0.5)
    bad = scale.full_scale_check(ab(0.8), p, **kw)
    assert not bad["accepted"] and bad["why"].startswith("slower at full scale: -20.0 %")


def test_health_gate_scales_are_checked():
    assert scale.parse_gate(None) == ("node", "pair") and scale.parse_gate("off") == ()
    with pytest.raises(UsageError, match="--health-gate 'rail'"):
        scale.parse_gate("rail")


def test_ctrl_c_waits_for_each_thread_to_stop_what_it_launched():
    # Ctrl-C while a node's run hangs in the health gate or the env check: the launcher is cancelled and
    # the tune goes on only once every thread has stopped what it started. The wait used to be a
    # Thread.join, which Ctrl-C left believing a running thread had stopped (CPython 3.11): the tune
    # exited 130 and a hung node's srun step ran on.
    import os
    import signal
    import time

    cancel = threading.Event()
    backend = SimpleNamespace(launcher=lambda: SimpleNamespace(cancel=cancel))
    began, stopped = threading.Event(), []

    def work(i):
        if i == 1:                  # the hung node: its launch runs until the launcher is cancelled
            began.set()
            cancel.wait(60)
            time.sleep(0.3)         # stopping it takes a while (srun's SIGINT, SIGINT escalation)
        stopped.append(i)

    def ctrl_c():
        began.wait(60)
        time.sleep(0.3)             # the main thread is waiting for the threads by now
        os.kill(os.getpid(), signal.SIGINT)

    # Python's Ctrl-C handler, also where the suite was started with SIGINT ignored (a background job
    # of a script), in which case Python installs none
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            scale._run_threads(backend, work, 2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sorted(stopped) == [0, 1]           # nothing still running when the interrupt goes on
    assert not cancel.is_set()                 # the launcher is usable again (a resumed study)


def test_the_host_nccl_printed_is_mapped_to_the_launchers_node_name():
    assert scale.node_of("gpu01", ("gpu01", "gpu02")) == "gpu01"
    assert scale.node_of("gpu01", ("gpu01.cluster", "gpu02.cluster")) == "gpu01.cluster"
    assert scale.node_of("localhost", ("vm",)) == "vm"                  # one node: it is that one
    assert scale.node_of("x", ("a", "b")) == "x"                         # unknown: the group is judged whole
