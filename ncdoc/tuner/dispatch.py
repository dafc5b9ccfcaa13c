"""Running measurement jobs: on Ray, in this process, or per node group from threads, behind one interface.

The backends that launch through ncdoc.cluster (nccl-tests, torch) need no worker of their own:
their launcher keeps every deadline and ends what it started, so LaunchExecutor runs their jobs
from threads of this process, one node group each (at the end of this module). What follows is
about the simulator's and custom backends' executors.

A job is a list of measurement steps (an environment, a repeat index, optionally a tuner
table) run in order on one node group. A trial's repeat is one job; an interleaved
comparison (A B A B ...) is one job too, so both sides see the same nodes and conditions.

What a job costs is what its measurements cost. A backend whose NCCL runs inside the Ray
worker (torch: `needs_fresh_process`) gets a fresh worker per job (max_calls=1, the env in
runtime_env), because NCCL reads its environment once per process. Every other backend
reuses workers: the simulator computes in the worker, nccl-tests hands each step's env to the
benchmark process it starts. The simulator does not need Ray at all: `make_executor` runs it
in this process unless the study asks for node groups, a Ray cluster or emulated failures.

Jobs run concurrently only on disjoint node groups: each reserves its group's custom
resource ("ncdoc_nodegroup_<i>": 1). Multi-node backends get a gang: a placement group of one
bundle per node (STRICT_SPREAD) per node group. A job's time limit runs from the moment its
worker reports that it started (the task's first yield), not from submission, so a hang is
called a hang however long a busy machine takes to start a worker; a job that never starts is
reported as such. A job past its limit is killed (ray.cancel(force=True)); a lost worker or
node costs only that job.

Resource names must not contain "_group_": Ray reads "<name>_group_<id>" as a placement
group's internal resource, and a task asking for "ncdoc_group_0" is never scheduled.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner.backends import Backend, Measurement, RunContext, TrialFailed
from ncdoc.startup.compiled_patterns import precompiled

GROUP_PREFIX = "ncdoc_nodegroup_"
_GROUP_RE = precompiled(re.escape(GROUP_PREFIX) + r"(\d{1,20}(?!\d))\Z")
# How long a submitted job may wait for a worker before it is reported as never started: long
# enough for a fresh worker on a loaded machine or a node joining, short of forever.
START_LIMIT_S = 180.0


@dataclass(frozen=True)
class Step:
    label: str                                   # "trial", "A", "B", ...
    env: tuple[tuple[str, str], ...]             # the complete NCCL environment of this step
    repeat_index: int
    table: tuple = ()                            # tuner-table rules (ncdoc.tuner.table.Rule) to load


@dataclass(frozen=True)
class Job:
    key: str
    steps: tuple[Step, ...]
    workload: tuple[tuple[str, tuple[int, ...]], ...]
    timeout_s: float                             # per step; the job may take this times its steps
    keep_going: bool = False                     # a failed step is noted and the next one runs
    group_hint: str = ""                         # in process: the node group to stand for (a replica)


@dataclass(frozen=True)
class JobResult:
    key: str
    ok: bool
    measurements: tuple[tuple[str, Measurement], ...] = ()
    reason: str = ""
    kind: str = ""                               # failed jobs: init|call|crash|hang|timeout|lost|error|start
    elapsed_s: float = 0.0
    group: str = ""
    step_failures: tuple[tuple[str, str], ...] = ()   # keep_going jobs: (label, reason) per failed step
    indexes: tuple[int, ...] = ()                # the repeat index of each measurement (its round)


def env_tuple(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(env.items()))


def run_job(backend: Backend, job: Job, context: RunContext) -> JobResult:
    """Run every step of `job` in order; the first failing step fails the job (unless keep_going)."""
    from dataclasses import replace

    t0 = time.monotonic()
    out, failures, indexes = [], [], []
    for i, step in enumerate(job.steps):
        label = step.label.replace("/", "_")      # "Tree/LL": one folder per step
        ctx = replace(context, log_key=f"{job.key}/{i:02d}-{label}-r{step.repeat_index}")
        try:
            m = backend.measure(dict(step.env), job.workload, step.repeat_index,
                                timeout_s=job.timeout_s, context=ctx, table=step.table)
        except TrialFailed as exc:
            reason, kind = exc.reason, exc.kind
        except Exception as exc:   # a backend bug must cost one trial, not the study
            reason, kind = f"{type(exc).__name__}: {exc}", "error"
        else:
            out.append((step.label, m))
            indexes.append(step.repeat_index)
            continue
        if not job.keep_going:
            return JobResult(job.key, False, tuple(out), reason, kind, time.monotonic() - t0, context.group,
                             indexes=tuple(indexes))
        failures.append((step.label, reason))
    return JobResult(job.key, True, tuple(out), "", "", time.monotonic() - t0, context.group, tuple(failures),
                     tuple(indexes))


class Executor:
    """submit() jobs up to `slots` at a time; wait() returns finished ones (failed included)."""

    slots = 1

    def submit(self, job: Job) -> None:
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> list[JobResult]:
        raise NotImplementedError

    def in_flight(self) -> list[str]:
        raise NotImplementedError

    def cancel_all(self) -> list[str]:
        return []

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class InProcessExecutor(Executor):
    """Runs jobs here, one at a time, without timeouts: for backends that cannot hang (the simulator
    reporting its failures), benchmarks and quick tests."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self._queue: deque[Job] = deque()

    def submit(self, job: Job) -> None:
        self._queue.append(job)

    def in_flight(self) -> list[str]:
        return [j.key for j in self._queue]

    def wait(self, timeout: float | None = None) -> list[JobResult]:
        if not self._queue:
            return []
        job = self._queue[0]                     # stays in flight while it runs: Ctrl-C reports it
        res = run_job(self.backend, job, RunContext(group=job.group_hint or "in-process"))
        self._queue.popleft()
        return [res]

    def cancel_all(self) -> list[str]:
        keys = self.in_flight()
        self._queue.clear()
        return keys


