"""`ncdoc tune` as users run it: killed mid-study and resumed, JSON summary, clear errors."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ncdoc.cli.main import main
from tuner_toy import SLOW_SIM_CLI

optuna = pytest.importorskip("optuna")


def _storage(path):
    from ncdoc.tuner.storage import storage_for
    return storage_for(str(path), path.parent)


def _states(journal):
    """Trial states of the study in `journal`, read while the driver writes it ({} before it exists)."""
    if not journal.exists():
        return {}
    try:
        study = optuna.load_study(study_name="ncdoc-tune", storage=_storage(journal))
    except Exception:                              # the study is not in the log yet
        return {}
    out = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


def _trials(journal):
    study = optuna.load_study(study_name="ncdoc-tune", storage=_storage(journal))
    return {t.number: t for t in study.trials}


@pytest.mark.ray
@pytest.mark.slow
def test_sigkill_mid_study_then_resume_keeps_completed_and_requeues_running(tmp_path):
    out = tmp_path / "out"
    db = out / "study.journal"
    # Two node groups: trials run as Ray tasks while the driver is killed.
    args = [sys.executable, "-m", "ncdoc", "tune", "--preset", "h100-roce-8node", "--out", str(out),
            "--repeats", "1", "--top-k", "0", "--groups", "2"]
    proc = subprocess.Popen(args + ["--trials", "40"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            st = _states(db)
            if st.get("COMPLETE", 0) >= 3 and st.get("RUNNING", 0) >= 1:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        else:
            pytest.fail("the study did not get going in 90 s")
        os.kill(proc.pid, signal.SIGKILL)                       # the driver dies, no clean-up at all
        proc.wait(timeout=30)
    finally:
        try:                                                     # Ray's helpers started by that driver
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.stderr.close()
    before = _trials(db)
    complete = {n: (t.params, t.value) for n, t in before.items() if t.state.name == "COMPLETE"}
    running = {n: t.params for n, t in before.items() if t.state.name == "RUNNING"}
    assert len(complete) >= 3 and running

    total = len(before) + 4                                     # room for every queued trial, the requeued ones too
    # The resumed driver runs the rest in process (the simulator needs no Ray): what matters is the storage.
    args.remove("--groups")
    args.remove("2")
    res = subprocess.run(args + ["--trials", str(total), "--resume", "--json"], capture_output=True, text=True,
                         timeout=180, start_new_session=True)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["schema_version"] == 2 and sorted(summary["requeued"]) == sorted(running)
    assert "marked failed and queued again" in res.stderr
    after = _trials(db)
    for n, (params, value) in complete.items():                 # every completed trial is still there
        assert after[n].state.name == "COMPLETE" and after[n].params == params and after[n].value == value
    for n, params in running.items():                           # RUNNING ones: failed, then run again
        assert after[n].state.name == "FAIL" and after[n].user_attrs["ncdoc.failed"].startswith("interrupted")
        again = [t for t in after.values() if t.user_attrs.get("ncdoc.requeued_from") == n]
        # A driver killed between two suggest() calls leaves a partial set: those values are kept;
        # killed before the first one, there is nothing to re-run.
        assert len(again) == (1 if params else 0), (n, params, [t.number for t in again])
        if params:
            assert params.items() <= again[0].params.items() and again[0].state.name in ("COMPLETE", "PRUNED")
    assert not [t for t in after.values() if t.state.name == "RUNNING"]


def _interrupt_a_tune(out):
    """Start a tune, SIGINT it while a trial runs; (returncode, stdout, stderr)."""
    db = out / "study.journal"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SIM_CLI, "tune", "--preset", "h100-roce-8node", "--out", str(out),
                             "--repeats", "1", "--trials", "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (_states(db).get("COMPLETE", 0) >= 2 and _states(db).get("RUNNING")):
            assert proc.poll() is None
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, stdout, stderr


@pytest.mark.slow
def test_ctrl_c_stores_running_trials_as_interrupted_and_queues_them(tmp_path):
    # a simulated trial takes milliseconds: the signal can land just after the trial seen RUNNING
    # finished; such a try proves nothing about running trials, so it is taken again
    for attempt in range(4):
        out = tmp_path / f"out{attempt}"
        rc, stdout, stderr = _interrupt_a_tune(out)
        assert rc == 130 and stdout == "", stderr[-3000:]
        assert "--resume" in stderr and "Traceback" not in stderr
        trials = _trials(out / "study.journal")
        stopped = [t for t in trials.values() if t.user_attrs.get("ncdoc.fail_kind") == "interrupted"]
        if stopped:
            break
    assert stopped and all(t.state.name == "FAIL" for t in stopped)
    queued = [t for t in trials.values() if t.state.name == "WAITING" and "ncdoc.requeued_from" in t.user_attrs]
    # a trial stopped before its first suggest() has nothing to run again (as after a SIGKILL, above)
    assert sorted(t.user_attrs["ncdoc.requeued_from"] for t in queued) == sorted(t.number for t in stopped if t.params)


def test_torch_backend_without_torch_is_a_clear_usage_error(tmp_path, capsys):
    try:
        import torch  # noqa: F401
        if torch.cuda.is_available():
            pytest.skip("torch with CUDA is present")
    except ImportError:
        pass
    rc = main(["tune", "--backend", "torch", "--example", "dgx-h100", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "backend torch is not available:" in err and "Traceback" not in err


def test_without_a_gpu_and_without_a_cluster_it_exits_2_listing_the_presets(tmp_path, capsys, monkeypatch):
    import ncdoc.tuner.run as run
    monkeypatch.setattr(run, "has_gpu", lambda: False)
    rc = main(["tune", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "no GPU" in err and "--preset NAME (one of: h100-ib-2node" in err and "Traceback" not in err
    assert not (tmp_path / "nccl.env").exists()


@pytest.mark.parametrize("argv,match", [
    (["--confirm-pairs", "2"], "--confirm-pairs >= 5"),
    (["--sampler", "cmaes"], "not available"),
    (["--format", "toml"], "unknown --format"),
    (["--preset", "nope"], "unknown simulator preset"),
    (["--profile", "nope"], "unknown workload profile"),
    (["--collectives", "allreduce"], "unknown collective"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, argv, match):
    if argv[1] == "cmaes":
        try:
            import cmaes  # noqa: F401
            pytest.skip("cmaes is installed")
        except ImportError:
            pass
    base = ["tune", "--out", str(tmp_path)] + ([] if "--preset" in argv else ["--preset", "h100-ib-2node"])
    rc = main(base + argv + ["--trials", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and "Traceback" not in err


def test_json_summary_and_files(tmp_path, capsys):
    rc = main(["tune", "--preset", "h100-roce-8node", "--trials", "8", "--repeats", "1", "--top-k", "1",
               "--out", str(tmp_path), "--format", "dotenv,json", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    data = json.loads(cap.out)
    assert data["schema_version"] == 2 and data["backend"] == "sim" and data["simulated"] is True
    assert data["trials_complete"] + data["trials_stopped_early"] + data["trials_failed"] == 8
    assert data["measurements"] > 8 and data["changes"]
    assert {"sh", "dotenv", "json", "explain", "summary"} <= set(data["files"])
    assert json.loads((tmp_path / "summary.json").read_text()) == data
    assert "trial 8 of 8" in cap.err                             # progress went to stderr, plain lines
    assert "SIMULATED" in cap.err


def test_console_summary_says_simulated_and_what_to_do(tmp_path, capsys):
    rc = main(["tune", "--preset", "h100-roce-8node", "--trials", "6", "--repeats", "1", "--out", str(tmp_path),
               "--storage", "memory"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("SIMULATED: not measured on hardware") and "Rerun with --backend nccl-tests" in out


def test_progress_is_a_live_line_on_a_tty_and_plain_lines_otherwise():
    import io

    from ncdoc.tuner.progress import Progress

    info = {"done": 3, "total": 10, "failed": 1, "best": 1.234, "elapsed": 30.0, "slots": 2}
    tty = io.StringIO()
    p = Progress(tty, tty=True)
    p.update(info)
    p.update({**info, "done": 4, "elapsed": 40.0})
    p.note("a note")
    p.finish()
    out = tty.getvalue()
    assert out.startswith("\r\033[K") and "trial 4 of 10, 1 failed, best x1.234 vs baseline, ETA 30s" in out
    assert "\r\033[Kncdoc tune: a note\n" in out and "\n" not in out.split("a note")[0]
    plain = io.StringIO()
    p = Progress(plain, tty=False)
    p.update(info)
    p.update(info)                                              # same trial count: no duplicate line
    assert plain.getvalue() == "ncdoc tune: trial 3 of 10, 1 failed, best x1.234 vs baseline, ETA 35s\n"


def test_ctrl_c_inside_a_storage_commit_is_an_interrupt():
    from optuna.exceptions import StorageInternalError

    from ncdoc.cli.commands.tune import _interrupted

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:       # what Optuna's sqlite storage does around a commit
            raise StorageInternalError("An exception is raised during the commit.") from exc
    except StorageInternalError as wrapped:
        assert _interrupted(wrapped)
    assert not _interrupted(StorageInternalError("disk full"))
