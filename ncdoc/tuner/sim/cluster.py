"""Clusters the simulator runs on: node hardware (from a Snapshot or a preset) plus fabric knobs.

The hardware half is what NCCL's own model sees (GPUs, NVLink, PCIe, NICs, paths); the fabric
half is what it does not (ECMP collisions, congestion, stragglers, noise). Presets are small
named clusters for tests and benchmarks; `cluster_from_snapshot` builds one from a probed node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ncdoc.errors import UsageError

FABRICS = ("ib", "roce", "socket")
NIC_PATHS = ("PIX", "PXB", "PHB", "SYS")

# NCCL's NVLink bandwidth per link, GB/s, by SM (src/graph/topo.h); sm86 parts have 12.
_NVL_BW = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}
# NCCL's CPU interconnect figures, GB/s (topo.h): Intel SPR 22 (QPI: BDW 6, SKL 10, EMR 40), AMD 16.
_CPU_IC = {"Intel": 22.0, "AMD": 16.0, "ARM": 6.0}
# PCIe per-lane figure in NCCL's units (100 Mb/s), by generation (topo.h): bw = width * lane / 80.
_PCIE_LANE = {1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}


@dataclass(frozen=True)
class SimCluster:
    name: str = "custom"
    nodes: int = 2
    gpus_per_node: int = 8
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    sm: int = 90                          # compute capability x10
    nvlink_links: int = 18                # active NVLinks per GPU (0: none)
    nvswitch: bool = True
    nvls: bool = True                     # NVLink SHARP multicast works (sm90+, NVSwitch, fabric manager)
    pcie_gen: int = 5
    pcie_width: int = 16
    gpu_gpu_path: str = "NVL"             # worst GPU-GPU path: NVL, or PIX/PXB/PHB/SYS without NVLink
    nics_per_node: int = 8
    nic_rate_gbps: float = 400.0
    link_layer: str = ""                  # "IB" | "RoCE"; derived from `fabric` when empty
    gpu_nic_paths: tuple[str, ...] = ()   # per GPU, path to its nearest NIC; empty: all PIX
    gdr: bool = True                      # GPUDirect RDMA possible (nvidia_peermem or dma-buf)
    cpu_vendor: str = "Intel"             # "Intel" | "AMD" | "ARM"
    cpu_interconnect_gbs: float = 0.0     # 0: NCCL's figure for the vendor
    host_mem_gbs: float = 250.0           # host memory bandwidth a node can give to staging copies
    nccl_version: str = "2.30.7"
    fabric: str = "ib"                    # "ib" | "roce" | "socket" (no usable RDMA device)
    tcp_gbps: float = 100.0               # speed of the interface NET/Socket would use
    socket_vendor: str = "other"          # "aws" | "gcp" | "other": NCCL's socket thread auto-detection
    ecmp_paths: int = 0                   # spine paths RoCE flows hash onto (ECMP); 0: no hashing
    leaf_nodes: int = 0                   # nodes under one leaf (rail group); traffic between groups
                                          # crosses the spine; 0: every node of the job under one leaf
    ecmp_base_eff: float = 0.71           # share of the line rate left by 5-tuple hashing with one QP
    ecmp_qp_hash: bool = True             # switches hash the QP (RoCE v2 UDP source port, E-ECMP)
    switch_ar: bool = False               # RoCE switches do adaptive routing (flowlet/packet spraying)
    rail_optimized: bool = True           # NIC i of every node on rail i (PXN, CROSS_NIC matter)
    oversubscription: float = 1.0         # leaf uplink oversubscription (>= 1)
    congestion: float = 0.0               # background congestion at scale, 0..1 (stress presets only)
    nic_ceiling_gbs: float = 0.0          # per-NIC cap from a misconfigured host (PCIe, ACS, IOMMU); 0: none
    lossless_tc: int | None = None        # RoCE: the only traffic class with PFC; None: all lossless
    vm: bool = False                      # GPUs and NICs passed through to a virtual machine
    relaxed_ordering: str = "visible"     # PCIe relaxed ordering: visible | hidden (VM hides it) | none
    net_msg_overhead_us: float = 0.0      # fixed cost per network message; 0: the link's own figure
    straggler_prob: float = 0.0           # per node and run, chance of a slow node
    straggler_scale: float = 0.0          # how much slower that node is (0.2 = 20 %)
    noise_sigma: float = 0.015            # multiplicative log-normal noise on every time
    seed: int = 0
    collnet: bool = False                 # a CollNet (SHARP) plugin is installed

    def __post_init__(self) -> None:
        if self.fabric not in FABRICS:
            raise UsageError(f"unknown fabric {self.fabric!r} (expected one of {', '.join(FABRICS)})")
        want_ll = "RoCE" if self.fabric == "roce" else "IB"
        if not self.link_layer:
            object.__setattr__(self, "link_layer", want_ll)
        elif self.fabric != "socket" and self.link_layer != want_ll:
            raise UsageError(f"link layer {self.link_layer} does not match fabric {self.fabric!r}")
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise UsageError("a cluster needs at least one node with one GPU")
        if self.gpu_nic_paths:
            paths = tuple("PHB" if p == "NODE" else p for p in self.gpu_nic_paths)
            if len(paths) != self.gpus_per_node or any(p not in NIC_PATHS for p in paths):
                raise UsageError(f"gpu_nic_paths must give one of {'/'.join(NIC_PATHS)} per GPU")
            object.__setattr__(self, "gpu_nic_paths", paths)
        if self.relaxed_ordering not in ("visible", "hidden", "none"):
            raise UsageError("relaxed_ordering must be one of visible, hidden, none")
        if not self.cpu_interconnect_gbs:
            object.__setattr__(self, "cpu_interconnect_gbs", _CPU_IC.get(self.cpu_vendor, 16.0))

    # ---- derived hardware figures, in NCCL's units (GB/s)
    @property
    def nranks(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def nic_paths(self) -> tuple[str, ...]:
        """Per GPU, the path to its nearest NIC (all PIX unless given)."""
        return self.gpu_nic_paths or ("PIX",) * self.gpus_per_node

    @property
    def nvlink_bw(self) -> float:
        """Per-GPU NVLink bandwidth as NCCL counts it (links x per-link bandwidth)."""
        if not self.nvlink_links:
            return 0.0
        per = _NVL_BW.get(self.sm) or _NVL_BW[max(k for k in _NVL_BW if k <= max(self.sm, 60))]
        return self.nvlink_links * per

    @property
    def pcie_bw(self) -> float:
        return self.pcie_width * _PCIE_LANE.get(self.pcie_gen, 120) / 80.0

    @property
    def nic_bw(self) -> float:
        """NCCL's NET bandwidth for one NIC: speed_Mbps / 8000."""
        return self.nic_rate_gbps / 8.0

    @property
    def tcp_bw(self) -> float:
        return self.tcp_gbps / 8.0

    def with_fabric(self, **changes: Any) -> "SimCluster":
        if "fabric" in changes and "link_layer" not in changes:
            changes["link_layer"] = ""            # derived again from the new fabric
        return replace(self, **changes)


