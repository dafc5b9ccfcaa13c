"""Ray: one task per node, pinned with node-affinity scheduling.

The nodes are the Ray cluster's live nodes (`--ray-address` to join one; otherwise a private
local instance on 127.0.0.1 without dashboard: ncdoc.cluster.ray_start, the one Ray starter). A node's name is its `ncdoc_host_<name>`
resource when it has one (`ray start --resources '{"ncdoc_host_gpu07": 1}'`: how several
raylets on one machine, or nodes behind unhelpful hostnames, get their names), else its
hostname (with #2, #3 for raylets sharing a host).

Each task runs the command as a child process of a reused worker (the env goes to the child,
not into runtime_env, so no fresh worker is started per env: that costs seconds a node). The
child dies with the worker (PR_SET_PDEATHSIG), so a hung task cancelled with
`ray.cancel(force=True)` takes its command with it. Multi-node jobs (nccl-tests across nodes)
need MPI to wire the ranks: the task on the group's first node runs the mpirun line for the
group (`--mpi-flavour` picks its flags); single-node jobs run the benchmark directly.
"""

from __future__ import annotations

import os
import time

from ncdoc.cluster.launch import Job, JobRun, Launcher, NodeRun, exit_reason
from ncdoc.cluster.nodes import expand, unique
from ncdoc.errors import UsageError

NODE_RESOURCE = "ncdoc_host_"
START_GRACE_S = 20.0          # a node's first task may wait this long for its worker process


def run_on_node(argv, env, timeout_s, node, clear=()):
    """The body of a per-node task (runs on the target node): the command, its output, the node's clock.
    `clear`: prefixes of inherited variables to drop (the job's env is its whole NCCL environment)."""
    import signal
    import subprocess

    from ncdoc.cluster import processes
    clock = time.time()
    full = {k: v for k, v in os.environ.items() if not (clear and k.startswith(tuple(clear)))}
    full.update(env or {})
    full["NCDOC_NODE"] = node
    processes.load_libc()
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=full, start_new_session=True, preexec_fn=processes.die_with_parent)
    except OSError as exc:
        return {"rc": 127, "stdout": "", "stderr": f"cannot start {argv[0]}: {exc.strerror or exc}",
                "clock": clock, "elapsed": 0.0, "timeout": False, "start_error": True}
    try:
        out, err = p.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    return {"rc": p.returncode, "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace"),
            "clock": clock, "elapsed": time.monotonic() - t0, "timeout": timed_out, "start_error": False}


