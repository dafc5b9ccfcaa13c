"""One tune per study: a second `ncdoc tune` on a study that is being tuned stops at once (one line,
exit 2); the lock of a tune that died is taken over."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ncdoc.cli.main import main
from tuner_toy import SLOW_SIM_CLI
from ncdoc.errors import UsageError
from ncdoc.tuner.study_lock import STALE_S, StudyLock, lock_path

pytest.importorskip("optuna")


def test_where_the_lock_lives(tmp_path):
    assert lock_path(None, tmp_path, "ncdoc-tune") == tmp_path.resolve() / "study.journal.ncdoc-tune.lock"
    assert lock_path(str(tmp_path / "s.db"), tmp_path, "a b") == tmp_path.resolve() / "s.db.a_b.lock"
    assert lock_path(f"sqlite:///{tmp_path}/x.db", tmp_path, "n").name == "x.db.n.lock"
    assert lock_path("memory", tmp_path, "n") is None
    pg = lock_path("postgresql://db/optuna", tmp_path, "n")
    assert pg.parent == tmp_path and pg != lock_path("postgresql://db/optuna", tmp_path, "m")


def test_a_held_lock_refuses_a_second_holder_until_released(tmp_path):
    path = lock_path(None, tmp_path, "s")
    with StudyLock(path, "s"):
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(UsageError, match=rf"study 's' is being tuned by another ncdoc tune \(pid {os.getpid()}"):
            StudyLock(path, "s").acquire()
    assert not path.exists()
    with StudyLock(path, "s"):                       # free again
        pass


def test_a_holder_on_another_host_counts_while_its_heartbeat_is_fresh(tmp_path):
    path = lock_path(None, tmp_path, "s")
    path.write_text(json.dumps({"host": "gpu-elsewhere", "pid": 4242, "since": time.time()}))
    with pytest.raises(UsageError, match="pid 4242 on gpu-elsewhere"):
        StudyLock(path, "s").acquire()
    old = time.time() - STALE_S - 5
    os.utime(path, (old, old))
    notes = []
    with StudyLock(path, "s", log=notes.append):
        assert json.loads(path.read_text())["host"] == socket.gethostname()
    assert "no heartbeat" in notes[0]


def _slow_tune(out):
    """A tune whose simulated measurements last 50 ms each, so that it is still running when looked at."""
    return subprocess.Popen([sys.executable, "-c", SLOW_SIM_CLI, "tune", "--preset", "h100-ib-2node", "--out", str(out),
                             "--repeats", "1", "--trials", "200"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


@pytest.mark.slow
def test_a_second_tune_of_a_running_study_exits_2_and_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    out = tmp_path / "out"
    lock = lock_path(None, out, "ncdoc-tune")
    proc = _slow_tune(out)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (out / "study.journal").exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            time.sleep(0.1)
        assert lock.exists()
        rc = main(["tune", "--preset", "h100-ib-2node", "--out", str(out), "--resume", "--trials", "3"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"study 'ncdoc-tune' is being tuned by another ncdoc tune (pid {proc.pid} on" in err
        assert proc.poll() is None                   # the first tune is untouched
        os.kill(proc.pid, signal.SIGKILL)            # it dies without cleaning up: its lock file stays
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    assert lock.exists() and json.loads(lock.read_text())["pid"] == proc.pid
    rc = main(["tune", "--preset", "h100-ib-2node", "--out", str(out), "--resume", "--trials", "60",
               "--repeats", "1", "--top-k", "0"])
    err = capsys.readouterr().err
    assert rc == 0, err[-2000:]
    assert f"the tune that held it (pid {proc.pid} on" in err and "is gone; taking it over" in err
    assert not lock.exists()