def _h100(**kw: Any) -> SimCluster:
    base = dict(gpu_name="NVIDIA H100 80GB HBM3", sm=90, nvlink_links=18, nvswitch=True, nvls=True,
                pcie_gen=5, pcie_width=16, nics_per_node=8, nic_rate_gbps=400.0, cpu_vendor="Intel")
    base.update(kw)
    return SimCluster(**base)


# Healthy fabrics stay flat with scale at large sizes (tuner_anchors.md 1i: 4 nodes 385-391 GB/s,
# NVIDIA/nccl#1222; 248 nodes ~350, NVIDIA/nccl-tests#283), so the default presets carry no
# congestion; congested fabrics are the named "-congested" stress presets.
_PRESETS: dict[str, SimCluster] = {
    "h100-ib-2node": _h100(name="h100-ib-2node", nodes=2),
    # Two nodes on one rail group: no spine hop, so ECMP has nothing to collide on (oci-hpc PR#48).
    "h100-roce-2node": _h100(name="h100-roce-2node", nodes=2, fabric="roce", ecmp_paths=8),
    # nccl#2409: a misconfigured RoCE host stuck at ~13 GB/s per rail, whatever the env (nccl#2408).
    "h100-roce-2node-misconfigured": _h100(name="h100-roce-2node-misconfigured", nodes=2, fabric="roce",
                                           ecmp_paths=8, nic_ceiling_gbs=13.1, nccl_version="2.29.7"),
    "h100-1node": _h100(name="h100-1node", nodes=1),
    "h100-socket-2node": _h100(name="h100-socket-2node", nodes=2, fabric="socket", tcp_gbps=200.0),
    "h100-nogdr-2node": _h100(name="h100-nogdr-2node", nodes=2, gdr=False),
    "h100-ib-8node": _h100(name="h100-ib-8node", nodes=8, straggler_prob=0.002, straggler_scale=0.1),
    "h100-ib-16node": _h100(name="h100-ib-16node", nodes=16, straggler_prob=0.004, straggler_scale=0.15),
    # Several racks: rings and all-to-all cross the spine, where RoCE hashes flows (ECMP).
    "h100-roce-8node": _h100(name="h100-roce-8node", nodes=8, fabric="roce", ecmp_paths=8, leaf_nodes=4,
                             straggler_prob=0.002, straggler_scale=0.1),
    "h100-roce-8node-ar": _h100(name="h100-roce-8node-ar", nodes=8, fabric="roce", ecmp_paths=8, leaf_nodes=4,
                                switch_ar=True, straggler_prob=0.002, straggler_scale=0.1),
    # RoCE whose PFC covers one traffic class only (the common TC 106 = DSCP 26 setup).
    "h100-roce-8node-lossless-tc": _h100(name="h100-roce-8node-lossless-tc", nodes=8, fabric="roce",
                                         lossless_tc=106),
    "h100-vm-2node": _h100(name="h100-vm-2node", nodes=2, vm=True, relaxed_ordering="hidden"),
    # Stress presets: congestion beyond what healthy fabrics show.
    "h100-ib-16node-congested": _h100(name="h100-ib-16node-congested", nodes=16, congestion=0.5,
                                      straggler_prob=0.01, straggler_scale=0.2),
    "h100-roce-8node-congested": _h100(name="h100-roce-8node-congested", nodes=8, fabric="roce", ecmp_paths=8,
                                       leaf_nodes=4, congestion=0.3, straggler_prob=0.005, straggler_scale=0.15),
    "a100-ib-4node": SimCluster(name="a100-ib-4node", nodes=4, gpu_name="NVIDIA A100-SXM4-80GB", sm=80,
                                nvlink_links=12, nvswitch=True, nvls=False, pcie_gen=4, nics_per_node=8,
                                nic_rate_gbps=200.0, cpu_vendor="AMD"),
    "l40s-pcie-2node": SimCluster(name="l40s-pcie-2node", nodes=2, gpu_name="NVIDIA L40S", sm=89,
                                  nvlink_links=0, nvswitch=False, nvls=False, pcie_gen=4, gpu_gpu_path="SYS",
                                  nics_per_node=2, nic_rate_gbps=200.0,
                                  gpu_nic_paths=("PXB",) * 8, cpu_vendor="Intel"),
}
PRESETS: tuple[str, ...] = tuple(_PRESETS)


