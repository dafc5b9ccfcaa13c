"""The nccl-tests backend against stand-in binaries (tests/fixtures/bin/*_perf) that print nccl-tests'
exact output with NCCL's INFO lines, and hang, crash or fail like NCCL does with bad settings. Every
run goes through the cluster launcher layer: this machine alone here, srun and mpirun stand-ins in
tests/tuner/test_tune_cluster.py."""

import json
import shutil
from pathlib import Path

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import RunContext, TrialFailed
from ncdoc.tuner.backends.launched import LaunchOptions
from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend, parse_rows
from ncdoc.tuner.space import Hardware
from paths import TESTS

BIN = TESTS / "fixtures" / "bin"
HW1 = Hardware(fabric="ib", nodes=1, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90,
               nccl_version="2.30.7")
WL = [("all_reduce", (1 << 20, 1 << 22)), ("all_gather", (1 << 20,))]

pytestmark = pytest.mark.skipif(shutil.which("python3") is None, reason="the stand-ins run on python3")


def _backend(tmp_path, **kw):
    return NcclTestsBackend(str(BIN), hardware=HW1, log_dir=str(tmp_path / "trials"), **kw)


def test_measure_parses_the_standin_output_like_the_simulator_prints_it(tmp_path):
    sim = pytest.importorskip("ncdoc.tuner.sim")
    m = _backend(tmp_path).measure({}, WL, 0, timeout_s=60)
    rows = m.results("all_reduce")
    assert [r.size for r in rows] == [1 << 20, 1 << 22]
    text = sim.nccl_tests_text(sim.preset("h100-1node"), {}, "all_reduce", [1 << 20, 1 << 21, 1 << 22])
    want = parse_rows(text)
    assert rows[0].busbw == want[1 << 20][0] and rows[1].busbw == want[1 << 22][0]
    assert m.results("all_gather")[0].busbw > 0
    # what NCCL ran, from its TUNING lines: the simulator's own choice for those sizes
    picks = [sim.nccl_choice(sim.preset("h100-1node"), {}, "all_reduce", s) for s in (1 << 20, 1 << 22)]
    assert [(r.algo, r.proto, r.nchannels) for r in rows] == [(c.algo, c.proto, c.nchannels) for c in picks]


def test_bad_nccl_setting_fails_with_ncclss_warning(tmp_path):
    with pytest.raises(TrialFailed, match='Unrecognized element token "Bogus"') as err:
        _backend(tmp_path).measure({"NCCL_ALGO": "Bogus"}, WL, 0, timeout_s=60)
    assert err.value.kind == "call" and "exited with 1" in err.value.reason


def test_hang_is_killed_at_the_timeout(monkeypatch, tmp_path):
    monkeypatch.setenv("NCDOC_STANDIN_MODE", "hang")
    monkeypatch.setattr("ncdoc.tuner.backends.launched.START_MARGIN_S", 0.5)
    with pytest.raises(TrialFailed, match="no result within 1.5 s") as err:
        _backend(tmp_path).measure({}, WL, 0, timeout_s=1.5)
    assert err.value.kind == "hang"


def test_crash_is_reported_with_its_signal(monkeypatch, tmp_path):
    monkeypatch.setenv("NCDOC_STANDIN_MODE", "crash")
    with pytest.raises(TrialFailed, match="killed by SIGSEGV") as err:
        _backend(tmp_path).measure({}, WL, 0, timeout_s=30)
    assert err.value.kind == "crash"


def test_each_run_is_one_nccl_tests_line_with_the_info_log_and_its_log_is_kept(monkeypatch, tmp_path):
    log = tmp_path / "cmds.log"
    monkeypatch.setenv("NCDOC_STANDIN_LOG", str(log))
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_9")                  # the driver's own: never reaches a trial
    be = _backend(tmp_path, iters=5, warmup=2)
    assert be.launcher_kind == "local"
    m = be.measure({"NCCL_BUFFSIZE": "8388608"}, WL, 0, timeout_s=60,
                   context=RunContext(log_key="trial-3-r0/00-trial-r0"))
    assert m.results("all_reduce")[0].busbw > 0
    first = log.read_text().splitlines()[0].split()
    assert first[:7] == ["all_reduce_perf", "-b", "1048576", "-e", "4194304", "-f", "2"]
    opts = dict(zip(first[7::2], first[8::2]))
    assert opts["-g"] == "8" and opts["-n"] == "5" and opts["-w"] == "2" and opts["-c"] == "1" and opts["-T"] == "60"
    run_log = tmp_path / "trials" / "trial-3-r0" / "00-trial-r0" / "all_reduce.b0.log"
    text = run_log.read_text()
    assert "NCCL_BUFFSIZE set by environment to 8388608." in text and "Bytes -> Algo" in text
    assert "NCCL_IB_HCA" not in text and "NCCL_DEBUG_SUBSYS" not in text


def test_final_comparisons_check_more_results(monkeypatch, tmp_path):
    log = tmp_path / "cmds.log"
    monkeypatch.setenv("NCDOC_STANDIN_LOG", str(log))
    be = _backend(tmp_path)
    be.measure({}, WL[:1], 0, timeout_s=60, context=RunContext(log_key="trial-1-r0/00-trial-r0"))
    be.measure({}, WL[:1], 0, timeout_s=60, context=RunContext(log_key="confirm-1/00-A-r5000"))
    checks = [line.split()[line.split().index("-c") + 1] for line in log.read_text().splitlines()]
    assert checks == ["1", "3"]


