"""The node's topology as a tree with a few cross links, in the tiers a reader scans.

Tiers, left to right: NUMA nodes (CPU sockets) -> PCIe host bridges (root complexes) -> PCIe
switches (nested switches one tier each) -> GPUs and NICs. A PCIe switch is its upstream port
with its downstream ports, as NCCL and nvidia-smi count it (ncdoc.topology); root ports are
folded into their host bridge. Cross links: each GPU's rail to its nearest NIC(s), with NCCL's
path type (PIX/PXB/PHB/NODE/SYS); NVLink to the NVSwitch fabric (or GPU to GPU) as NV#.

Marks a reader must not miss: a port that is not ACTIVE, a port slower than its peers, a PCIe
link trained below its maximum width or speed, a fabric manager that is not running (all "bad");
a NIC that NCCL_IB_HCA leaves out ("excluded").

When the node came as an imported `nvidia-smi topo -m` matrix there is no PCI tree: devices that
are PIX to each other are drawn under one switch marked as inferred, the rest under their NUMA node.

Every id here is made by this module ("n3"), never taken from an input, so renderers can put ids
into SVG, DOT and Mermaid without escaping them; labels and details are input text and must be
escaped by each renderer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ncdoc.topology import Topology, normalize_bus_id
from ncdoc.readers.numbers import is_digits

KINDS = ("socket", "hostbridge", "switch", "gpu", "nic", "nvswitch")
PATH_COLOURS_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class TNode:
    id: str                                  # made here ("n0"): safe in any output format
    kind: str                                # one of KINDS
    label: str                               # "GPU0", "NIC3", "NUMA node 0", "PCIe switch 0000:16:00.0"
    detail: str = ""                         # "NVIDIA H100 80GB HBM3", "mlx5_0 · 400 Gb/s InfiniBand"
    parent: str | None = None                # id of the node above, None for a tier-0 node
    state: str = "ok"                        # ok | bad | excluded | inferred
    problems: tuple[str, ...] = ()           # "port 1 DOWN", "PCIe x8 of x16"
    endpoint: str | None = None              # the topology label ("GPU0", "NIC0") of a GPU or NIC
    name: str = ""                           # HCA name of a NIC ("mlx5_0")


@dataclass(frozen=True)
class TEdge:
    a: str
    b: str
    kind: str                                # pcie | rail | nvlink
    label: str = ""                          # "PIX", "NV18", "x8 of x16"
    state: str = "ok"                        # ok | bad


@dataclass(frozen=True)
class TopoGraph:
    source: str                              # "pci" | "matrix" | "none"
    nodes: tuple[TNode, ...] = ()
    edges: tuple[TEdge, ...] = ()
    gpu_labels: tuple[str, ...] = ()
    nic_labels: tuple[str, ...] = ()
    pairs: dict[str, dict[str, str]] = field(default_factory=dict)    # GPU label -> NIC label -> path
    nic_names: dict[str, str] = field(default_factory=dict)           # NIC label -> HCA name
    notes: tuple[str, ...] = ()
    status: str = ""                         # why there is no picture, when there is none

    def node(self, node_id: str) -> TNode:
        return next(n for n in self.nodes if n.id == node_id)

    def children(self, node_id: str | None) -> list[TNode]:
        return [n for n in self.nodes if n.parent == node_id]

    def devices(self) -> list[TNode]:
        return [n for n in self.nodes if n.kind in ("gpu", "nic")]

    def depth(self, node: TNode) -> int:
        d, p = 0, node.parent
        while p is not None:
            d += 1
            p = self.node(p).parent
        return d


def path_class(path: str | None) -> str:
    """NV#, PIX, ... as the family a legend colours ("NV" for every NV#; "unknown" otherwise)."""
    p = (path or "").strip().upper()
    if p.startswith("NV") and is_digits(p[2:]):
        return "NV"
    if p == "SOC":
        return "SYS"
    return p if p in PATH_COLOURS_ORDER else "unknown"


# ---------------------------------------------------------------- marks on devices

def _gts(speed: str | None) -> float | None:
    """'32.0 GT/s PCIe' -> 32.0."""
    if not speed:
        return None
    head = speed.strip().split(" ", 1)[0]
    try:
        return float(head)
    except ValueError:
        return None


def pcie_downgrade(dev) -> str | None:
    """'x8 of x16', '16.0 of 32.0 GT/s' when a PCIe link trained below what it can do."""
    if dev is None:
        return None
    out = []
    if dev.link_width and dev.max_link_width and dev.link_width < dev.max_link_width:
        out.append(f"x{dev.link_width} of x{dev.max_link_width}")
    cur, top = _gts(dev.link_speed), _gts(dev.max_link_speed)
    if cur and top and cur < top:
        out.append(f"{cur:g} of {top:g} GT/s")
    return ", ".join(out) or None