def uniform_env(job: Job) -> dict[str, str] | None:
    """The one environment every step of `job` runs with, or None when the steps differ."""
    envs = {step.env for step in job.steps}
    return dict(envs.pop()) if len(envs) == 1 else None


def apply_process_env(wanted: Mapping[str, str]) -> None:
    """Make this process's NCCL_* environment exactly `wanted` (inherited ones are unset)."""
    for name in [n for n in os.environ if n.startswith("NCCL_") and n not in wanted]:
        del os.environ[name]
    os.environ.update(wanted)


def _ray_job(backend: Backend, job: Job, context: RunContext, fresh: bool) -> Iterator[Any]:
    """The body of a Ray task, a generator: it first reports that it started (the dispatcher's
    clock for the job's time limit starts then), then yields the result."""
    yield "started"
    if fresh:
        env = uniform_env(job)
        if env is not None:
            apply_process_env(env)
    yield run_job(backend, job, context)


def limit_s(job: Job) -> float:
    """How long a started job may run: its steps' timeouts and a margin. Backends that time out
    their own runs (nccl-tests kills a hung benchmark at timeout_s) report first, with the better
    reason; the dispatcher's kill is for backends that hang with their worker."""
    total = job.timeout_s * len(job.steps)
    return round(total * 1.1 + 1.0, 1)


def _hostname() -> str:
    import socket
    return socket.gethostname()


@dataclass
class _Running:
    job: Job
    group: str
    submitted: float
    started: float | None = None


