"""Link health: RDMA port state, rate, error counters, link layers, RoCE MTU, PCIe link width/speed.

The facts each check reads (hcas, pci) are declared with its rule (rules/network.yaml,
rules/topology.yaml): the engine calls it only when they are known.
"""

from __future__ import annotations

from ncdoc.engine.rules import Context, check
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.nccl.devices import is_active, link_layer, selected_ports
from ncdoc.readers.numbers import float_or_none, is_digits

# Counters that only grow on physical or link-level faults (not congestion: port_xmit_wait,
# port_xmit_discards are left out).
ERROR_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
                  "port_rcv_remote_physical_errors", "local_link_integrity_errors",
                  "excessive_buffer_overrun_errors")


def _compute(ctx: Context) -> set[str] | None:
    if ctx.missing("topology"):
        return None
    return {n for nics in ctx.topology.rails.values() for n in nics}


def _port_ev(h, p) -> Evidence:
    rate = p.rate_text or (f"{p.rate_gbps:g} Gb/s" if p.rate_gbps else "rate ?")
    return Evidence(f"{h.name} port {p.num}: {p.state or '?'} / {p.phys_state or '?'}, {rate}, "
                    f"{p.link_layer or '?'}", f"hcas/{h.name}/port {p.num}")


# Mellanox/NVIDIA PCI device ids of SR-IOV virtual functions (Connect-IB to ConnectX-5 Ex, ConnectX-6,
# and 0x101e, the generic mlx5 VF of ConnectX-6 Dx and later); the physical functions are the odd ids.
_MLX_VF_IDS = {4114, 4116, 4118, 4120, 4122, 4124, 4126}


def _is_vf(h) -> bool:
    if h.vendor_part_id in _MLX_VF_IDS:
        return True
    t = (h.hca_type or "").upper()
    return t.startswith("MT") and is_digits(t[2:]) and int(t[2:]) in _MLX_VF_IDS


def _zero_guid(h) -> bool:
    g = (h.node_guid or "").lower().replace("0x", "").replace(":", "")
    return bool(g) and not g.strip("0")


def _why_down(h, p) -> tuple[str, str | None]:
    """(the likely cause, in words; a fix more precise than the rule's, or None)."""
    phys = (p.phys_state or "").lower()
    state = (p.state or "").upper()
    if link_layer(p) != "Ethernet" and (phys == "linkup" or state in ("INIT", "ARMED")):
        # the cable and the peer are fine: the port waits for the subnet manager to activate it
        link = "its physical link is up, so the cable is fine: " if phys == "linkup" else ""
        if _is_vf(h):
            guid = " (its node GUID is all zeros: none was assigned)" if _zero_guid(h) else ""
            return (f"{link}it is an SR-IOV virtual function{guid}, which stays down until a subnet manager with "
                    "virtualization enabled activates it",
                    "Enable virtualization in the subnet manager (OpenSM: virt_enabled 2) and give the VF a "
                    "node/port GUID (ip link set <pf> vf <n> node_guid/port_guid ..., or the SR-IOV device plugin).")
        sm = " (SM lid 0: it has never seen one)" if p.sm_lid == 0 else ""
        return (f"{link}the subnet manager has not activated the port{sm}",
                "Check the subnet manager (sminfo; is opensm or the switch SM running and does it see this port?).")
    if phys == "disabled":
        return "the port is disabled (administratively, or no cable/transceiver detected)", None
    if phys == "polling":
        return "no link partner: no cable, a bad cable/transceiver or the switch port is down", None
    return "", None


