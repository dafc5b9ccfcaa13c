"""The nccl-tests backend against stand-in binaries (tests/fixtures/bin/*_perf) that print nccl-tests'
exact output, and hang, crash or fail like NCCL does with bad settings."""

import shutil
from pathlib import Path

import pytest

from ncdoc.errors import UsageError
from ncdoc.tuner.backends import TrialFailed
from ncdoc.tuner.backends.nccl_tests import NcclTestsBackend, parse_rows
from ncdoc.tuner.space import Hardware
from paths import TESTS

BIN = TESTS / "fixtures" / "bin"
HW1 = Hardware(fabric="ib", nodes=1, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90,
               nccl_version="2.30.7")
WL = [("all_reduce", (1 << 20, 1 << 22)), ("all_gather", (1 << 20,))]

pytestmark = pytest.mark.skipif(shutil.which("python3") is None, reason="the stand-ins run on python3")


def _backend(**kw):
    return NcclTestsBackend(str(BIN), hardware=HW1, **kw)


def test_measure_parses_the_standin_output_like_the_simulator_prints_it():
    sim = pytest.importorskip("ncdoc.tuner.sim")
    m = _backend().measure({}, WL, 0, timeout_s=60)
    rows = m.results("all_reduce")
    assert [r.size for r in rows] == [1 << 20, 1 << 22]
    text = sim.nccl_tests_text(sim.preset("h100-1node"), {}, "all_reduce", [1 << 20, 1 << 21, 1 << 22])
    want = parse_rows(text)
    assert rows[0].busbw == want[1 << 20][0] and rows[1].busbw == want[1 << 22][0]
    assert m.results("all_gather")[0].busbw > 0


def test_bad_nccl_setting_fails_with_ncclss_warning():
    with pytest.raises(TrialFailed, match='Unrecognized element token "Bogus"') as err:
        _backend().measure({"NCCL_ALGO": "Bogus"}, WL, 0, timeout_s=60)
    assert err.value.kind == "call" and "exited with 1" in err.value.reason


def test_hang_is_killed_at_the_timeout(monkeypatch, tmp_path):
    monkeypatch.setenv("NCDOC_STANDIN_MODE", "hang")
    with pytest.raises(TrialFailed, match="no result within 1.5 s") as err:
        _backend().measure({}, WL, 0, timeout_s=1.5)
    assert err.value.kind == "hang"


def test_crash_is_reported_with_its_signal(monkeypatch):
    monkeypatch.setenv("NCDOC_STANDIN_MODE", "crash")
    with pytest.raises(TrialFailed, match="killed by signal SIGSEGV") as err:
        _backend().measure({}, WL, 0, timeout_s=30)
    assert err.value.kind == "crash"


def test_single_node_command_and_env(monkeypatch, tmp_path):
    log = tmp_path / "cmds.log"
    monkeypatch.setenv("NCDOC_STANDIN_LOG", str(log))
    monkeypatch.setenv("NCCL_DEBUG", "INFO")                     # inherited, but not part of the trial: unset
    be = _backend(iters=5, warmup=2)
    cmd = be.command("all_reduce", (1 << 20, 1 << 22), {})
    assert cmd == [str(BIN / "all_reduce_perf"), "-b", "1048576", "-e", "4194304", "-f", "2", "-n", "5",
                   "-w", "2", "-c", "1", "-g", "8"]
    env = be._process_env({"NCCL_IB_QPS_PER_CONNECTION": "4"})
    assert env["NCCL_IB_QPS_PER_CONNECTION"] == "4" and "NCCL_DEBUG" not in env and "PATH" in env
    be.measure({}, WL, 0, timeout_s=60)
    assert log.read_text().splitlines()[0].startswith("all_reduce_perf -b 1048576 -e 4194304 -f 2")


def test_multi_node_command_is_an_mpirun_line_exporting_the_env():
    hw = Hardware(fabric="ib", nodes=2, gpus_per_node=8, nics_per_node=8)
    be = NcclTestsBackend(str(BIN), hardware=hw, hosts=("n1", "n2"), mpirun="/opt/ompi/bin/mpirun")
    assert be.gang_size == 1                                     # hosts given: mpirun reaches them itself
    cmd = be.command("all_reduce", (1 << 20,), {"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_ALGO": "a b;c"},
                     hosts=("n1", "n2"))
    head = cmd[:cmd.index(str(BIN / "all_reduce_perf"))]
    assert head[:7] == ["/opt/ompi/bin/mpirun", "-np", "16", "-H", "n1:8,n2:8", "--bind-to", "none"]
    assert ["-x", "NCCL_ALGO=a b;c"] == head[7:9] and ["-x", "NCCL_IB_QPS_PER_CONNECTION=4"] == head[9:11]
    assert cmd[-2:] == ["-g", "1"]
    assert NcclTestsBackend(str(BIN), hardware=hw).gang_size == 2   # no hosts: one Ray node per host


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


@pytest.mark.ray
def test_study_through_ray_with_the_standins(ray_runtime, tmp_path):
    """A whole tune on Ray with the real backend: the 0-byte buffer hangs the stand-in (as NCCL would)
    and is killed; the others are measured, re-measured and written out."""
    from ncdoc.tuner.run import TuneOptions, run_tune

    (tmp_path / "s.yaml").write_text(SPACE)
    res = run_tune(TuneOptions(backend="nccl-tests", example="dgx-h100", nodes=1, gpus_per_node=8,
                               nccl_tests_dir=str(BIN), space=str(tmp_path / "s.yaml"), sampler="grid",
                               profile="latency", trials=3, repeats=1, timeout_s=4.0, top_k=1, confirm_pairs=5,
                               out=str(tmp_path / "out")))
    assert res.backend["backend"] == "nccl-tests" and res.trials_complete == 2 and res.trials_failed == 1
    (reason,) = res.failures
    assert "hung" in reason and "all_reduce_perf" in reason
    assert (tmp_path / "out" / "nccl.env").is_file()
    left = [p for p in Path("/proc").glob("[0-9]*") if _cmdline(p).count(str(BIN))]
    assert not left, "a killed trial left its benchmark process behind"


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
