"""Checks over nccl-tests output: runs that failed, wrong results, ranks that never formed one job, busbw
shape and level.

A run with one rank in total (`one_rank`) moves no data over any link, so its busbw is compared with
nothing: busbw_below_line_rate says so once, as info, and the other bandwidth checks pass it by.
Bandwidth figures come from ncdoc.nccl.bandwidth (calibrated against anchors.md); nccl-tests prints
GB/s as 1e9 bytes/s, which is what the port rate / 8 gives too.
"""

from __future__ import annotations

from ncdoc.startup.record import record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.nccl.bandwidth import ERROR_FRACTION, MIN_PEAK_BYTES, WARN_FRACTION
from ncdoc.checks.evidence_common import (cite, cite_kind, env_evidence, env_value, job_expectation, job_nodes,
                                          merge_evidence, tests_collective, tests_complete_listing)
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip

# A drop from the peak by this factor at a larger size is a collapse, not noise.
COLLAPSE_FACTOR = 2.5
COLLAPSE_MIN_BYTES = 1 << 20


@record
class Point:
    size: int
    busbw: float
    wrong: int                 # #wrong of both groups (0 when the output has the old max-error column)
    line: int | None
    text: str


def _fmt(x: float | None) -> str:
    return "N/A" if x is None else f"{x:g}"


def points(t: Any) -> list[Point]:
    """One point per result row: the better of out-of-place and in-place busbw."""
    counts = getattr(t, "wrong_kind", None) == "count"
    out = []
    for r in getattr(t, "rows", ()) or ():
        bw = r.busbw
        if bw is None:
            continue
        groups = [g for g in (r.oop, r.ip) if g is not None]
        wrong = int(sum(g.wrong for g in groups if g.wrong is not None)) if counts else 0
        text = (f"{r.size} B {r.type or ''} {r.redop or ''}: busbw "
                + " / ".join(_fmt(g.busbw) for g in groups) + " GB/s"
                + (", #wrong " + " / ".join(_fmt(g.wrong) for g in groups) if counts else ""))
        out.append(Point(r.size, bw, wrong, r.line or None, " ".join(text.split())))
    return out


def _ev(t: Any, *pts: Point) -> tuple[Evidence, ...]:
    return cite(t, pts)


def one_rank(t: Any) -> str | None:
    """Why this output is a run with one rank in total, or None when it is not (or cannot be told).

    Rank 0 prints every rank's device line, MPI ranks included, so a whole listing that names rank 0 alone,
    with nThread x nGpus 1, is one rank. Without a listing: busbw = algbw x (n-1)/n (2(n-1)/n for all_reduce)
    is 0 at every size while algbw is not only for n = 1; tests whose factor is 1 cannot show it this way.
    """
    devices = getattr(t, "devices", ()) or ()
    if devices:
        if {d.rank for d in devices} != {0} or any("device line" in x for x in getattr(t, "truncation", ())):
            return None
        if (getattr(t, "nthread", None) or 1) * (getattr(t, "ngpus", None) or 1) != 1:
            return None
        procs = {(d.host, d.pid) for d in devices}
        if len(procs) > 1:      # separate jobs (nccl_tests_not_one_job): each of them one rank
            return f"each of {len(procs)} separate processes lists rank 0 alone"
        d = devices[0]
        return f"the only device listed is rank 0 on {d.host}{', ' + d.name if d.name else ''}"
    rows = [r for r in getattr(t, "rows", ()) or () if r.busbw is not None]
    algbw = max((g.algbw for r in rows for g in (r.oop, r.ip) if g is not None and g.algbw is not None),
                default=0.0)
    if rows and algbw >= 1.0 and all(r.busbw == 0 for r in rows):
        return f"busbw is 0 at every size while algbw reaches {algbw:g} GB/s, which only n = 1 gives"
    return None


def _one_rank_hit(t: Any, why: str) -> Hit:
    coll = getattr(t, "collective", None)
    pts = points(t)
    peak = _peak(t)
    if peak is None or peak.busbw == 0:
        factor = "2(n-1)/n" if coll == "all_reduce" else "(n-1)/n"
        what = f"{coll or 'its'} busbw is 0 by definition (busbw = algbw x {factor}, n = 1)"
        shown = max(pts, key=lambda p: p.size) if pts else None     # the largest size: algbw > 0, busbw 0
    else:
        what = f"{coll or 'the test'} only copies inside one GPU (busbw {peak.busbw:g} GB/s is that copy)"
        shown = peak
    return Hit(f"inconclusive: nccl-tests ran with one rank in total ({why}): one rank moves no data over NVLink or the "
               f"network, so {what} and says nothing about the links",
               merge_evidence(cite_kind(t, "header", limit=1), _ev(t, shown) if shown else (),
                              cite_kind(t, "summary", limit=1)),
               fix="To measure the links run one rank per GPU: -g N on one node (N GPUs), or one process per GPU "
                   "with MPI (mpirun -np N ... -g 1).",
               severity="info", subject="one-rank")