def test_a_variable_the_trial_changes_must_reach_nccl_on_every_rank(tmp_path, monkeypatch):
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"nodes": ["localhost"], "faults": {"localhost": {
        "ignore_env": ["NCCL_BUFFSIZE"]}}}))
    monkeypatch.setenv("NCDOC_STANDIN_FAULTS", str(faults))
    monkeypatch.setenv("NCDOC_STANDIN_PRESET", "h100-1node")
    with pytest.raises(TrialFailed) as err:
        _backend(tmp_path).measure({"NCCL_BUFFSIZE": "8388608"}, WL, 0, timeout_s=60)
    assert err.value.kind == "invalid"
    assert err.value.reason.startswith("invalid: NCCL_BUFFSIZE=8388608 did not reach NCCL on localhost")


def test_today_s_variables_are_not_checked_for_an_env_line_but_a_removed_one_must_not_come_back(tmp_path):
    be = _backend(tmp_path, base_env={"NCCL_SOCKET_IFNAME": "eth0"})
    g = be.group_for(("n1",), {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_BUFFSIZE": "4194304"}, "k")
    assert g.tuned == {"NCCL_BUFFSIZE": "4194304"} and g.unset == () and g.clear_env == ("NCCL_",)
    g = be.group_for(("n1",), {}, "k")
    assert g.tuned == {} and g.unset == ("NCCL_SOCKET_IFNAME",)


def test_several_nodes_launch_through_mpirun_with_pass_through_flags(tmp_path):
    """The mpirun line the backend asks the launcher for: one rank per GPU, the env as -x, the
    --launcher-args as given, inherited NCCL_* dropped."""
    from ncdoc.cluster import bench
    hw = Hardware(fabric="ib", nodes=2, gpus_per_node=8, nics_per_node=8)
    launch = LaunchOptions(launcher="mpirun", nodes="n1,n2", command=str(BIN / "mpirun"),
                           extra_args=("--mca", "btl", "tcp,self"), mpi_flavour="openmpi")
    be = NcclTestsBackend(str(BIN), hardware=hw, launch=launch, log_dir=str(tmp_path),
                          environ={"SLURM_JOB_NODELIST": "n[1-2]", "NCCL_DEBUG": "WARN", "PATH": "/bin"})
    assert be.all_nodes() == ["n1", "n2"] and "NCCL_DEBUG" not in be.environ
    spec = be.spec("all_reduce", (1 << 20,), 60.0, nodes=("n1", "n2"))
    (job,) = bench.jobs_for(spec, be.group_for(("n1", "n2"), {"NCCL_IB_QPS_PER_CONNECTION": "4"}, "t"))
    cmd = be.launcher().job_command(job)
    head = cmd[:cmd.index(str(BIN / "all_reduce_perf"))]
    assert head[:7] == [str(BIN / "mpirun"), "-np", "16", "-H", "n1:8,n2:8", "--bind-to", "none"]
    assert ["-x", "NCCL_IB_QPS_PER_CONNECTION=4"] == head[head.index("NCCL_IB_QPS_PER_CONNECTION=4") - 1:][:2]
    assert ["-x", "NCCL_DEBUG=INFO"] == head[head.index("NCCL_DEBUG=INFO") - 1:][:2]
    assert head[-3:] == ["--mca", "btl", "tcp,self"] and cmd[cmd.index("-g") + 1] == "1"
    assert job.clear_env == ("NCCL_",)


def test_missing_binaries_are_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="alltoall_perf not found"):
        NcclTestsBackend(str(tmp_path), hardware=HW1, collectives=["alltoall"])


def test_minimal_parser_reads_the_documented_layout():
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
        "     1048576        262144     float     sum      -1    98.70   10.62   19.92       0    97.71   10.73   20.12       0\n"
        "  8589934592    2147483648     float     sum      -1  71234.5  120.59  226.10       3  70522.2  121.80  228.38       0\n"
        "# Avg bus bandwidth    : 98.1234 \n")
    from ncdoc.tuner.backends.nccl_tests import _parse_rows_minimal
    rows = _parse_rows_minimal(text)
    assert rows[1048576] == (19.92, 20.12, 98.70, 0)
    assert rows[8589934592][3] == 3


SPACE = """\
schema_version: 1
name: standin
variables:
  NCCL_BUFFSIZE: {values: [unset, 0, 8388608]}
"""


@pytest.mark.slow
def test_a_whole_tune_with_the_standins(tmp_path):
    """A whole tune with the real backend on this machine: the 0-byte buffer hangs the stand-in (as
    NCCL would) and is ended by nccl-tests' own -T; the others are measured, re-measured and written."""
    from ncdoc.tuner.run import TuneOptions, run_tune

    (tmp_path / "s.yaml").write_text(SPACE)
    res = run_tune(TuneOptions(backend="nccl-tests", example="dgx-h100", nodes=1, gpus_per_node=8,
                               nccl_tests_dir=str(BIN), space=str(tmp_path / "s.yaml"), sampler="grid",
                               profile="latency", trials=3, repeats=1, timeout_s=4.0, top_k=1, confirm_pairs=5,
                               out=str(tmp_path / "out")))
    assert res.backend["backend"] == "nccl-tests" and res.backend["launcher"] == "local"
    assert res.trials_complete == 2 and res.trials_failed == 1
    (reason,) = res.failures
    assert "hung" in reason and "all_reduce_perf" in reason
    assert (tmp_path / "out" / "nccl.env").is_file()
    assert any((tmp_path / "out" / "trials").glob("trial-*/*/all_reduce.b0.log"))   # every run's log is kept
    left = [p for p in Path("/proc").glob("[0-9]*") if _cmdline(p).count(str(BIN))]
    assert not left, "a killed trial left its benchmark process behind"


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
