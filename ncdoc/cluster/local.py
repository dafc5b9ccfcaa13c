"""This machine alone: the launcher for one node, with the same deadlines, cleanup and logs.

A single-node measurement needs no srun, mpirun or Ray: nccl-tests drives every GPU of the node
from one process (`-g N`). The local launcher runs per-node commands and jobs here, each in its
own session with its output in files (ncdoc.cluster.processes): killed with its process group at
its deadline or on Ctrl-C. A job for more than one rank on this node would need MPI to wire the
ranks; it is refused (use --launcher mpirun with this host).
"""

from __future__ import annotations

import os
import socket
import time

from ncdoc.cluster import processes
from ncdoc.cluster.launch import Job, JobRun, Launcher, NodeRun, exit_reason, job_environ, job_result
from ncdoc.errors import UsageError


def this_host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


class LocalLauncher(Launcher):
    name = "local"

    def __init__(self, *, nodes: str | None = None, environ=None, dry_run: bool = False):
        self.environ = dict(os.environ if environ is None else environ)
        me = this_host()
        if nodes:
            from ncdoc.cluster.nodes import expand
            wanted = expand(nodes)
            others = [n for n in wanted if n not in (me, "localhost")]
            if others:
                raise UsageError(f"--launcher local runs on this machine ({me}) only, not on {', '.join(others[:6])}: "
                                 "use --launcher slurm, mpirun or ray for other nodes")
        self._nodes = [me]

    def nodes(self) -> list[str]:
        return list(self._nodes)

    def per_node_commands(self, nodes, argv, env) -> list[list[str]]:
        return [list(argv)]

    def run_per_node(self, nodes, argv, *, env=None, timeout_s: float = 60.0, log_dir: str) -> dict[str, NodeRun]:
        os.makedirs(log_dir, exist_ok=True)
        node = self._nodes[0]
        full = {**self.environ, **(env or {}), "NCDOC_NODE": node}
        out, err = os.path.join(log_dir, f"{node}.out"), os.path.join(log_dir, f"{node}.err")
        proc = processes.Proc(list(argv), full, out, err, timeout_s=timeout_s, label=node)
        clock = time.time()
        processes.run_all([proc], cancel=self.cancel)
        common = dict(stdout=proc.output(), stderr=proc.errors(), rc=proc.rc, clock=clock, window=(clock, time.time()),
                      log=out, elapsed_s=proc.elapsed_s)
        if proc.start_error:
            return {node: NodeRun(node, False, reason=proc.start_error, kind="launch", **common)}
        if proc.killed:
            return {node: NodeRun(node, False, reason=f"no answer within {timeout_s:g} s (killed)", kind="timeout",
                                  **common)}
        if proc.rc != 0:
            kind, reason = exit_reason(proc.rc, proc.errors(), os.path.basename(argv[0]))
            return {node: NodeRun(node, False, reason=reason, kind=kind, **common)}
        return {node: NodeRun(node, True, **common)}

    def job_command(self, job: Job) -> list[str]:
        if job.ranks_per_node != 1 or len(job.nodes) != 1:
            raise UsageError(f"--launcher local runs one process on this machine; job {job.key} wants "
                             f"{len(job.nodes)} node(s) x {job.ranks_per_node} rank(s) (use --launcher mpirun)")
        return list(job.argv)

    def run_jobs(self, jobs, *, log_dir: str) -> list[JobRun]:
        os.makedirs(log_dir, exist_ok=True)
        procs = [processes.Proc(self.job_command(j), {**job_environ(self.environ, j), "NCDOC_NODE": self._nodes[0]},
                                os.path.join(log_dir, f"{j.key}.log"), timeout_s=j.timeout_s, label=j.key)
                 for j in jobs]
        processes.run_all(procs, cancel=self.cancel)
        return [job_result(j, p) for j, p in zip(jobs, procs)]


__all__ = ["LocalLauncher", "this_host"]