def _peer_rates(hcas) -> dict[tuple, float]:
    """The usual port rate per (link layer, HCA type): the most common one among the node's ports."""
    seen: dict[tuple, dict[float, int]] = {}
    for h in hcas:
        for p in h.ports:
            if p.rate_gbps:
                key = (p.link_layer or "", h.hca_type or h.board_id or "")
                seen.setdefault(key, {}).setdefault(p.rate_gbps, 0)
                seen[key][p.rate_gbps] += 1
    return {k: max(v, key=lambda r: (v[r], r)) for k, v in seen.items() if v}


def _nic_marks(hca, usual: dict[tuple, float], included) -> tuple[str, list[str], str]:
    """(detail, problems, state) of one NIC."""
    if hca is None:
        return "", [], "ok"
    problems: list[str] = []
    bits = []
    for p in hca.ports:
        rate = f"{p.rate_gbps:g} Gb/s" if p.rate_gbps else ""
        layer = {"InfiniBand": "IB", "Ethernet": "Ethernet"}.get(p.link_layer or "", p.link_layer or "")
        bits.append(" ".join(x for x in (rate, layer) if x))
        state = (p.state or "").upper()
        if state and state not in ("ACTIVE", "ACTIVE_DEFER"):
            phys = f" ({p.phys_state})" if p.phys_state else ""
            problems.append(f"port {p.num} {state}{phys}")
        norm = usual.get((p.link_layer or "", hca.hca_type or hca.board_id or ""))
        if p.rate_gbps and norm and p.rate_gbps < norm and state in ("", "ACTIVE", "ACTIVE_DEFER"):
            problems.append(f"port {p.num} at {p.rate_gbps:g} Gb/s, its peers at {norm:g}")
    detail = hca.name + (" · " + ", ".join(b for b in dict.fromkeys(bits) if b) if any(bits) else "")
    state = "bad" if problems else "ok"
    if included is not None and not any(included(hca.name, p.num) for p in hca.ports or ()):
        state = "excluded" if not problems else state
        problems.append("left out by NCCL_IB_HCA")
    return detail, problems, state


def _included(ib_hca: str | None, nccl_version: str | None):
    """A predicate (hca, port) -> bool for NCCL_IB_HCA, or None when it is not set."""
    if not ib_hca or not ib_hca.strip():
        return None
    from ncdoc.nccl.devices import ib_list
    lst = ib_list(ib_hca, nccl_version)
    return lst.matches


# ---------------------------------------------------------------- building

class _Builder:
    def __init__(self):
        self.nodes: list[TNode] = []
        self.edges: list[TEdge] = []
        self._by_key: dict[tuple, str] = {}

    def add(self, key: tuple, kind: str, label: str, **kw) -> str:
        if key in self._by_key:
            return self._by_key[key]
        nid = f"n{len(self.nodes)}"
        self._by_key[key] = nid
        self.nodes.append(TNode(nid, kind, label, **kw))
        return nid

    def get(self, key: tuple) -> str | None:
        return self._by_key.get(key)


def _numa_label(snapshot, numa: int | None) -> tuple[str, str]:
    if numa is None:
        return "NUMA node ?", "placement unknown"
    node = next((n for n in snapshot.numa.nodes if n.id == numa), None) if snapshot is not None else None
    return f"NUMA node {numa}", (f"CPUs {node.cpulist}" if node is not None and node.cpulist else "")


