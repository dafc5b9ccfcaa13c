"""mpirun: Open MPI, MPICH (Hydra) and Intel MPI, each with its own flags.

                    Open MPI                         MPICH / Hydra, Intel MPI
    hosts           -H h1:1,h2:1 (slots per host)    -hosts h1,h2 -ppn N
    ranks           -np N                            -n N
    env             -x NAME=VALUE                    -genv NAME VALUE
    output tags     --tag-output: [1,0]<stdout>:     -prepend-rank: [0]

Per node: one rank per host, mapped in host order, so rank i is the i-th node and its tagged
lines are that node's. Jobs: ranks_per_node ranks on each host, `--bind-to none` for Open MPI
(nccl-tests picks its GPU by local rank). --launcher-args go to mpirun as given (`--mca btl
tcp,self`, `-x UCX_TLS`, `-bootstrap ssh`). A deadline or Ctrl-C sends mpirun SIGTERM, on
which it ends its remote ranks, then SIGKILL to what is left in its process group.
"""

from __future__ import annotations

import os
import subprocess

from ncdoc.cluster import processes
from ncdoc.cluster.launch import (Job, JobRun, Launcher, NodeRun, find_tool, job_environ, job_result, node_run,
                                  parse_marks, wrap)
from ncdoc.cluster.nodes import expand, read_hostfile, unique, within
from ncdoc.errors import UsageError
from ncdoc.startup.compiled_patterns import precompiled

FLAVOURS = ("openmpi", "hydra", "intel")
_OMPI_TAG = precompiled(r"^\[(?:[^\]]*,)?(\d{1,20}(?!\d))\]<(stdout|stderr)>: ?(.*)$")
_RANK_TAG = precompiled(r"^\[(\d{1,20}(?!\d))\] ?(.*)$")


def detect_flavour(mpirun: str, environ=None) -> str:
    """Which MPI `mpirun --version` belongs to."""
    try:
        p = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=15, env=environ)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot run {mpirun} --version ({exc}); pass --mpi-flavour openmpi|hydra|intel") from None
    text = (p.stdout + p.stderr).lower()
    if "open mpi" in text or "open-mpi" in text or "openrte" in text or "prrte" in text:
        return "openmpi"
    if "intel(r) mpi" in text or "intel mpi" in text:
        return "intel"
    if "hydra" in text or "mpich" in text:
        return "hydra"
    raise UsageError(f"cannot tell which MPI {mpirun} is from its --version; pass --mpi-flavour openmpi|hydra|intel")


def check_resolvable(names, *, budget_s: float = 10.0) -> None:
    """UsageError naming the hosts that do not resolve (a hostfile with a typo, a stale name)."""
    import socket
    import time
    end = time.monotonic() + budget_s
    bad = []
    for n in names:
        if time.monotonic() > end:
            break
        try:
            socket.getaddrinfo(n, None)
        except OSError:
            bad.append(n)
    if bad:
        shown = ", ".join(bad[:6]) + (f" and {len(bad) - 6} more" if len(bad) > 6 else "")
        raise UsageError(f"unknown host(s), not resolvable from here: {shown}")


