"""Checks of NCCL's RoCE GID choice against the node's GID tables (and, without tables, the log).

NCCL picks one GID per RoCE port (NCCL_IB_GID_INDEX, or its own choice from NCCL 2.21 on; before,
index 0): a link-local or RoCE v1 GID there cannot be routed between subnets, and QPs time out.
"""

from __future__ import annotations

from ncdoc.checks.env import ev
from ncdoc.checks.env_node import _ib_in_use, _port_ev
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.devices import choose_gid, link_layer, selected_ports


def _roce_ports(ctx: Context):
    """The RoCE ports NCCL would use whose GID table is known (ports of unknown state included)."""
    ctx.require("hcas")
    if not _ib_in_use(ctx):
        return []
    hca = ctx.env_map.get("NCCL_IB_HCA")
    ports = [(h, p) for h, p in selected_ports(ctx.snapshot.hcas.hcas, hca.value if hca else None,
                                                ctx.nccl_version, unknown_state=True)
             if link_layer(p) == "Ethernet"]
    known = [(h, p) for h, p in ports if p.gids]
    if ports and not known:
        raise Skip("the RoCE ports' GID tables are unknown")
    return known


def _gid_env(ctx: Context) -> dict[str, str]:
    return {k: v.value for k, v in ctx.env_map.items() if k.startswith("NCCL_IB_")}


def _version_note(ctx: Context) -> str:
    return "" if ctx.nccl_version else " [assumes NCCL >= 2.21 (version unknown)]"


def _judged(ctx: Context, explicit: bool, msg: str, evidence, subject: str) -> Hit:
    """The finding on the GID NCCL uses: as the rule says when the index is set or the NCCL version known;
    without either it rests on a presumed NCCL (2.21+ chooses the GID itself), so it says it is inconclusive."""
    if explicit or ctx.nccl_version:
        return Hit(msg + ("" if explicit else _version_note(ctx)), evidence, subject=subject)
    return Hit("inconclusive: " + msg + " - if NCCL is 2.21 or newer, which chooses the GID itself; no input shows "
               "the NCCL version or an NCCL_IB_GID_INDEX", evidence,
               fix="Give the job's NCCL log (its 'NCCL version' line) or the NCCL_IB_GID_INDEX the job sets (--env).",
               severity="info", subject=subject)


def _ports(group) -> str:
    names = [f"{h.name}:{p.num}" for h, p, _idx, _gid in group]
    return ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:3])} and {len(names) - 3} more"


def _group_ev(ctx: Context, group) -> tuple[Evidence, ...]:
    out = []
    v = ctx.env_map.get("NCCL_IB_GID_INDEX")
    if v is not None:
        out.append(ev(v))
    for h, p, idx, gid in group:
        text = f"{h.name} port {p.num} GID[{idx}] = {gid.gid} ({gid.type or 'type unknown'})" if gid else \
            f"{h.name} port {p.num} GID[{idx}] is empty"
        out.append(Evidence(text, f"hcas/{h.name}/port {p.num}/gids"))
    return tuple(out)


def _subject(group) -> str:
    return ",".join(f"{h.name}:{p.num}" for h, p, _i, _g in group)


def _v2_index(ports) -> int | None:
    """The one GID index that is a routable RoCE v2 IPv4 GID on all these ports, the index to suggest."""
    better = {g.index for p in ports for g in p.gids if g.roce_version == 2 and g.ipv4 and not g.link_local}
    return min(better) if len(better) == 1 else None


def _choices(ctx: Context, want) -> dict:
    """Ports grouped by (GID index, what is wrong) for the ports where `want(how, gid)` says what is wrong."""
    env = _gid_env(ctx)
    groups: dict = {}
    for h, p in _roce_ports(ctx):
        idx, gid, how = choose_gid(p, env, ctx.nccl_version)
        what = want(how, gid)
        if what:
            groups.setdefault((idx, what), []).append((h, p, idx, gid))
    return groups


@check("roce_gid_link_local")
def roce_gid_link_local(ctx: Context):
    explicit = ctx.env_map.get("NCCL_IB_GID_INDEX") is not None

    def wrong(how, gid):
        if how.startswith("default index 0"):
            return None             # roce-gid-index-unset reports this case
        if gid is None:
            return "empty"
        return "link-local" if gid.link_local else None
    for (idx, what), group in sorted(_choices(ctx, wrong).items()):
        if what == "empty":
            msg = f"{_ports(group)}: NCCL_IB_GID_INDEX={idx} points at an empty GID slot"
        elif explicit:
            msg = (f"{_ports(group)}: NCCL_IB_GID_INDEX={idx} selects a link-local GID (fe80::): RoCE v2 traffic "
                   "with it cannot be routed between subnets")
        else:
            netdevs = sorted({n for _h, p, _i, _g in group for n in p.netdevs})
            msg = (f"{_ports(group)} {'has' if len(group) == 1 else 'have'} no routable RoCE GID, so NCCL falls back to the link-local GID[{idx}]: "
                   f"the RoCE netdev ({', '.join(netdevs) or '?'}) or its bond/master needs an IP address")
        yield _judged(ctx, explicit, msg, _group_ev(ctx, group), _subject(group))


