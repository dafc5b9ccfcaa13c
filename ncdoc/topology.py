"""GPU/NIC path types, named as NCCL and `nvidia-smi topo -m` name them.

One classifier serves live and imported snapshots: when the Snapshot holds a PCI tree the
paths are derived from it (plus NVLinks and NUMA nodes); when it holds only an imported
matrix (pasted `nvidia-smi topo -m`) that matrix is used as given.

PCIe semantics, as NCCL and nvidia-smi see them: a PCIe switch is one upstream-port bridge
plus its downstream-port bridges and counts as ONE bridge. Two devices behind the same switch
(or root port) are PIX; crossing more than one switch without the host bridge is PXB; meeting
only at the host bridge (different root ports) is PHB; different host bridges on one NUMA node
is NODE; different NUMA nodes is SYS.

Reading the tree: a PciDevice's parent is its upstream bridge, or (not itself a device) the
host bridge ("pci0000:17"). Below a host bridge, bridges alternate root port, switch upstream
port, switch downstream port, upstream port...; every port of one switch counts as that switch.
kind="switch" (NCCL's XML, which keeps one node per whole switch) counts as one switch as is.
NICs are the RDMA devices (one per HCA, natural name order, as nvidia-smi lists them); only when
RDMA devices are unknown do the PCI network devices stand in, named by label.
"""

from __future__ import annotations

# No `re`: this module is on the `ncdoc check` path, whose start-up budget cannot pay for the
# regex machinery; the few patterns are string operations (each comment gives the pattern).
from ncdoc.startup.record import Record, record

from ncdoc.snapshot import OK, UNKNOWN, Snapshot, Status
from ncdoc.readers.numbers import is_digits

PATH_TYPES = ("X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS")  # order of closeness; NV# counts as NV

_SAME_NUMA = ("PIX", "PXB", "PHB", "NODE")  # every one of these implies both ends share a NUMA node


_RANKS: dict = {}       # path text -> rank: rails and rules rank the same few texts hundreds of times


def path_rank(p: str) -> int:
    """Closeness rank of a path string: X 0, NV# 1, PIX 2 ... SYS 6; anything else 99."""
    if not isinstance(p, str):
        return 99
    rank = _RANKS.get(p)
    if rank is None:
        rank = _rank(p)
        if len(_RANKS) < 256:
            _RANKS[p] = rank
    return rank


def _rank(p: str) -> int:
    s = p.strip().upper()
    if s == "SOC":  # pre-2018 nvidia-smi name for SYS
        s = "SYS"
    if s[:2] == "NV" and s[2:].isdecimal():         # NV\d+ (\d is str.isdecimal)
        s = "NV"
    try:
        return PATH_TYPES.index(s)
    except ValueError:
        return 99


_HEX_DIGITS = "0123456789abcdefABCDEF"
_LOWER_HEX = "0123456789abcdef"


def _hex(s: str, most: int) -> bool:
    return 0 < len(s) <= most and not s.lstrip(_HEX_DIGITS)


_BUS_IDS: dict = {}     # bus id text -> normalized: a check compares the same few ids hundreds of times


def normalize_bus_id(bus_id: str | None) -> str | None:
    """'00000000:18:00.0', '18:00.0', '0000:18:00' -> '0000:18:00.0'; None if it is no bus id.

    A bus id is what regex (?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\\.([0-7]))?
    matches in full; anything else comes back stripped and lower-cased.
    """
    if not bus_id:
        return None
    out = _BUS_IDS.get(bus_id)
    if out is None and len(bus_id) == 12 and bus_id[4] == ":" and bus_id[7] == ":" and bus_id[10] == "." \
            and bus_id[11] in "01234567" and not bus_id[:4].lstrip(_LOWER_HEX) \
            and not bus_id[5:7].lstrip(_LOWER_HEX) and not bus_id[8:10].lstrip(_LOWER_HEX):
        out = _BUS_IDS[bus_id] = bus_id      # already in normal form, as sysfs and the probes write it
    if out is None:
        s = bus_id.strip()
        head, dot, fn = s.partition(".")
        parts = head.split(":")
        if len(parts) == 2:
            parts.insert(0, "0")
        if (len(parts) == 3 and _hex(parts[0], 8) and _hex(parts[1], 2) and _hex(parts[2], 2)
                and (not dot or (len(fn) == 1 and fn in "01234567"))):
            dom, bus, dev = parts
            out = f"{int(dom, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn or 0}"
        else:
            out = s.lower()
        if len(_BUS_IDS) < 4096:
            _BUS_IDS[bus_id] = out
    return out