class RayLauncher(Launcher):
    name = "ray"

    def __init__(self, *, address: str | None = None, nodes: str | None = None, mpirun: str = "mpirun",
                 extra_args=(), mpi_flavour: str | None = None, dry_run: bool = False, num_cpus: int | None = None):
        from ncdoc.cluster.ray_start import start
        self._started = start(address, num_cpus=num_cpus)
        import ray
        self.ray = ray
        self.mpirun, self.extra, self.mpi_flavour = mpirun, list(extra_args), mpi_flavour or "openmpi"
        self._ids = self._discover()
        if nodes:
            wanted = unique(expand(nodes))
            strangers = [n for n in wanted if n not in self._ids]
            if strangers:
                raise UsageError(f"--nodes names host(s) that are not live nodes of the Ray cluster: "
                                 f"{', '.join(strangers[:6])} (it has {', '.join(list(self._ids)[:6])}"
                                 f"{' ...' if len(self._ids) > 6 else ''})")
            self._nodes = wanted
        else:
            self._nodes = list(self._ids)
        if not self._nodes:
            raise UsageError("the Ray cluster has no live nodes")
        self._task = ray.remote(num_cpus=0, max_retries=0)(run_on_node)

    def _discover(self) -> dict[str, str]:
        """Node name -> Ray node id, for every live node."""
        from ncdoc.cluster.attributes import natural
        found: list[tuple[str, str]] = []
        seen: dict[str, int] = {}
        for n in self.ray.nodes():
            if not n.get("Alive"):
                continue
            named = [k[len(NODE_RESOURCE):] for k in (n.get("Resources") or {}) if k.startswith(NODE_RESOURCE)]
            name = named[0] if named else (n.get("NodeManagerHostname") or n.get("NodeManagerAddress") or n["NodeID"])
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}#{seen[name]}"
            found.append((name, n["NodeID"]))
        return dict(sorted(found, key=lambda x: natural(x[0])))

    def nodes(self) -> list[str]:
        return list(self._nodes)

    def _strategy(self, node: str):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        if node not in self._ids:
            raise UsageError(f"{node} is not a live node of the Ray cluster")
        return NodeAffinitySchedulingStrategy(self._ids[node], soft=False)

    def per_node_commands(self, nodes, argv, env) -> list[list[str]]:
        from ncdoc.cluster.launch import shell_line
        return [["ray-task", f"node={n}", shell_line(argv, {**(env or {}), "NCDOC_NODE": n})] for n in nodes]

    def _gather(self, refs: dict, limit_s: float):
        """Wait for every ref until `limit_s`; force-cancel the rest. -> ({ref: value|exception}, timed out refs)."""
        ray = self.ray
        done: dict = {}
        pending = list(refs)
        end = time.monotonic() + limit_s
        try:
            while pending and time.monotonic() < end:
                if self.cancel.is_set():               # Ctrl-C seen by another thread's dispatcher
                    raise KeyboardInterrupt
                ready, pending = ray.wait(pending, num_returns=len(pending),
                                          timeout=min(1.0, max(0.0, end - time.monotonic())))
                for r in ready:
                    try:
                        done[r] = ray.get(r)
                    except Exception as exc:            # the node died, the worker crashed
                        done[r] = exc
        except KeyboardInterrupt:
            for r in pending:
                ray.cancel(r, force=True)
            raise
        for r in pending:
            try:
                ray.cancel(r, force=True)              # the only way to stop a task stuck in a syscall
            except Exception:
                pass
        return done, pending

    def run_per_node(self, nodes, argv, *, env=None, timeout_s: float = 60.0, log_dir: str) -> dict[str, NodeRun]:
        nodes = unique(nodes)
        os.makedirs(log_dir, exist_ok=True)
        t0 = time.time()
        refs = {self._task.options(scheduling_strategy=self._strategy(n)).remote(list(argv), dict(env or {}),
                                                                                  timeout_s, n): n for n in nodes}
        done, late = self._gather(refs, timeout_s + START_GRACE_S)
        t1 = time.time()
        runs = {}
        for ref, n in refs.items():
            log = os.path.join(log_dir, f"{n}.out")
            if ref in late:
                runs[n] = NodeRun(n, False, reason=f"no answer within {timeout_s:g} s (Ray task cancelled)",
                                  kind="timeout", log=log)
                _write(log, "", f"ncdoc: no answer within {timeout_s:g} s; task force-cancelled\n")
                continue
            value = done[ref]
            if isinstance(value, Exception):
                kind = "lost" if "NodeDied" in type(value).__name__ or "node" in str(value).lower()[:300] else "crash"
                first = (str(value).strip().splitlines() or [type(value).__name__])[0][:200]
                runs[n] = NodeRun(n, False, reason=f"the Ray task failed ({type(value).__name__}: {first})",
                                  kind=kind, log=log)
                _write(log, "", first + "\n")
                continue
            _write(log, value["stdout"], value["stderr"])
            common = dict(stdout=value["stdout"], stderr=value["stderr"], rc=value["rc"], clock=value["clock"],
                          window=(t0, t1), log=log, elapsed_s=value["elapsed"])
            if value["start_error"]:
                runs[n] = NodeRun(n, False, reason=value["stderr"], kind="launch", **common)
            elif value["timeout"]:
                runs[n] = NodeRun(n, False, reason=f"no answer within {timeout_s:g} s (killed on the node)",
                                  kind="timeout", **common)
            elif value["rc"] != 0:
                kind, reason = exit_reason(value["rc"], value["stderr"], os.path.basename(argv[0]))
                runs[n] = NodeRun(n, False, reason=reason, kind=kind, **common)
            else:
                runs[n] = NodeRun(n, True, **common)
        return runs

    # -- jobs
    def _mpi(self):
        from ncdoc.cluster.mpi import MpiLauncher
        names = ",".join(self._nodes)
        return MpiLauncher(nodes=names, mpirun=self.mpirun, extra_args=self.extra, flavour=self.mpi_flavour,
                           environ={}, dry_run=True)

    def job_command(self, job: Job) -> list[str]:
        if len(job.nodes) == 1:
            return list(job.argv)
        return self._mpi().job_command(job)

    def run_jobs(self, jobs, *, log_dir: str) -> list[JobRun]:
        os.makedirs(log_dir, exist_ok=True)
        refs = {}
        for job in jobs:
            cmd = self.job_command(job)
            extra = {"clear": tuple(job.clear_env)} if job.clear_env else {}
            ref = self._task.options(scheduling_strategy=self._strategy(job.nodes[0])).remote(
                cmd, dict(job.env), job.timeout_s, job.nodes[0], **extra)
            refs[ref] = (job, cmd)
        limit = max(j.timeout_s for j in jobs) + START_GRACE_S if jobs else 0
        done, late = self._gather(refs, limit)
        out = []
        for ref, (job, cmd) in refs.items():
            log = os.path.join(log_dir, f"{job.key}.log")
            if ref in late:
                _write(log, "", f"ncdoc: no result within {job.timeout_s:g} s; Ray task force-cancelled\n")
                out.append(JobRun(job, False, reason=f"no result within {job.timeout_s:g} s (Ray task cancelled)",
                                  kind="timeout", command=tuple(cmd), log=log))
                continue
            v = done[ref]
            if isinstance(v, Exception):
                first = (str(v).strip().splitlines() or [type(v).__name__])[0][:200]
                _write(log, "", first + "\n")
                out.append(JobRun(job, False, reason=f"the Ray task failed: {first}", kind="lost",
                                  command=tuple(cmd), log=log))
                continue
            text = v["stdout"] + v["stderr"]
            _write(log, text, "")
            common = dict(output=text, rc=v["rc"], elapsed_s=v["elapsed"], command=tuple(cmd), log=log)
            if v["start_error"]:
                out.append(JobRun(job, False, reason=v["stderr"], kind="launch", **common))
            elif v["timeout"]:
                out.append(JobRun(job, False, reason=f"no result within {job.timeout_s:g} s (killed)", kind="timeout",
                                  **common))
            elif v["rc"] != 0:
                kind, reason = exit_reason(v["rc"], text, os.path.basename(cmd[0]))
                out.append(JobRun(job, False, reason=reason, kind=kind, **common))
            else:
                out.append(JobRun(job, True, **common))
        return out

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def _write(path: str, out: str, err: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out)
        if err:
            fh.write("--- stderr ---\n" + err)


__all__ = ["RayLauncher", "run_on_node", "NODE_RESOURCE"]