def build_graph(snapshot, topo: Topology, *, ib_hca: str | None = None,
                nccl_version: str | None = None) -> TopoGraph:
    """The tiered graph of one node from its Snapshot and classified Topology."""
    if not topo.status.known or not topo.endpoints:
        return TopoGraph(topo.source, status=topo.status.reason or "no GPU or NIC found")
    b = _Builder()
    hcas = {h.name: h for h in snapshot.hcas.hcas} if snapshot is not None else {}
    usual = _peer_rates(hcas.values())
    included = _included(ib_hca, nccl_version)
    devs = ({normalize_bus_id(d.address): d for d in snapshot.pci.devices}
            if snapshot is not None and topo.source == "pci" else {})

    def socket(numa: int | None) -> str:
        label, detail = _numa_label(snapshot, numa)
        return b.add(("socket", numa), "socket", label, detail=detail)

    # the parents first (tier by tier), then the devices under them
    placed: dict[str, str] = {}                 # endpoint label -> parent node id
    if topo.source == "pci":
        placed = _pci_parents(b, topo, devs, socket)
    else:
        placed = _matrix_parents(b, topo, socket)
    for e in topo.endpoints:
        parent = placed.get(e.label) or socket(e.numa)
        problems: list[str] = []
        state = "ok"
        if e.kind == "gpu":
            detail = e.name if e.name != e.label else ""
        else:
            detail, problems, state = _nic_marks(hcas.get(e.name), usual, included)
            detail = detail or (e.name if e.name != e.label else "")
        link = pcie_downgrade(devs.get(e.pci)) if e.pci else None
        if link:
            problems.append(f"PCIe {link}")
            state = "bad" if state == "ok" or state == "excluded" else state
        nid = b.add(("dev", e.label), e.kind, e.label, detail=detail, parent=parent, state=state,
                    problems=tuple(problems), endpoint=e.label, name=e.name if e.kind == "nic" else "")
        b.edges.append(TEdge(parent, nid, "pcie", f"PCIe {link}" if link else "", "bad" if link else "ok"))
    _parent_edges(b, devs)
    _rails(b, topo)
    _nvlinks(b, snapshot, topo)
    gpus = tuple(e.label for e in topo.endpoints if e.kind == "gpu")
    nics = tuple(e.label for e in topo.endpoints if e.kind == "nic")
    pairs = {g: {n: topo.matrix.get(g, {}).get(n) or topo.matrix.get(n, {}).get(g) or "?" for n in nics}
             for g in gpus}
    nic_names = {e.label: e.name for e in topo.endpoints if e.kind == "nic"}
    return TopoGraph(topo.source, tuple(b.nodes), tuple(b.edges), gpus, nics, pairs, nic_names,
                     tuple(topo.notes))


def _pci_parents(b: _Builder, topo: Topology, devs: dict, socket) -> dict[str, str]:
    """Host bridges and switches above each endpoint; endpoint label -> the node it hangs from."""
    def chain(addr: str) -> tuple[list[str], str | None]:
        out: list[str] = []
        p = devs[addr].parent
        p = normalize_bus_id(p) if p and normalize_bus_id(p) in devs else p
        while p is not None and p in devs and p not in out and p != addr:
            out.append(p)
            q = devs[p].parent
            p = normalize_bus_id(q) if q and normalize_bus_id(q) in devs else q
        return out, (None if p in devs else p)

    host_numa: dict[str, int | None] = {}
    for e in topo.endpoints:
        if e.pci in devs:
            host = chain(e.pci)[1]
            if host is not None and host_numa.get(host) is None:
                host_numa[host] = e.numa
    out: dict[str, str] = {}
    for e in sorted(topo.endpoints, key=lambda e: (e.numa if e.numa is not None else 1 << 30,
                                                   e.pci or "~", e.kind)):   # bus ids: fixed-width hex
        if e.pci not in devs:
            continue
        bridges, host = chain(e.pci)
        top_down = list(reversed(bridges))           # root port first
        numa = host_numa.get(host) if host is not None else e.numa
        parent = socket(numa if numa is not None else e.numa)
        root = host or (top_down[0] if top_down else None)
        if root is not None:
            parent = b.add(("host", root), "hostbridge", f"host bridge {root}",
                           detail="PCIe root complex", parent=parent)
        units: list[str] = []
        for depth, br in enumerate(top_down, start=1):
            if depth == 1 and devs[br].kind != "switch":
                continue                              # a root port: part of its host bridge
            if devs[br].kind == "switch" or depth % 2 == 0:
                unit = br
            else:
                unit = top_down[depth - 2]            # a downstream port: its upstream port's switch
            if unit not in units:
                units.append(unit)
        for unit in units:
            parent = b.add(("switch", unit), "switch", f"PCIe switch {unit}", parent=parent)
        out[e.label] = parent
    return out


def _parent_edges(b: _Builder, devs: dict) -> None:
    """PCIe edges between the tiers above the devices; a switch whose upstream link trained low is red."""
    have = {(e.a, e.b) for e in b.edges}
    for n in b.nodes:
        if n.parent is None or (n.parent, n.id) in have or n.kind in ("gpu", "nic"):
            continue
        link = None
        if n.kind == "switch":
            addr = n.label.rsplit(" ", 1)[-1]
            link = pcie_downgrade(devs.get(addr))
        b.edges.append(TEdge(n.parent, n.id, "pcie", f"PCIe {link}" if link else "", "bad" if link else "ok"))
        if link:
            i = b.nodes.index(n)
            b.nodes[i] = TNode(n.id, n.kind, n.label, n.detail, n.parent, "bad", n.problems + (f"PCIe {link}",),
                               n.endpoint, n.name)