_NATURAL_KEYS: dict = {}     # name -> key: the same dozen device names are sorted by several rules


def natural_key(name: str) -> list:
    """Sort key putting mlx5_2 before mlx5_10: runs of ASCII digits as numbers, the rest as text."""
    key = _NATURAL_KEYS.get(name)
    if key is None:
        key = _natural_key(name)
        if len(_NATURAL_KEYS) < 1024 and len(name) <= 64:
            _NATURAL_KEYS[name] = key
    return list(key)


def _natural_key(name: str) -> tuple:
    out = []
    i, n = 0, len(name)
    while i < n:
        digit = name[i] in _DIGITS
        j = i + 1
        while j < n and (name[j] in _DIGITS) == digit:
            j += 1
        t = name[i:j]
        # a run past 20 digits sorts after every real number (int() of it would cost, or fail past 4,300)
        out.append(((0, int(t), "") if len(t) <= 20 else (0, 10 ** 20 + len(t), t)) if digit else (1, 0, t))
        i = j
    return tuple(out)


_DIGITS = frozenset("0123456789")


@record(frozen=True)
class Endpoint(Record):
    label: str                 # "GPU0", "NIC3" (or "mlx5_0" when an old matrix names columns so)
    kind: str                  # "gpu" | "nic"
    name: str                  # GPU name, or HCA name like "mlx5_0" (the label when unknown)
    pci: str | None
    numa: int | None
    index: int


@record(frozen=True)
class Topology(Record):
    status: Status
    source: str                                  # "pci" | "matrix" | "none" (status unknown)
    endpoints: tuple[Endpoint, ...]              # GPUs first (GPU0..), then NICs (NIC0..)
    matrix: dict[str, dict[str, str]]            # label -> label -> path; unknown pairs left out
    nic_names: dict[str, str]                    # "NIC0" -> "mlx5_0"
    rails: dict[str, tuple[str, ...]]            # "GPU0" -> nearest NIC names (HCA names, else labels)
    numa: dict[str, int | None]                  # label -> NUMA node
    notes: tuple[str, ...] = ()                  # pairs left unknown and why

    def _label(self, name: str) -> str | None:
        # rules ask for paths by label or HCA name hundreds of times: every name is indexed on first use,
        # kept beside the fields as Snapshot's indexes are. Precedence: a label (of the matrix or an
        # endpoint) is itself; else the first NIC of that name (GPU names repeat; HCA names do not);
        # else the first nic_names entry naming it.
        index = self.__dict__.get("_label_index")
        if index is None:
            index = {}
            for lab in self.matrix:
                index[lab] = lab
            for e in self.endpoints:
                index[e.label] = e.label
            for e in self.endpoints:
                if e.kind == "nic":
                    index.setdefault(e.name, e.label)
            for lab, n in self.nic_names.items():
                index.setdefault(n, lab)
            self.__dict__["_label_index"] = index
        return index.get(name)

    def path(self, a: str, b: str) -> str | None:
        """Path type between two endpoints, by label ("GPU0", "NIC1") or HCA name ("mlx5_0")."""
        la, lb = self._label(a), self._label(b)
        if la is None or lb is None:
            return None
        return self.matrix.get(la, {}).get(lb) or self.matrix.get(lb, {}).get(la)

    def nearest_nic(self, gpu_label: str) -> tuple[str, str] | None:
        """(NIC name, path) of the closest NIC to a GPU; None when no NIC path is known."""
        nics = self.rails.get(gpu_label) or ()
        if not nics:
            return None
        p = self.path(gpu_label, nics[0])
        return (nics[0], p) if p else None

    def gpus(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.kind == "gpu")

    def nics(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.kind == "nic")

    def facts(self) -> dict:
        """The JSON-ready facts: matrix, rails {gpu: {nics, path}}, numa, nic_names."""
        rails = {}
        for g, names in self.rails.items():
            near = self.nearest_nic(g)
            rails[g] = {"nics": list(names), "path": near[1] if near else None}
        return {"matrix": {a: dict(row) for a, row in self.matrix.items()}, "rails": rails,
                "numa": dict(self.numa), "nic_names": dict(self.nic_names)}


def port_facts(snapshot: Snapshot) -> list[dict]:
    """One row per HCA port: device, port, state, phys_state, rate_gbps, link_layer."""
    rows = []
    for h in sorted(snapshot.hcas.hcas, key=lambda h: natural_key(h.name)):
        for p in h.ports:
            rows.append({"device": h.name, "port": p.num, "state": p.state, "phys_state": p.phys_state,
                         "rate_gbps": p.rate_gbps, "link_layer": p.link_layer})
    return rows