def preset(name: str) -> SimCluster:
    try:
        return _PRESETS[name]
    except KeyError:
        raise UsageError(f"unknown simulator preset {name!r} (known: {', '.join(PRESETS)})") from None


# ---------------------------------------------------------------- from a Snapshot

_GEN_BY_SPEED = {"2.5": 1, "5.0": 2, "5": 2, "8.0": 3, "8": 3, "16.0": 4, "16": 4, "32.0": 5, "32": 5,
                 "64.0": 6, "64": 6}


def _sm(cc: str | None) -> int | None:
    m = re.fullmatch(r"\s*(\d{1,20}(?!\d))\.(\d{1,20}(?!\d))\s*", cc or "")
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def _rails_from_topology(snapshot: Any, ngpus: int) -> tuple[tuple[str, ...], set[str]] | None:
    """Per GPU the path to its nearest NIC, and the set of those NICs, from ncdoc.topology."""
    try:
        from ncdoc.topology import classify   # written alongside; optional at import time
    except ImportError:
        return None
    try:
        topo = classify(snapshot)
    except Exception:                       # a partial snapshot must not stop the simulator
        return None
    paths, nics = [], set()
    for i in range(ngpus):
        near = topo.nearest_nic(f"GPU{i}")
        if near is None:
            return None
        p = near[1].upper()
        paths.append("PHB" if p == "NODE" else p if p in NIC_PATHS else "SYS")
        nics.update(topo.rails.get(f"GPU{i}", ()))
    return tuple(paths), nics