class RayExecutor(Executor):
    def __init__(self, backend: Backend, *, address: str | None = None, groups: int | None = None,
                 num_cpus: int | None = None, placement_groups: bool | None = None,
                 log: Callable[[str], None] | None = None):
        import ray

        self.ray = ray
        self.backend = backend
        self.log = log or (lambda msg: None)
        self._started = False
        if not ray.is_initialized():
            self._init(address, groups or 1, num_cpus)
        found = sorted((int(m.group(1)), k) for k in ray.cluster_resources() if (m := _GROUP_RE.match(k)))
        names = [k for _, k in found]
        if groups:
            names = names[:groups]
        if not names:
            if groups and groups > 1:
                raise UsageError(f"the Ray cluster has no '{GROUP_PREFIX}<i>' resources; start its nodes with "
                                 f"--resources '{{\"{GROUP_PREFIX}0\": 1}}' (one index per node group)")
            names = [""]                         # one group, no custom resource to reserve
        self.groups = names
        self.slots = len(names)
        gang = backend.gang_size
        self.use_pg = placement_groups if placement_groups is not None else gang > 1
        self.fresh = bool(backend.needs_fresh_process)
        task = ray.remote(max_retries=0, max_calls=1) if self.fresh else ray.remote(max_retries=0)
        self._remote = task(_ray_job)
        self._backend_ref = ray.put(backend)
        self._free = list(names)
        self._running: dict[Any, _Running] = {}
        self._pgs: dict[str, Any] = {}
        self._hosts: dict[str, tuple[str, ...]] = {}
        if self.use_pg:
            for g in names:
                self._reserve(g, gang)

    def _init(self, address: str | None, groups: int, num_cpus: int | None) -> None:
        # A private local instance (loopback only, no dashboard) with one custom resource per
        # simulated node group, or the cluster at `address`: ncdoc.cluster.ray_start, the one starter.
        from ncdoc.cluster.ray_start import start
        self._started = start(address, num_cpus=num_cpus or max(2, groups),
                              resources={f"{GROUP_PREFIX}{i}": 1 for i in range(groups)})

    def _reserve(self, group: str, gang: int) -> None:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {group: 1.0} if group else {"CPU": 1.0}
        bundle.update(getattr(self.backend, "bundle_resources", {}) or {})
        pg = placement_group([dict(bundle) for _ in range(gang)], strategy="STRICT_SPREAD")
        ready, _ = self.ray.wait([pg.ready()], timeout=120)
        if not ready:
            self.ray.util.remove_placement_group(pg)
            raise RunnerError(f"cannot reserve {gang} node(s) for node group {group or 'default'} "
                              "(STRICT_SPREAD needs one Ray node per bundle)")
        need = {group: 0.001} if group else {"CPU": 0.001}
        host_task = self.ray.remote(num_cpus=0)(_hostname)
        refs = [host_task.options(resources=need, scheduling_strategy=PlacementGroupSchedulingStrategy(
            pg, placement_group_bundle_index=i)).remote() for i in range(gang)]
        self._hosts[group] = tuple(self.ray.get(refs, timeout=120))
        self._pgs[group] = pg
        self.log(f"node group {group or 'default'}: {', '.join(self._hosts[group])}")

    def submit(self, job: Job) -> None:
        if not self._free:
            raise RuntimeError("no free node group: wait() for a result first")
        group = self._free.pop(0)
        opts: dict[str, Any] = {"num_cpus": 0 if group else 1}
        env = uniform_env(job) if self.fresh else None
        if env is not None:
            opts["runtime_env"] = {"env_vars": env}
        if group in self._pgs:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
            opts["resources"] = {group: 0.001} if group else {}
            if not group:
                opts["num_cpus"] = 0.001
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self._pgs[group], placement_group_bundle_index=0)
        elif group:
            opts["resources"] = {group: 1}
        ctx = RunContext(group=group or "default", hosts=self._hosts.get(group, ()),
                         placement_group=self._pgs.get(group))
        gen = self._remote.options(**opts).remote(self._backend_ref, job, ctx, self.fresh)
        self._running[gen] = _Running(job, group, time.monotonic())

    def in_flight(self) -> list[str]:
        return [r.job.key for r in self._running.values()]

    def _failure(self, run: _Running, exc: BaseException) -> JobResult:
        ex = self.ray.exceptions
        now = time.monotonic()
        if isinstance(exc, ex.TaskCancelledError):
            return JobResult(run.job.key, False, reason="cancelled", kind="cancelled",
                             elapsed_s=now - run.submitted, group=run.group)
        kind = "crash" if isinstance(exc, ex.WorkerCrashedError) else \
            "lost" if isinstance(exc, ex.NodeDiedError) else "error"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return JobResult(run.job.key, False, reason=f"{type(exc).__name__}: {first[:300]}", kind=kind,
                         elapsed_s=now - run.submitted, group=run.group)

    def _advance(self, gen: Any) -> JobResult | None:
        """Read what a ready generator holds: the start report (then maybe more) or the result."""
        run = self._running[gen]
        while True:
            try:
                item = self.ray.get(next(gen))
            except StopIteration:                # cannot happen before the result; be safe
                item = None
            except self.ray.exceptions.RayError as exc:
                del self._running[gen]
                self._free.append(run.group)
                return self._failure(run, exc)
            if item == "started":
                run.started = time.monotonic()
                ready, _ = self.ray.wait([gen], timeout=0)
                if not ready:
                    return None
                continue
            del self._running[gen]
            self._free.append(run.group)
            if isinstance(item, JobResult):
                return item
            return JobResult(run.job.key, False, reason="the worker returned no result", kind="error",
                             elapsed_s=time.monotonic() - run.submitted, group=run.group)

    def _deadline(self, run: _Running) -> float:
        return run.started + limit_s(run.job) if run.started is not None else run.submitted + START_LIMIT_S

    def wait(self, timeout: float | None = None) -> list[JobResult]:
        if not self._running:
            return []
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            nearest = min(self._deadline(r) for r in self._running.values()) - now
            wait_s = max(0.0, nearest if end is None else min(nearest, end - now))
            ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=min(wait_s, 5.0) + 0.01)
            results = [res for gen in ready if (res := self._advance(gen)) is not None]
            now = time.monotonic()
            for gen, run in list(self._running.items()):
                if now >= self._deadline(run):
                    results.append(self._kill(gen, "timeout" if run.started is not None else "start"))
            if results or (end is not None and now >= end):
                return results

    def _kill(self, gen: Any, kind: str) -> JobResult:
        run = self._running.pop(gen)
        try:
            self.ray.cancel(gen, force=True)     # the only way to stop a task stuck in NCCL
        except Exception:                        # already finished or its worker is gone
            pass
        self._free.append(run.group)
        if kind == "timeout":
            reason = (f"no result after {limit_s(run.job):g} s of running (NCCL hangs are common with bad "
                      "settings); killed")
        elif kind == "start":
            reason = (f"did not start within {START_LIMIT_S:g} s (no worker or node free for node group "
                      f"{run.group or 'default'}); cancelled")
        else:
            reason = "interrupted"
        return JobResult(run.job.key, False, reason=reason, kind=kind, elapsed_s=time.monotonic() - run.submitted,
                         group=run.group)

    def cancel_all(self) -> list[str]:
        keys = []
        for gen in list(self._running):
            keys.append(self._running[gen].job.key)
            self._kill(gen, "interrupted")
        return keys

    def close(self) -> None:
        self.cancel_all()
        for pg in self._pgs.values():
            try:
                self.ray.util.remove_placement_group(pg)
            except Exception:
                pass
        self._pgs.clear()
        if self._started:
            self.ray.shutdown()
            self._started = False