# ---------------------------------------------------------------- entry point

def classify(snapshot: Snapshot) -> Topology:
    """Path matrix, rails and NUMA of every GPU and NIC, from the PCI tree or an imported matrix."""
    pci_ok = snapshot.pci.status.state == OK and bool(snapshot.pci.devices)
    paths_ok = snapshot.paths.status.state == OK and bool(snapshot.paths.labels)
    if pci_ok:
        topo = _from_pci(snapshot)
        located = any(e.pci and snapshot_has(snapshot, e.pci) for e in topo.endpoints)
        if located or not paths_ok:
            return topo
    if paths_ok:
        return _from_matrix(snapshot)
    why = "no PCI tree and no imported topology matrix"
    if snapshot.pci.status.state != OK and snapshot.pci.status.reason not in ("", "not probed"):
        why += f" (PCI: {snapshot.pci.status.reason})"
    return Topology(Status.unknown(why), "none", (), {}, {}, {}, {})


def snapshot_has(snapshot: Snapshot, address: str) -> bool:
    want = normalize_bus_id(address)
    return any(normalize_bus_id(d.address) == want for d in snapshot.pci.devices)


def _rails(endpoints, matrix, nic_names) -> dict[str, tuple[str, ...]]:
    rails: dict[str, tuple[str, ...]] = {}
    nics = [e for e in endpoints if e.kind == "nic"]
    for g in (e for e in endpoints if e.kind == "gpu"):
        known = [(path_rank(p), n) for n in nics
                 if (p := matrix.get(g.label, {}).get(n.label) or matrix.get(n.label, {}).get(g.label))]
        best = min((r for r, _ in known), default=None)
        rails[g.label] = tuple(nic_names.get(n.label, n.label) for r, n in known
                               if best is not None and r == best and r < 99)
    return rails


# ---------------------------------------------------------------- imported matrix, as given

def _int_or_none(s: str | None) -> int | None:
    t = s.strip() if s is not None else ""           # \s*[0-9]+\s*
    return int(s) if t and len(t) <= 20 and t.isascii() and t.isdigit() else None


def _gpu_label(lab: str) -> bool:
    """regex GPU(\\d+), ignoring case (no character but g/G, p/P, u/U folds to G, P, U)."""
    return lab[:3].lower() == "gpu" and is_digits(lab[3:])


def _from_matrix(snapshot: Snapshot) -> Topology:
    pm = snapshot.paths
    labels = list(pm.labels)
    gpu_names = {g.index: g.name for g in snapshot.gpus.gpus} if snapshot.gpus.status.state == OK else {}
    numa = {lab: _int_or_none(pm.numa_affinity.get(lab)) for lab in labels}
    matrix: dict[str, dict[str, str]] = {lab: {} for lab in labels}
    for a in labels:
        for b in labels:
            p = (pm.matrix.get(a, {}).get(b) or pm.matrix.get(b, {}).get(a)) if a != b else "X"
            if p:
                matrix[a][b] = "SYS" if p.upper() == "SOC" else p
    # PIX/PXB/PHB/NODE all mean "same NUMA node": fill NICs' (and N/A GPUs') NUMA from a known peer.
    for lab in labels:
        if numa[lab] is None:
            numa[lab] = next((numa[o] for o in labels if numa[o] is not None
                              and matrix[lab].get(o) in _SAME_NUMA), None)
    endpoints, ni = [], 0
    for lab in labels:
        if _gpu_label(lab):
            idx = int(lab[3:])
            endpoints.append(Endpoint(lab, "gpu", gpu_names.get(idx, lab), None, numa[lab], idx))
    for lab in labels:
        if not _gpu_label(lab):
            nic = lab[:3] == "NIC" and is_digits(lab[3:])         # NIC(\d{1,20}(?!\d))
            endpoints.append(Endpoint(lab, "nic", pm.nic_names.get(lab, lab), None, numa[lab],
                                      int(lab[3:]) if nic else ni))
            ni += 1
    nic_names = {e.label: pm.nic_names[e.label] for e in endpoints if e.label in pm.nic_names}
    missing = sum(1 for a in labels for b in labels if b not in matrix[a])
    notes = (f"{missing // 2} pair(s) missing from the imported matrix (cut short)",) if missing else ()
    return Topology(Status.ok(pm.status.source or "matrix"), "matrix", tuple(endpoints), matrix,
                    nic_names, _rails(endpoints, matrix, nic_names), numa, notes)


# ---------------------------------------------------------------- derived from the PCI tree

