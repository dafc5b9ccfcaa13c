"""ncdoc-prelaunch as a cluster deploys it: installed from a wheel, run by absolute path from a prolog
with `env -i` and a minimal PATH, from another folder, without HOME, as an unprivileged user, and
with ncdoc deliberately broken. It must run the ncdoc installed beside it (never the python3 on
PATH), say "not ready" only when a finished check says so, and fail open loudly (closed with
NCDOC_STRICT=1) when ncdoc could not run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wheel_install
from paths import ROOT

MINIMAL_PATH = "/usr/bin:/bin"
COULD_NOT_RUN = "ncdoc pre-launch gate could not run: "


@pytest.fixture(scope="module")
def venv() -> Path:
    try:
        return wheel_install.venv()
    except wheel_install.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def snapshots():
    """A healthy and a broken node as snapshot files, in a folder anyone may read (pytest's own
    temporary folders are private to the user running the suite)."""
    import tempfile
    from ncdoc.examples.stored import load_example
    folder = Path(tempfile.mkdtemp(prefix="ncdoc-prelaunch-snaps-"))
    folder.chmod(0o755)
    out = {}
    for name in ("dgx-h100", "dgx-h100-port-down"):
        path = folder / f"{name}.json"
        path.write_text(load_example(name).to_json())
        path.chmod(0o644)
        out[name] = str(path)
    yield out
    shutil.rmtree(folder, ignore_errors=True)


def prelaunch(script, *args, env=None, cwd="/", user=None):
    cmd = [str(script), *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    # the subprocess timeout is a guard against a hang, not a measurement
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=env if env is not None else {"PATH": MINIMAL_PATH})


def test_help_prints_help(venv):
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: ncdoc-prelaunch")
    assert "exit status:" in p.stdout and "NCDOC_STRICT" in p.stdout and "fails open" in p.stdout


def test_env_i_with_a_minimal_path_runs_the_installed_ncdoc(venv, snapshots):
    script = venv / "bin" / "ncdoc-prelaunch"
    p = prelaunch(script, env={"PATH": MINIMAL_PATH, "NCDOC_SNAPSHOT": snapshots["dgx-h100"]})
    assert p.returncode == 0, p.stderr
    assert "No module named" not in p.stderr and COULD_NOT_RUN not in p.stderr
    p = prelaunch(script, env={"PATH": MINIMAL_PATH, "NCDOC_SNAPSHOT": snapshots["dgx-h100-port-down"]})
    assert p.returncode == 1
    assert "ERROR   NC4004 port-down" in p.stderr and "node not ready for NCCL jobs: 3 problems (failing)" in p.stderr
    assert p.stdout == ""                     # everything goes to stderr: a prolog's stdout is not a report


def test_the_job_the_prolog_sees_is_checked_live(venv):
    # More GPUs than any node has: the live check must say the node cannot run this job.
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", env={"PATH": MINIMAL_PATH, "SLURM_GPUS_ON_NODE": "64"})
    assert p.returncode == 1, p.stderr
    assert "NC5101 fewer-gpus-than-allocated" in p.stderr and "SLURM_GPUS_ON_NODE=64" in p.stderr


def test_never_the_python3_on_path(venv, snapshots, tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    for name in ("python3", "python", "ncdoc"):
        (fake / name).write_text("#!/bin/sh\necho \"wrong $0\" >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch",
                  env={"PATH": f"{fake}:{MINIMAL_PATH}", "NCDOC_SNAPSHOT": snapshots["dgx-h100"]})
    assert p.returncode == 0 and "wrong" not in p.stderr, p.stderr


def test_from_another_folder_through_a_symlink_and_by_relative_path(venv, snapshots, tmp_path):
    link_dir = tmp_path / "usr-local-bin"
    link_dir.mkdir()
    (link_dir / "ncdoc-prelaunch").symlink_to(venv / "bin" / "ncdoc-prelaunch")
    env = {"PATH": MINIMAL_PATH, "NCDOC_SNAPSHOT": snapshots["dgx-h100-port-down"]}
    p = prelaunch(link_dir / "ncdoc-prelaunch", env=env, cwd=str(tmp_path))
    assert p.returncode == 1 and "NC4004" in p.stderr, p.stderr
    p = prelaunch("./ncdoc-prelaunch", env=env, cwd=str(venv / "bin"))
    assert p.returncode == 1 and "NC4004" in p.stderr, p.stderr


def test_without_home(venv, snapshots):
    env = {"PATH": MINIMAL_PATH}
    assert "HOME" not in env
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", env=dict(env, NCDOC_SNAPSHOT=snapshots["dgx-h100"]))
    assert p.returncode == 0, p.stderr
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", env=env)              # live
    assert p.returncode in (0, 1) and COULD_NOT_RUN not in p.stderr and "ncdoc check: " in p.stderr, p.stderr


def _unprivileged_venv(user: int) -> tuple[Path | None, str]:
    """(a venv with the wheel that `user` can run, "") or (None, why there is none). The suite's own
    interpreter may live where only root can read it (a pyenv build under /root): then one of the
    system's interpreters is tried."""
    if shutil.which("setpriv") is None:
        return None, "setpriv (util-linux) is not installed"
    tried = []
    as_user = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    for interp in dict.fromkeys([getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3",
                                 "/usr/local/bin/python3"]):
        if not os.path.exists(interp):
            continue
        try:
            env_dir = wheel_install.venv(interp)
        except wheel_install.Unavailable as exc:
            tried.append(f"{interp}: {exc}")
            continue
        # asked from a shell already running as the user, as the wrapper asks (setpriv's own exec can
        # still reach a path that the user's processes cannot)
        py = env_dir / "bin" / "python3"
        p = subprocess.run([*as_user, "sh", "-c", f'[ -x "{py}" ] && cd / && "{py}" -c "import ncdoc"'],
                           capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            return env_dir, ""
        tried.append(f"{interp}: {(p.stderr.strip().splitlines() or ['exit %d' % p.returncode])[-1]}")
    return None, "no Python 3.10+ that user can run (" + "; ".join(tried) + ")"


def test_as_an_unprivileged_user(snapshots):
    if os.geteuid() != 0:
        uid, env_dir = None, wheel_install.venv()      # the suite already runs unprivileged: that is the case
    else:
        uid = 65534                                   # nobody
        env_dir, why = _unprivileged_venv(uid)
        if env_dir is None:
            pytest.skip(f"cannot run ncdoc as an unprivileged user here: {why}")
    script = env_dir / "bin" / "ncdoc-prelaunch"
    p = prelaunch(script, env={"PATH": MINIMAL_PATH, "NCDOC_SNAPSHOT": snapshots["dgx-h100-port-down"]}, user=uid)
    assert p.returncode == 1 and "NC4004 port-down" in p.stderr, p.stderr
    p = prelaunch(script, env={"PATH": MINIMAL_PATH}, user=uid)          # live: sysfs as a user reads it
    assert p.returncode in (0, 1) and COULD_NOT_RUN not in p.stderr and "ncdoc check: " in p.stderr, p.stderr


@pytest.fixture()
def broken_copy(venv, tmp_path):
    """A copy of the install to break (the venv's interpreter is a link to the base one: a copy runs)."""
    copy = tmp_path / "venv"
    shutil.copytree(venv, copy, symlinks=True)
    site = next((copy / "lib").glob("python3*/site-packages"))
    return copy, site / "ncdoc"


def _breaks(copy: Path, env_extra=None, *args):
    env = {"PATH": MINIMAL_PATH, **(env_extra or {})}
    return prelaunch(copy / "bin" / "ncdoc-prelaunch", *args, env=env)


@pytest.mark.parametrize("how", ["syntax-error-in-the-entry-module", "package-missing", "lazy-module-raises",
                                 "interpreter-missing"])
def test_a_broken_install_fails_open_loudly_and_closed_when_strict(broken_copy, how):
    copy, pkg = broken_copy
    if how == "syntax-error-in-the-entry-module":
        (pkg / "cli" / "main.py").write_text("def broken(:\n")
        for cached in (pkg / "cli" / "__pycache__").glob("main.*.pyc"):
            cached.unlink()
    elif how == "package-missing":
        shutil.rmtree(pkg)
    elif how == "lazy-module-raises":
        (pkg / "checks" / "job.py").write_text("raise RuntimeError('half-upgraded install')\n")
        for cached in (pkg / "checks" / "__pycache__").glob("job.*.pyc"):
            cached.unlink()
    else:
        for name in ("python", "python3", "ncdoc"):
            (copy / "bin" / name).unlink(missing_ok=True)
        for extra in (copy / "bin").glob("python3.*"):
            extra.unlink()
    p = _breaks(copy)
    assert p.returncode == 0, p.stderr                                  # fail-open: a broken ncdoc never drains
    lines = [line for line in p.stderr.splitlines() if line.startswith(COULD_NOT_RUN)]
    assert len(lines) == 1 and "the node was NOT checked" in lines[0] and "fail-open" in lines[0], p.stderr
    assert "not ready" not in p.stderr
    for strict in (_breaks(copy, {"NCDOC_STRICT": "1"}), _breaks(copy, None, "--strict")):
        assert strict.returncode == 2 and COULD_NOT_RUN in strict.stderr and "strict" in strict.stderr


def test_bad_usage_and_bad_input_are_could_not_run_never_ready_by_accident(venv, snapshots, tmp_path):
    script = venv / "bin" / "ncdoc-prelaunch"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    bad.chmod(0o644)
    for env_extra, args, needle in (({}, ("--expect-gpus", "abc"), "--expect-gpus wants a whole number"),
                                    ({"NCDOC_FAIL_ON": "fatal"}, (), "fail-on 'fatal'"),
                                    ({"NCDOC_SNAPSHOT": str(bad)}, (), "not valid JSON"),
                                    ({"NCDOC_TIMEOUT": "soon"}, (), "--timeout wants a number")):
        env = {"PATH": MINIMAL_PATH, **env_extra}
        p = prelaunch(script, *args, env=env)
        assert p.returncode == 0 and COULD_NOT_RUN in p.stderr and needle in p.stderr, p.stderr
        p = prelaunch(script, *args, "--strict", env=env)
        assert p.returncode == 2 and needle in p.stderr


def test_a_hung_read_is_the_deadline_not_a_hung_prolog(venv, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / ".nccl.conf")           # opening it blocks, like a file on a dead NFS home
    env = {"PATH": MINIMAL_PATH, "HOME": str(home), "NCDOC_TIMEOUT": "1"}
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", env=env)
    assert p.returncode == 0 and COULD_NOT_RUN in p.stderr and "deadline of 1 s" in p.stderr, p.stderr
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", "--strict", env=env)
    assert p.returncode == 2


def test_syslog_gets_the_verdict_when_asked(venv, snapshots, tmp_path):
    record = tmp_path / "calls.txt"
    standins = ROOT / "tests" / "fixtures" / "bin" / "prelaunch"
    env = {"PATH": f"{standins}:{MINIMAL_PATH}", "NCDOC_SNAPSHOT": snapshots["dgx-h100-port-down"],
           "NCDOC_SYSLOG": "1", "GATE_RECORD": str(record)}
    p = prelaunch(venv / "bin" / "ncdoc-prelaunch", env=env)
    assert p.returncode == 1
    calls = record.read_text().splitlines()
    assert calls[:4] == ["CALL logger", "ARG -t", "ARG ncdoc-prelaunch", "ARG --"]
    assert calls[4].startswith("ARG ncdoc-prelaunch: ") and "node not ready" in calls[4]


def test_the_wheel_carries_the_stored_examples_and_the_wrapper(venv):
    site = next((venv / "lib").glob("python3*/site-packages"))
    stored = {p.stem for p in (site / "ncdoc" / "examples" / "snapshots").glob("*.json")}
    assert {"dgx-h100", "dgx-h100-port-down", "workstation-2gpu"} <= stored
    p = subprocess.run([str(venv / "bin" / "ncdoc"), "check", "--example", "dgx-h100-port-down", "--no-config"],
                       capture_output=True, text=True, timeout=120, env={"PATH": MINIMAL_PATH})
    assert p.returncode == 1 and "NC4004" in p.stdout
    # compiled bytecode, as pip leaves it
    assert list((site / "ncdoc" / "cli" / "__pycache__").glob("main.*.pyc"))


def test_a_source_checkout_runs_its_own_package(snapshots):
    # bin/ beside ncdoc/ (a development checkout): the package of that checkout, with an interpreter
    # that has the package's dependencies
    env = {"PATH": f"{Path(sys.executable).parent}:{MINIMAL_PATH}", "NCDOC_SNAPSHOT": snapshots["dgx-h100-port-down"]}
    p = subprocess.run(["sh", str(ROOT / "bin" / "ncdoc-prelaunch")], capture_output=True, text=True, timeout=120,
                       env=env, cwd="/")
    assert p.returncode == 1 and "NC4004 port-down" in p.stderr, p.stderr
