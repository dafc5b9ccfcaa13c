"""The real backends' one way to launch: every measurement is a run of ncdoc.cluster.bench on the
step's node group, through the cluster launcher layer (srun, mpirun with pass-through flags, Ray,
or this machine alone).

What that gives each trial (docs/cluster.md, "Trust in every measurement"):
  - NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING on every run, nccl-tests' own -T
    timeout and -c checks (more check iterations in the final comparisons);
  - the verdict of ncdoc.cluster.trust: the ranks formed one job of the GPUs launched, one NCCL
    version on every rank, every variable the step changes appears in NCCL's "set by environment
    to" lines on every rank, every node ran with the same NCCL environment and nothing the step
    is without leaked in from the launcher's environment; else the trial is rejected with that
    reason (TrialFailed kind "invalid": a measurement that does not measure the setting);
  - the algorithm, protocol and channel count NCCL used at each size, from its TUNING lines;
  - each run's log under LOG_DIR/<job>/<step>/ (the tune's output folder, trials/);
  - remote processes ended at the deadline or on Ctrl-C by the launcher (srun's step kill,
    mpirun's process tree, Ray task cancellation), also when the dispatcher runs measurements in
    threads (Launcher.cancel).

A step's environment is its whole NCCL environment: inherited NCCL_* variables are dropped from
what the launcher passes on (the driver's own must not ride along), and the variables today's
environment sets that a step leaves out are checked not to reach NCCL.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ncdoc.tuner.backends import Backend, Measurement, RunContext, SizeResult, TrialFailed, Workload

START_MARGIN_S = 30.0         # beyond --timeout, before the launcher kills a run that nccl-tests' -T did not end
# Jobs that decide what is recommended (ncdoc.tuner.confirm, run.py): their runs check more results.
FINAL_JOBS = ("confirm-", "final", "replica", "full-scale")
# Set to load a tuner table: read by NCCL's plugin loader and the plugin, which do not print them as
# NCCL prints its parameters; the table's effect shows in the TUNING lines instead.
TABLE_VARS = ("NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE")


@dataclass(frozen=True)
class LaunchOptions:
    """How the real backends reach the nodes (the cluster commands' launcher flags)."""
    launcher: str | None = None              # slurm | mpirun | ray | local (None: see kind())
    nodes: str | None = None                 # a Slurm hostlist: gpu[01-16]
    hostfile: str | None = None
    ray_address: str | None = None
    command: str | None = None               # the srun or mpirun binary
    extra_args: tuple[str, ...] = ()         # passed to srun / mpirun as given
    mpi_flavour: str | None = None

    def kind(self, environ: Mapping[str, str]) -> str:
        """The launcher asked for, else: Ray for a Ray cluster's address, srun inside a Slurm allocation,
        mpirun for a hostfile or several named nodes, this machine alone otherwise."""
        if self.launcher:
            return self.launcher
        if self.ray_address:
            return "ray"
        if environ.get("SLURM_JOB_ID") and shutil.which(self.command or "srun", path=environ.get("PATH")):
            return "slurm"
        if self.hostfile or (self.nodes and len(_expand(self.nodes)) > 1):
            return "mpirun"
        return "local"


def _expand(nodes: str) -> list[str]:
    from ncdoc.cluster.nodes import expand
    return expand(nodes)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


class LaunchedBackend(Backend):
    """Base of nccl-tests and torch: subclasses say which program a bench run starts (`program`)."""

    in_process_ok = True          # the launcher enforces every deadline and ends what it started
    reports_choices = True        # SizeResult algo/proto/nchannels are NCCL's own (its TUNING lines)

    def __init__(self, *, hardware: Any, base_env: Mapping[str, str] | None, launch: LaunchOptions | None,
                 gpus_per_node: int | None, iters: int | None, warmup: int, check_iters: int = 1,
                 final_check_iters: int = 3, log_dir: str | None = None, environ: Mapping[str, str] | None = None,
                 expectation: Any = None, tuner_plugin: str | None = None, table_dir: str | None = None,
                 max_bands: int = 2):
        self.hw = hardware
        self.base_env = dict(base_env or {})
        self.launch = launch or LaunchOptions()
        self.gpus = gpus_per_node or hardware.gpus_per_node
        self.iters, self.warmup = iters, warmup
        self.check_iters, self.final_check_iters = check_iters, final_check_iters
        self.max_bands = max_bands
        self.log_dir = str(Path(log_dir or "ncdoc-tune/trials").resolve())
        # The launcher's environment: the driver's, less its NCCL_* (every job carries its own whole env).
        env = dict(os.environ if environ is None else environ)
        self.environ = {k: v for k, v in env.items() if not k.startswith("NCCL_")}
        self._expectation = expectation
        self.tuner_plugin = str(Path(tuner_plugin).resolve()) if tuner_plugin else None
        # Tables are written here for the benchmark to load: on shared storage when the ranks are remote.
        self.table_dir = str(Path(table_dir).resolve()) if table_dir else None
        self._launcher: Any = None
        self.nodes_default: tuple[str, ...] = ()   # where a step without a node group runs (set by the plan)

    # ---------------------------------------------------------------- what subclasses give
    def program(self, collective: str, nodes: Sequence[str], key: str) -> tuple[str, ...]:
        """argv up to nccl-tests' flags for a run on `nodes`; () for nccl-tests itself (<collective>_perf)."""
        return ()

    def tests_dir(self) -> str | None:
        return None

    # ---------------------------------------------------------------- the launcher
    @property
    def launcher_kind(self) -> str:
        return self.launch.kind(self.environ)

    def launcher(self) -> Any:
        """The launcher, made once (in the driver: launchers hold processes, Ray handles, events)."""
        if self._launcher is None:
            from ncdoc.cluster.launchers import make_launcher
            lo = self.launch
            self._launcher = make_launcher(self.launcher_kind, nodes=lo.nodes, hostfile=lo.hostfile,
                                           ray_address=lo.ray_address, command=lo.command, extra_args=lo.extra_args,
                                           mpi_flavour=lo.mpi_flavour, environ=self.environ)
        return self._launcher

    def all_nodes(self) -> list[str]:
        return list(self.launcher().nodes())

    def close(self) -> None:
        if self._launcher is not None:
            self._launcher.close()
            self._launcher = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_launcher"] = None                # never pickled: made again where it is used
        return state

    # ---------------------------------------------------------------- measuring
    def table_support(self) -> str | None:
        from ncdoc.tuner.table import plugin_problem
        return plugin_problem(self.tuner_plugin)

    def _with_table(self, env: Mapping[str, str], table: Sequence[Any]) -> dict[str, str]:
        if not table:
            return dict(env)
        why = self.table_support()
        if why:
            raise TrialFailed(f"cannot load the tuner table: {why}", kind="tool")
        from ncdoc.tuner.table import plugin_env
        return {**env, **plugin_env(table, str(self.tuner_plugin), self.table_dir)}

    def spec(self, collective: str, sizes: Sequence[int], timeout_s: float | None, *, nodes: Sequence[str] = (),
             key: str = "", final: bool = False) -> Any:
        from ncdoc.cluster.bench import BenchSpec
        limit = float(timeout_s or 600.0)
        # nccl-tests' own -T ends a hung run with its own message first; the launcher's deadline is the
        # backstop (a margin for the job's start: srun, NCCL init).
        return BenchSpec(collective=collective, sizes=tuple(int(s) for s in sizes), iters=self.iters,
                         warmup=self.warmup, check_iters=self.final_check_iters if final else self.check_iters,
                         timeout_s=limit, tests_dir=self.tests_dir(), program=self.program(collective, nodes, key),
                         job_timeout_s=limit + START_MARGIN_S, max_bands=self.max_bands)

    def group_for(self, nodes: Sequence[str], env: Mapping[str, str], key: str) -> Any:
        """The bench Group of one step: what it changes against today's env is what must reach NCCL."""
        from ncdoc.cluster import bench
        tuned = {k: v for k, v in env.items() if self.base_env.get(k) != v and k not in TABLE_VARS}
        unset = tuple(k for k in self.base_env if k not in env and not k.startswith("NCCL_DEBUG"))
        return bench.group(self.launcher(), nodes, env=dict(env), gpus_per_node=self.gpus, key=key, tuned=tuned,
                           unset=unset, clear_env=("NCCL_",))

    def bench_run(self, nodes: Sequence[str], env: Mapping[str, str], collective: str, sizes: Sequence[int], *,
                  timeout_s: float | None, key: str) -> Any:
        """One bench run of `collective` on `nodes`, its logs under LOG_DIR/<key>: (the BenchResult of
        ncdoc.cluster.bench, with rows, verdict and runs; the BenchSpec it ran)."""
        from ncdoc.cluster import bench
        spec = self.spec(collective, sizes, timeout_s, nodes=nodes, key=f"{key}/{collective}",
                         final=key.startswith(FINAL_JOBS))
        where = os.path.join(self.log_dir, *(safe_name(p) for p in key.split("/")))
        return bench.run(self.launcher(), [self.group_for(nodes, env, collective)], spec, log_dir=where)[0], spec

    def measure(self, env: Mapping[str, str], workload: Workload, repeat_index: int, *,
                timeout_s: float | None = None, context: RunContext | None = None,
                table: Sequence[Any] = ()) -> Measurement:
        env = self._with_table(env, table)
        nodes = tuple(context.hosts) if context and context.hosts else (self.nodes_default or tuple(self.all_nodes()))
        key = (context.log_key if context else "") or f"run-{repeat_index}"
        rows = []
        for collective, sizes in workload:
            r, spec = self.bench_run(nodes, env, collective, sizes, timeout_s=timeout_s, key=key)
            if not r.ok:
                kind = failure_kind(r)
                reason = self._reason(r)
                if kind == "hang":
                    what = "the benchmark" if spec.program else f"{collective}_perf"
                    reason = f"{what} gave no result within {spec.timeout_s:g} s (hung): {reason}"
                raise TrialFailed(reason, kind=kind)
            got = {row.size: row for row in r.rows}
            missing = [s for s in sizes if s not in got]
            if missing:
                raise TrialFailed(f"{collective}: no result row for size(s) {missing}. Log: {_log_of(r)}", kind="call")
            rows.append((collective, tuple(SizeResult(size=s, busbw=got[s].busbw, algbw=got[s].algbw,
                                                      time_us=got[s].time_us, algo=got[s].algo, proto=got[s].proto,
                                                      nchannels=got[s].channels) for s in sizes)))
        return Measurement(tuple(rows))

    def _reason(self, r: Any) -> str:
        failed = next((run for run in r.runs if not run.ok), None)
        reason = r.reason
        if failed is not None:
            tail = _tail(failed.output)
            if tail and tail not in reason:
                reason = f"{reason}. {tail}"
        return f"{reason} (log: {_log_of(r)})"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "nodes": self.hw.nodes, "gpus_per_node": self.gpus, "fabric": self.hw.fabric,
                "launcher": self.launcher_kind}