class MpiLauncher(Launcher):
    name = "mpirun"

    def __init__(self, *, nodes: str | None = None, hostfile: str | None = None, mpirun: str = "mpirun",
                 extra_args=(), flavour: str | None = None, environ=None, dry_run: bool = False):
        self.environ = dict(os.environ if environ is None else environ)
        self.mpirun = mpirun if dry_run else find_tool(mpirun, "mpirun", "install an MPI, or use --launcher slurm / ray",
                                                       self.environ)
        if flavour is not None and flavour not in FLAVOURS:
            raise UsageError(f"unknown MPI flavour {flavour!r} (use one of {', '.join(FLAVOURS)})")
        self.flavour = flavour or ("openmpi" if dry_run else detect_flavour(self.mpirun, self.environ))
        self.extra = list(extra_args)
        if nodes:
            chosen, what = expand(nodes), "--nodes"
        elif hostfile:
            chosen, what = [h for h, _ in read_hostfile(hostfile)], "the hostfile"
        elif self.environ.get("SLURM_JOB_NODELIST"):
            chosen, what = expand(self.environ["SLURM_JOB_NODELIST"]), "the allocation"
        else:
            raise UsageError("mpirun needs the nodes: --nodes LIST or --hostfile FILE")
        chosen = unique(chosen, what="hostfile" if what == "the hostfile" else "node list")
        allocation = self.environ.get("SLURM_JOB_NODELIST")
        if allocation:
            within(chosen, expand(allocation), what=what, where=f"this job's allocation ({allocation})")
        elif not dry_run:
            check_resolvable(chosen)
        self._nodes = chosen

    def nodes(self) -> list[str]:
        return list(self._nodes)

    def _env_flags(self, env) -> list[str]:
        out: list[str] = []
        for k in sorted(env or {}):
            out += ["-x", f"{k}={env[k]}"] if self.flavour == "openmpi" else ["-genv", k, env[k]]
        return out

    def _hosts(self, nodes, per_node: int) -> list[str]:
        if self.flavour == "openmpi":
            return ["-np", str(len(nodes) * per_node), "-H", ",".join(f"{n}:{per_node}" for n in nodes)]
        return ["-n", str(len(nodes) * per_node), "-ppn", str(per_node), "-hosts", ",".join(nodes)]

    # -- per node
    def per_node_commands(self, nodes, argv, env) -> list[list[str]]:
        nodes = list(nodes)
        tag = ["--map-by", "node", "--tag-output"] if self.flavour == "openmpi" else ["-prepend-rank"]
        return [[self.mpirun, *self._hosts(nodes, 1), *tag, *self._env_flags(env), *self.extra, *wrap(argv)]]

    def run_per_node(self, nodes, argv, *, env=None, timeout_s: float = 60.0, log_dir: str) -> dict[str, NodeRun]:
        import time
        nodes = unique(nodes)
        cmd = self.per_node_commands(nodes, argv, env)[0]
        os.makedirs(log_dir, exist_ok=True)
        proc = processes.Proc(cmd, self.environ, os.path.join(log_dir, "mpirun.out"),
                              os.path.join(log_dir, "mpirun.err"), timeout_s=timeout_s,
                              escalation=processes.MPIRUN, label="mpirun")
        t0 = time.time()
        processes.run_all([proc], cancel=self.cancel)
        window = (t0, time.time())
        if proc.start_error:
            return {n: NodeRun(n, False, reason=proc.start_error, kind="launch") for n in nodes}
        out: dict[int, list[str]] = {}
        err: dict[int, list[str]] = {}
        plain_err: list[str] = []
        for stream, text in (("stdout", proc.output()), ("stderr", proc.errors())):
            for line in text.splitlines():
                if self.flavour == "openmpi":
                    m = _OMPI_TAG.match(line)
                    if not m:
                        if stream == "stderr":
                            plain_err.append(line)
                        continue
                    rank, which, body = int(m.group(1)), m.group(2), m.group(3)
                else:
                    m = _RANK_TAG.match(line)
                    if not m:
                        if stream == "stderr":
                            plain_err.append(line)
                        continue
                    rank, which, body = int(m.group(1)), stream, m.group(2)
                (out if which == "stdout" else err).setdefault(rank, []).append(body)
        runs = {}
        why = next((ln.strip() for ln in plain_err if ln.strip()), "its rank never started")
        for rank, n in enumerate(nodes):
            marks = parse_marks("\n".join(err.get(rank, [])))
            stdout = "\n".join(out[rank]) + "\n" if rank in out else ""
            log = os.path.join(log_dir, f"{n}.out")
            with open(log, "w", encoding="utf-8") as fh:
                fh.write(stdout + ("--- stderr ---\n" + marks.stderr if marks.stderr.strip() else ""))
            runs[n] = node_run(n, marks, stdout, killed=proc.killed, timeout_s=timeout_s,
                               started=rank in err or rank in out or bool(proc.killed),
                               why_not_started=f"mpirun could not run it there: {why[:200]}",
                               window=window, log=log, elapsed_s=proc.elapsed_s)
        return runs

    # -- multi-rank jobs
    def job_command(self, job: Job) -> list[str]:
        bind = ["--bind-to", "none"] if self.flavour == "openmpi" else []
        return [self.mpirun, *self._hosts(job.nodes, job.ranks_per_node), *bind, *self._env_flags(job.env),
                *self.extra, *job.argv]

    def run_jobs(self, jobs, *, log_dir: str) -> list[JobRun]:
        os.makedirs(log_dir, exist_ok=True)
        # mpirun's own environment reaches the ranks it starts on its own host (not the remote ones):
        # what the job clears is cleared there too, so every rank sees the same env (the -x flags).
        procs = [processes.Proc(self.job_command(j), job_environ(self.environ, j) if j.clear_env else self.environ,
                                os.path.join(log_dir, f"{j.key}.log"), timeout_s=j.timeout_s,
                                escalation=processes.MPIRUN, label=j.key) for j in jobs]
        processes.run_all(procs, cancel=self.cancel)
        return [job_result(j, p) for j, p in zip(jobs, procs)]


__all__ = ["MpiLauncher", "FLAVOURS", "detect_flavour", "check_resolvable"]
