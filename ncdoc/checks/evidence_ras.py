"""Checks over NCCL's own reports on a running job: the RAS report (ncclras, RAS log lines) and the 2.31
diagnostics (NCCL DIAG lines: active checks at init, RAS diagnostics across ranks).

RAS reports what it can see of every rank: processes that stopped answering or are dead, communicators
whose ranks report errors, and ranks whose state or collective *launch* counts differ. A count gap of
one in one snapshot is normal while collectives run; a gap that stays, or grows, is a rank that stopped
launching. The diagnostics say [OK] or [INFO] per check; an [INFO] line is either a notice or a problem,
and the category the parser gave it (ncdoc.evidence.nccl_diag) says which.
"""

from __future__ import annotations

from ncdoc.engine.rules import Context, check
from ncdoc.evidence.ras_model import TRANSITIONAL
from ncdoc.findings import Evidence, Hit
from ncdoc.readers.numbers import is_digits

_MAX = 4


def _ev(report, *kinds: str, limit: int = _MAX) -> tuple[Evidence, ...]:
    out: list[Evidence] = []
    for k in kinds:
        for c in report.evidence.get(k, ()):
            e = Evidence(c.text.strip(), report.source, c.line)
            if e not in out:
                out.append(e)
    return tuple(out[:limit])


def _line(report, line: int, text: str) -> Evidence:
    return Evidence(text.strip(), report.source, line or None)


def _who(p) -> str:
    gpu = f" (GPU {p.gpus})" if p.gpus else ""
    return f"process {p.pid} on {p.node}{gpu}" if p.pid else f"a process on {p.node}"


def _rank_who(r) -> str:
    where = f" (GPU {r.gpu}, process {r.pid} on {r.node})" if r.node else ""
    return f"rank {r.rank}{where}"


def _reports(ctx: Context) -> list:
    return list(ctx.evidence.get("ras", ()))


def _inconsistent(r) -> str:
    """Why a report's numbers cannot all be right (RAS data gathered while ranks come and go, or damaged)."""
    total = r.gpus or r.processes
    for i in r.comm_issues:
        sizes = [c.ranks_per_comm for c in r.comm_rows]
        if i.missing and sizes and i.missing > max(sizes):
            return f"communicator {i.comm} is said to miss {i.missing} ranks, more than any communicator has"
        for x in i.ranks:
            if total and x.rank >= 4 * max(total, 1) and x.rank > 65536:
                return f"it names rank {x.rank}, far beyond the job's {total} GPUs"
    return ""


# ---------------------------------------------------------------- RAS

@check("ras_ranks_missing")
def ras_ranks_missing(ctx: Context):
    """RAS cannot reach job processes: missing data (unresponsive), considered dead, or ranks missing from a
    communicator."""
    for r in _reports(ctx):
        dead = list(r.dead_processes)
        missing = [p for p in r.missing_processes if p.state != "dead"]
        comm_missing = [i for i in r.comm_issues if i.kind.startswith("INCOMPLETE")]
        dead_events = [e for e in r.events if e.kind == "peer_dead"]
        if not (dead or missing or r.dead_count or r.missing_count or comm_missing or dead_events):
            continue
        parts = []
        if r.dead_count or dead:
            n = r.dead_count or len(dead)
            parts.append(f"{n} job process{'es are' if n != 1 else ' is'} considered dead (unreachable over the RAS "
                         "network for a minute)" + (f": {', '.join(_who(p) for p in dead[:3])}" if dead else ""))
        if missing or (r.missing_count and not dead):
            n = r.missing_count or len(missing)
            unresponsive = any(p.state == "unresponsive" for p in missing)
            parts.append(f"{n} job process{'es' if n != 1 else ''} did not answer"
                         + (" (unresponsive, not yet dead)" if unresponsive else "")
                         + (f": {', '.join(_who(p) for p in missing[:3])}" if missing else ""))
        for i in comm_missing[:2]:
            named = ", ".join(_rank_who(x) for x in i.ranks[:3])
            parts.append(f"communicator {i.comm or i.comm_hash} ({i.comm_hash}) misses {i.missing or len(i.ranks)} "
                         f"rank(s)" + (f": {named}" if named else ""))
        if dead_events and not (r.dead_count or dead):
            parts.append(f"RAS declared {len(dead_events)} peer(s) dead: {', '.join(e.peer for e in dead_events[:3])}")
        if r.no_comm_data:
            parts.append("no communicator data was collected: the surviving ranks had already torn their "
                         "communicators down, which is not a healthy empty report")
        if r.timeouts:
            parts.append(f"{r.timeouts} communication timeout(s) while gathering the report")
        if r.query_seconds and r.query_seconds >= 1.0:
            parts.append(f"the query waited {r.query_seconds:g} s for answers (a peer that does not answer)")
        if r.outlier_nodes:
            nodes = sorted({p.node for p in r.outlier_nodes if p.node})
            parts.append(f"outlier node(s) {', '.join(nodes[:3])} run a different number of processes than the others")
        odd = _inconsistent(r)
        sev = "error" if (r.dead_count or dead or missing or r.missing_count or comm_missing or dead_events) else "warning"
        if odd:
            parts.append(f"the report is partly inconsistent ({odd}): take the missing process as a lead and query "
                         "again (ncclras -v)")
        who = (dead or missing or [None])[0]
        msg = "RAS cannot reach part of the job: " + "; ".join(parts)
        fix = ("Inspect the process RAS names" + (f" ({_who(who)})" if who else "")
               + ": a stopped, hung or crashed process stops answering RAS first (check that it exists, `py-spy dump` "
                 "or gdb its threads, its node's dmesg for Xid or OOM-killer lines); the other ranks then hang in "
                 "their next collective. Query again a few seconds later: a process considered dead is gone for good.")
        ev = _ev(r, "dead", "missing", "comm_incomplete", "event_peer_dead", "no_comm_data", "timeouts", "query")
        yield Hit(msg, ev, fix=fix, severity=sev, subject=f"ras:{r.source}")