def failure_kind(result: Any) -> str:
    """How a failed bench run counts for the study: init | call | crash | hang | lost | tool (the setting
    or the cluster failed) or invalid (the run did not measure what it claims)."""
    failed = next((run for run in result.runs if not run.ok), None)
    if failed is not None:
        if failed.kind == "exit" and "operation timed out" in (failed.output or ""):
            return "hang"                       # nccl-tests' own -T ended it
        return {"timeout": "hang", "crash": "crash", "exit": "call", "launch": "tool", "lost": "lost"}.get(
            failed.kind, "call")
    v = result.verdict
    reasons = " ".join(v.reasons) if v is not None else ""
    if "wrong result" in reasons or "nccl-tests failed on" in reasons or "out-of-bounds" in reasons:
        return "call"                           # NCCL ran the setting and it broke: evidence against it
    return "invalid"


def _log_of(r: Any) -> str:
    logs = [run.log for run in r.runs if run.log]
    return logs[-1] if logs else "-"


def _tail(text: str | None, n: int = 3) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    warn = [ln for ln in lines if "WARN" in ln or "error" in ln.lower() or "failure" in ln.lower()]
    keep = (warn or lines)[-n:]
    return ("Last output: " + " | ".join(ln.strip()[:200] for ln in keep)) if keep else ""


__all__ = ["LaunchOptions", "LaunchedBackend", "failure_kind", "FINAL_JOBS", "safe_name"]
