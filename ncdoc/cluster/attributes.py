"""What is compared across nodes: one flat table of node x attribute values, read from snapshots.

Each attribute has a key (`versions.nccl`, `port.mlx5_3:1.rate`, `env.NCCL_IB_HCA`), a group
(the rule family that judges it) and whether a difference can change what NCCL does (the
acceptance record asks for a rerun only then). Values are short strings as a person would
compare them ("400 Gb/s", "RoCE v2 at index 3"); None means the node could not say (its
section is unknown), which is never counted as a difference.

Per-device attributes are keyed by the device's name (GPU index, HCA name, HCA port), so a
node with a port missing shows "(absent)" in that column and a node with a NIC renamed shows
it under the new name.
"""

from __future__ import annotations

from ncdoc.startup.record import record

ABSENT = "(absent)"        # the node has no such device / port
UNSET = "(unset)"          # the variable is not set on that node

# Groups in the order the drift matrix lists them.
GROUPS = ("versions", "gpus", "hcas", "ports", "pcie", "host", "topology", "env")


@record
class Attr:
    key: str
    group: str
    label: str
    affects_nccl: bool = True


def natural(text: str) -> list:
    """Sort key that puts mlx5_2 before mlx5_10 and GPU2 before GPU10."""
    from ncdoc.topology import natural_key       # the one natural order (ASCII digit runs, bounded)
    return natural_key(text)


def _peermem(modules: dict) -> str | None:
    if not modules:
        return None
    loaded = [m for m in ("nvidia_peermem", "nv_peer_mem") if modules.get(m)]
    return ", ".join(loaded) if loaded else "not loaded"


def _acs(pci) -> str | None:
    if not pci.status.known:
        return None
    readable = [d for d in pci.devices if d.kind == "bridge" and d.acs_ctrl is not None]
    if not readable:
        return None
    on = [d for d in readable if d.acs_ctrl.lower() not in ("0", "0x0", "0x00", "0x0000", "0000")]
    return f"on ({len(on)} bridge{'s' if len(on) != 1 else ''})" if on else "off"


def _link(dev) -> str | None:
    if dev is None or (dev.link_speed is None and dev.link_width is None):
        return None
    speed = (dev.link_speed or "?").replace(" PCIe", "")
    return f"{speed} x{dev.link_width}" if dev.link_width else speed


def _gid(port) -> str:
    """The RoCE v2 GID a RoCE port offers NCCL: the index of its first RoCE v2 IPv4 GID."""
    v2 = [g for g in port.gids if g.roce_version == 2]
    ipv4 = [g for g in v2 if g.ipv4]
    if ipv4:
        return f"RoCE v2 at index {ipv4[0].index}"
    if v2:
        return f"RoCE v2 (no IPv4) at index {v2[0].index}"
    if port.gids:
        return "RoCE v1 only"
    return "no GIDs"


class _TopologyCache:
    """classify() once per distinct PCI layout: nodes of one model share it."""

    def __init__(self):
        self._by_key: dict = {}

    def facts(self, snap) -> dict[str, str] | None:
        pci = snap.pci
        key = (tuple((d.address, d.parent, d.kind) for d in pci.devices) if pci.status.known else None,
               tuple((g.index, g.pci_bus_id) for g in snap.gpus.gpus),
               tuple((h.name, h.pci_address) for h in snap.hcas.hcas),
               tuple(sorted(snap.paths.matrix)) if snap.paths.status.known else None)
        if key not in self._by_key:
            self._by_key[key] = self._compute(snap)
        return self._by_key[key]

    @staticmethod
    def _compute(snap) -> dict[str, str] | None:
        from ncdoc.topology import classify
        topo = classify(snap)
        if not topo.status.known:
            return None
        out = {}
        for g in topo.gpus():
            near = topo.nearest_nic(g.label)
            out[f"topology.{g.label}"] = f"{near[0]} {near[1]}" if near else "no NIC path"
        rails = {n for names in topo.rails.values() for n in names[:1]}
        out["topology.rails"] = str(len(rails))
        return out