def cluster_from_snapshot(snapshot: Any, nodes: int, **fabric: Any) -> SimCluster:
    """A cluster of `nodes` copies of the snapshot's node; `fabric` sets or overrides any field.

    Read: GPUs (count, name, compute capability, NVLinks and whether they reach an NVSwitch,
    fabric manager state), the GPUs' PCIe link, HCAs (active ports, rate, link layer), host CPU
    vendor, nvidia_peermem, NCCL version, and from ncdoc.topology.classify the GPU-NIC paths and
    the NICs nearest to the GPUs (the ones rings use). Where a fact is unknown the SimCluster
    default stays; pass gpu_nic_paths= (or any other field) to set it directly.
    """
    kw: dict[str, Any] = {"name": f"snapshot-{nodes}node", "nodes": nodes}
    gpus = tuple(snapshot.gpus.gpus)
    if gpus:
        kw["gpus_per_node"] = len(gpus)
        kw["gpu_name"] = gpus[0].name
        sms = [s for s in (_sm(g.compute_capability) for g in gpus) if s]
        if sms:
            kw["sm"] = min(sms)
        links = [sum(1 for l in g.nvlinks if l.active) for g in gpus]
        kw["nvlink_links"] = min(links) if links else 0
        kw["nvswitch"] = any(l.active and l.remote_type == "switch" for g in gpus for l in g.nvlinks)
        fm = snapshot.gpus.fabric_manager
        kw["nvls"] = kw["nvswitch"] and kw.get("sm", 90) >= 90 and fm in (None, "completed", "not_supported")
        kw["gpu_gpu_path"] = "NVL" if kw["nvlink_links"] else "SYS"
        dev = snapshot.pci_device(gpus[0].pci_bus_id) if hasattr(snapshot, "pci_device") else None
        if dev is not None and dev.link_speed:
            gen = _GEN_BY_SPEED.get(dev.link_speed.split()[0])
            if gen:
                kw["pcie_gen"] = gen
            if dev.link_width:
                kw["pcie_width"] = dev.link_width
    ports = [(h, p) for h in snapshot.hcas.hcas for p in h.ports]
    active = [(h, p) for h, p in ports if (p.state or "ACTIVE").upper().endswith("ACTIVE")]
    if active:
        eth = [(h, p) for h, p in active if (p.link_layer or "").lower() == "ethernet"]
        roce = len(eth) > len(active) / 2
        kw["fabric"] = "roce" if roce else "ib"
        # NCCL cannot merge IB and Ethernet ports; count the majority link layer's devices.
        used = eth if roce else [(h, p) for h, p in active if (h, p) not in eth]
        kw["nics_per_node"] = len({h.name for h, _ in used})
        rates = [p.rate_gbps for _, p in used if p.rate_gbps]
        if rates:
            kw["nic_rate_gbps"] = max(set(rates), key=rates.count)
    elif snapshot.hcas.status.state != "unknown":
        kw["fabric"] = "socket"
    vendor = (snapshot.host.cpu_vendor or "").lower()
    if "amd" in vendor:
        kw["cpu_vendor"] = "AMD"
    elif "intel" in vendor:
        kw["cpu_vendor"] = "Intel"
    elif vendor:
        kw["cpu_vendor"] = "ARM"
    peermem = snapshot.host.modules.get("nvidia_peermem")
    if peermem is not None:
        # A snapshot does not show whether dma-buf works; pass gdr=True where a node relies on it.
        kw["gdr"] = bool(peermem)
    hyper = (snapshot.host.hypervisor or "").lower()
    kw["socket_vendor"] = "aws" if "amazon" in hyper else "gcp" if "google" in hyper else "other"
    if snapshot.versions.nccl:
        kw["nccl_version"] = snapshot.versions.nccl
    if "gpu_nic_paths" not in fabric and kw.get("fabric") != "socket":
        rails = _rails_from_topology(snapshot, kw.get("gpus_per_node", 8))
        if rails:
            kw["gpu_nic_paths"] = rails[0]
            # Rings use the NICs nearest to the GPUs; storage NICs elsewhere stay out of them.
            if rails[1] and "nics_per_node" in kw:
                kw["nics_per_node"] = min(kw["nics_per_node"], len(rails[1]))
    kw.update(fabric)
    return SimCluster(**kw)
