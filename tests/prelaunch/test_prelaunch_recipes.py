"""The recipes in docs/prelaunch.md, run as written (taken from the page, so the page cannot rot):
the sbatch first step, the Slurm prolog that drains with a reason, the Kubernetes init container.
`srun`, `scontrol` and `logger` are stand-ins that record their arguments
(tests/fixtures/bin/prelaunch/); nodes are simulated with snapshot files (NCDOC_SNAPSHOT) or
checked live with the job's variables as Slurm sets them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

import wheel_install
from paths import FIXTURES, ROOT

DOC = ROOT / "docs" / "prelaunch.md"
STANDINS = FIXTURES / "bin" / "prelaunch"


def recipe(name: str) -> str:
    """The fenced block right after `<!-- recipe: NAME -->` in docs/prelaunch.md."""
    m = re.search(rf"<!-- recipe: {re.escape(name)} -->\n```[a-z]*\n(.*?)\n```", DOC.read_text(), re.S)
    assert m, f"docs/prelaunch.md has no recipe {name!r}"
    return m.group(1) + "\n"


@pytest.fixture(scope="module")
def venv() -> Path:
    try:
        return wheel_install.venv()
    except wheel_install.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def nodes():
    """Snapshot files of a healthy node, a node with a port down and a workstation with 2 GPUs."""
    from ncdoc.examples.stored import load_example
    folder = Path(tempfile.mkdtemp(prefix="ncdoc-recipe-nodes-"))
    out = {}
    for name in ("dgx-h100", "dgx-h100-port-down", "workstation-2gpu"):
        out[name] = folder / f"{name}.json"
        out[name].write_text(load_example(name).to_json())
    yield out
    shutil.rmtree(folder, ignore_errors=True)


def calls(record: Path) -> list[tuple[str, list[str]]]:
    """The stand-ins' calls: [(command, [args])]."""
    out: list[tuple[str, list[str]]] = []
    if not record.exists():
        return out
    for line in record.read_text().splitlines():
        kind, _, value = line.partition(" ")
        if kind == "CALL":
            out.append((value, []))
        elif kind == "ARG":
            out[-1][1].append(value)
    return out


# ---------------------------------------------------------------- sbatch: the first step

def _sbatch(tmp_path, venv, node_envs: dict[str, dict[str, str]]):
    script = tmp_path / "job.sbatch"
    script.write_text(recipe("sbatch"))
    (tmp_path / "train.py").write_text("open('trained', 'w').write('yes')\n")
    node_dir = tmp_path / "nodes"
    node_dir.mkdir()
    for name, env in node_envs.items():
        (node_dir / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    record = tmp_path / "calls.txt"
    env = {"PATH": f"{STANDINS}:{venv / 'bin'}:/usr/bin:/bin", "GATE_RECORD": str(record),
           "GATE_SRUN_NODES": str(node_dir), "HOME": str(tmp_path)}
    p = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    return p, calls(record)


def test_sbatch_first_step_stops_the_job_when_one_node_is_not_ready(tmp_path, venv, nodes):
    p, made = _sbatch(tmp_path, venv, {"gpu01": {"NCDOC_SNAPSHOT": nodes["dgx-h100"]},
                                       "gpu02": {"NCDOC_SNAPSHOT": nodes["dgx-h100-port-down"]}})
    assert p.returncode == 1, p.stderr
    assert made == [("srun", ["--ntasks-per-node=1", "--export=ALL", "ncdoc-prelaunch"])]   # train never started
    assert "NC4004 port-down" in p.stderr and "node not ready for NCCL jobs" in p.stderr
    assert not (tmp_path / "trained").exists()


def test_sbatch_first_step_lets_a_ready_job_train(tmp_path, venv, nodes):
    p, made = _sbatch(tmp_path, venv, {"gpu01": {"NCDOC_SNAPSHOT": nodes["dgx-h100"]},
                                       "gpu02": {"NCDOC_SNAPSHOT": nodes["dgx-h100"]}})
    assert p.returncode == 0, p.stderr
    assert [c for c, _ in made] == ["srun", "srun"] and made[1][1] == ["--export=ALL", "python", "train.py"]
    assert (tmp_path / "trained").read_text() == "yes"


def test_sbatch_first_step_checks_the_node_live_against_the_job(tmp_path, venv):
    # a node given more GPUs than any node has, as Slurm's step variables say
    p, made = _sbatch(tmp_path, venv, {"gpu01": {"SLURM_GPUS_ON_NODE": "64", "SLURM_NNODES": "1"}})
    assert p.returncode == 1 and "NC5101 fewer-gpus-than-allocated" in p.stderr, p.stderr
    assert len(made) == 1


# ---------------------------------------------------------------- Slurm prolog: drain with a reason

def _prolog(tmp_path, venv_dir: Path, env_extra: dict[str, str]):
    text = recipe("prolog")
    site = {"NCDOC_BIN=/opt/ncdoc/bin": f"NCDOC_BIN={venv_dir / 'bin'}",
            "PATH=/usr/bin:/bin:/usr/sbin:/sbin": f"PATH={STANDINS}:/usr/bin:/bin:/usr/sbin:/sbin"}
    for line, ours in site.items():          # the two site-specific lines: where ncdoc is, the stand-ins first
        assert text.count(line) == 1, f"the prolog recipe no longer sets {line!r}"
        text = text.replace(line, ours)
    script = tmp_path / "prolog.sh"
    script.write_text(text)
    record = tmp_path / "calls.txt"
    env = {"GATE_RECORD": str(record), "SLURMD_NODENAME": "gpu17", "SLURM_JOB_ID": "4242", **env_extra}
    # Slurm runs a prolog with no PATH and as root, from slurmd's folder
    p = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=300, cwd="/", env=env)
    return p, calls(record)