def _failure_cause(t: Any, root: Any) -> str:
    where = root.location + (f" on {root.host}" if root.host else "")
    if root.kind == "cuda":
        return f"CUDA error '{root.error}'" + (f" ({root.meaning})" if root.meaning else "") + f" at {where}"
    if root.kind == "nccl":
        return (f"NCCL error '{root.error}'" + (f" ({root.error_name})" if root.error_name else "")
                + (f": {root.last_error}" if root.last_error else "") + f" at {where}")
    note = getattr(t, "failure_note", None)
    if note is not None:
        return f"{note.text.strip().rstrip('.')} (Test failure {where})"
    return (f"Test failure {where}, with no message before it (nccl-tests prints some errors on stderr: "
            "capture it too, 2>&1)")


# ---------------------------------------------------------------- correctness and the job

@check("nccl_tests_wrong_results")
def nccl_tests_wrong_results(ctx: Context):
    for t in ctx.tests:
        bad = [p for p in points(t) if p.wrong > 0]
        oob = getattr(t, "out_of_bounds", None)
        oob_failed = getattr(t, "out_of_bounds_ok", None) is False or (isinstance(oob, int) and oob > 0)
        if not bad and not oob_failed:
            continue
        total = sum(p.wrong for p in bad)
        msg = (f"nccl-tests reports {total} wrong value(s) at {len(bad)} size(s)" if bad else
               "nccl-tests reports out-of-bounds values")
        if bad and oob_failed:
            msg += f" and {oob} out-of-bounds value(s)"
        yield Hit(msg + ": the collective returned corrupt data, so its bandwidth means nothing",
                  merge_evidence(_ev(t, *bad[:3]), cite_kind(t, "out_of_bounds" if oob_failed else "summary", limit=1)),
                  subject="wrong")


@check("nccl_tests_failed")
def nccl_tests_failed(ctx: Context):
    for t in ctx.tests:
        fails = getattr(t, "failures", ()) or ()
        if not fails:
            continue
        # the CUDA/NCCL line is the cause; the TESTCHECK lines relay it up the call stack
        root = next((x for x in fails if x.kind != "test"), fails[0])
        before = {r.size for r in getattr(t, "rows", ()) if r.line and r.line < fails[0].line}
        prog = f"{t.collective}_perf" if getattr(t, "collective", None) else "nccl-tests"
        when = (f"{prog} stopped before measuring" if not before else
                f"{prog} failed after measuring {len(before)} size(s)")
        msg = f"{when}: {_failure_cause(t, root)}"
        hosts = sorted({x.host for x in fails if x.host})
        if len(hosts) > 1:
            msg += f"; failures on {len(hosts)} hosts ({', '.join(hosts[:4])})"
        note = getattr(t, "failure_note", None) if root.kind == "test" else None
        yield Hit(msg, merge_evidence(cite(t, (note,)), cite(t, (root,)), cite(t, fails[:3]), limit=4),
                  subject="failed")


def _empty_runs(t: Any) -> list[int]:
    """Runs (header blocks) before the last that list no device and print no row: several processes
    printed the header at once."""
    runs = getattr(t, "runs", 0) or 0
    if runs < 2:
        return []
    used = {r.run for r in getattr(t, "rows", ())} | {d.run for d in getattr(t, "devices", ())}
    return [i for i in range(runs - 1) if i not in used]


def _rank0_hosts(t: Any) -> list[str]:
    return sorted({d.host for d in getattr(t, "devices", ()) if d.rank == 0})


@check("nccl_tests_not_one_job")
def nccl_tests_not_one_job(ctx: Context):
    for t in ctx.tests:
        reasons = []
        if _empty_runs(t):
            reasons.append(f"the test header is printed {t.headers or t.runs} times before any device or result: "
                           "several processes each ran their own test")
        hosts0 = _rank0_hosts(t)
        if len(hosts0) > 1:
            reasons.append(f"rank 0 is listed on {len(hosts0)} hosts ({', '.join(hosts0[:4])}): each process "
                           "numbered its own ranks from 0")
        elif getattr(t, "duplicate_ranks", ()):
            reasons.append(f"rank(s) {', '.join(map(str, t.duplicate_ranks[:6]))} are listed more than once")
        runs = max(getattr(t, "runs", 0) or 0, 1)
        if (getattr(t, "summaries", 0) or 0) > runs:
            reasons.append(f"the summary is printed {t.summaries} times for {runs} run(s): every process "
                           "reported its own result")
        hosts = getattr(t, "hosts", ()) or ()
        nodes = ctx.options.get("nodes") or next((lg.nnodes for lg in ctx.logs if lg.nnodes), None)
        if not reasons and nodes and nodes > 1 and len(hosts) == 1 and tests_complete_listing(t):
            reasons.append(f"every rank is on {hosts[0]} although the job spans {nodes} nodes")
        if reasons:
            yield Hit("the nccl-tests ranks did not form one job: " + "; ".join(reasons)
                      + " - the numbers measure single processes, not the network",
                      cite_kind(t, "header", "summary", limit=4), subject="job")


