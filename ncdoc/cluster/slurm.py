"""Slurm: srun with the allocation's nodes.

Per node: one job step, one task per node, every line labelled with its task (`--label`),
the node named by the wrapper's first stderr line; a task that fails does not end the
others (`--kill-on-bad-exit=0`). Multi-rank jobs: one step per job, `--ntasks-per-node`
ranks per node, killed as a whole when one rank fails. The environment travels as srun's
own (`--export=ALL`): srun splits an --export list at commas, and NCCL values such as
NCCL_IB_HCA=mlx5_0,mlx5_1 contain commas. Anything in --launcher-args is passed to srun
as given (`--mpi=pmix`, `--gpus-per-node=8`, `--reservation=...`).

At a deadline or Ctrl-C srun gets SIGINT twice (which ends the step on every node), then
SIGTERM and SIGKILL.
"""

from __future__ import annotations

import os

from ncdoc.cluster import processes
from ncdoc.cluster.launch import (Job, JobRun, Launcher, Marks, NodeRun, find_tool, job_environ, job_result, last_line,
                                  node_run, parse_marks, wrap)
from ncdoc.cluster.nodes import compress, expand, read_hostfile, unique, within
from ncdoc.errors import UsageError
from ncdoc.startup.compiled_patterns import precompiled

_LABEL = precompiled(r"^\s*(\d{1,20}(?!\d)): ?(.*)$")
_TASK_ERROR = precompiled(r"^srun: error: (\S+): tasks? ([\d,\-]+): (.*)$")
_NODE_FAIL = precompiled(r"^srun: error: Node failure on (\S+)")


class SlurmLauncher(Launcher):
    name = "slurm"

    def __init__(self, *, nodes: str | None = None, hostfile: str | None = None, srun: str = "srun",
                 extra_args=(), environ=None, dry_run: bool = False):
        self.environ = dict(os.environ if environ is None else environ)
        self.srun = srun if dry_run else find_tool(
            srun, "srun", "is this a Slurm login node? (or use --launcher mpirun / ray)", self.environ)
        self.extra = list(extra_args)
        allocation = self.environ.get("SLURM_JOB_NODELIST") or self.environ.get("SLURM_NODELIST")
        self.allocation = expand(allocation) if allocation else None
        if nodes:
            chosen = expand(nodes)
        elif hostfile:
            chosen = [h for h, _ in read_hostfile(hostfile)]
        elif self.allocation is not None:
            chosen = list(self.allocation)
        else:
            raise UsageError("not inside a Slurm allocation (no SLURM_JOB_NODELIST): run inside salloc or sbatch, "
                             "or name the nodes with --nodes")
        chosen = unique(chosen, what="hostfile" if hostfile and not nodes else "node list")
        if self.allocation is not None:
            within(chosen, self.allocation, what="the hostfile" if hostfile and not nodes else "--nodes",
                   where=f"this job's allocation ({compress(self.allocation)})")
        self._nodes = chosen

    def nodes(self) -> list[str]:
        return list(self._nodes)

    # -- per node
    def per_node_commands(self, nodes, argv, env) -> list[list[str]]:
        nodes = list(nodes)
        return [[self.srun, f"--nodelist={compress(nodes)}", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}",
                 "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0", "--export=ALL", *self.extra,
                 *wrap(argv)]]

    def run_per_node(self, nodes, argv, *, env=None, timeout_s: float = 60.0, log_dir: str) -> dict[str, NodeRun]:
        import time
        nodes = unique(nodes)
        cmd = self.per_node_commands(nodes, argv, env)[0]
        os.makedirs(log_dir, exist_ok=True)
        proc = processes.Proc(cmd, {**self.environ, **(env or {})}, os.path.join(log_dir, "srun.out"),
                              os.path.join(log_dir, "srun.err"), timeout_s=timeout_s, escalation=processes.SRUN,
                              label="srun")
        t0 = time.time()
        processes.run_all([proc], cancel=self.cancel)
        t1 = time.time()
        if proc.start_error:
            return {n: NodeRun(n, False, reason=proc.start_error, kind="launch") for n in nodes}
        return self._split(nodes, proc, log_dir, (t0, t1))

    def _split(self, nodes, proc, log_dir, window) -> dict[str, NodeRun]:
        """One NodeRun per node from the labelled output of one step (tasks are matched to nodes by
        the name the wrapper printed: Slurm orders a nodelist its own way)."""
        out: dict[int, list[str]] = {}
        err: dict[int, list[str]] = {}
        srun_lines: list[str] = []
        for text, into in ((proc.output(), out), (proc.errors(), err)):
            for line in text.splitlines():
                m = _LABEL.match(line)
                if m:
                    into.setdefault(int(m.group(1)), []).append(m.group(2))
                elif into is err:
                    srun_lines.append(line)
        marks_by_node = {}
        task_of = {}
        for task, lines in err.items():
            marks = parse_marks("\n".join(lines))
            if marks.node:
                marks_by_node[marks.node] = marks
                task_of[marks.node] = task
        failed, lost = {}, set()
        for line in srun_lines:
            m = _TASK_ERROR.match(line)
            if m:
                failed[m.group(1)] = m.group(3).strip()
            m = _NODE_FAIL.match(line)
            if m:
                lost.add(m.group(1))
        runs = {}
        for n in nodes:
            task = task_of.get(n)
            stdout = "\n".join(out[task]) + "\n" if task is not None and task in out else ""
            marks = marks_by_node.get(n) or Marks()
            log = os.path.join(log_dir, f"{n}.out")
            with open(log, "w", encoding="utf-8") as fh:
                fh.write(stdout + ("--- stderr ---\n" + marks.stderr if marks.stderr.strip() else ""))
            common = dict(window=window, log=log, elapsed_s=proc.elapsed_s)
            if n in lost:
                runs[n] = NodeRun(n, False, stdout=stdout, stderr=marks.stderr,
                                  reason="Slurm reported a node failure during the step", kind="lost", **common)
                continue
            why = failed.get(n) or last_line("\n".join(srun_lines)) or "its task never started"
            runs[n] = node_run(n, marks, stdout, killed=proc.killed, timeout_s=proc.timeout_s,
                               started=task is not None or bool(proc.killed),
                               why_not_started=f"srun could not run it there: {why}", **common)
        return runs

    # -- multi-rank jobs
    def job_command(self, job: Job) -> list[str]:
        n = len(job.nodes)
        return [self.srun, f"--nodelist={compress(job.nodes)}", f"--nodes={n}",
                f"--ntasks={n * job.ranks_per_node}", f"--ntasks-per-node={job.ranks_per_node}",
                "--kill-on-bad-exit=1", "--export=ALL", *self.extra, *job.argv]

    def run_jobs(self, jobs, *, log_dir: str) -> list[JobRun]:
        os.makedirs(log_dir, exist_ok=True)
        procs = []
        for job in jobs:
            procs.append(processes.Proc(self.job_command(job), job_environ(self.environ, job),
                                        os.path.join(log_dir, f"{job.key}.log"), timeout_s=job.timeout_s,
                                        escalation=processes.SRUN, label=job.key))
        processes.run_all(procs, cancel=self.cancel)
        return [job_result(job, p) for job, p in zip(jobs, procs)]


__all__ = ["SlurmLauncher"]