@dataclass(frozen=True)
class NodeGroup:
    """Nodes that run one trial at a time (a topology-placed subset of the cluster)."""
    name: str
    nodes: tuple[str, ...]


FULL = "full-scale"          # a job's group_hint: every node at once (the full-scale check)


class LaunchExecutor(Executor):
    """Jobs of a backend that launches through ncdoc.cluster (nccl-tests, torch), run from this
    process: one thread per node group, a job per group at a time, as many at once as there are
    groups. The launcher keeps every deadline and ends what it started; on Ctrl-C (or cancel_all)
    the launcher's cancel event makes every launch in flight stop its processes, remote ones
    included, and the threads are joined before the interrupt goes on.

    A job's `group_hint` pins it: a group's name, "replica" (the second group), or FULL (every node
    of `full`, once all groups are idle). Results of a group are scaled by its baseline factors
    (`set_factors`, per collective and size: the per-group baseline), so scores from different
    groups compare; full-scale jobs are not scaled (they compare sides within the job)."""

    def __init__(self, backend: Backend, groups: "list[NodeGroup]", *, full: tuple[str, ...] = (),
                 log: Callable[[str], None] | None = None):
        import queue

        if not groups:
            raise UsageError("no node group to run trials on")
        self.backend = backend
        self.groups = list(groups)
        self.slots = len(self.groups)
        self.full = tuple(full) or tuple(n for g in self.groups for n in g.nodes)
        self.log = log or (lambda msg: None)
        self.launcher = backend.launcher()           # made here, once: the threads share it
        self._free = [g.name for g in self.groups]
        self._pending: list[Job] = []
        self._running: dict[str, tuple[Any, list[str]]] = {}
        self._done: "queue.Queue[tuple[str, JobResult]]" = queue.Queue()
        self.factors: dict[str, dict[tuple[str, int], float]] = {}

    def set_factors(self, factors: Mapping[str, Mapping[tuple[str, int], float]]) -> None:
        self.factors = {g: dict(f) for g, f in factors.items()}

    def drop(self, name: str) -> None:
        """Stop using a node group (idle: its baseline could not be measured)."""
        if len(self.groups) > 1:
            self.groups = [g for g in self.groups if g.name != name]
            self._free = [n for n in self._free if n != name]
            self.slots = len(self.groups)

    def submit(self, job: Job) -> None:
        self._pending.append(job)
        self._start_ready()

    def _take(self, job: Job) -> tuple[list[str], tuple[str, ...]] | None:
        names = [g.name for g in self.groups]
        hint = job.group_hint
        if hint == FULL:
            if len(self._free) < len(names):
                return None
            return list(self._free), self.full
        if hint in names:
            want = hint
        elif hint == "replica" and len(names) > 1:
            want = names[1]
        else:
            want = self._free[0] if self._free else None
        if want is None or want not in self._free:
            return None
        return [want], next(g.nodes for g in self.groups if g.name == want)

    def _start_ready(self) -> None:
        import threading

        for job in list(self._pending):
            took = self._take(job)
            if took is None:
                continue
            names, hosts = took
            self._pending.remove(job)
            for n in names:
                self._free.remove(n)
            label = FULL if job.group_hint == FULL else names[0]
            t = threading.Thread(target=self._run, args=(job, label, hosts), name=f"ncdoc-{job.key}", daemon=True)
            self._running[job.key] = (t, names)
            t.start()

    def _run(self, job: Job, group: str, hosts: tuple[str, ...]) -> None:
        t0 = time.monotonic()
        try:
            res = run_job(self.backend, job, RunContext(group=group, hosts=hosts))
            res = self._scaled(res, group)
        except KeyboardInterrupt:                    # cancel_all: the launcher stopped what it ran
            res = JobResult(job.key, False, reason="interrupted", kind="interrupted",
                            elapsed_s=time.monotonic() - t0, group=group)
        except BaseException as exc:                 # a bug must cost this job, not hang the study
            res = JobResult(job.key, False, reason=f"{type(exc).__name__}: {exc}", kind="error",
                            elapsed_s=time.monotonic() - t0, group=group)
        self._done.put((job.key, res))

    def _scaled(self, res: JobResult, group: str) -> JobResult:
        f = self.factors.get(group)
        if not f or not res.measurements:
            return res
        from dataclasses import replace
        return replace(res, measurements=tuple((lab, scale_measurement(m, f)) for lab, m in res.measurements))

    def in_flight(self) -> list[str]:
        return list(self._running) + [j.key for j in self._pending]

    def wait(self, timeout: float | None = None) -> list[JobResult]:
        import queue

        if not self._running:
            self._start_ready()
            if not self._running:                    # nothing can start (cannot happen: be safe)
                return []
        end = None if timeout is None else time.monotonic() + timeout
        out: list[JobResult] = []
        while not out:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                break
            try:   # short waits: Ctrl-C reaches this thread between them
                key, res = self._done.get(timeout=0.5 if left is None else min(0.5, left))
            except queue.Empty:
                continue
            out.append(res)
            while True:
                try:
                    out.append(self._done.get_nowait()[1])
                except queue.Empty:
                    break
        for res in out:
            t, names = self._running.pop(res.key)
            t.join()
            self._free.extend(names)
        self._free.sort(key=[g.name for g in self.groups].index)
        self._start_ready()
        return out

    def cancel_all(self) -> list[str]:
        keys = self.in_flight()
        self._pending.clear()
        if self._running:
            self.launcher.cancel.set()
            try:
                for t, _ in list(self._running.values()):
                    t.join(60)
            finally:
                self.launcher.cancel.clear()
            self._running.clear()
            self._free = [g.name for g in self.groups]
            while not self._done.empty():
                self._done.get_nowait()
        return keys

    def close(self) -> None:
        self.cancel_all()
        close = getattr(self.backend, "close", None)
        if close:
            close()


