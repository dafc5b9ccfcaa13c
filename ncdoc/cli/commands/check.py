"""`ncdoc check`: the pre-launch gate. Node + effective NCCL env + the job's claims; prints only problems."""

from __future__ import annotations

import sys

from ncdoc.cli import rule_options as opt
from ncdoc.errors import DeadlineExceeded, UsageError
from ncdoc.readers.numbers import is_digits

NAME = "check"
HELP = "pre-launch gate: check this node for the job about to start; print problems only, exit 1 on errors"
FORMATS = ("lines", "text", "json", "markdown", "github", "sarif", "junit", "concise")
DEFAULT_TIMEOUT_S = 10.0
DESCRIPTION = f"""\
Check the node a job is about to run on (probed live, or from --snapshot / --example; '-'
reads the snapshot from standard input) with the NCCL environment and the GPUs, nodes and
ranks the job will see, and print one line per problem. Cheap enough for every job script,
Slurm prolog and Kubernetes init container (see ncdoc-prelaunch).

The job's claims come from its launcher's variables (SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS,
SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES; SLURM_NNODES, SLURM_JOB_NUM_NODES,
SLURM_JOB_NODELIST, NNODES; WORLD_SIZE, OMPI_COMM_WORLD_SIZE and the local sizes), from
--expect-gpus / --nodes, and from the config file's expect-gpus; with --snapshot or --example,
the launcher's variables (when any is set) replace the job the snapshot was captured with.
On a job known to run on one node, problems that matter only between nodes (a port down, HCA or
GID selection, the socket interface) are reported as info, saying why (docs/prelaunch.md).

The whole check has a deadline (--timeout, default {DEFAULT_TIMEOUT_S:g} s): NVML runs in a child
process that is stopped when it has not answered in time (an error finding names it), and a
check that cannot finish by the deadline stops with exit status 2.

exit status: 0 the node is ready (nothing at or above --fail-on, default error); 1 not ready
(findings at or above it); 2 ncdoc could not run (bad usage, an unreadable snapshot, config or
policy pack, an internal error, the deadline passed).

examples:
  ncdoc check
  ncdoc check --expect-gpus 8 --nodes 4 --timeout 5
  ncdoc check --snapshot node7.json --fail-on warning
  ncdoc check --env NCCL_IB_HCA==mlx5_0,mlx5_1 --quiet && srun ./train
  srun --ntasks-per-node=1 ncdoc check --json > fleet.jsonl
  ncdoc check --format sarif > ncdoc.sarif
  ncdoc check --json --ignore NC1004:"pinned on purpose until 2.24"
"""


def add_arguments(parser) -> None:
    opt.add_node_arguments(parser)
    opt.add_env_arguments(parser)
    opt.add_selection_arguments(parser, "error")
    parser.add_argument("--expect-gpus", metavar="N",
                        help="the job needs N GPUs on this node (beside SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES, ...)")
    parser.add_argument("--nodes", metavar="N",
                        help="the job spans N nodes (beside SLURM_NNODES, ...); more than 1 needs an RDMA path")
    parser.add_argument("--timeout", metavar="SECONDS",
                        help=f"deadline for the whole check (default {DEFAULT_TIMEOUT_S:g}); NVML is stopped at it")
    opt.add_output_arguments(parser, FORMATS, "lines")
    parser.add_argument("--timings", action="store_true", help="print each probe's time to stderr")
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing; only the exit status")


def run(args) -> int:
    # A check builds a few thousand objects (the snapshot, rules, findings) and keeps them all
    # to the end: the cyclic collector would only walk them again and again (a tenth of the
    # run). It is off for the check and back on after, for callers that go on in-process.
    import gc
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if enabled:
            gc.enable()


def _count(text: str | None, flag: str, minimum: int = 0) -> int | None:
    if text is None:
        return None
    t = text.strip()
    if not (is_digits(t) and t.isascii()) or int(t) < minimum:
        raise UsageError(f"{flag} wants a whole number{' of 1 or more' if minimum else ''}, got {text!r}")
    return int(t)


def _seconds(text: str | None) -> float:
    if text is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"--timeout wants a number of seconds above 0, got {text!r}")
    return value