class _Tree:
    """Ancestor chains of PCI devices and the switch each bridge belongs to."""

    def __init__(self, devices):
        self.devs = devs = {normalize_bus_id(d.address): d for d in devices}
        # each device's upstream, normalized once: the chains below walk it for every device
        up: dict[str, str | None] = {}
        for addr, d in devs.items():
            p = d.parent
            if p is not None:
                n = normalize_bus_id(p)
                p = n if n in devs else p
            up[addr] = p
        self._up = up
        self._chains: dict[str, tuple[list[str], str | None]] = {}
        self._chain_sets: dict[str, set[str]] = {}    # path() compares every endpoint pair's chains
        self._units: dict[str, str] = {}
        seen: dict[str, set[int]] = {}
        for addr, d in devs.items():
            _, host = self.chain(addr)
            if host is not None and d.numa_node is not None and d.numa_node >= 0:
                seen.setdefault(host, set()).add(d.numa_node)
        self.host_numa = {h: next(iter(s)) for h, s in seen.items() if len(s) == 1}

    def parent(self, addr: str) -> str | None:
        return self._up[addr]

    def chain(self, addr: str) -> tuple[list[str], str | None]:
        """Bridges above `addr`, nearest first, and the host bridge (the first non-device above)."""
        got = self._chains.get(addr)
        if got is None:
            devs, up = self.devs, self._up
            out: list[str] = []
            p = up[addr]
            while p is not None and p in devs and p not in out and p != addr:
                out.append(p)
                p = up[p]
            got = self._chains[addr] = (out, None if p in devs else p)
        return got

    def unit(self, bridge: str) -> str:
        """The PCIe switch (or root port) a bridge is part of: ports of one switch share a unit."""
        u = self._units.get(bridge)
        if u is None:
            u = self._units[bridge] = self._unit(bridge)
        return u

    def _unit(self, bridge: str) -> str:
        if self.devs[bridge].kind == "switch":  # NCCL's XML: one node per whole switch
            return bridge
        depth = len(self.chain(bridge)[0]) + 1  # 1 = root port, 2 = upstream port, 3 = downstream...
        if depth == 1 or depth % 2 == 0:
            return bridge
        return self.chain(bridge)[0][0]  # a downstream port belongs to its upstream port's switch

    def _chain_set(self, addr: str) -> set[str]:
        s = self._chain_sets.get(addr)
        if s is None:
            s = self._chain_sets[addr] = set(self.chain(addr)[0])
        return s

    def path(self, a: str, b: str) -> str | None:
        """PIX/PXB/PHB when a and b share a host bridge; "" for different host bridges; None unknown."""
        chains = self._chains            # every device's chain was made with the tree
        ca, ha = chains[a] if a in chains else self.chain(a)
        cb, hb = chains[b] if b in chains else self.chain(b)
        in_b = self._chain_sets.get(b)
        if in_b is None:
            in_b = self._chain_set(b)
        if in_b.isdisjoint(ca):
            if ha is None or hb is None:
                return None  # a device whose upstream is not recorded
            if ha != hb:
                return ""
            return "PHB"
        i = 0
        while ca[i] not in in_b:        # the nearest bridge above both
            i += 1
        j = cb.index(ca[i])
        unit = self.unit
        first = unit(ca[0])
        for x in ca[1:i + 1] + cb[:j + 1]:
            if unit(x) != first:
                return "PXB"
        return "PIX"


def _nv_counts(gpus) -> dict[tuple[str, str], int]:
    """NV<k> per GPU pair: direct links counted per peer; NVSwitch GPUs get min of switch links."""
    switch_links: dict[str, int] = {}
    direct: dict[tuple[str, str], int] = {}
    for g in gpus:
        a = normalize_bus_id(g.pci_bus_id) or g.pci_bus_id
        to_switch = 0
        for l in g.nvlinks:
            if l.active:
                remote = l.remote_type
                if remote == "switch":
                    to_switch += 1
                elif remote == "gpu" and l.remote_pci:
                    key = (a, normalize_bus_id(l.remote_pci) or l.remote_pci)
                    direct[key] = direct.get(key, 0) + 1
        switch_links[a] = to_switch
    out: dict[tuple[str, str], int] = {}
    for a, sa in switch_links.items():
        for b, sb in switch_links.items():
            if a == b:
                continue
            k = max(direct.get((a, b), 0), direct.get((b, a), 0)) if direct else 0
            if sa and sb:
                k += sa if sa < sb else sb
            if k:
                out[(a, b)] = k
    return out


