"""Checks of the NCCL environment against the node: HCA lists, interfaces, GDR level, rails
(RoCE GIDs: ncdoc.checks.roce_gid).

The variable a check judges and the node facts it needs are declared with its rule
(rules/env_node.yaml: only_if_set, needs): the engine calls it only when the variable is set,
and skips the rule, with the reason, when the facts are unknown.
"""

from __future__ import annotations

from ncdoc.checks.env import ev, ib_switched_off
from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.parse import parse_level
from ncdoc.nccl.devices import (find_interfaces, ib_list, is_active, is_loopback, selected_ports, virtual_reason)


def _port_ev(h, p) -> Evidence:
    return Evidence(f"{h.name} port {p.num}: {p.state or '?'} ({p.phys_state or '?'}), {p.link_layer or '?'}",
                    f"hcas/{h.name}/port {p.num}")


def _ib_in_use(ctx: Context) -> bool:
    """False when the env keeps NCCL off the IB transport altogether (ib-disabled-by-env says so)."""
    return not ib_switched_off(ctx)


# ---------------------------------------------------------------- NCCL_IB_HCA

def _partial_listing(ctx: Context) -> str | None:
    """The pasted device listing the HCA inventory came from, when it may not list every device (show_gids
    and ibstatus excerpts, a cut ibv_devinfo), and no complete inventory (live probe, full ibv_devinfo or
    ibstat) is there too; None otherwise."""
    node = [n for n in (ctx.evidence or {}).get("node_evidence", ()) if getattr(n, "tool", None)]
    if not node:
        return None
    partial = [n for n in node if n.tool in ("show_gids", "ibstatus")
               or any("cut short" in x or "without their hca_id" in x for x in n.notes)]
    sources = [x for x in (ctx.snapshot.hcas.status.source or "").split("; ") if x]
    if len(partial) < len(node) or any(not x.startswith("import:") for x in sources):
        return None                 # a complete listing or a live probe is there too
    return f"the {partial[0].tool} listing given"


@check("ib_hca_unknown_device")
def ib_hca_unknown_device(ctx: Context):
    v = ctx.env_map["NCCL_IB_HCA"]
    hcas = ctx.snapshot.hcas.hcas
    lst = ib_list(v.value, ctx.nccl_version)
    names = [h.name for h in hcas]
    partial = _partial_listing(ctx)
    for e in lst.entries:
        hit_devs = [h for h in hcas if (h.name == e.prefix if lst.exact else h.name.startswith(e.prefix))]
        if hit_devs and e.port != -1 and not any(p.num == e.port for h in hit_devs for p in h.ports):
            yield Hit(f"NCCL_IB_HCA entry {e.raw!r}: {', '.join(h.name for h in hit_devs)} has no port {e.port}",
                      (ev(v),), severity="error" if not lst.negate else "warning", subject=e.raw)
        elif not hit_devs:
            known = ", ".join(names) or "none"
            if lst.negate:
                yield Hit(f"NCCL_IB_HCA excludes {e.raw!r}, which matches no RDMA device (devices: {known}): "
                          "the device meant to be excluded is still used", (ev(v),), severity="warning",
                          subject=e.raw)
            elif partial:
                # an excerpt may leave devices out: "not listed" is no proof the node lacks it
                yield Hit(f"NCCL_IB_HCA entry {e.raw!r} is not in {partial} (devices listed: {known}); check "
                          "`ibv_devinfo -l` on the node", (ev(v),), severity="warning", subject=e.raw)
            else:
                yield Hit(f"NCCL_IB_HCA entry {e.raw!r} matches no RDMA device on this node (devices: {known})",
                          (ev(v),), subject=e.raw)
    if not lst.negate and hcas and not selected_ports(hcas, v.value, ctx.nccl_version, active_only=False):
        yield Hit(f"NCCL_IB_HCA={v.value} selects no RDMA device "
                  + (f"in {partial}: if the node has no other device, NCCL falls back to TCP sockets" if partial
                     else "at all: NCCL falls back to TCP sockets"),
                  (ev(v),), severity="warning" if partial else None, subject="NCCL_IB_HCA")


@check("ib_hca_prefix_match")
def ib_hca_prefix_match(ctx: Context):
    v = ctx.env_map["NCCL_IB_HCA"]
    lst = ib_list(v.value, ctx.nccl_version)
    if lst.exact:
        return
    names = [h.name for h in ctx.snapshot.hcas.hcas]
    for e in lst.entries:
        extra = [n for n in names if n.startswith(e.prefix) and n != e.prefix]
        if e.prefix in names and extra:
            verb = "excludes" if lst.negate else "selects"
            yield Hit(f"NCCL_IB_HCA entry {e.raw!r} is a prefix: it also {verb} {', '.join(extra)}",
                      (ev(v),), fix=f"Add '=' for exact names: NCCL_IB_HCA={'^' if lst.negate else ''}="
                                    f"{','.join(x.raw for x in lst.entries)}.",
                      env_patch={"NCCL_IB_HCA": ("^" if lst.negate else "") + "=" +
                                 ",".join(x.raw for x in lst.entries)}, subject=e.raw)


