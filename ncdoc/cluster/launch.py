"""One way to run something on every node: the Launcher interface and what a launch returns.

Two kinds of launch, the same on every launcher (Slurm, mpirun, Ray):

    runs = launcher.run_per_node(nodes, argv, env=..., timeout_s=30, log_dir="out/logs")
        one process per node (a snapshot, a probe); runs[node] is a NodeRun: ok, stdout,
        the reason when not ok (timeout, crash, exit status, node lost), its log file
    results = launcher.run_jobs([Job(...), ...], log_dir="out/runs")
        multi-rank programs (nccl-tests) on node groups, concurrently, one JobRun each

Every launch can be printed instead (`per_node_commands`, `job_command`: --dry-run shows
the exact command lines), kills what it started at its deadline or on Ctrl-C (srun's step,
mpirun's ranks, Ray tasks) and keeps each node's or job's output under the log folder.

Every per-node process sees NCDOC_NODE (the node's name as ncdoc calls it). Under srun and
mpirun the command runs inside a small sh wrapper that also prints the node's clock on
stderr first (`ncdoc-node <name> <epoch seconds>`), which the cross-node clock check reads.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field

from ncdoc.errors import UsageError
from ncdoc.readers.numbers import is_digits

LAUNCHERS = ("slurm", "mpirun", "ray", "local")
CLOCK_MARK = "ncdoc-node"

EXIT_MARK = "ncdoc-exit"

# The per-node wrapper (srun, mpirun): name and clock to stderr, the command, its exit status to
# stderr, and exit 0 itself: mpirun ends the whole job when one rank fails, and one node's
# failure must cost only that node's answer.
WRAPPER = ('NCDOC_NODE="${SLURMD_NODENAME:-$(hostname)}"; export NCDOC_NODE; '
           'printf "' + CLOCK_MARK + ' %s %s\\n" "$NCDOC_NODE" "$(date +%s.%N 2>/dev/null || date +%s)" >&2; '
           '"$@"; printf "' + EXIT_MARK + ' %s\\n" "$?" >&2; exit 0')


def wrap(argv) -> list[str]:
    return ["sh", "-c", WRAPPER, "sh", *argv]


@dataclass(frozen=True)
class NodeRun:
    node: str
    ok: bool
    stdout: str = ""
    stderr: str = ""
    rc: int | None = None
    reason: str = ""            # why not ok, one line a person understands
    kind: str = ""              # timeout | crash | exit | lost | launch | malformed
    elapsed_s: float = 0.0
    clock: float | None = None  # the node's clock (epoch s) when its process started
    window: tuple[float, float] | None = None  # our clock around that moment (launch, answer)
    log: str = ""


@dataclass(frozen=True)
class Job:
    """One multi-rank program on a node group."""
    key: str
    nodes: tuple[str, ...]
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    ranks_per_node: int = 1
    timeout_s: float = 600.0
    # Inherited variables with these prefixes are dropped: `env` is the job's whole NCCL environment
    # (a tuner trial must not pick up the driver's NCCL_* by way of srun --export=ALL or mpirun's own env).
    clear_env: tuple[str, ...] = ()


def job_environ(base, job: "Job") -> dict[str, str]:
    """The process environment of a job's launcher (or of the job itself): `base` without what the job
    clears, then the job's env."""
    out = {k: v for k, v in (base or {}).items() if not (job.clear_env and k.startswith(job.clear_env))}
    out.update(job.env)
    return out


@dataclass(frozen=True)
class JobRun:
    job: Job
    ok: bool
    output: str = ""            # stdout and stderr of every rank, as the launcher merged them
    rc: int | None = None
    reason: str = ""
    kind: str = ""              # timeout | crash | exit | launch | lost
    elapsed_s: float = 0.0
    command: tuple[str, ...] = ()
    log: str = ""


class Launcher:
    """Base class. Subclasses: SlurmLauncher, MpiLauncher, RayLauncher, LocalLauncher.

    `cancel` (a threading.Event) ends every launch in flight from any thread, as Ctrl-C ends one in
    the main thread: what it started is stopped with the launcher's escalation and the launch raises
    KeyboardInterrupt (a dispatcher running measurements in threads sets it on Ctrl-C)."""

    name = "base"

    @property
    def cancel(self):
        import threading
        ev = self.__dict__.get("_cancel")
        if ev is None:
            ev = self.__dict__["_cancel"] = threading.Event()
        return ev

    def nodes(self) -> list[str]:
        """The nodes this launcher reaches (the allocation, the hostfile, the Ray cluster)."""
        raise NotImplementedError

    def per_node_commands(self, nodes, argv, env) -> list[list[str]]:
        """The command line(s) run_per_node would start (for --dry-run)."""
        raise NotImplementedError

    def run_per_node(self, nodes, argv, *, env=None, timeout_s: float = 60.0, log_dir: str) -> dict[str, NodeRun]:
        raise NotImplementedError

    def job_command(self, job: Job) -> list[str]:
        raise NotImplementedError

    def run_jobs(self, jobs, *, log_dir: str) -> list[JobRun]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def shell_line(argv, env=None) -> str:
    """A command line a person can paste: env assignments first, every word quoted as needed."""
    pre = [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())]
    return " ".join((["env"] + pre if pre else []) + [shlex.quote(a) for a in argv])