def _matrix_parents(b: _Builder, topo: Topology, socket) -> dict[str, str]:
    """No PCI tree: devices PIX to each other hang from one inferred switch under their NUMA node."""
    labels = [e.label for e in topo.endpoints]
    group: dict[str, int] = {}
    for a in labels:
        for c in labels:
            if a < c and (topo.matrix.get(a, {}).get(c) or "").upper() == "PIX":
                ga, gc = group.get(a), group.get(c)
                if ga is None and gc is None:
                    group[a] = group[c] = len(group) + 1000
                elif ga is None:
                    group[a] = gc
                elif gc is None:
                    group[c] = ga
                elif ga != gc:
                    for k, v in list(group.items()):
                        if v == gc:
                            group[k] = ga
    out: dict[str, str] = {}
    names: dict[int, int] = {}
    for e in topo.endpoints:
        g = group.get(e.label)
        if g is None:
            continue
        idx = names.setdefault(g, len(names))
        members = [x for x in labels if group.get(x) == g]
        out[e.label] = b.add(("switch", g), "switch", f"PCIe switch {idx} (inferred)",
                             detail="PIX: " + " ".join(members), parent=socket(e.numa), state="inferred")
    return out


def _rails(b: _Builder, topo: Topology) -> None:
    by_name = {e.name: e.label for e in topo.endpoints if e.kind == "nic"}
    by_name.update({lab: lab for lab in (e.label for e in topo.endpoints if e.kind == "nic")})
    for g in topo.gpus():
        for nic_name in topo.rails.get(g.label, ()):
            lab = by_name.get(nic_name) or next((k for k, v in topo.nic_names.items() if v == nic_name), None)
            ga, na = b.get(("dev", g.label)), b.get(("dev", lab)) if lab else None
            if ga and na:
                path = topo.path(g.label, lab) or "?"
                b.edges.append(TEdge(ga, na, "rail", path))


def _nvlinks(b: _Builder, snapshot, topo: Topology) -> None:
    gpus = topo.gpus()
    if not gpus:
        return
    by_index = {g.index: g for g in snapshot.gpus.gpus} if snapshot is not None else {}
    switch_links = {g.label: sum(1 for lk in by_index[g.index].nvlinks if lk.active and lk.remote_type == "switch")
                    for g in gpus if g.index in by_index}
    fm = snapshot.gpus.fabric_manager if snapshot is not None else None
    on_switch = [g for g in gpus if switch_links.get(g.label)]
    if not on_switch and topo.source == "matrix" and len(gpus) > 2:
        # topo -m alone: NV# between every GPU pair with one count is an NVSwitch system
        counts = {topo.path(a.label, c.label) for a in gpus for c in gpus if a.label < c.label}
        if len(counts) == 1 and path_class(next(iter(counts))) == "NV":
            nv = next(iter(counts))
            sid = b.add(("nvswitch",), "nvswitch", "NVLink all-to-all", detail=f"{nv}, every GPU pair")
            for g in gpus:
                b.edges.append(TEdge(b.get(("dev", g.label)), sid, "nvlink", nv))
            return
    if on_switch:
        bad = fm in ("not_started", "failed", "in_progress")
        sid = b.add(("nvswitch",), "nvswitch", "NVSwitch fabric",
                    detail=f"fabric manager {fm.replace('_', ' ')}" if fm else "",
                    state="bad" if bad else "ok",
                    problems=(f"fabric manager {fm.replace('_', ' ')}",) if bad else ())
        for g in on_switch:
            b.edges.append(TEdge(b.get(("dev", g.label)), sid, "nvlink", f"NV{switch_links[g.label]}",
                                 "bad" if bad else "ok"))
    # GPU to GPU links that are not through the switch
    seen = set()
    for a in gpus:
        for c in gpus:
            if a.label >= c.label or (a.label, c.label) in seen:
                continue
            p = topo.path(a.label, c.label) or ""
            if path_class(p) == "NV" and not (switch_links.get(a.label) and switch_links.get(c.label)):
                seen.add((a.label, c.label))
                b.edges.append(TEdge(b.get(("dev", a.label)), b.get(("dev", c.label)), "nvlink", p))


__all__ = ["TNode", "TEdge", "TopoGraph", "build_graph", "path_class", "pcie_downgrade", "KINDS"]
