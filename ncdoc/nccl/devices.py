"""What NCCL would pick on a node: IP interfaces, RDMA ports, RoCE GIDs.

Pure functions over Snapshot parts, mirroring NCCL's selection code (nccl_facts.md 2.1-2.3):
`ncclFindInterfaces` (default search order when NCCL_SOCKET_IFNAME is unset), the IB device
filter of net_ib/init.cc, and `ncclIbGetGidIndex` / `ncclUpdateGidIndex` for RoCE.
"""

from __future__ import annotations

from ncdoc.nccl.parse import LATEST, NcclList, parse_list, strtoll, version_cmp

# ---------------------------------------------------------------- IP interfaces
# Addresses are classified by hand: the stdlib ipaddress module is only imported for the rare
# subnet questions (NCCL_COMM_ID, NCCL_IB_ADDR_RANGE), keeping `ncdoc check` fast.


def _addrs(netif) -> list[tuple[int, str]]:
    """(IP version, address without prefix length or zone) for each address of an interface."""
    out = []
    for a in netif.addresses:
        addr = a.split("/")[0].split("%")[0].strip().lower()
        if addr:
            out.append((6 if ":" in addr else 4, addr))
    return out


def _loopback(v: int, addr: str) -> bool:
    return addr.startswith("127.") if v == 4 else addr in ("::1", "0:0:0:0:0:0:0:1")


def _link_local(v: int, addr: str) -> bool:
    if v == 4:
        return addr.startswith("169.254.")
    head = addr.split(":", 1)[0]
    try:
        return head != "" and int(head, 16) & 0xFFC0 == 0xFE80      # fe80::/10
    except ValueError:
        return False


def has_address(netif, family: str | None = None) -> bool:
    """NCCL lists an interface once it has an AF_INET/AF_INET6 address (IPv6 loopback is skipped)."""
    for v, addr in _addrs(netif):
        if v == 6 and _loopback(v, addr):
            continue
        if family == "AF_INET" and v != 4:
            continue
        if family == "AF_INET6" and v != 6:
            continue
        return True
    return False


def link_local_only(netif) -> bool:
    addrs = [(v, a) for v, a in _addrs(netif) if not _loopback(v, a)]
    return bool(addrs) and all(_link_local(v, a) for v, a in addrs)


def is_loopback(netif) -> bool:
    return netif.kind == "loopback" or netif.name == "lo" or any(_loopback(v, a) for v, a in _addrs(netif))


def is_running(netif) -> bool:
    # IFF_RUNNING: operstate "up"; loopback and some virtual links report "unknown" while running
    return (netif.operstate or "").lower() in ("up", "unknown")


def usable(netif, version: str | None, family: str | None = None) -> bool:
    """Would NCCL `version` list this interface at all?"""
    if not has_address(netif, family):
        return False
    if version_cmp(version or LATEST, (2, 28, 3)) >= 0 and not is_running(netif):
        return False
    return True


def _in_subnet(netif, addr: str) -> bool:
    import ipaddress
    try:
        target = ipaddress.ip_address(addr)
    except ValueError:
        return False
    nets = []
    for a in netif.addresses:
        try:
            nets.append(ipaddress.ip_interface(a.split("%")[0]).network)
        except ValueError:
            continue
    return any(n.version == target.version and target in n for n in nets)


def find_interfaces(interfaces, ifname: str | None, *, comm_id: str | None = None,
                    family: str | None = None, version: str | None = None) -> tuple[list, str]:
    """(interfaces NCCL would use, in order; how it chose them) as `ncclFindInterfaces` does.

    The bootstrap uses the first one; the Socket transport uses all (up to 16).
    """
    key = (ifname, comm_id, family, version)
    kept = _FOUND.get(key)
    if kept is not None and kept[0] is interfaces:
        return list(kept[1]), kept[2]
    found, how = _find_interfaces(interfaces, ifname, comm_id, family, version)
    if type(interfaces) is tuple:       # as for _SELECTED: a snapshot's interfaces, asked by several rules
        if len(_FOUND) >= 32:
            _FOUND.clear()
        _FOUND[key] = (interfaces, tuple(found), how)
    return found, how