def find_tool(cmd: str, what: str, hint: str, environ=None) -> str:
    """The path of a launcher executable (on the PATH of `environ`, the launcher's environment),
    or UsageError (exit 2) saying it is not installed."""
    if os.sep in cmd:
        if os.path.isfile(cmd) and os.access(cmd, os.X_OK):
            return cmd
        raise UsageError(f"{what} {cmd!r} is not an executable file")
    found = shutil.which(cmd, path=(environ or os.environ).get("PATH"))
    if not found:
        raise UsageError(f"{cmd} is not installed (not on PATH): {hint}")
    return found


@dataclass(frozen=True)
class Marks:
    """What the wrapper said on a node's stderr, and that stderr without it."""
    node: str | None = None
    clock: float | None = None
    rc: int | None = None            # the command's exit status (None: it never finished)
    stderr: str = ""


def parse_marks(stderr: str) -> Marks:
    node = clock = rc = None
    keep = []
    for line in stderr.splitlines():
        if line.startswith(CLOCK_MARK + " ") and node is None:
            parts = line.split()
            if len(parts) >= 3:
                node = parts[1]
                try:
                    clock = float(parts[2])
                except ValueError:               # a date without %N: whole seconds
                    digits = parts[2].split(".")[0]
                    clock = float(digits) if is_digits(digits) else None
                continue
        if line.startswith(EXIT_MARK + " "):
            value = line.split()[1] if len(line.split()) > 1 else ""
            rc = int(value) if is_digits(value.lstrip("-")) else None
            continue
        keep.append(line)
    return Marks(node, clock, rc, "\n".join(keep) + ("\n" if keep else ""))


def node_run(node: str, marks: Marks, stdout: str, *, killed: str = "", timeout_s: float | None = None,
             started: bool = True, why_not_started: str = "", **common) -> NodeRun:
    """A NodeRun from what one node printed under the wrapper, srun and mpirun alike."""
    common.update(stdout=stdout, stderr=marks.stderr, clock=marks.clock, rc=marks.rc)
    if not started:
        return NodeRun(node, False, reason=why_not_started or "its process never started", kind="launch", **common)
    if marks.rc is None:
        if killed:
            return NodeRun(node, False, reason=f"no answer within {timeout_s:g} s (killed)", kind="timeout", **common)
        return NodeRun(node, False, reason="its process ended without a word (node lost?)", kind="lost", **common)
    if marks.rc != 0:
        kind, reason = exit_reason(marks.rc, marks.stderr, "the command")
        return NodeRun(node, False, reason=reason, kind=kind, **common)
    return NodeRun(node, True, **common)


def exit_reason(rc: int | None, stderr: str, what: str) -> tuple[str, str]:
    """(kind, reason) for a per-node process that did not succeed."""
    from ncdoc.cluster.processes import signal_name
    sig = signal_name(rc)
    tail = last_line(stderr)
    if sig:
        return "crash", f"{what} was killed by {sig}" + (f": {tail}" if tail else "")
    return "exit", f"{what} exited with {rc}" + (f": {tail}" if tail else "")


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.startswith(CLOCK_MARK)]
    return lines[-1][:200] if lines else ""


def job_result(job: Job, p) -> JobRun:
    """A JobRun from a finished launcher process (srun, mpirun, or the benchmark itself)."""
    text = p.output()
    common = dict(output=text, rc=p.rc, elapsed_s=p.elapsed_s, command=tuple(p.argv), log=p.out_path)
    if p.start_error:
        return JobRun(job, False, reason=p.start_error, kind="launch", **common)
    if p.killed:
        return JobRun(job, False, reason=f"no result within {job.timeout_s:g} s ({p.killed}); "
                                         f"{', '.join(p.cleanup)}", kind="timeout", **common)
    if p.rc != 0:
        kind, reason = exit_reason(p.rc, text, os.path.basename(job.argv[0]) if job.argv else "the job")
        return JobRun(job, False, reason=reason, kind=kind, **common)
    return JobRun(job, True, **common)


__all__ = ["LAUNCHERS", "NodeRun", "Job", "JobRun", "Launcher", "job_environ", "wrap", "shell_line", "find_tool", "parse_marks", "node_run", "Marks",
           "exit_reason", "job_result", "CLOCK_MARK", "EXIT_MARK", "last_line"]