@check("ib_hca_includes_down_port")
def ib_hca_includes_down_port(ctx: Context):
    v = ctx.env_map["NCCL_IB_HCA"]
    lst = ib_list(v.value, ctx.nccl_version)
    if lst.negate:
        return
    chosen = selected_ports(ctx.snapshot.hcas.hcas, v.value, ctx.nccl_version, active_only=False)
    down = [(h, p) for h, p in chosen if p.state is not None and not is_active(p)]
    if not down:
        return
    none_left = len(down) == len(chosen)
    for h, p in down:
        yield Hit(f"NCCL_IB_HCA selects {h.name}:{p.num}, which is {p.state or 'not active'}: NCCL skips it"
                  + ("; no selected port is up, so NCCL falls back to TCP sockets" if none_left else ""),
                  (ev(v), _port_ev(h, p)), severity="error" if none_left else None, subject=f"{h.name}:{p.num}")


@check("nic_count_limited")
def nic_count_limited(ctx: Context):
    v = ctx.env_map["NCCL_IB_HCA"]
    if not _ib_in_use(ctx):
        return                  # IB off: no NIC is used, whatever the node has (ib-disabled-by-env says so)
    ctx.require("hcas", "topology")
    topo = ctx.topology
    rail_nics = {n for nics in topo.rails.values() for n in nics}
    hcas = {h.name: h for h in ctx.snapshot.hcas.hcas}
    usable = {n for n in rail_nics if n in hcas and any(is_active(p) for p in hcas[n].ports)}
    chosen = {h.name for h, _ in selected_ports(ctx.snapshot.hcas.hcas, v.value, ctx.nccl_version)}
    left_out = sorted(usable - chosen)
    if not left_out or not (usable & chosen):
        return                  # nothing left out, or nothing chosen (ib-hca-unknown-device says so)
    gpus = [g for g, nics in sorted(topo.rails.items()) if set(nics) & set(left_out) and not set(nics) & chosen]
    yield Hit(f"NCCL_IB_HCA uses {len(usable & chosen)} of the {len(usable)} rail NICs: it leaves out "
              f"{', '.join(left_out)}" + (f", the nearest NIC of {', '.join(gpus)}" if gpus else ""),
              (ev(v),), subject="NCCL_IB_HCA")


# ---------------------------------------------------------------- NCCL_SOCKET_IFNAME

def _interfaces(ctx: Context):
    env = ctx.env_map
    ifname = env.get("NCCL_SOCKET_IFNAME")
    comm_id = env.get("NCCL_COMM_ID")
    fam = env.get("NCCL_SOCKET_FAMILY")
    family = fam.value if fam is not None and fam.value in ("AF_INET", "AF_INET6") else None
    found, how = find_interfaces(ctx.snapshot.net.interfaces, ifname.value if ifname else None,
                                 comm_id=comm_id.value if comm_id else None, family=family,
                                 version=ctx.nccl_version)
    return ifname, found, how


def _socket_transport(ctx: Context) -> bool:
    """Would NCCL carry data over the Socket transport (all found interfaces), not only bootstrap?"""
    if not _ib_in_use(ctx) or ctx.missing("hcas"):
        return not _ib_in_use(ctx)
    hca = ctx.env_map.get("NCCL_IB_HCA")
    return not selected_ports(ctx.snapshot.hcas.hcas, hca.value if hca else None, ctx.nccl_version)


def _ifname_ev(ifname, how: str) -> tuple[Evidence, ...]:
    return (ev(ifname),) if ifname is not None else (Evidence(f"NCCL_SOCKET_IFNAME unset: {how}", "env"),)


@check("socket_ifname_no_match")
def socket_ifname_no_match(ctx: Context):
    v = ctx.env_map["NCCL_SOCKET_IFNAME"]
    if len(v.value) == 1:
        return                  # NCCL ignores a one-character value (invalid-value says so)
    ctx.require("net")
    ifname, found, how = _interfaces(ctx)
    if found:
        return
    ifs = ctx.snapshot.net.interfaces
    from ncdoc.nccl.parse import parse_list
    lst = parse_list(v.value, max_entries=16, version=ctx.nccl_version)
    named = [n for n in ifs if lst.matches(n.name)]
    if named:
        why = "; ".join(f"{n.name} is {n.operstate or 'not up'}" + ("" if n.addresses else " with no IP address")
                        for n in named)
        msg = f"NCCL_SOCKET_IFNAME={v.value} matches only interfaces NCCL cannot use ({why})"
    else:
        msg = (f"NCCL_SOCKET_IFNAME={v.value} matches no interface on this node "
               f"(interfaces: {', '.join(n.name for n in ifs) or 'none'})")
    yield Hit(msg + ": bootstrap fails with 'no socket interface found'", (ev(v),), subject="NCCL_SOCKET_IFNAME")