@check("port_down")
def port_down(ctx: Context):
    compute = _compute(ctx)
    hcas = ctx.snapshot.hcas.hcas
    known = [p for h in hcas for p in h.ports if p.state is not None]
    if not known and any(h.ports for h in hcas):
        raise Skip("port states unknown (the evidence lists ports without their state)")
    hca_env = ctx.env_map.get("NCCL_IB_HCA")
    usable = selected_ports(hcas, hca_env.value if hca_env else None, ctx.nccl_version)   # active and selected
    for h in hcas:
        for p in h.ports:
            if is_active(p) or p.state is None:
                continue            # up, or state not known
            cause, fix = _why_down(h, p)
            head = f"{h.name} port {p.num} is {p.state or 'not active'} ({p.phys_state or 'phys state ?'})"
            head += f": {cause}" if cause else ""
            if not usable:
                up_elsewhere = [f"{x.name}:{q.num}" for x in hcas for q in x.ports if is_active(q)]
                unknown = [x.name for x in hcas if x is not h and (not x.ports or any(q.state is None for q in x.ports))]
                fallback = ("it finds no IB device and falls back to TCP sockets between nodes (init fails instead "
                            "if NCCL_NET=IB forces the IB network)")
                if hca_env and up_elsewhere:
                    msg = f"{head}. NCCL skips it and NCCL_IB_HCA={hca_env.value} leaves no other active port, so {fallback}"
                elif unknown:
                    msg = (f"{head}. NCCL skips it, and no other port is known to be up (the state of "
                           f"{', '.join(unknown[:4])} is not shown): if none is, {fallback}")
                else:
                    msg = f"{head}. NCCL skips it and no other RDMA port is up, so {fallback}"
                sev = None
            elif compute is not None:
                rail = h.name in compute
                msg = f"{head}. " + ("A GPU's nearest NIC: NCCL skips it and its GPUs send through other NICs" if rail
                                     else "An RDMA port that is no GPU's nearest NIC: NCCL skips it")
                sev = None if rail else "warning"
            elif (p.phys_state or "").lower() == "disabled":
                # a disabled port beside working ones is often one nobody cabled on purpose
                msg = (f"{head}. NCCL skips it and uses the {len(usable)} active port(s); no topology was given to say "
                       "whether GPUs depend on it")
                sev = "warning"
            else:
                msg = (f"{head}. NCCL skips it; if it is a GPU's nearest NIC, that GPU sends through another NIC "
                       "(no topology was given to say)")
                sev = None
            yield Hit(msg, (_port_ev(h, p),), fix=fix, severity=sev, subject=f"{h.name}:{p.num}")


# Plain string parsing, no `re`: this module is on the `ncdoc check` path, whose start-up
# budget cannot pay for the regex machinery.

def _leading(s: str, ok) -> str:
    """The longest prefix of `s` whose characters all pass `ok`."""
    i = 0
    while i < len(s) and ok(s[i]):
        i += 1
    return s[:i]


def _width(w: str | None) -> int | None:
    digits = _leading(w or "", str.isdecimal)             # regex (\d{1,20}(?!\d)) at the start
    return int(digits) if digits else None


@check("link_below_rated_speed")
def link_below_rated_speed(ctx: Context):
    ports = [(h, p) for h in ctx.snapshot.hcas.hcas for p in h.ports if is_active(p)]
    groups: dict[tuple, list] = {}
    for h, p in ports:
        groups.setdefault((h.hca_type or h.vendor_part_id or h.board_id, link_layer(p), h.board_id), []).append((h, p))
    for members in groups.values():
        best = max((p.rate_gbps or 0) for _, p in members)
        widest = max((_width(p.width) or 0) for _, p in members)
        for h, p in members:
            w = _width(p.width)
            if p.rate_gbps and best and p.rate_gbps < best:
                yield Hit(f"{h.name} port {p.num} runs at {p.rate_gbps:g} Gb/s while identical ports run at "
                          f"{best:g} Gb/s" + (f" (width {p.width} of {widest}X)" if w and w < widest else ""),
                          (_port_ev(h, p),), subject=f"{h.name}:{p.num}")
            elif w and widest and w < widest:
                yield Hit(f"{h.name} port {p.num} trained at width {p.width}, identical ports at {widest}X",
                          (_port_ev(h, p),), subject=f"{h.name}:{p.num}")


@check("link_errors")
def link_errors(ctx: Context):
    counted = False
    for h in ctx.snapshot.hcas.hcas:
        for p in h.ports:
            if not p.counters:
                continue
            counted = True
            bad = {k: p.counters[k] for k in ERROR_COUNTERS if p.counters.get(k)}
            if bad:
                text = ", ".join(f"{k}={v}" for k, v in bad.items())
                yield Hit(f"{h.name} port {p.num} has link error counts ({text}): a flaky cable, transceiver or "
                          "switch port; NCCL sees retries, timeouts or hangs", (Evidence(text, f"hcas/{h.name}/port "
                                                                                          f"{p.num}/counters"),),
                          subject=f"{h.name}:{p.num}")
    if not counted and any(h.ports for h in ctx.snapshot.hcas.hcas):
        raise Skip("port error counters unknown")


@check("mixed_link_layers")
def mixed_link_layers(ctx: Context):
    hca = ctx.env_map.get("NCCL_IB_HCA")
    chosen = selected_ports(ctx.snapshot.hcas.hcas, hca.value if hca else None, ctx.nccl_version)
    layers: dict[str, list[str]] = {}
    for h, p in chosen:
        if link_layer(p):
            layers.setdefault(link_layer(p), []).append(f"{h.name}:{p.num}")
    if len(layers) > 1:
        desc = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(layers.items()))
        how = f"NCCL_IB_HCA={hca.value}" if hca else "NCCL_IB_HCA unset"
        yield Hit(f"NCCL would use InfiniBand and Ethernet (RoCE) ports together ({how}): {desc}. Ports of "
                  "different link layers cannot talk to each other or be merged",
                  (Evidence(desc, "hcas"),), subject="NCCL_IB_HCA")