@check("roce_gid_v1")
def roce_gid_v1(ctx: Context):
    def wrong(how, gid):
        if how.startswith("default index 0") or gid is None or gid.link_local:
            return None
        return how if gid.roce_version == 1 else None
    for (idx, how), group in sorted(_choices(ctx, wrong).items()):
        fix_idx = _v2_index(p for _h, p, _i, _g in group)
        msg = (f"{_ports(group)} {'uses' if len(group) == 1 else 'use'} GID[{idx}], a RoCE v1 GID ({how}): RoCE v1 is "
               "not routable and gets no ECN congestion control")
        explicit = ctx.env_map.get("NCCL_IB_GID_INDEX") is not None
        if not explicit and not ctx.nccl_version:
            yield _judged(ctx, explicit, msg, _group_ev(ctx, group), _subject(group))
            continue
        yield Hit(msg + ("" if explicit else _version_note(ctx)), _group_ev(ctx, group),
                  fix=f"Set NCCL_IB_GID_INDEX={fix_idx} (RoCE v2, IPv4)." if fix_idx is not None else None,
                  env_patch={"NCCL_IB_GID_INDEX": str(fix_idx)} if fix_idx is not None else {},
                  subject=_subject(group))


@check("roce_gid_index_unset")
def roce_gid_index_unset(ctx: Context):
    set_to = ctx.env_map.get("NCCL_IB_GID_INDEX")
    if set_to is not None and set_to.value != "":
        return                      # an empty value is NCCL's default, as if unset
    try:
        ports = _roce_ports(ctx)
    except Skip as unknown_tables:
        ports = []
        if not _roce_seen(ctx):
            raise unknown_tables
    if not ports:
        yield from _gid_index_unset_without_tables(ctx)
        return
    version = ctx.nccl_version
    if not version:
        raise Skip("NCCL version unknown: NCCL before 2.21 uses GID index 0 when NCCL_IB_GID_INDEX is unset")

    def wrong(how, gid):
        return "index0" if how.startswith("default index 0") else None
    for (idx, _what), group in sorted(_choices(ctx, wrong).items()):
        kinds = sorted({("link-local " if g.link_local else "") + (g.type or "type unknown")
                        for _h, _p, _i, g in group if g is not None}) or ["empty"]
        fix_idx = _v2_index(p for _h, p, _i, _g in group)
        yield Hit(f"{_ports(group)}: NCCL {version} (< 2.21) uses GID index 0 ({', '.join(kinds)}) because "
                  "NCCL_IB_GID_INDEX is unset", _group_ev(ctx, group),
                  fix=f"Set NCCL_IB_GID_INDEX={fix_idx} (the RoCE v2 IPv4 GID) or upgrade NCCL to 2.21+."
                  if fix_idx is not None else "Set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 GID (see show_gids).",
                  env_patch={"NCCL_IB_GID_INDEX": str(fix_idx)} if fix_idx is not None else {},
                  subject=_subject(group))


def _roce_seen(ctx: Context) -> list[tuple[str, Evidence]]:
    """RoCE ports NCCL uses, known without their GID tables: "NET/IB : Using [0]mlx5_0:1/RoCE" in a
    log, or a port whose link layer is Ethernet in an RDMA device listing."""
    out: list[tuple[str, Evidence]] = []
    for log in ctx.logs:
        from ncdoc.checks.evidence_common import cite_kind
        names = [d.name for d in getattr(log, "net_devices", ()) or ()
                 if getattr(d, "transport", None) == "IB" and getattr(d, "link_layer", None) == "RoCE"]
        if names:
            cited = cite_kind(log, "net_devices", limit=1)
            out.extend((n, cited[0] if cited else Evidence(f"NET/IB device {n} (RoCE)", log.source)) for n in names)
    if not out and not ctx.missing("hcas") and _ib_in_use(ctx):
        hca = ctx.env_map.get("NCCL_IB_HCA")
        out = [(f"{h.name}:{p.num}", _port_ev(h, p))
               for h, p in selected_ports(ctx.snapshot.hcas.hcas, hca.value if hca else None, ctx.nccl_version,
                                          unknown_state=True) if link_layer(p) == "Ethernet" and not p.gids]
    return out


