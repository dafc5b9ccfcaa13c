"""nccl-tests on node groups through a launcher: parsed, trust-checked, with what NCCL chose.

This is the measurement API the cluster test uses and the tuner's real backends are meant to
call (docs/cluster.md, "For the tuner"):

    spec = BenchSpec(collective="all_reduce", sizes=(1 << 20, 1 << 30), check_iters=1, timeout_s=120)
    groups = [group(launcher, ("node01", "node02"), env={"NCCL_ALGO": "Ring"}, gpus_per_node=8)]
    for result in run(launcher, groups, spec, log_dir="out/trial-7"):
        result.ok, result.verdict.reasons, result.rows[0].busbw, result.rows[0].algo

Every run gets NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING (added to the caller's
subsystems), nccl-tests' own -T timeout and -c validation (more check iterations for final
candidates: check_iters), and iteration counts scaled by size: small messages need many
iterations to time, large ones few, so sizes are run in bands, one nccl-tests invocation per
band with its own -n. Groups run concurrently (one job each), bands one after another.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from ncdoc.cluster.launch import Job, JobRun
from ncdoc.errors import UsageError

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,ENV,TUNING"}
DEFAULT_SIZES = (1 << 20, 1 << 24, 1 << 28, 1 << 30)
TARGET_S = 0.25                 # timed seconds per size the iteration count aims at
MIN_ITERS, MAX_ITERS = 5, 200


@dataclass(frozen=True)
class BenchSpec:
    collective: str = "all_reduce"
    sizes: tuple[int, ...] = DEFAULT_SIZES
    iters: int | None = None           # None: scaled by size (iterations_for)
    warmup: int = 5
    check_iters: int = 1               # nccl-tests -c: 0 is never used, final candidates want more
    timeout_s: float = 300.0           # nccl-tests' own -T (seconds per test)
    tests_dir: str | None = None
    extra_args: tuple[str, ...] = ()   # further nccl-tests flags (-d, -o, -G ...)
    assumed_algbw: float = 20.0        # GB/s, for the iteration count when nothing better is known
    # Another benchmark that takes nccl-tests' flags and prints its format (the torch backend's
    # program), instead of <collective>_perf: its argv up to the flags.
    program: tuple[str, ...] = ()
    job_timeout_s: float | None = None   # the launcher's limit per run (default: -T per size + 30 s)
    max_bands: int | None = None       # at most this many runs per measurement (neighbouring bands merged)

    def command(self) -> list[str]:
        return list(self.program) if self.program else [self.binary()]

    def binary(self) -> str:
        name = f"{self.collective}_perf"
        if self.tests_dir:
            path = os.path.join(self.tests_dir, name)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise UsageError(f"nccl-tests binary {name} not found (or not executable) in {self.tests_dir}; "
                                 "build nccl-tests with MPI=1 and pass --nccl-tests-dir DIR (its build/ folder)")
            return path
        return name                    # found on each node's PATH


@dataclass(frozen=True)
class Group:
    """Where one measurement runs and with which environment."""
    key: str
    nodes: tuple[str, ...]
    env: dict = field(default_factory=dict)
    ranks_per_node: int = 1
    gpus_per_rank: int = 1
    # What the trust check verifies reached NCCL: None, every NCCL_* of env; a tuner step names what
    # it changes (today's variables are held to "the same on every rank" instead).
    tuned: dict | None = None
    unset: tuple[str, ...] = ()        # variables the run must not have (a driver's env leaking in)
    clear_env: tuple[str, ...] = ()    # inherited variables dropped (ncdoc.cluster.launch.Job)

    @property
    def ranks(self) -> int:
        return len(self.nodes) * self.ranks_per_node * self.gpus_per_rank


@dataclass(frozen=True)
class SizeRow:
    size: int
    busbw: float
    algbw: float
    time_us: float
    algo: str | None = None            # what NCCL used (TUNING lines)
    proto: str | None = None
    channels: int | None = None

    def to_dict(self) -> dict:
        return {"size": self.size, "busbw": self.busbw, "algbw": self.algbw, "time_us": self.time_us,
                "algo": self.algo, "proto": self.proto, "channels": self.channels}


@dataclass(frozen=True)
class BenchResult:
    group: Group
    ok: bool                           # ran, and the verdict says it is a result
    rows: tuple[SizeRow, ...] = ()
    verdict: object = None             # ncdoc.cluster.trust.Verdict (of the first band that failed, else the last)
    runs: tuple[JobRun, ...] = ()
    reason: str = ""                   # why not ok, one line

    @property
    def peak_busbw(self) -> float | None:
        return max((r.busbw for r in self.rows), default=None)

    def to_dict(self) -> dict:
        return {"key": self.group.key, "nodes": list(self.group.nodes), "env": dict(self.group.env),
                "ok": self.ok, "reason": self.reason, "peak_busbw": self.peak_busbw,
                "rows": [r.to_dict() for r in self.rows],
                "verdict": self.verdict.to_dict() if self.verdict is not None else None,
                "logs": [r.log for r in self.runs], "commands": [list(r.command) for r in self.runs]}


def group(launcher, nodes, *, env=None, gpus_per_node: int = 8, key: str | None = None, one_gpu: bool = False,
          **checks):
    """A Group for `nodes`: every GPU of each node (one rank each, or one process driving them all where
    the launcher runs a single process per node: Ray or this machine alone), or one GPU per node
    (`one_gpu`). `checks`: Group's tuned, unset and clear_env."""
    nodes = tuple(nodes)
    key = key or "-".join(nodes)
    if one_gpu:
        return Group(key, nodes, dict(env or {}), 1, 1, **checks)
    if launcher.name in ("ray", "local") and len(nodes) == 1:
        return Group(key, nodes, dict(env or {}), 1, gpus_per_node, **checks)
    return Group(key, nodes, dict(env or {}), gpus_per_node, 1, **checks)