# the Ethernet MTU a RoCE active MTU corresponds to (the largest IB MTU that fits it with RoCE's headers)
_ETH_MTU_FOR = {1024: "a 1500-byte", 2048: "a 2200-4100-byte", 512: "a 600-1100-byte"}


@check("roce_mtu_mismatch")
def roce_mtu_mismatch(ctx: Context):
    snap = ctx.snapshot
    roce = [(h, p) for h in snap.hcas.hcas for p in h.ports if is_active(p) and link_layer(p) == "Ethernet"]
    compute = _compute(ctx)
    if compute:
        roce = [(h, p) for h, p in roce if h.name in compute] or roce
    if not roce:
        return
    mtus = [p.active_mtu for _, p in roce if p.active_mtu]
    top = max(mtus) if mtus else None
    for h, p in roce:
        netmtu = None
        for n in p.netdevs:
            ni = snap.netif(n)
            if ni and ni.mtu:
                netmtu = ni.mtu
        if p.active_mtu and top and p.active_mtu < top:
            yield Hit(f"{h.name} port {p.num} runs RoCE with MTU {p.active_mtu} while other RoCE ports use {top}"
                      + (f" (its netdev MTU is {netmtu})" if netmtu else "") + ": QPs between them use the smaller "
                      "MTU, and a switch path with a smaller MTU drops packets", (
                          Evidence(f"{h.name}:{p.num} active_mtu {p.active_mtu}, netdev MTU {netmtu or '?'}",
                                   f"hcas/{h.name}/port {p.num}"),), subject=f"{h.name}:{p.num}")
        elif p.active_mtu and p.max_mtu and p.active_mtu < p.max_mtu and (netmtu is None or netmtu < p.max_mtu + 100):
            # RoCE takes the largest IB MTU that fits the netdev's: 1024 under a 1500-byte Ethernet MTU
            why = (f"because its netdev MTU is {netmtu}" if netmtu else
                   f"because its netdev MTU is below {p.max_mtu + 100} (ibv_devinfo does not show it; "
                   f"{p.active_mtu} is what {_ETH_MTU_FOR.get(p.active_mtu, 'a small')} Ethernet MTU allows)")
            yield Hit(f"{h.name} port {p.num} runs RoCE with MTU {p.active_mtu} (the NIC supports {p.max_mtu}) {why}: "
                      "RDMA messages go out in small packets",
                      (Evidence(f"{h.name}:{p.num} active_mtu {p.active_mtu}, max_mtu {p.max_mtu}"
                                + (f", netdev MTU {netmtu}" if netmtu else ""), f"hcas/{h.name}/port {p.num}"),),
                      fix="Set a jumbo MTU (e.g. 9000) on the RoCE netdev and the switch ports.",
                      subject=f"{h.name}:{p.num}")


def _gts(speed: str | None) -> float | None:
    s = (speed or "").lstrip()                             # regex \s*([\d.]+)\s*GT/s at the start
    number = s[:len(s) - len(s.lstrip("0123456789."))]
    value = float_or_none(number) if number else None      # "1.2.3" or 400 digits: no speed
    return value if value is not None and s[len(number):].lstrip().startswith("GT/s") else None


@check("pcie_link_degraded")
def pcie_link_degraded(ctx: Context):
    from ncdoc.topology import normalize_bus_id
    rdma = {normalize_bus_id(h.pci_address) for h in ctx.snapshot.hcas.hcas if h.pci_address} \
        if ctx.snapshot.hcas.status.known else set()
    for d in ctx.snapshot.pci.devices:
        if d.kind not in ("gpu", "nic") or (d.kind == "nic" and normalize_bus_id(d.address) not in rdma):
            continue            # GPUs and RDMA NICs: management NICs are not NCCL's business
        narrow = d.link_width and d.max_link_width and d.link_width < d.max_link_width
        # GPUs drop their PCIe speed when idle (power saving); only NICs are judged on speed
        if d.kind == "nic":
            now_gts, max_gts = _gts(d.link_speed), _gts(d.max_link_speed)
            slow = now_gts and max_gts and now_gts < max_gts
        else:
            slow = False
        if narrow or slow:
            now = f"x{d.link_width} {d.link_speed or '?'}"
            cap = f"x{d.max_link_width} {d.max_link_speed or '?'}"
            # a NIC's link limits only traffic between nodes; a GPU's, its peers on the node too
            yield Hit(f"{d.kind.upper()} {d.address} PCIe link trained at {now}, capable of {cap}: its bandwidth to "
                      "the host and peers is cut", (Evidence(f"{d.address}: {now} (max {cap})", "pci"),),
                      subject=d.address, scope="multi-node" if d.kind == "nic" else None)