def _count_gap(issue) -> tuple[str, int | None]:
    """What an operation-count mismatch says in words, and the largest gap between launch counts."""
    nums = []
    for g in issue.groups:
        if is_digits(g.value):
            nums.append(int(g.value))
    for x in issue.ranks:
        if is_digits(x.value):
            nums.append(int(x.value))
    gap = max(nums) - min(nums) if len(nums) > 1 else None
    return issue.what, gap


@check("ras_collective_mismatch")
def ras_collective_mismatch(ctx: Context):
    """Ranks of one communicator report different collective launch counts, or different states."""
    for r in _reports(ctx):
        for i in r.comm_issues:
            if not i.kind.startswith("MISMATCH") and "MISMATCH" not in i.kind:
                continue
            name = f"communicator {i.comm or ''} ({i.comm_hash})".replace("  ", " ").replace("( ", "(")
            ev = (_line(r, i.line, i.lines[0] if i.lines else ""),) if i.line else ()
            ev += tuple(Evidence(f"{g.count} ranks at {g.value}", r.source) for g in i.groups[:2] if not i.line)
            if "status" in i.what:
                states = {g.value for g in i.groups} | {x.value for x in i.ranks if x.value}
                groups = ", ".join(f"{g.count} {g.value}" for g in i.groups)
                if states <= TRANSITIONAL:
                    yield Hit(f"the ranks of {name} are at different lifecycle stages ({groups}): a communicator "
                              "being set up or torn down while another replaces it; this is transient - query again, "
                              "it should settle", ev, severity="info", subject=f"ras-status:{i.comm_hash}")
                else:
                    yield Hit(f"the ranks of {name} report different states ({groups}): some ranks aborted the "
                              "communicator while others still run it, and those will hang in their next "
                              "collective", ev, severity="error", subject=f"ras-status:{i.comm_hash}")
                continue
            what, gap = _count_gap(i)
            groups = "; ".join(f"{g.count} rank(s) at operation {g.value}" for g in i.groups)
            singles = [x for x in i.ranks if x.value]
            listed = [m for g in i.groups for m in g.members] + singles
            counts = {g.value: g for g in i.groups}
            ahead = behind = None
            if singles:
                top = max(int(g.value) for g in i.groups if is_digits(g.value)) if counts else None
                behind = [x for x in singles if top is not None and is_digits(x.value) and int(x.value) < top]
                ahead = [x for x in singles if top is not None and is_digits(x.value) and int(x.value) > top]
            elif listed and len(i.groups) >= 2:
                listed_group = next(g for g in i.groups if g.members)
                others = [g for g in i.groups if g is not listed_group and is_digits(g.value)]
                if is_digits(listed_group.value) and others:
                    if int(listed_group.value) > max(int(g.value) for g in others):
                        ahead = list(listed_group.members)
                    else:
                        behind = list(listed_group.members)
            msg = (f"the ranks of {name} have launched different numbers of {what.replace(' counts', '')}s "
                   f"({groups}" + (f"; {', '.join(f'rank {x.rank} at {x.value}' for x in singles[:3])}" if singles else "")
                   + ")")
            if gap == 1:
                msg += (": a difference of one in one snapshot is normal while collectives run (RAS samples launch "
                        "counts on the host); query again - counts that stop moving mean those ranks are stuck")
            elif gap:
                msg += f": a gap of {gap} operations"
                msg += (" - a straggler: the ranks behind stopped launching collectives (a host-side stall: data "
                        "loading, CPU contention, a checkpoint, a hang before the call); the others will wait for it")
            if behind:
                msg += f"; behind: {', '.join(_rank_who(x) for x in behind[:4])}"
            if ahead:
                msg += (f"; the ranks RAS lists are ahead ({', '.join(_rank_who(x) for x in ahead[:4])}): RAS "
                        "itemises the smaller group, so the stragglers are the others")
            yield Hit(msg, ev, fix="Query RAS again (ncclras, or ncclras -m to watch): if the counts do not move, look "
                                   "at what the lagging ranks' host threads are doing (py-spy dump); a one-operation "
                                   "difference that keeps moving needs nothing.",
                      severity="warning", subject=f"ras-count:{i.comm_hash}")


