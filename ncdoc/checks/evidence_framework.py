"""Checks over what a framework says about the NCCL collectives it ran: PyTorch's ProcessGroupNCCL watchdog.

A watchdog timeout says one thing for sure: a collective did not finish within the process group's
timeout. What it does not say is why, and in particular it does not show a network fault: every rank
blocked in the same collective is what a dead or stuck peer, an application that called collectives in
different orders, a stalled host thread and a stalled transfer all look like. The check reads the work
records (SeqNum, OpType, sizes) across ranks, the progress lines (last enqueued / completed), what NCCL
itself printed (errors or none) and what a RAS report saw, and says which of those the evidence points at.
"""

from __future__ import annotations

from collections import Counter

from ncdoc.checks.evidence_common import cite, env_evidence, env_value, merge_evidence
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Hit

_DEFAULT_TIMEOUT_MS = 600_000       # kProcessGroupNCCLDefaultTimeout (ProcessGroupNCCL.hpp): 10 minutes
_LATE = 2.0                         # a timeout noticed after this many times its limit: the process itself stalled
_ENV = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT",
        "NCCL_BLOCKING_WAIT", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DESYNC_DEBUG")


def _ms(ms: int | None) -> str:
    if ms is None:
        return "?"
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:.1f} h"
    if ms >= 60_000:
        return f"{ms / 60_000:g} min"
    return f"{ms / 1000:g} s"


def _ranks(ranks) -> str:
    rs = sorted({r for r in ranks if r is not None})
    if not rs:
        return "the ranks"
    shown = ", ".join(map(str, rs[:8])) + (" ..." if len(rs) > 8 else "")
    return f"rank{'s' if len(rs) > 1 else ''} {shown}"


def _nccl_errors(ctx: Context) -> list:
    """NCCL's own error lines (WARNs), apart from the watchdog's and the framework's copies of them."""
    out = []
    for log in ctx.logs:
        out += [(log, p) for p in log.problems if p.level == "WARN" and p.kind != "collective_timeout"]
    return out


def _ras_view(ctx: Context) -> str:
    """What a RAS report beside the timeout says about the peers."""
    reports = [r for r in ctx.evidence.get("ras", ()) if r.comm_rows or r.missing_count or r.dead_count]
    if not reports:
        return ""
    gone = sum(r.missing_count + r.dead_count for r in reports)
    if gone:
        return (f"; the RAS report names {gone} job process(es) it cannot reach (ras-ranks-missing): start there, "
                "that is the rank the others wait for")
    if all(c.errors == "OK" and c.status in ("RUNNING", "INIT") for r in reports for c in r.comm_rows):
        return ("; the RAS report beside it sees every rank alive (RUNNING, OK) - RAS counts collectives launched, "
                "not completed, so all ranks entered the collective and it stalled inside (a GPU kernel or a "
                "transfer that never finished), rather than a peer having died or never called it")
    return ""


def _without_work_record(ctx: Context, log, fw) -> Hit:
    """The watchdog's progress line or its heartbeat monitor, without the timed-out work record."""
    if fw.progress:
        p = fw.progress[0]
        msg = (f"PyTorch's NCCL watchdog stopped rank {p.rank} at collective #{p.seq} (enqueued up to #{p.last_enqueued}, "
               f"completed up to #{p.last_completed}): a collective did not finish in time")
        ev = cite(log, [x.evidence for x in fw.progress], 3)
    else:
        msg = (f"PyTorch's NCCL watchdog thread itself was stuck for {fw.stuck_s} s (the heartbeat monitor kills the "
               "process then): a CUDA or NCCL call it waits on hung - a GPU that stopped responding, or an NCCL "
               "abort that blocks")
        ev = cite(log, [fw.stuck_line], 1)
    return Hit(msg + "; NCCL's own lines or every rank's stack show which", ev,
               fix="Dump every rank's stacks while it hangs (py-spy dump), turn on the flight recorder "
                   "(TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1), and check dmesg for Xid errors "
                   "on the GPUs.", subject="watchdog")


