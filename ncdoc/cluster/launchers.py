"""Which launcher a command line asks for (--launcher, --nodes, --hostfile, --ray-address, ...).

Kept apart from ncdoc.cluster.launch, which the launchers themselves import.
"""

from __future__ import annotations

import os
import shlex
import shutil

from ncdoc.cluster.launch import LAUNCHERS, Launcher
from ncdoc.errors import UsageError


def make_launcher(kind: str | None, *, nodes: str | None = None, hostfile: str | None = None,
                  ray_address: str | None = None, command: str | None = None, extra_args=(),
                  mpi_flavour: str | None = None, environ=None, dry_run: bool = False) -> Launcher:
    """The launcher a command line asks for. Default: Slurm inside an allocation, else Ray."""
    environ = os.environ if environ is None else environ
    if kind is None:
        kind = "slurm" if environ.get("SLURM_JOB_ID") and shutil.which(command or "srun") else "ray"
    if kind not in LAUNCHERS:
        raise UsageError(f"unknown launcher {kind!r} (use one of {', '.join(LAUNCHERS)})")
    extra = [a for item in extra_args for a in shlex.split(item)]
    if kind == "slurm":
        from ncdoc.cluster.slurm import SlurmLauncher
        return SlurmLauncher(nodes=nodes, hostfile=hostfile, srun=command or "srun", extra_args=extra,
                             environ=environ, dry_run=dry_run)
    if kind == "mpirun":
        from ncdoc.cluster.mpi import MpiLauncher
        return MpiLauncher(nodes=nodes, hostfile=hostfile, mpirun=command or "mpirun", extra_args=extra,
                           flavour=mpi_flavour, environ=environ, dry_run=dry_run)
    if hostfile:
        raise UsageError(f"--hostfile is for --launcher slurm or mpirun; "
                         f"{'a Ray cluster knows its nodes' if kind == 'ray' else '--launcher local is this machine'}")
    if kind == "local":
        from ncdoc.cluster.local import LocalLauncher
        return LocalLauncher(nodes=nodes, environ=environ, dry_run=dry_run)
    from ncdoc.cluster.ray_nodes import RayLauncher
    return RayLauncher(address=ray_address, nodes=nodes, mpirun=command or "mpirun", extra_args=extra,
                       mpi_flavour=mpi_flavour, dry_run=dry_run)


__all__ = ["make_launcher"]