def _gid_index_unset_without_tables(ctx: Context):
    """The version rule needs no GID table: NCCL < 2.21 on RoCE with NCCL_IB_GID_INDEX unset uses index 0,
    the link-local RoCE v1 GID on a Mellanox/NVIDIA NIC."""
    roce = _roce_seen(ctx)
    if not roce or not _ib_in_use(ctx):
        return                      # (no import before here: `ncdoc check` on an IB node ends at this line)
    from ncdoc.checks.evidence_common import cite_problems, env_value
    from ncdoc.nccl.parse import version_cmp
    launched = [lf.get("NCCL_IB_GID_INDEX") for lf in ctx.evidence.get("launch", ()) if hasattr(lf, "get")]
    if env_value(ctx, "NCCL_IB_GID_INDEX") not in (None, "") or any(v not in (None, "") for v in launched):
        return
    version = ctx.nccl_version
    if not version:
        raise Skip("NCCL version unknown: NCCL before 2.21 uses GID index 0 when NCCL_IB_GID_INDEX is unset")
    if version_cmp(version, "2.21") >= 0:
        return                      # 2.21 and later select a RoCE v2 IPv4 GID themselves
    used = {str(k) for log in ctx.logs for k in ((getattr(log, "ib", None) or {}).get("gid_index") or {})}
    if used and "0" not in used:
        return                      # the log's QP lines show another GID index in use
    names = list(dict.fromkeys(n for n, _ in roce))
    msg = (f"{', '.join(names[:4])}{' and more' if len(names) > 4 else ''}: NCCL {version} (< 2.21) uses GID index 0 "
           "on RoCE because NCCL_IB_GID_INDEX is unset; on Mellanox/NVIDIA NICs that is the link-local RoCE v1 GID, "
           "which is neither routable nor congestion-controlled")
    evidence = [e for _, e in roce[:2]]
    retry = [(log, p) for log in ctx.logs for p in log.problems_of("ib_completion_error") if p.code == 12]
    severity = "warning"
    if retry:
        msg += (f". The log shows IB completion error 12 (transport retry counter exceeded) {len(retry)} time(s): "
                "what an unroutable GID gives, so this is the likely cause")
        severity = "error"
        evidence += list(cite_problems(retry[0][0], [p for _, p in retry[:1]]))
    yield Hit(msg, tuple(evidence), severity=severity,
              fix="Set NCCL_IB_GID_INDEX to the RoCE v2 IPv4 GID (show_gids; usually 3), or upgrade NCCL to 2.21+.",
              subject=",".join(names))


@check("roce_gid_table_sparse")
def roce_gid_table_sparse(ctx: Context):
    """NCCL's own GID choice walks the table from index 0: empty slots before the first GID can stop it."""
    set_to = ctx.env_map.get("NCCL_IB_GID_INDEX")
    explicit = set_to is not None and set_to.value != ""
    failed = [(log, p) for log in ctx.logs for p in log.problems_of("roce_gid_type_unreadable")]
    if failed:
        from ncdoc.checks.evidence_common import cite_problems
        log = failed[0][0]
        yield Hit("NCCL could not read the RoCE version of a GID ('read failed in ncclIbRoceGetVersionNum'): "
                  "the port's GID table has empty slots, typical of Kubernetes pods whose macvlan NICs own "
                  "only some GID indexes" + (f"; NCCL_IB_GID_INDEX={set_to.value} names one of them" if explicit
                                             else ", and NCCL's own GID search stops at the first empty one"),
                  cite_problems(log, [p for lg, p in failed if lg is log][:2]), severity="error",
                  subject="NCCL_IB_GID_INDEX")
        return
    if explicit:
        return                      # an explicit index skips NCCL's search over the table
    if not ctx.logs:
        ctx.require("hcas")         # with a log, its lines are the evidence: no listing, nothing more to say
    if ctx.missing("hcas"):
        return
    sparse = [(h, p) for h, p in _roce_ports(ctx) if p.gids and min(g.index for g in p.gids) > 0]
    if not sparse:
        return
    fix_idx = _v2_index(p for _h, p in sparse)
    names = [f"{h.name}:{p.num}" for h, p in sparse]
    yield Hit(f"{', '.join(names[:4])}{' and more' if len(names) > 4 else ''}: the GID table starts at index "
              f"{min(g.index for _h, p in sparse for g in p.gids)} (the slots below are empty) and "
              "NCCL_IB_GID_INDEX is unset: NCCL's own GID search can fail on such a table ('read failed in "
              "ncclIbRoceGetVersionNum') or pick a link-local GID",
              tuple(Evidence(f"{h.name} port {p.num} GID[{g.index}] = {g.gid} ({g.type or 'type unknown'}), the "
                             "first one", f"hcas/{h.name}/port {p.num}/gids")
                    for h, p in sparse[:4] for g in (min(p.gids, key=lambda x: x.index),)),
              fix=f"Set NCCL_IB_GID_INDEX={fix_idx} (the RoCE v2 IPv4 GID)." if fix_idx is not None else None,
              env_patch={"NCCL_IB_GID_INDEX": str(fix_idx)} if fix_idx is not None else {},
              subject=",".join(names))