@check("ras_communicator_error")
def ras_communicator_error(ctx: Context):
    """Ranks of a communicator report an initialization or asynchronous error to RAS."""
    for r in _reports(ctx):
        for i in r.comm_issues:
            if "ERROR" not in i.kind:
                continue
            reported = "; ".join(f"{g.count} rank(s) reported {g.value}" for g in i.groups[:3])
            singles = "; ".join(f"{_rank_who(x)} reported {x.value}" for x in i.ranks[:3] if x.value)
            what = (i.what or "an error").lower()
            yield Hit(f"communicator {i.comm} ({i.comm_hash}): {what} on {i.missing or len(i.ranks) or '?'} rank(s)"
                      + (f" ({reported or singles})" if reported or singles else "")
                      + ": NCCL failed on those ranks; their logs (NCCL_DEBUG=WARN at least) say why",
                      (_line(r, i.line, i.lines[0] if i.lines else ""),) if i.line else (),
                      fix="Read the NCCL WARN lines of the ranks RAS names (NCCL_DEBUG=WARN or INFO); the first rank "
                          "to fail usually names the cause.",
                      subject=f"ras-error:{i.comm_hash}")


# ---------------------------------------------------------------- NCCL DIAG

def _diags(ctx: Context) -> list:
    return list(ctx.evidence.get("diag", ()))


def _diag_ev(d, lines, limit: int = _MAX) -> tuple[Evidence, ...]:
    return tuple(Evidence(x.raw, d.source, x.line) for x in lines[:limit])


# Variables that only change what NCCL logs: a difference across ranks is harmless itself
_LOG_ONLY = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
             "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_RAS_ENABLE", "NCCL_RUN_DIAGNOSTICS", "NCCL_RUN_RAS_DIAGNOSTICS")


@check("diag_config_mismatch")
def diag_config_mismatch(ctx: Context):
    """NCCL's diagnostics found ranks whose configuration differs: NCCL_* variables, CUDA or graphics driver
    versions, GPU models or counts, NVLink counts."""
    from ncdoc.evidence.nccl_diag import env_var_of
    for d in _diags(ctx):
        lines = list(d.of("config_mismatch"))
        if not lines:
            continue
        env_lines = [x for x in lines if x.check == "NCCL environment"]
        other = [x for x in lines if x.check != "NCCL environment"]
        if env_lines:
            names = sorted({v for v in (env_var_of(x) for x in env_lines) if v} | set(d.env_values))
            detail = "; ".join(f"{n}: " + ", ".join(f"{val} on ranks {{{','.join(map(str, rs))}}}"
                                                    for val, rs in d.env_values.get(n, {}).items())
                               for n in names if d.env_values.get(n))
            harmless = names and all(n in _LOG_ONLY for n in names)
            msg = (f"the ranks were started with different NCCL settings ({', '.join(names) or 'NCCL_* variables'}"
                   + (f" - {detail}" if detail else "") + ")")
            if harmless:
                msg += (": these only change what NCCL logs, so they are harmless themselves, but they show that the "
                        "launcher does not give every rank the same environment - check the variables that matter too")
            else:
                msg += (": ranks that disagree on how NCCL connects or which algorithm, protocol or buffers it uses "
                        "fail to connect, hang or corrupt results")
            yield Hit(msg, _diag_ev(d, env_lines),
                      fix="Give every rank the same NCCL_* environment: export it in the job script before the launcher "
                          "(srun --export=ALL, mpirun -x NAME, torchrun inherits), not in per-node shell profiles or "
                          "images that differ.",
                      severity="warning" if harmless else "error", subject="diag-env")
        for x in other[:_MAX]:
            yield Hit(f"NCCL's diagnostics report a mismatch across ranks in {x.check}: {x.text}: nodes of one job "
                      "should run the same driver, CUDA and GPU configuration",
                      _diag_ev(d, [x]),
                      fix="Bring every node to the same driver (and CUDA) version and GPU configuration, or keep the "
                          "job on nodes that match.",
                      severity="warning", subject=f"diag:{x.check}")