def _from_pci(snapshot: Snapshot) -> Topology:
    tree = _Tree(snapshot.pci.devices)
    devs = tree.devs

    def dev_numa(addr: str | None) -> int | None:
        if addr in devs:
            n = devs[addr].numa_node
            if n is not None and n >= 0:
                return n
            return tree.host_numa.get(tree.chain(addr)[1])
        return None

    endpoints: list[Endpoint] = []
    gpus = sorted(snapshot.gpus.gpus, key=lambda g: g.index)
    if gpus:
        for g in gpus:
            addr = normalize_bus_id(g.pci_bus_id)
            numa = g.numa_node if g.numa_node is not None and g.numa_node >= 0 else dev_numa(addr)
            endpoints.append(Endpoint(f"GPU{g.index}", "gpu", g.name, addr, numa, g.index))
    else:
        for i, addr in enumerate(sorted(a for a, d in devs.items() if d.kind == "gpu")):
            endpoints.append(Endpoint(f"GPU{i}", "gpu", f"GPU{i}", addr, dev_numa(addr), i))
    hcas = sorted(snapshot.hcas.hcas, key=lambda h: natural_key(h.name))
    if hcas:
        for i, h in enumerate(hcas):
            addr = normalize_bus_id(h.pci_address)
            numa = h.numa_node if h.numa_node is not None and h.numa_node >= 0 else dev_numa(addr)
            endpoints.append(Endpoint(f"NIC{i}", "nic", h.name, addr, numa, i))
    elif snapshot.hcas.status.state == UNKNOWN:
        # RDMA devices not known (e.g. a vendor's static NCCL XML names none): the PCI NICs, by address.
        # When RDMA devices were looked for and none exist, list none, as nvidia-smi does.
        for i, addr in enumerate(sorted(a for a, d in devs.items() if d.kind == "nic")):
            endpoints.append(Endpoint(f"NIC{i}", "nic", f"NIC{i}", addr, dev_numa(addr), i))

    n_numa = len(snapshot.numa.nodes) if snapshot.numa.status.state == OK and snapshot.numa.nodes else None
    nv = _nv_counts(gpus)
    matrix: dict[str, dict[str, str]] = {e.label: {} for e in endpoints}
    unknown: list[tuple[tuple[int, int], str]] = []    # (where the pair's first label stands, ...), note
    # what the pair loop reads of each endpoint, read once (20 endpoints make 190 pairs)
    ends = [(e.label, e.kind == "gpu", e.pci, e.numa, e.pci in devs) for e in endpoints]
    for i, (la, gpu_a, pa, na, tree_a) in enumerate(ends):
        row = matrix[la]
        row[la] = "X"
        for j in range(i + 1, len(ends)):   # every path below reads the same both ways
            lb, gpu_b, pb, nb, tree_b = ends[j]
            p = None
            if gpu_a and gpu_b and (k := nv.get((pa, pb))):
                p = f"NV{k}"
            elif tree_a and tree_b:
                p = tree.path(pa, pb)
                if p == "":  # different host bridges
                    p = _numa_path(na, nb, n_numa)
                elif p is None and na is not None and nb is not None and na != nb:
                    p = "SYS"
            elif na is not None and nb is not None and na != nb:
                p = "SYS"  # not in the tree, but NUMA alone settles it
            if p:
                row[lb] = matrix[lb][la] = p
            else:
                x, y = endpoints[i], endpoints[j]
                (ka, a), (kb, b) = sorted(((i, x), (j, y)), key=lambda t: t[1].label)
                where = "not in the PCI tree" if not (x.pci in devs and y.pci in devs) else "NUMA node unknown"
                unknown.append(((ka, kb), f"{a.label}-{b.label}: path unknown ({where})"))
    notes = [text for _, text in sorted(unknown)]
    nic_names = {e.label: e.name for e in endpoints if e.kind == "nic" and e.name != e.label}
    numa = {e.label: e.numa for e in endpoints}
    source = snapshot.pci.status.source or "pci"
    status = Status.ok(source) if endpoints else Status.absent("no GPU and no RDMA NIC found", source)
    return Topology(status, "pci", tuple(endpoints), matrix,
                    nic_names, _rails(endpoints, matrix, nic_names), numa, tuple(notes))


def _numa_path(na: int | None, nb: int | None, n_numa: int | None) -> str | None:
    if na is not None and nb is not None:
        return "NODE" if na == nb else "SYS"
    if n_numa == 1:
        return "NODE"
    return None


__all__ = ["PATH_TYPES", "Endpoint", "Topology", "classify", "path_rank", "normalize_bus_id",
           "natural_key", "port_facts"]