def iterations_for(size: int, algbw_gbs: float) -> int:
    """Timed iterations for one size: about TARGET_S of work, within MIN_ITERS..MAX_ITERS, as a power of two."""
    t = 20e-6 + size / (max(algbw_gbs, 0.1) * 1e9)
    n = max(MIN_ITERS, min(MAX_ITERS, int(TARGET_S / t)))
    return max(MIN_ITERS, min(MAX_ITERS, 2 ** int(math.log2(n))))


def bands(spec: BenchSpec) -> list[tuple[int, int, int]]:
    """(min size, max size, iterations) per nccl-tests invocation."""
    sizes = sorted(set(int(s) for s in spec.sizes))
    out: list[tuple[int, int, int]] = []
    for s in sizes:
        n = spec.iters or iterations_for(s, spec.assumed_algbw)
        if out and out[-1][2] == n:
            out[-1] = (out[-1][0], s, n)
        else:
            out.append((s, s, n))
    k = spec.max_bands
    if k and len(out) > k:
        # Every launch costs a job start (srun, NCCL init): neighbouring bands share a run, with the
        # iteration count of the chunk's middle band.
        chunks = [out[i * len(out) // k:(i + 1) * len(out) // k] for i in range(k)]
        out = [(c[0][0], c[-1][1], c[len(c) // 2][2]) for c in chunks if c]
    return out


def run_env(env) -> dict:
    """The group's env with the INFO log every trust check needs."""
    out = dict(env or {})
    out["NCCL_DEBUG"] = "INFO"
    subsys = [s for s in (out.get("NCCL_DEBUG_SUBSYS") or "").split(",") if s]
    if subsys and subsys[0].startswith("^"):
        subsys = []                  # an exclusion list would hide what is needed: ask for it plainly
    for s in DEBUG_ENV["NCCL_DEBUG_SUBSYS"].split(","):
        if s not in subsys and "ALL" not in subsys:
            subsys.append(s)
    out["NCCL_DEBUG_SUBSYS"] = ",".join(subsys)
    return out


def argv_for(spec: BenchSpec, g: Group, lo: int, hi: int, iters: int) -> list[str]:
    return [*spec.command(), "-b", str(lo), "-e", str(hi), "-f", "2", "-g", str(g.gpus_per_rank), "-n", str(iters),
            "-w", str(spec.warmup), "-c", str(max(1, spec.check_iters)), "-T", str(int(math.ceil(spec.timeout_s))),
            *spec.extra_args]


def jobs_for(spec: BenchSpec, g: Group) -> list[Job]:
    out = []
    for i, (lo, hi, iters) in enumerate(bands(spec)):
        sizes = sum(1 for s in spec.sizes if lo <= s <= hi)
        limit = spec.job_timeout_s if spec.job_timeout_s else spec.timeout_s * max(1, sizes) + 30.0
        out.append(Job(f"{g.key}.b{i}", g.nodes, tuple(argv_for(spec, g, lo, hi, iters)), run_env(g.env),
                       g.ranks_per_node, timeout_s=limit, clear_env=tuple(g.clear_env)))
    return out


def _rows(spec: BenchSpec, tests, ranklog, nranks: int, lo: int, hi: int) -> list[SizeRow]:
    from ncdoc.cluster.tuning_log import COLLECTIVE_FUNC
    func = COLLECTIVE_FUNC.get(spec.collective)
    printed = {}
    for row in tests.rows:
        if row.complete and row.oop is not None and row.oop.busbw is not None:
            printed[row.size] = row
    out = []
    for s in sorted(x for x in spec.sizes if lo <= x <= hi):
        if not printed:
            break
        size = min(printed, key=lambda k: (abs(k - s), -k))
        if abs(size - s) > max(64, s // 8):
            continue
        row = printed[size]
        per_rank = size // nranks if spec.collective in ("all_gather", "reduce_scatter") and nranks else size
        pick = ranklog.chosen(func, size) or ranklog.chosen(func, per_rank)
        out.append(SizeRow(s, row.oop.busbw, row.oop.algbw or 0.0, row.oop.time_us or 0.0,
                           pick.algo if pick else None, pick.proto if pick else None, pick.channels if pick else None))
    return out


def evaluate(spec: BenchSpec, g: Group, runs) -> BenchResult:
    """One group's BenchResult from its band runs (pure: what the outputs say)."""
    from ncdoc.cluster import trust, tuning_log
    from ncdoc.evidence.nccl_log import parse_nccl_log
    from ncdoc.evidence.nccl_tests import parse_nccl_tests
    rows: list[SizeRow] = []
    verdict = None
    for run, (lo, hi, _) in zip(runs, bands(spec)):
        lines = run.output.splitlines()
        tests = parse_nccl_tests(lines, source=run.log or g.key)
        ranklog = tuning_log.read(lines)
        logfacts = parse_nccl_log(lines, source=run.log or g.key)
        tuned = g.tuned if g.tuned is not None else {k: v for k, v in g.env.items() if k.startswith("NCCL_")}
        verdict = trust.judge(tests, ranklog, expected_ranks=g.ranks, tuned=tuned, logfacts=logfacts,
                              checked=spec.check_iters >= 1, unset=g.unset)
        if not run.ok:
            return BenchResult(g, False, tuple(rows), verdict, tuple(runs), run.reason)
        if not verdict.valid:
            return BenchResult(g, False, tuple(rows), verdict, tuple(runs), "invalid: " + verdict.reasons[0])
        rows += _rows(spec, tests, ranklog, g.ranks, lo, hi)
    if not rows:
        return BenchResult(g, False, (), verdict, tuple(runs), "no result row for the sizes asked")
    return BenchResult(g, True, tuple(rows), verdict, tuple(runs))


def run(launcher, groups, spec: BenchSpec, *, log_dir: str) -> list[BenchResult]:
    """Measure every group (concurrently, band by band) and judge each run."""
    groups = list(groups)
    per_group = [jobs_for(spec, g) for g in groups]
    runs: list[list[JobRun]] = [[] for _ in groups]
    for b in range(len(bands(spec))):
        batch = [jobs[b] for jobs in per_group]
        for i, r in enumerate(launcher.run_jobs(batch, log_dir=log_dir)):
            runs[i].append(r)
    return [evaluate(spec, g, rs) for g, rs in zip(groups, runs)]


__all__ = ["BenchSpec", "Group", "SizeRow", "BenchResult", "group", "bands", "iterations_for", "jobs_for", "run",
           "evaluate", "run_env", "DEBUG_ENV"]