@check("framework_watchdog_timeout")
def framework_watchdog_timeout(ctx: Context):
    """PyTorch's ProcessGroupNCCL watchdog gave up on a collective: what the work records across ranks show."""
    for log in ctx.logs:
        fw = log.framework
        if not fw.timeouts:
            if fw.progress or fw.stuck_s:
                yield _without_work_record(ctx, log, fw)
            continue
        ts = list(fw.timeouts)
        first = ts[0]
        by_seq: dict[tuple, list] = {}
        for t in ts:
            by_seq.setdefault(t.seq, []).append(t)
        parts = []
        desync = []
        for seq, group in sorted(by_seq.items()):
            ops = Counter((t.op, t.numel_in) for t in group)
            if len(ops) > 1:
                desync.append((seq, group))
        ops_seen = sorted({t.op for t in ts})
        seqs = sorted(by_seq)
        timeout = first.timeout_ms
        what = (f"PyTorch's NCCL watchdog timed out {first.op} SeqNum={first.seq}"
                + (f" ({first.numel_in:,} elements)" if first.numel_in else "")
                + f" after {_ms(timeout)}" + (" (the default)" if timeout == _DEFAULT_TIMEOUT_MS else "")
                + f" on {_ranks(t.rank for t in ts)}")
        if len(seqs) > 1:
            what += f"; SeqNums {', '.join(map(str, seqs[:6]))}{' ...' if len(seqs) > 6 else ''}"
        severity = "error"
        fix = ("Find the rank that did not reach this collective: dump all ranks' stacks while it hangs (py-spy dump), "
               "or turn on PyTorch's flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1) "
               "and compare the last collective each rank entered; rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "
               "to see whether NCCL itself reports a transport error. Raise the timeout only when a long step before "
               "the collective (checkpointing, evaluation on one rank) is expected.")
        if desync:
            seq, group = desync[0]
            kinds = "; ".join(f"rank {t.rank} {t.op}" + (f" ({t.numel_in:,} elements)" if t.numel_in else "")
                              for t in group[:4])
            parts.append(f"ranks disagree on what collective #{seq} is ({kinds}): they called collectives in different "
                         "orders or with different sizes - an application desync (a rank-dependent code path: "
                         "evaluation, logging or checkpointing on some ranks only, uneven data), not a network fault")
            fix = ("Make every rank issue the same collectives in the same order: look for code that runs a collective "
                   "on some ranks only (metrics, evaluation, saving on rank 0, uneven last batches); "
                   "TORCH_NCCL_DESYNC_DEBUG=1 or the flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE=2000 "
                   "TORCH_NCCL_DUMP_ON_TIMEOUT=1) names the mismatching call.")
        elif len(seqs) > 1 and max(seqs) - min(seqs) > 1000 and len({t.rank for t in ts}) > 1:
            parts.append("the ranks time out at SeqNums far apart: they are in different process groups, or some "
                         "ranks fell far behind (a stalled rank), so compare each process group's ranks separately")
        elif len(ops_seen) == 1 and len(seqs) == 1 and len({t.rank for t in ts}) > 1:
            parts.append(f"every rank that reports is blocked in the same collective ({first.op} #{first.seq}): a "
                         "peer that never reached it (crashed, stuck in other code, waiting on a different process "
                         "group) or a transfer that stalled; the ranks missing from these lines are the ones to look at")
        progress = list(fw.progress)
        ahead = [p for p in progress if p.last_enqueued > p.seq]
        if ahead:
            p = ahead[0]
            parts.append(f"rank {p.rank} had enqueued work up to #{p.last_enqueued} and completed up to "
                         f"#{p.last_completed}: the host kept issuing work while the GPU waited in #{p.seq}")
        late = [t for t in ts if t.ran_ms and t.timeout_ms and t.ran_ms > _LATE * t.timeout_ms]
        if late:
            t = late[0]
            parts.append(f"the watchdog noticed only after {_ms(t.ran_ms)} (limit {_ms(t.timeout_ms)}): the process "
                         "itself was stalled for hours (host memory pressure, a blocked thread, a stopped process)")
        if fw.stuck_s:
            parts.append(f"the watchdog thread itself got stuck for {fw.stuck_s} s (the heartbeat monitor)")
        nccl = _nccl_errors(ctx)
        if nccl:
            parts.append(f"NCCL logged {len(nccl)} error line(s) before it (see the other findings): the timeout "
                         "follows from that error")
            severity = "warning"            # the NCCL error's own finding names the cause
        elif not desync:
            parts.append("NCCL itself printed no error, so these lines alone do not show a network problem")
        ras = _ras_view(ctx)
        handling = env_value(ctx, "TORCH_NCCL_ASYNC_ERROR_HANDLING") or env_value(ctx, "NCCL_ASYNC_ERROR_HANDLING")
        if handling is not None and handling.strip() == "0":
            parts.append("with (TORCH_)NCCL_ASYNC_ERROR_HANDLING=0 the watchdog only logs: the job hangs instead "
                         "of aborting")
        msg = what + (": " + "; ".join(parts) if parts else "") + ras
        ev = merge_evidence(cite(log, [t.evidence for t in ts], 3), cite(log, [p.evidence for p in progress], 1),
                            *(env_evidence(ctx, n) for n in _ENV), limit=6)
        yield Hit(msg, ev, fix=fix, severity=severity, subject=f"watchdog:{first.seq}")