_FOUND: dict = {}


def _find_interfaces(interfaces, ifname, comm_id, family, version) -> tuple[list, str]:
    cands = [n for n in interfaces if usable(n, version, family)]
    if ifname is not None and len(ifname) > 1:
        lst = parse_list(ifname, max_entries=16, version=version)
        return [n for n in cands if lst.matches(n.name)][:16], f"NCCL_SOCKET_IFNAME={ifname}"
    steps: list[tuple[str, NcclList | None]] = [("ib", parse_list("ib"))]
    if comm_id:
        steps.append(("comm-id-subnet", None))
    excl = "^docker,lo,virbr" if version_cmp(version or LATEST, (2, 28, 3)) >= 0 else "^docker,lo"
    steps += [(excl, parse_list(excl)), ("docker", parse_list("docker")), ("lo", parse_list("lo")),
              ("virbr", parse_list("virbr"))]
    for how, lst in steps:
        if lst is None:
            host = comm_id.rsplit(":", 1)[0].strip("[]")
            found = [n for n in cands if _in_subnet(n, host)]
        else:
            found = [n for n in cands if lst.matches(n.name)]
        if found:
            return found[:16], f"default search ({how})"
    return [], "default search (nothing found)"


VIRTUAL_KINDS = ("docker", "veth", "virbr", "tun", "virtual")


def virtual_reason(netif, interfaces=()) -> str | None:
    """Why an interface is a poor choice for NCCL traffic between nodes, or None."""
    if netif.kind in VIRTUAL_KINDS:
        return f"a {netif.kind} interface"
    if netif.kind == "bridge":
        slaves = [s for s in interfaces if s.name in netif.slaves or s.master == netif.name]
        if not any(s.kind in ("physical", "bond", "vlan") for s in slaves):
            return "a bridge with no physical port"
    if link_local_only(netif):
        return "an interface with only link-local addresses"
    return None


# ---------------------------------------------------------------- RDMA ports

def ib_list(ib_hca: str | None, version: str | None) -> NcclList:
    from ncdoc.nccl.parse import ib_hca_max_entries
    return parse_list(ib_hca or "", max_entries=ib_hca_max_entries(version), version=version)


def is_active(port) -> bool:
    return (port.state or "").upper() in ("ACTIVE", "ACTIVE_DEFER")


def link_layer(port) -> str | None:
    """The port's link layer; when a pasted excerpt lacks it, what the other fields imply.

    RoCE GID types ("RoCE v2", "IB/RoCE v1") mean Ethernet; an ACTIVE InfiniBand port always has
    a LID from the subnet manager, so an ACTIVE port with LID 0 is Ethernet, and one with a LID is IB.
    """
    if port.link_layer:
        return port.link_layer
    if any(g.type and "RoCE" in g.type for g in port.gids):
        return "Ethernet"
    if is_active(port) and port.lid is not None:
        return "Ethernet" if port.lid == 0 else "InfiniBand"
    return None


def selected_ports(hcas, ib_hca: str | None, version: str | None, *, active_only: bool = True,
                   unknown_state: bool = False):
    """[(hca, port)] NCCL's IB transport would use: active IB/RoCE ports matching NCCL_IB_HCA.

    unknown_state: also keep ports whose state is not known (pasted GID tables, partial evidence).
    """
    key = (ib_hca, version, active_only, unknown_state)
    kept = _SELECTED.get(key)
    if kept is not None and kept[0] is hcas:
        return list(kept[1])
    lst = ib_list(ib_hca, version)
    out = []
    for h in hcas:
        for p in h.ports:
            if active_only and not is_active(p) and not (unknown_state and p.state is None):
                continue
            if link_layer(p) not in ("InfiniBand", "Ethernet", None):
                continue
            if lst.matches(h.name, p.num):
                out.append((h, p))
    if type(hcas) is tuple:             # a snapshot's (immutable) HCAs: the next rule asking gets this answer
        if len(_SELECTED) >= 32:
            _SELECTED.clear()
        _SELECTED[key] = (hcas, tuple(out))
    return out


