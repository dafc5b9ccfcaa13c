"""Running measurement jobs: on Ray (the default) or in this process, behind one interface.

A job is a list of measurement steps (an environment and a repeat index each) run in order
on one node group. A trial is one job (its env repeated); an interleaved confirmation
(A B A B ...) is one job too, so both halves see the same nodes and conditions.

On Ray each job is one task, with the trial's env in runtime_env so NCCL, which reads its
environment once per process, starts fresh (max_calls=1: a worker never serves two jobs).
Jobs run concurrently only on disjoint node groups: each reserves its group's custom
resource ("ncdoc_nodegroup_<i>": 1). Multi-node backends get a gang: a placement group of
one bundle per node (STRICT_SPREAD) per node group. A job past its timeout is killed
(ray.cancel(force=True)); a lost worker or node costs only that job.

Resource names must not contain "_group_": Ray reads "<name>_group_<id>" as a placement
group's internal resource, and a task asking for "ncdoc_group_0" is never scheduled.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ncdoc.errors import RunnerError, UsageError
from ncdoc.tuner.backends import Backend, Measurement, RunContext, TrialFailed

GROUP_PREFIX = "ncdoc_nodegroup_"
_GROUP_RE = re.compile(re.escape(GROUP_PREFIX) + r"(\d+)\Z")


@dataclass(frozen=True)
class Step:
    label: str                                   # "trial", "A", "B", ...
    env: tuple[tuple[str, str], ...]             # the complete NCCL environment of this step
    repeat_index: int


@dataclass(frozen=True)
class Job:
    key: str
    steps: tuple[Step, ...]
    workload: tuple[tuple[str, tuple[int, ...]], ...]
    timeout_s: float                             # per step; the job may take this times its steps
    process_env: tuple[tuple[str, str], ...] | None = None   # set in the worker process itself
    keep_going: bool = False                     # a failed step is noted and the next one runs


@dataclass(frozen=True)
class JobResult:
    key: str
    ok: bool
    measurements: tuple[tuple[str, Measurement], ...] = ()
    reason: str = ""
    kind: str = ""                               # failed jobs: init|call|crash|hang|timeout|lost|error
    elapsed_s: float = 0.0
    group: str = ""
    step_failures: tuple[tuple[str, str], ...] = ()   # keep_going jobs: (label, reason) per failed step


def env_tuple(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(env.items()))


def run_job(backend: Backend, job: Job, context: RunContext) -> JobResult:
    """Run every step of `job` in order; the first failing step fails the job."""
    t0 = time.monotonic()
    out, failures = [], []
    for step in job.steps:
        try:
            m = backend.measure(dict(step.env), job.workload, step.repeat_index,
                                timeout_s=job.timeout_s, context=context)
        except TrialFailed as exc:
            reason, kind = exc.reason, exc.kind
        except Exception as exc:   # a backend bug must cost one trial, not the study
            reason, kind = f"{type(exc).__name__}: {exc}", "error"
        else:
            out.append((step.label, m))
            continue
        if not job.keep_going:
            return JobResult(job.key, False, tuple(out), reason, kind, time.monotonic() - t0, context.group)
        failures.append((step.label, reason))
    return JobResult(job.key, True, tuple(out), "", "", time.monotonic() - t0, context.group, tuple(failures))


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
    """Runs jobs here, one at a time, without timeouts: benchmarks and quick tests only."""

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
        job = self._queue.popleft()
        return [run_job(self.backend, job, RunContext(group="in-process"))]

    def cancel_all(self) -> list[str]:
        keys = self.in_flight()
        self._queue.clear()
        return keys


def _ray_job(backend: Backend, job: Job, context: RunContext) -> JobResult:
    """The body of a Ray task: apply the process env (set and unset), then run the job."""
    if job.process_env is not None:
        wanted = dict(job.process_env)
        for name in [n for n in os.environ if n.startswith("NCCL_") and n not in wanted]:
            del os.environ[name]                 # inherited from the driver, unset for this trial
        os.environ.update(wanted)
    return run_job(backend, job, context)


def _limit(job: Job) -> float:
    """How long a job may take on Ray: its steps' timeouts, plus time to start a worker process.
    Backends that time out their own runs (nccl-tests) thus report first, with the better reason."""
    total = job.timeout_s * len(job.steps)
    return round(total + 2.0 + 0.1 * total, 1)


def _hostname() -> str:
    import socket
    return socket.gethostname()


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
        # Trials carry their env: a fresh worker process each (max_calls=1). Jobs without one
        # (interleaved A/B runs, whose backends start a process per step) may reuse workers.
        self._remote = ray.remote(max_retries=0, max_calls=1)(_ray_job)
        self._remote_reuse = ray.remote(max_retries=0)(_ray_job)
        self._backend_ref = ray.put(backend)
        self._free = list(names)
        self._running: dict[Any, tuple[Job, str, float]] = {}
        self._pgs: dict[str, Any] = {}
        self._hosts: dict[str, tuple[str, ...]] = {}
        if self.use_pg:
            for g in names:
                self._reserve(g, gang)

    def _init(self, address: str | None, groups: int, num_cpus: int | None) -> None:
        import logging

        ray = self.ray
        kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        # Ray logs a notice about its token authentication at every start; not ncdoc's user's concern.
        logging.getLogger("ray").setLevel(logging.ERROR)
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                # A private local instance: loopback where Ray allows it, no dashboard, one
                # custom resource per simulated node group.
                ray.init(num_cpus=num_cpus or max(2, groups), _node_ip_address="127.0.0.1",
                         resources={f"{GROUP_PREFIX}{i}": 1 for i in range(groups)}, **kw)
        except ConnectionError as exc:
            raise RunnerError(f"cannot join the Ray cluster at {address}", cause=str(exc)) from None
        self._started = True

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
        if job.process_env is not None:
            opts["runtime_env"] = {"env_vars": dict(job.process_env)}
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
        fresh = job.process_env is not None or self.backend.needs_fresh_process
        ref = (self._remote if fresh else self._remote_reuse).options(**opts).remote(self._backend_ref, job, ctx)
        self._running[ref] = (job, group, time.monotonic())

    def in_flight(self) -> list[str]:
        return [job.key for job, _, _ in self._running.values()]

    def _finish(self, ref: Any) -> JobResult:
        job, group, t0 = self._running.pop(ref)
        self._free.append(group)
        ex = self.ray.exceptions
        try:
            return self.ray.get(ref)
        except ex.TaskCancelledError:
            return JobResult(job.key, False, reason="cancelled", kind="cancelled",
                             elapsed_s=time.monotonic() - t0, group=group)
        except (ex.WorkerCrashedError, ex.NodeDiedError, ex.RayTaskError, ex.RayError) as exc:
            kind = "crash" if isinstance(exc, ex.WorkerCrashedError) else \
                "lost" if isinstance(exc, ex.NodeDiedError) else "error"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return JobResult(job.key, False, reason=f"{type(exc).__name__}: {first[:300]}", kind=kind,
                             elapsed_s=time.monotonic() - t0, group=group)

    def wait(self, timeout: float | None = None) -> list[JobResult]:
        if not self._running:
            return []
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            deadlines = {ref: t0 + _limit(job) for ref, (job, _, t0) in self._running.items()}
            nearest = min(deadlines.values()) - now
            wait_s = max(0.0, nearest if end is None else min(nearest, end - now))
            ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=min(wait_s, 5.0) + 0.01)
            results = [self._finish(ref) for ref in ready]
            now = time.monotonic()
            for ref, deadline in deadlines.items():
                if ref in self._running and now >= deadline:
                    results.append(self._kill(ref, "timeout"))
            if results or (end is not None and now >= end):
                return results

    def _kill(self, ref: Any, kind: str) -> JobResult:
        job, group, t0 = self._running.pop(ref)
        try:
            self.ray.cancel(ref, force=True)     # the only way to stop a task stuck in NCCL
        except Exception:                        # already finished or its worker is gone
            pass
        self._free.append(group)
        reason = (f"no result after {_limit(job):g} s (NCCL hangs are common with bad settings); killed"
                  if kind == "timeout" else "interrupted")
        return JobResult(job.key, False, reason=reason, kind=kind, elapsed_s=time.monotonic() - t0,
                         group=group)

    def cancel_all(self) -> list[str]:
        keys = []
        for ref in list(self._running):
            keys.append(self._running[ref][0].key)
            self._kill(ref, "interrupted")
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


def make_executor(backend: Backend, *, kind: str = "ray", address: str | None = None,
                  groups: int | None = None, log: Callable[[str], None] | None = None) -> Executor:
    if kind == "inprocess":
        return InProcessExecutor(backend)
    if kind != "ray":
        raise UsageError(f"unknown executor {kind!r} (ray, inprocess)")
    return RayExecutor(backend, address=address, groups=groups, log=log)
