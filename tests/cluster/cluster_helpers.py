"""Simulated clusters for the cluster tests: fixture snapshots on disk, the stand-in launchers on PATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from paths import FIXTURES, ROOT

BIN = FIXTURES / "bin"


def write_snapshots(folder, spec: dict) -> dict:
    """One <node>.json per node of an ncdoc.engine.cases cluster spec; returns the ClusterFacts."""
    from ncdoc.engine.cases import cluster_facts
    facts = cluster_facts(spec)
    os.makedirs(folder, exist_ok=True)
    for name, snap in facts.nodes.items():
        (folder / f"{name}.json").write_text(snap.to_json() + "\n")
    return facts


def standin_env(tmp_path, *, nodes: str, faults: dict | None = None, snaps=None, mpi: str | None = None,
                allocation: bool = True) -> dict:
    """The environment of a process that should meet the stand-in srun/mpirun/scontrol/nccl-tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SLURM_", "NCDOC_STANDIN"))}
    env["PATH"] = f"{BIN}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
    env["NCDOC_STANDIN_LOG"] = str(tmp_path / "standin.log")
    if allocation:
        env["SLURM_JOB_NODELIST"] = nodes
        env["SLURM_JOB_ID"] = "4242"
    if faults is not None:
        path = tmp_path / "faults.json"
        path.write_text(json.dumps(faults))
        env["NCDOC_STANDIN_FAULTS"] = str(path)
    if snaps is not None:
        env["NCDOC_FIXTURE_SNAPS"] = str(snaps)
    if mpi:
        env["NCDOC_STANDIN_MPI"] = mpi
    return env


def standin_calls(tmp_path) -> list:
    """Every command line the stand-ins were given (JSON lines), and their "abort ..." notes."""
    path = tmp_path / "standin.log"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        out.append(json.loads(line) if line.startswith("[") else line)
    return out


def ncdoc(args, env, cwd=None, timeout=240):
    """Run the ncdoc CLI in a subprocess (the launchers start real processes)."""
    return subprocess.run([sys.executable, "-m", "ncdoc", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT, timeout=timeout)