@check("diag_p2p_failed")
def diag_p2p_failed(ctx: Context):
    """NCCL's active diagnostics could not verify some GPU-to-GPU paths (P2P transfers, topology checks)."""
    from ncdoc.evidence.nccl_diag import p2p_counts
    for d in _diags(ctx):
        lines = list(d.of("p2p_failed"))
        if not lines:
            continue
        counted = next((c for c in (p2p_counts(x) for x in lines) if c), None)
        msg = ("NCCL's P2P check at init failed: " + (f"only {counted[0]} of {counted[1]} GPU-to-GPU transfers "
                                                     "passed verification" if counted else lines[0].text)
               + ": a GPU pair's direct path (NVLink or PCIe P2P) corrupts or loses data, so collectives over it "
                 "hang or return wrong results")
        yield Hit(msg, _diag_ev(d, lines),
                  fix="Find the failing pair in the lines NCCL prints for it (and `nvidia-smi topo -p2p r`, `nvidia-smi "
                      "nvlink -s`); check PCIe ACS/IOMMU for PCIe pairs, NVLink state and the Fabric Manager for NVLink "
                      "pairs; NCCL_P2P_DISABLE=1 confirms it (slower) while you fix it.",
                  subject="diag-p2p")


@check("diag_net_bw_outlier")
def diag_net_bw_outlier(ctx: Context):
    """NCCL's active diagnostics measured a network path between nodes far below the others."""
    from ncdoc.evidence.nccl_diag import net_outlier
    for d in _diags(ctx):
        outliers = list(d.of("net_outlier"))
        failed = list(d.of("net_failed"))
        for x in outliers[:_MAX]:
            got = net_outlier(x)
            if got is None:
                continue
            mode, rank, host, bw, median = got
            where = ("between NICs of different rails (cross-nic), while same-NIC paths are fine" if mode == "cross-nic"
                     and not any("same-nic" in y.text for y in outliers) else f"({mode})")
            yield Hit(f"NCCL's network check measured rank {rank} on {host} at {bw:g} Gbit/s against a median of "
                      f"{median:g} Gbit/s {where}: that NIC, its cable or switch port, or its route is slow, and "
                      "every ring through it runs at its speed",
                      _diag_ev(d, [x]),
                      fix="Check that NIC's port (ibstat/ibv_devinfo: rate, width, errors), its switch port and, for "
                          "cross-nic paths, the fabric between rails; on rail-only fabrics NCCL_CROSS_NIC=0 keeps "
                          "traffic on its rail.",
                      severity="warning", subject=f"diag-net:{rank}:{mode}")
        if failed:
            yield Hit(f"NCCL's network check could not complete: {failed[0].text}", _diag_ev(d, failed),
                      fix="Check that perftest's ib_write_bw is installed on every node and that the nodes reach each "
                          "other over the NICs NCCL uses; rerun with NCCL_RUN_DIAGNOSTICS=1.",
                      severity="info", subject="diag-net-incomplete")


@check("gpu_hardware_errors")
def gpu_hardware_errors(ctx: Context):
    """NCCL's RAS diagnostics report uncorrected ECC errors, Xid/SXid events or inactive NVLinks."""
    for d in _diags(ctx):
        lines = list(d.of("hardware"))
        for x in lines[:_MAX]:
            if x.check == "NVLink":
                what = "inactive NVLinks: those GPUs run their peer traffic at a fraction of the speed, or fall back"
                fix = ("Check `nvidia-smi nvlink -s` on the ranks' nodes and the Fabric Manager; reset the GPUs or send "
                       "the node for repair if links stay down.")
            elif x.check == "ECC":
                what = "volatile ECC errors: a GPU's memory returned bad data, and results on it cannot be trusted"
                fix = "Drain the node, reset the GPU and check `nvidia-smi -q -d ECC,ROW_REMAPPER`; send it for repair if it recurs."
            else:
                what = "Xid/SXid events from the driver: a GPU or NVSwitch fault that NCCL's failures follow from"
                fix = "Look the Xid codes up in NVIDIA's Xid catalog (dmesg on the node) and act on them: reset, drain or repair."
            yield Hit(f"NCCL's diagnostics report {x.check}: {x.text} - {what}", _diag_ev(d, [x]), fix=fix,
                      severity="error", subject=f"diag-hw:{x.check}")