@check("socket_ifname_loopback_by_name")
def socket_ifname_loopback_by_name(ctx: Context):
    """Without node facts or a log (`ncdoc lint` of an env alone): NCCL_SOCKET_IFNAME naming only lo,
    the loopback interface every Linux node has, is wrong on any of them. Skipped when the node's
    interfaces or a log can decide (the other checks of the rule do), or when the value says less."""
    why = ctx.missing("net")
    if why is None:
        raise Skip("the node's interfaces decide")
    if any(ctx.evidence.values()):
        raise Skip(why)          # with a log, the log says whether the job spans nodes (ev_socket_ifname_loopback)
    v = ctx.env_map.get("NCCL_SOCKET_IFNAME")
    if v is None or not v.value:
        raise Skip(why)
    from ncdoc.nccl.parse import parse_list
    lst = parse_list(v.value, max_entries=16, version=ctx.nccl_version)
    if lst.negate or not lst.entries or any(e.prefix != "lo" for e in lst.entries):
        raise Skip(why)
    yield Hit(f"NCCL_SOCKET_IFNAME={v.value} selects only lo, the loopback interface of every Linux node: NCCL "
              "bootstraps over 127.0.0.1, which ranks on other nodes cannot reach", (ev(v),), subject="lo")


@check("socket_ifname_loopback")
def socket_ifname_loopback(ctx: Context):
    ifname, found, how = _interfaces(ctx)
    if not found:
        return
    if is_loopback(found[0]):
        yield Hit(f"NCCL bootstraps over {found[0].name} (loopback, {how}): ranks on other nodes cannot reach it",
                  _ifname_ev(ifname, how), severity="error", subject=found[0].name)
    elif _socket_transport(ctx):
        for n in found[1:]:
            if is_loopback(n):
                yield Hit(f"{n.name} (loopback) is among the interfaces the Socket transport uses ({how})",
                          _ifname_ev(ifname, how), severity="warning", subject=n.name)


@check("socket_ifname_virtual")
def socket_ifname_virtual(ctx: Context):
    ifname, found, how = _interfaces(ctx)
    if not found:
        return
    ifs = ctx.snapshot.net.interfaces
    boot = found[0]
    why = None if is_loopback(boot) else virtual_reason(boot, ifs)
    if why:
        yield Hit(f"NCCL bootstraps over {boot.name}, {why} ({how}): traffic between nodes may not route, or "
                  "crosses a software bridge", _ifname_ev(ifname, how), subject=boot.name)
    for n in (found[1:] if _socket_transport(ctx) else ()):
        w = None if is_loopback(n) else virtual_reason(n, ifs)
        if w:
            yield Hit(f"{n.name}, {w}, is among the interfaces NCCL uses ({how})", _ifname_ev(ifname, how),
                      severity="info", subject=n.name)


# ---------------------------------------------------------------- NCCL_NET_GDR_LEVEL

# nvidia-smi path names -> NCCL path types (NODE is NCCL's PHB: through the CPU, one NUMA node)
_NCCL_PATH = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_ORDER = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")


@check("gdr_level_excludes_nic")
def gdr_level_excludes_nic(ctx: Context):
    v = ctx.env_map["NCCL_NET_GDR_LEVEL"]
    level, _how = parse_level(v.value, version=ctx.nccl_version)
    if level is None:
        return                      # invalid-value reports an ignored level
    ctx.require("topology")
    topo = ctx.topology
    off = []
    for g in topo.gpus():
        near = topo.nearest_nic(g.label)
        if not near:
            continue
        nic, path = near
        p = _NCCL_PATH.get(path.upper())
        if p and _ORDER.index(p) > _ORDER.index(level):
            off.append((g.label, nic, path))
    if off:
        gpus = [g for g, _, _ in off]
        paths = sorted({p for _, _, p in off})
        yield Hit(f"NCCL_NET_GDR_LEVEL={v.value} ({level}) is closer than the GPU-NIC path ({'/'.join(paths)}) of "
                  f"{', '.join(gpus)}: GPUDirect RDMA is off for them, data is staged through host memory",
                  (ev(v), *(Evidence(f"{g} -> {n}: {p}", "topology") for g, n, p in off)),
                  env_patch={"NCCL_NET_GDR_LEVEL": None}, subject=",".join(gpus))