def node_attributes(snap, topo_cache: _TopologyCache | None = None) -> tuple[dict[str, str], set[str]]:
    """(key -> value, groups this node could not say anything about) for one snapshot."""
    vals: dict[str, str] = {}
    unknown: set[str] = set()
    h = snap.host
    if h.status.known:
        if h.kernel:
            vals["host.kernel"] = h.kernel
        if h.os:
            vals["host.os"] = h.os
        if h.iommu:
            vals["host.iommu"] = h.iommu
        vals["host.virtual"] = h.hypervisor or "bare metal"
        pm = _peermem(h.modules)
        if pm:
            vals["host.peermem"] = pm
    else:
        unknown.add("host")
    acs = _acs(snap.pci)
    if acs:
        vals["host.acs"] = acs

    v = snap.versions
    if v.status.known:
        for name in ("driver", "cuda_driver", "nccl", "rdma_core"):
            vals[f"versions.{name}"] = getattr(v, name) or ABSENT
        vals["versions.net_plugin"] = ", ".join(sorted(p.rsplit("/", 1)[-1] for p in v.net_plugins)) or "none"
        vals["versions.tuner_plugin"] = ", ".join(sorted(p.rsplit("/", 1)[-1] for p in v.tuner_plugins)) or "none"
    else:
        unknown.add("versions")

    g = snap.gpus
    if g.status.known:
        vals["gpus.count"] = str(len(g.gpus))
        vals["gpus.model"] = ", ".join(sorted({x.name for x in g.gpus})) or "none"
        links = sorted({sum(1 for link in x.nvlinks if link.active) for x in g.gpus})
        if g.gpus:
            vals["gpus.nvlinks"] = str(links[0]) if len(links) == 1 else f"{links[0]}-{links[-1]} per GPU"
        if g.fabric_manager:
            vals["gpus.fabric_manager"] = g.fabric_manager
    else:
        unknown.update(("gpus",))

    hc = snap.hcas
    if hc.status.known:
        vals["hcas.count"] = str(len(hc.hcas))
        for hca in hc.hcas:
            vals[f"hcas.{hca.name}.fw"] = hca.fw_ver or ABSENT
            for p in hca.ports:
                name = f"port.{hca.name}:{p.num}"
                vals[f"{name}.state"] = (p.state or "?") + (f"/{p.phys_state}" if p.phys_state else "")
                if p.rate_gbps is not None:
                    vals[f"{name}.rate"] = f"{p.rate_gbps:g} Gb/s"
                if p.width:
                    vals[f"{name}.width"] = p.width
                if p.link_layer:
                    vals[f"{name}.link_layer"] = p.link_layer
                if p.active_mtu:
                    vals[f"{name}.mtu"] = str(p.active_mtu)
                if (p.link_layer or "").lower() == "ethernet":
                    vals[f"{name}.gid"] = _gid(p)
    else:
        unknown.update(("hcas", "ports"))

    if snap.pci.status.known:
        by_addr = {d.address: d for d in snap.pci.devices}
        for gpu in g.gpus:
            link = _link(by_addr.get(gpu.pci_bus_id))
            if link:
                vals[f"pcie.GPU{gpu.index}"] = link
        for hca in hc.hcas:
            link = _link(by_addr.get(hca.pci_address or ""))
            if link:
                vals[f"pcie.{hca.name}"] = link
    else:
        unknown.add("pcie")

    topo = (topo_cache or _TopologyCache()).facts(snap)
    if topo is None:
        unknown.add("topology")
    else:
        vals.update(topo)

    e = snap.env
    if e.status.known:
        for ev in e.values:
            vals[f"env.{ev.name}"] = ev.value
    else:
        unknown.add("env")
    return vals, unknown


_LABELS = {
    "host.kernel": "kernel", "host.os": "OS", "host.iommu": "IOMMU", "host.virtual": "virtualisation",
    "host.peermem": "GPUDirect peer-memory module", "host.acs": "PCIe ACS",
    "versions.driver": "GPU driver", "versions.cuda_driver": "CUDA driver API", "versions.nccl": "NCCL library",
    "versions.rdma_core": "rdma-core / OFED", "versions.net_plugin": "NCCL net plugin",
    "versions.tuner_plugin": "NCCL tuner plugin", "gpus.count": "GPU count", "gpus.model": "GPU model",
    "gpus.nvlinks": "active NVLinks per GPU", "gpus.fabric_manager": "fabric manager", "hcas.count": "HCA count",
    "topology.rails": "rail NICs",
}
_PORT_FIELDS = {"link_layer": "link layer", "mtu": "MTU", "gid": "RoCE GID"}
_NOT_NCCL = {"host.os"}                    # differences that do not change what NCCL does by themselves
_NOT_NCCL_ENV = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
                 "NCCL_DEBUG_TIMESTAMP_LEVELS"}


def describe(key: str) -> Attr:
    group = key.split(".", 1)[0]
    if group == "hcas" and key.endswith(".fw"):
        label = f"{key.split('.')[1]} firmware"
    elif group == "port":
        dev, field = key[5:].rsplit(".", 1)
        label = f"{dev} {_PORT_FIELDS.get(field, field)}"
        group = "ports"
    elif group == "pcie":
        label = f"{key[5:]} PCIe link"
    elif group == "topology" and key != "topology.rails":
        label = f"{key[9:]} nearest NIC"
    elif group == "env":
        label = key[4:]
    else:
        label = _LABELS.get(key, key)
    affects = key not in _NOT_NCCL and not (group == "env" and key[4:] in _NOT_NCCL_ENV)
    return Attr(key, group, label, affects)


def _order(key: str) -> tuple:
    group = describe(key).group
    return (GROUPS.index(group) if group in GROUPS else len(GROUPS), natural(key))


@record(frozen=False)
class AttributeTable:
    """Column-major node x attribute values: values[key][node] (None = not known there)."""
    nodes: tuple[str, ...]
    attrs: dict[str, Attr]
    values: dict[str, dict[str, str | None]]

    def value(self, key: str, node: str) -> str | None:
        return self.values.get(key, {}).get(node)

    def row(self, node: str) -> dict[str, str | None]:
        return {k: col.get(node) for k, col in self.values.items()}


def build_table(nodes) -> AttributeTable:
    """The table for `nodes` (name -> Snapshot, in report order)."""
    cache = _TopologyCache()
    per_node: dict[str, tuple[dict[str, str], set[str]]] = {}
    keys: set[str] = set()
    for name, snap in nodes.items():
        vals, unknown = node_attributes(snap, cache)
        per_node[name] = (vals, unknown)
        keys.update(vals)
    ordered = sorted(keys, key=_order)
    attrs = {k: describe(k) for k in ordered}
    values: dict[str, dict[str, str | None]] = {k: {} for k in ordered}
    for name, (vals, unknown) in per_node.items():
        for k in ordered:
            v = vals.get(k)
            if v is None:
                grp = attrs[k].group
                if grp in unknown or (grp == "ports" and "hcas" in unknown):
                    v = None
                else:
                    v = UNSET if grp == "env" else ABSENT
            values[k][name] = v
    return AttributeTable(tuple(nodes), attrs, values)


__all__ = ["ABSENT", "UNSET", "GROUPS", "Attr", "AttributeTable", "node_attributes", "describe", "build_table",
           "natural"]