# (NCCL_IB_HCA, version, flags) -> (the HCAs asked about, the ports chosen): a check asks the same
# question in a dozen rules. Kept only for a tuple of HCAs (a snapshot's, which cannot change) and
# only while it is the very tuple asked about again; each caller gets its own list.
_SELECTED: dict = {}


# ---------------------------------------------------------------- RoCE GID choice

def _gid_family(gid) -> str:
    return "AF_INET" if gid is not None and gid.ipv4 else "AF_INET6"


def _gid_valid(gid) -> bool:
    if gid is None:
        return False
    configured = any(int(x, 16) for x in gid.gid.split(":")[4:]) if ":" in gid.gid else False
    return configured and not gid.link_local


def _in_range(gid, family: str, rng: str | None) -> bool:
    if not rng or "/" not in rng:
        return True
    import ipaddress
    try:
        net = ipaddress.ip_network(rng, strict=False)
    except ValueError:
        return True                 # NCCL ignores a range it cannot read
    if gid is None:
        return False
    if family == "AF_INET":
        return gid.ipv4 is not None and net.version == 4 and ipaddress.ip_address(gid.ipv4) in net
    try:
        return net.version == 6 and ipaddress.ip_address(gid.gid) in net
    except ValueError:
        return False


def choose_gid(port, env: dict[str, str], version: str | None) -> tuple[int, object, str]:
    """(GID index NCCL uses on a RoCE port, the Gid or None when that slot is empty, how).

    `env` maps NCCL_IB_* names to values. Before 2.21 an unset NCCL_IB_GID_INDEX meant 0.
    """
    table = {g.index: g for g in port.gids}
    raw = env.get("NCCL_IB_GID_INDEX")
    parsed = strtoll(raw) if raw not in (None, "") else None
    idx = parsed.value if parsed is not None and parsed.value is not None else None   # overflow: default
    modern = version_cmp(version or LATEST, (2, 21)) >= 0
    if idx is None:
        idx = -1 if modern else 0
    if idx >= 0:
        return idx, table.get(idx), ("NCCL_IB_GID_INDEX" if raw not in (None, "") else "default index 0 (NCCL < 2.21)")
    fam = env.get("NCCL_IB_ADDR_FAMILY") or "AF_INET"
    if fam not in ("AF_INET", "AF_INET6"):
        fam = "AF_INET"
    rng = env.get("NCCL_IB_ADDR_RANGE")
    ver_raw = env.get("NCCL_IB_ROCE_VERSION_NUM")
    user_ver = strtoll(ver_raw).value if ver_raw else 2
    g = 0
    n = (max(table) + 1) if table else 0
    for c in range(1, n):
        gid, cand = table.get(g), table.get(c)
        cfam = _gid_family(cand)
        if cfam != _gid_family(gid) and cfam == fam and _in_range(cand, fam, rng):
            g = c
            continue
        if cfam != fam or not _gid_valid(cand) or not _in_range(cand, fam, rng):
            continue
        gv = gid.roce_version if gid else None
        cv = cand.roce_version
        if (gv != cv or not _gid_valid(gid)) and cv == user_ver:
            g = c
    return g, table.get(g), "auto-selected (NCCL >= 2.21)"


__all__ = ["has_address", "link_local_only", "is_running", "usable", "find_interfaces", "VIRTUAL_KINDS",
           "virtual_reason", "is_loopback", "ib_list", "is_active", "link_layer", "selected_ports", "choose_gid"]
