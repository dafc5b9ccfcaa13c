"""Gathering through the stand-in srun and mpirun: per-node answers, the reasons of the nodes that did
not answer, cleanup of the step after a timeout, exact --dry-run lines, and the inputs that exit 2."""

import json
import shlex

import pytest

from cluster_helpers import ncdoc, standin_calls, standin_env, write_snapshots

FAULTS = {"nodes": "node[01-06]", "faults": {"node02": {"agent": "hang"}, "node04": {"agent": "crash"},
                                             "node05": {"down": True, "agent": "slow:2"},
                                             "node06": {"agent": "garbage"}}}


@pytest.fixture(scope="module")
def snaps(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fixture-snaps")
    write_snapshots(folder, {"example": "dgx-h100", "nodes": 6, "patch": {"node03": {"versions.nccl": "2.19.3"}}})
    return folder


def _gather(tmp_path, snaps, launcher_args, mpi=None):
    env = standin_env(tmp_path, nodes="node[01-06]", faults=FAULTS, snaps=snaps, mpi=mpi)
    p = ncdoc(["cluster", "snapshot", *launcher_args, "--agent", "ncdoc-fixture-node", "--timeout", "2",
               "--out-dir", str(tmp_path / "out"), "-o", str(tmp_path / "cluster.json")], env, cwd=tmp_path)
    return p, json.loads((tmp_path / "cluster.json").read_text())


@pytest.mark.parametrize("launcher, mpi", [("slurm", None), ("mpirun", "openmpi"), ("mpirun", "hydra")])
def test_a_bad_node_costs_only_its_own_answer(tmp_path, snaps, launcher, mpi):
    args = ["--launcher", launcher] + (["--nodes", "node[01-06]"] if launcher == "mpirun" else [])
    p, doc = _gather(tmp_path, snaps, args, mpi)
    assert p.returncode == 1, p.stderr                     # written, but incomplete
    assert "Traceback" not in p.stderr
    assert sorted(doc["nodes"]) == ["node01", "node03"]
    assert doc["complete"] is False
    why = {u["node"]: (u["kind"], u["reason"]) for u in doc["unreachable"]}
    assert why["node02"][0] == "timeout" and "2 s" in why["node02"][1]
    assert why["node04"][0] == "crash" and "SIGSEGV" in why["node04"][1]
    assert why["node05"][0] in ("lost", "timeout")
    assert why["node06"][0] == "malformed" and "did not print a snapshot" in why["node06"][1]
    assert doc["nodes"]["node03"]["versions"]["nccl"] == "2.19.3"
    # each node's output is kept, and the hung step was ended (its tasks killed), not left behind
    assert (tmp_path / "out" / "gather" / "node01.out").read_text().lstrip().startswith("{")
    assert any(isinstance(c, str) and c.startswith("abort") for c in standin_calls(tmp_path))
    assert all(f"node0{i}" in p.stderr for i in (2, 4, 5, 6))


def test_clock_offsets_come_back_from_the_wrapper(tmp_path, snaps):
    env = standin_env(tmp_path, nodes="node[01-03]", snaps=snaps)
    p = ncdoc(["cluster", "snapshot", "--launcher", "slurm", "--agent", "ncdoc-fixture-node", "--out-dir",
               str(tmp_path / "o"), "-o", str(tmp_path / "c.json")], env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert sorted(doc["clock_offsets"]) == ["node01", "node02", "node03"]
    lo, hi = doc["clock_offsets"]["node01"]
    assert lo <= 0.5 and hi >= -0.5                       # the same machine: no skew
    check = ncdoc(["cluster", "check", str(tmp_path / "c.json"), "--json"], env, cwd=tmp_path)
    assert "clock-skew" not in {f["name"] for f in json.loads(check.stdout)["findings"]}
    assert "clock-skew" not in [s["name"] for s in json.loads(check.stdout)["skipped"]]


def test_srun_dry_run_prints_the_exact_step(tmp_path):
    env = standin_env(tmp_path, nodes="gpu[01-16]")
    p = ncdoc(["cluster", "snapshot", "--launcher", "slurm", "--dry-run", "--launcher-args=--mpi=pmix -p batch"],
              env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    argv = shlex.split(p.stdout.strip())
    assert argv[:8] == ["srun", "--nodelist=gpu[01-16]", "--nodes=16", "--ntasks=16", "--ntasks-per-node=1",
                        "--label", "--kill-on-bad-exit=0", "--export=ALL"]
    assert argv[8:10] == ["--mpi=pmix", "-p"] and argv[-2:] == ["ncdoc", "snapshot"]
    assert standin_calls(tmp_path) == []                   # nothing ran


@pytest.mark.parametrize("flavour, head", [
    ("openmpi", ["mpirun", "-np", "3", "-H", "a1:1,a2:1,a3:1", "--map-by", "node", "--tag-output"]),
    ("hydra", ["mpirun", "-n", "3", "-ppn", "1", "-hosts", "a1,a2,a3", "-prepend-rank"]),
    ("intel", ["mpirun", "-n", "3", "-ppn", "1", "-hosts", "a1,a2,a3", "-prepend-rank"]),
])
def test_mpirun_dry_run_per_flavour(tmp_path, flavour, head):
    (tmp_path / "hosts").write_text("a1 slots=8\na2 slots=8\na3:8\n")
    env = standin_env(tmp_path, nodes="a[1-3]", allocation=False)
    p = ncdoc(["cluster", "snapshot", "--launcher", "mpirun", "--hostfile", "hosts", "--mpi-flavour", flavour,
               "--launcher-args=--mca btl tcp,self", "--dry-run"], env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    argv = shlex.split(p.stdout.strip())
    assert argv[:len(head)] == head
    assert argv[len(head):len(head) + 3] == ["--mca", "btl", "tcp,self"]


def test_mpirun_flavour_is_asked_from_mpirun(tmp_path, snaps):
    env = standin_env(tmp_path, nodes="node[01-02]", snaps=snaps, mpi="intel")
    p = ncdoc(["cluster", "snapshot", "--launcher", "mpirun", "--agent", "ncdoc-fixture-node", "--out-dir",
               str(tmp_path / "o"), "-o", str(tmp_path / "c.json")], env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    call = next(c for c in standin_calls(tmp_path) if isinstance(c, list) and c[0] == "mpirun")
    assert "-prepend-rank" in call and "-hosts" in call


@pytest.mark.parametrize("args, words", [
    (["--launcher", "slurm", "--launcher-cmd", "no-such-srun"], "no-such-srun is not installed"),
    (["--launcher", "slurm", "--nodes", "node[01-09]"], "not in this job's allocation"),
    (["--launcher", "slurm", "--nodes", "node01,node01"], "node01 twice"),
    (["--launcher", "mpirun", "--hostfile", "strangers"], "not in this job's allocation"),
    (["--launcher", "mpirun"], "mpirun needs the nodes"),
    (["--launcher", "slurm", "--nodes", "node[03-01]"], "backwards"),
])
def test_bad_node_lists_and_missing_launchers_exit_2_with_one_line(tmp_path, args, words):
    (tmp_path / "strangers").write_text("node01\nother07\n")
    env = standin_env(tmp_path, nodes="node[01-04]")
    if args == ["--launcher", "mpirun"]:
        env.pop("SLURM_JOB_NODELIST")
    p = ncdoc(["cluster", "snapshot", *args, "--out-dir", str(tmp_path / "o")], env, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and words in p.stderr and "Traceback" not in p.stderr


def test_unresolvable_hostfile_outside_an_allocation(tmp_path):
    (tmp_path / "hosts").write_text("localhost\nno-such-host-zz9.invalid\n")
    env = standin_env(tmp_path, nodes="x", allocation=False)
    p = ncdoc(["cluster", "snapshot", "--launcher", "mpirun", "--hostfile", "hosts", "--mpi-flavour", "openmpi"],
              env, cwd=tmp_path)
    assert p.returncode == 2 and "no-such-host-zz9.invalid" in p.stderr and p.stderr.count("\n") == 1


def test_live_check_gathers_first(tmp_path, snaps):
    env = standin_env(tmp_path, nodes="node[01-04]", snaps=snaps)
    p = ncdoc(["cluster", "check", "--launcher", "slurm", "--agent", "ncdoc-fixture-node", "--out-dir",
               str(tmp_path / "o"), "--json"], env, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert [f["name"] for f in doc["findings"]] == ["nccl-version-drift"]
    assert "node03" in doc["findings"][0]["message"]