def test_prolog_leaves_a_ready_node_alone(tmp_path, venv, nodes):
    p, made = _prolog(tmp_path, venv, {"NCDOC_SNAPSHOT": str(nodes["dgx-h100"])})
    assert p.returncode == 0, p.stderr
    assert made == []


def test_prolog_drains_a_node_that_is_not_ready_with_the_first_problem_as_reason(tmp_path, venv, nodes):
    p, made = _prolog(tmp_path, venv, {"NCDOC_SNAPSHOT": str(nodes["dgx-h100-port-down"])})
    assert p.returncode == 1, p.stderr                    # Slurm requeues the job
    drain = [args for cmd, args in made if cmd == "scontrol"]
    assert len(drain) == 1
    update, node, state, reason = drain[0]
    assert (update, node, state) == ("update", "NodeName=gpu17", "State=DRAIN")
    assert reason.startswith("Reason=ncdoc: ERROR NC4004 port-down: mlx5_4 port 1 is DOWN") and len(reason) <= 215
    logged = [args[-1] for cmd, args in made if cmd == "logger"]
    assert logged and logged[0].startswith("ncdoc-prelaunch: gpu17: node not ready for NCCL jobs")


def test_prolog_drains_for_the_gpus_the_job_was_given(tmp_path, venv):
    gpus = ",".join(str(i) for i in range(64))            # more than any node has
    p, made = _prolog(tmp_path, venv, {"SLURM_JOB_GPUS": gpus})
    assert p.returncode == 1, p.stderr
    (reason,) = [args[3] for cmd, args in made if cmd == "scontrol"]
    assert "NC5101 fewer-gpus-than-allocated" in reason


def test_prolog_with_a_broken_ncdoc_fails_open_and_logs_it(tmp_path, venv, nodes):
    broken = tmp_path / "venv"
    shutil.copytree(venv, broken, symlinks=True)
    shutil.rmtree(next((broken / "lib").glob("python3*/site-packages")) / "ncdoc")
    p, made = _prolog(tmp_path, broken, {"NCDOC_SNAPSHOT": str(nodes["dgx-h100-port-down"])})
    assert p.returncode == 0, p.stderr                    # a broken install never drains the cluster
    assert [cmd for cmd, _ in made] == ["logger"]
    assert "ncdoc pre-launch gate could not run" in made[0][1][-1] and "NOT checked" in made[0][1][-1]
    # a site that would rather stop jobs than run them unchecked
    os.unlink(tmp_path / "calls.txt")
    p, made = _prolog(tmp_path, broken, {"NCDOC_STRICT": "1"})
    assert p.returncode == 1
    (reason,) = [args[3] for cmd, args in made if cmd == "scontrol"]
    assert reason.startswith("Reason=ncdoc: ncdoc pre-launch gate could not run")


# ---------------------------------------------------------------- Kubernetes init container

def _init_container(venv, snapshot: Path):
    spec = yaml.safe_load(recipe("init-container"))["initContainers"][0]
    env = {e["name"]: str(e["value"]) for e in spec["env"]}
    env.update({"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "NCDOC_SNAPSHOT": str(snapshot)})
    # the kubelet runs `command` as given (exec form), with the container's env and no HOME
    return subprocess.run(spec["command"], capture_output=True, text=True, timeout=300, env=env, cwd="/")


def test_init_container_lets_a_ready_pod_start(venv, nodes):
    p = _init_container(venv, nodes["dgx-h100"])
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("node, code", [("dgx-h100-port-down", "NC4004"), ("workstation-2gpu", "NC5101")])
def test_init_container_keeps_the_pod_from_starting(venv, nodes, node, code):
    p = _init_container(venv, nodes[node])
    assert p.returncode == 1 and code in p.stderr, p.stderr