# ---------------------------------------------------------------- bandwidth shape

@check("busbw_collapse")
def busbw_collapse(ctx: Context):
    for t in ctx.tests:
        if one_rank(t):
            continue        # no link carries the data, so a drop says nothing about one (busbw_below_line_rate says so)
        peak: Point | None = None
        prev: Point | None = None
        for p in points(t):
            if prev is not None and p.size < prev.size:
                peak = None         # a new sweep (another type, op or -N cycle) starts over
            prev = p
            if peak is None or p.busbw > peak.busbw:
                peak = p
                continue
            if (p.size > peak.size and p.size >= COLLAPSE_MIN_BYTES and peak.busbw > 0
                    and p.busbw * COLLAPSE_FACTOR <= peak.busbw):
                yield Hit(f"busbw falls from {peak.busbw:g} GB/s at {_size(peak.size)} to {p.busbw:g} GB/s at "
                          f"{_size(p.size)} ({peak.busbw / max(p.busbw, 1e-9):.1f}x lower)",
                          _ev(t, peak, p), subject="collapse")
                break


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:g} {unit}"
    return f"{n} B"


def _peak(t: Any) -> Point | None:
    pts = points(t)
    return max(pts, key=lambda p: p.busbw) if pts else None


# ---------------------------------------------------------------- bandwidth level

@check("busbw_below_line_rate")
def busbw_below_line_rate(ctx: Context):
    tests = ctx.tests
    single = {id(t): why for t in tests if (why := one_rank(t))}
    for t in tests:
        if id(t) in single:
            yield _one_rank_hit(t, single[id(t)])
    tests = [t for t in tests if id(t) not in single]
    # below ~1 GB busbw has not reached its plateau: such a run cannot show a slow link, however it compares
    small = {id(t) for t in tests if points(t) and max(p.size for p in points(t)) < MIN_PEAK_BYTES}
    for t in tests:
        if id(t) in small:
            largest = max(p.size for p in points(t))
            peak = _peak(t)
            yield Hit(f"inconclusive: the largest size measured is {_size(largest)}, below the ~1 GiB busbw needs to "
                      f"reach its plateau (peak {peak.busbw:g} GB/s here), so this run cannot say whether the links "
                      "reach their rate", merge_evidence(_ev(t, peak), cite_kind(t, "header", limit=1)),
                      fix="Rerun up to large sizes: -b 1G -e 8G -f 2 (with -n 20 iterations or more).",
                      severity="info", subject="busbw-small-sizes")
    tests = [t for t in tests if id(t) not in small]
    if not tests:
        return
    exp = job_expectation(ctx)
    if not exp.known:
        if single or small:
            return          # a Skip now would drop the notes above with it
        raise Skip("expected bandwidth unknown: give node evidence (ibstat, ibv_devinfo, a snapshot) or "
                   "--nic-gbps N --nics K")
    for t in tests:
        peak = _peak(t)
        if peak is None:
            continue
        pct = exp.achieved_pct(peak.busbw)
        if pct is None or pct >= 100 * WARN_FRACTION:
            continue
        what = "NVLink" if exp.nodes == 1 else "the network"
        msg = (f"peak busbw {peak.busbw:g} GB/s is {pct:.0f} % of the ~{exp.expected_busbw:.0f} GB/s {what} "
               f"should give ({exp.summary()})")
        sev = "error" if pct < 100 * ERROR_FRACTION else "warning"
        yield Hit(msg, merge_evidence(_ev(t, peak), cite_kind(t, "summary", limit=1)), severity=sev,
                  subject="busbw")


_RING_ONLY = ("ring",)