def scale_measurement(m: Measurement, factors: Mapping[tuple[str, int], float]) -> Measurement:
    """A measurement with busbw and algbw multiplied (time divided) by each size's factor."""
    from dataclasses import replace
    rows = []
    for collective, results in m.rows:
        rows.append((collective, tuple(replace(r, busbw=r.busbw * factors.get((collective, r.size), 1.0),
                                               algbw=r.algbw * factors.get((collective, r.size), 1.0),
                                               time_us=r.time_us / factors.get((collective, r.size), 1.0))
                                       for r in results)))
    return Measurement(tuple(rows))


EXECUTORS = ("auto", "ray", "inprocess")


def make_executor(backend: Backend, *, kind: str = "auto", address: str | None = None,
                  groups: int | None = None, log: Callable[[str], None] | None = None,
                  node_groups: "list[NodeGroup] | None" = None, full: tuple[str, ...] = ()) -> Executor:
    """`auto`: a backend that launches through ncdoc.cluster (nccl-tests, torch) runs from here, a job
    per node group at a time (LaunchExecutor over `node_groups`, default one group of its nodes); the
    simulator in this process (it measures without hanging: `in_process_ok`) unless node groups or a
    Ray cluster are asked for; else Ray."""
    if kind not in EXECUTORS:
        raise UsageError(f"unknown executor {kind!r} ({', '.join(EXECUTORS)})")
    if kind == "auto" and hasattr(backend, "launcher"):
        if node_groups is None:
            nodes = tuple(getattr(backend, "nodes_default", ()) or backend.launcher().nodes())
            node_groups = [NodeGroup("g0", nodes)]
        return LaunchExecutor(backend, node_groups, full=full, log=log)
    if kind == "auto":
        kind = "inprocess" if backend.in_process_ok and not address and (groups or 1) <= 1 else "ray"
    if kind == "inprocess":
        return InProcessExecutor(backend)
    return RayExecutor(backend, address=address, groups=groups, log=log)