def _run(args) -> int:
    import time
    started = time.monotonic()
    fmt = opt.output_format(args, "lines")
    expect_gpus = _count(args.expect_gpus, "--expect-gpus")
    nodes = _count(args.nodes, "--nodes", minimum=1)
    timeout = _seconds(args.timeout)
    version = opt.nccl_version_arg(args)
    if [args.snapshot, *args.env_file].count("-") > 1:
        raise UsageError("only one of --snapshot and --env-file can read standard input ('-')")
    from ncdoc.usecases.node_context import node_context
    with _Deadline(timeout):
        sel = opt.selection(args, default_fail_on="error")
        cfg = sel.config
        config_gpus = (cfg.path, cfg.expect_gpus) if cfg is not None and cfg.expect_gpus is not None else None
        # NVML gets what is left of the deadline, less a share kept for the rules and the report.
        left = timeout - (time.monotonic() - started)
        snap, ctx = node_context(**opt.node_and_env(args), nccl_version=version,
                                 job={"expect_gpus": expect_gpus, "nodes": nodes, "config_gpus": config_gpus},
                                 live_options={"timeout_s": max(0.1, left - min(1.0, 0.2 * timeout))})
        from ncdoc.engine.rules import node_rules      # rules on logs or nccl-tests output judge nothing here
        sel.rules = node_rules(sel.rules)
        report = sel.run(ctx)
    failed = report.fails(sel.fail_on)
    code = 1 if failed else 0
    if args.quiet:
        return code
    if args.timings:
        print(timings_line(snap, time.monotonic() - started), file=sys.stderr)
    node = snap.host.hostname if snap.host.status.known else None
    if fmt == "lines":
        if report.findings:              # a clean node prints nothing: leave the formatters unimported
            from ncdoc.output import render
            sys.stdout.write(render(report, "lines", color=args.color))
        n = len(report.findings)
        mild = sum(1 for f in report.findings if f.original_severity)
        print(f"ncdoc check: {n} problem{'s' if n != 1 else ''}" + (" (failing)" if failed else "")
              + (f" ({mild} judged as info: the job runs on one node)" if mild else "")
              + f"; {len(report.skipped)} rules skipped (ncdoc doctor says why)", file=sys.stderr)
    elif fmt == "json":
        sys.stdout.write(json_report(report, snap, ctx, sel.fail_on, code))
    else:
        from ncdoc.output import render
        ran = sel.ran + [r for r, _ in sel.ignored]
        sys.stdout.write(render(report, fmt, title="ncdoc check", color=args.color, rules=ran,
                                fail_on=sel.fail_on, node=node, exit_code=code))
    return code


class _Deadline:
    """`with _Deadline(seconds):` raises DeadlineExceeded in the block once `seconds` have passed.

    NVML, the one probe known to hang, has its own share of the time in a child process
    (ncdoc.probes.nvml_process). Everything else reads files, which can still block (a dead NFS
    home holding ~/.nccl.conf, a sysfs attribute of a device stuck in reset): a real-time timer
    interrupts the process at the deadline and the check stops, "ncdoc could not run" (exit 2).
    The C-level `_signal` module is used directly (`signal` imports enum). A read blocked in
    uninterruptible kernel sleep is out of any process's reach: ncdoc-prelaunch runs the check
    under timeout(1) as the last resort. Outside the main thread (no signals) it does nothing.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._previous = None
        self._armed = False

    def _fire(self, signum, frame):
        raise DeadlineExceeded(f"the check did not finish within its deadline of {self.seconds:g} s "
                               "(--timeout); the node was not fully checked")

    def __enter__(self) -> "_Deadline":
        import _signal
        try:
            self._previous = _signal.signal(_signal.SIGALRM, self._fire)
        except (ValueError, OSError):            # not the main thread
            return self
        _signal.setitimer(_signal.ITIMER_REAL, self.seconds)
        self._armed = True
        return self

    def __exit__(self, *exc) -> None:
        if self._armed:
            import _signal
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            _signal.signal(_signal.SIGALRM, self._previous if self._previous is not None else _signal.SIG_DFL)
            self._armed = False


def timings_line(snap, elapsed_s: float) -> str:
    """One line: each probe's time, what timed out, and the whole check's."""
    probes = snap.probes
    if not probes.timings:
        return (f"ncdoc check: no probe ran (the node was read from {snap.origin}); "
                f"check total {elapsed_s * 1000:.1f} ms")
    parts = [f"{t.name} {t.ms:.1f}" + (" (timed out)" if t.timed_out else "") for t in probes.timings]
    return f"ncdoc check: probe times (ms): {', '.join(parts)}; check total {elapsed_s * 1000:.1f} ms"


def json_report(report, snap, ctx, fail_on: str, code: int) -> str:
    """The JSON report with what a fleet needs to compare nodes: host, time, versions, the decision."""
    import json
    import time
    from ncdoc.output.jsonout import report_dict
    base = report_dict(report, title="ncdoc check", skipped=True)
    data = {k: base[k] for k in ("schema_version", "tool", "version")}
    data["hostname"] = snap.host.hostname if snap.host.status.known else None
    data["time"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    data["nccl_version"] = ctx.nccl_version
    data["driver_version"] = snap.versions.driver if snap.versions.status.known else None
    data["decision"] = {"exit_code": code, "ready": code == 0, "fail_on": fail_on}
    data["snapshot"] = {"origin": snap.origin, "created": snap.created or None}
    data.update({k: v for k, v in base.items() if k not in data})
    p = snap.probes
    data["probes"] = {"deadline_s": p.deadline_s, "timings_ms": {t.name: t.ms for t in p.timings},
                      "timed_out": list(p.timed_out)}
    return json.dumps(data, indent=2, default=str) + "\n"