@check("two_node_tree_overstates")
def two_node_tree_overstates(ctx: Context):
    tests = ctx.tests
    nodes = job_nodes(ctx)
    if nodes is None:
        raise Skip("node count unknown (give --nodes, or output that lists every rank's host)")
    if nodes != 2 or tests_collective(ctx) != "all_reduce":
        return
    algo = (env_value(ctx, "NCCL_ALGO") or "").strip().lower()
    if algo in _RING_ONLY:
        return
    exp = job_expectation(ctx)
    for t in tests:
        peak = _peak(t)
        if peak is None or one_rank(t):
            continue
        over = exp.network_busbw is not None and peak.busbw > exp.network_busbw
        msg = ("two nodes with the default algorithm: Tree/NVLSTree all-reduce sends only part of the data "
               "between the nodes, so busbw is not the network's rate")
        if over:
            msg += (f"; here {peak.busbw:g} GB/s exceeds the ~{exp.network_busbw:.0f} GB/s the NICs can carry")
        yield Hit(msg, merge_evidence(_ev(t, peak), env_evidence(ctx, "NCCL_ALGO")),
                  fix="Rerun with NCCL_ALGO=Ring to measure the network (or on more than two nodes).",
                  env_patch={"NCCL_ALGO": "Ring"}, severity="warning" if over else "info", subject="tree")


# ---------------------------------------------------------------- ranks and GPUs

_MOST_GPUS = 16          # no host NCCL runs on has more GPUs than this


def _gpus_asked(ctx: Context, t: Any) -> tuple[str, Evidence] | None:
    """What the pasted command line asks of each host, when that is more GPUs than it can have: processes per host
    x -g x -t of nccl-tests (each process drives -g x -t GPUs of its own)."""
    cmd = getattr(t, "command", None) or {}
    per, g, th = cmd.get("per_host"), cmd.get("ngpus") or 1, cmd.get("nthreads") or 1
    if not per or per * g * th <= 1:
        return None
    want = per * g * th
    snap = ctx.snapshot
    have = len(snap.gpus.gpus) if snap is not None and snap.gpus.status.known and snap.gpus.gpus else None
    if have is not None and want <= have or have is None and want <= _MOST_GPUS:
        return None
    limit = f"the host has {have}" if have is not None else "more than any host has"
    return (f"the command runs {per} processes per host with -g {g}" + (f" -t {th}" if th > 1 else "")
            + f", {want} GPUs per host ({limit})",
            Evidence(cmd.get("text", ""), getattr(t, "source", ""), cmd.get("line") or None))


@check("gpu_oversubscription")
def gpu_oversubscription(ctx: Context):
    """More processes on a host than it has GPUs: several processes listed on one GPU, or processes whose GPU
    index does not exist there ('invalid device ordinal')."""
    for t in ctx.tests:
        devices = getattr(t, "devices", ()) or ()
        by_gpu: dict[tuple, set] = {}
        for d in devices:
            gpu = d.bus_id or (str(d.device) if d.device is not None else None)
            if gpu is not None:                  # per run: two runs pasted together list the same GPUs again
                by_gpu.setdefault((d.run, d.host, gpu), set()).add(d.pid)
        shared = {k: v for k, v in by_gpu.items() if len(v) > 1}
        ordinal = [f for f in getattr(t, "failures", ()) or () if f.kind == "cuda" and f.error_name ==
                   "cudaErrorInvalidDevice"]
        asked = _gpus_asked(ctx, t)
        if not shared and not ordinal and not asked:
            continue
        parts, ev = [], []
        if asked:
            parts.append(asked[0])
            ev.append(asked[1])
        if shared:
            (run, host, gpu), pids = max(shared.items(), key=lambda kv: len(kv[1]))
            parts.append(f"{len(pids)} processes on {host} use the same GPU ({gpu})"
                         + (f", and {len(shared) - 1} more GPU(s) are shared the same way" if len(shared) > 1 else ""))
            ev += [Evidence(f"{d.host} pid {d.pid} rank {d.rank} device {d.device}", getattr(t, "source", ""), d.line)
                   for d in devices if (d.run, d.host, d.bus_id or str(d.device)) == (run, host, gpu)][:3]
        if ordinal:
            hosts = sorted({f.host for f in ordinal if f.host})
            parts.append(f"{len(ordinal)} process(es)" + (f" on {', '.join(hosts[:3])}" if hosts else "")
                         + " failed with 'invalid device ordinal' (CUDA error 101): they asked for a GPU index the "
                           "host does not have")
            ev += list(cite(t, ordinal[:2]))
        yield Hit("more processes (or GPUs per process) than the host has GPUs: " + "; ".join(parts)
                  + " - the launcher placed more ranks on a host than it has GPUs (slots, -np, hostfile), each rank "
                    "was not given its own GPU, or CUDA_VISIBLE_DEVICES hides GPUs",
                  tuple(ev[:4]),
                  fix="Run one rank per GPU: as many processes per host as it has GPUs (mpirun -np N with -H host:slots "
                      "or a hostfile, srun --ntasks-per-node=GPUs), and -g 1 per process (or one process per host with "
                      "-g GPUs); check that the ranks really spread over the hosts (the '# Rank ... on <host>' lines).",
                  subject="oversubscription")
