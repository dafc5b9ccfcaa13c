"""Graph inputs to NCCL's cost model, derived from the hardware the way ncclTopoCompute would.

This is a crude stand-in for NCCL's topology search (src/graph/search.cc; nccl_facts.md 4.2 and
4.6 step 1): per graph it picks the highest speed from the per-arch speed arrays that the links
allow, counts how many channels fit, applies ncclTopoDupChannels and the second pass, and
then the communicator's channel count as ncclTopoPostset sets it. It reproduces NCCL's printed
GRAPH lines for the common shapes (e.g. 8x H100: ring 12 x 30 GB/s single node, 8 x 48 GB/s
across 8x400G NICs); unusual topologies are approximate. The tests feed NCCL's own printed
graphs into the tables instead, so the table formulas are checked independently of this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ncdoc.tuner.sim.cluster import SimCluster
from ncdoc.tuner.sim.params import NcclParams
from ncdoc.tuner.sim.revisions import (
    COLLNET_CHAIN, COLLNET_DIRECT, LOC_BW, MAXCHANNELS, NVLS, NVLS_TREE, PAT, PATH, PATTERN_BALANCED_TREE,
    PATTERN_NVLS, PATTERN_RING, PATTERN_TREE, RING, SPEEDS_INTER, SPEEDS_INTRA, TREE)


@dataclass(frozen=True)
class Graph:
    """One searched graph, as NCCL logs it: `Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s`."""
    pattern: int
    nchannels: int
    bw_intra: float
    bw_inter: float
    type_intra: str = "LOC"
    type_inter: str = "PIX"
    same_channels: int = 1
    latency_inter: float = 0.0


EMPTY = Graph(pattern=0, nchannels=0, bw_intra=0.0, bw_inter=0.0, type_intra="LOC", type_inter="PIX")


@dataclass(frozen=True)
class CommTopo:
    """What ncclTopoTuneModel and topoGetAlgoInfo read from the communicator."""
    nranks: int
    nnodes: int
    ppn: int                       # local ranks
    min_cc: int
    max_cc: int
    cpu_vendor: str                # "Intel" | "AMD" | "other"
    graphs: tuple[Graph, ...]      # indexed by algorithm
    nvls_support: bool
    nvls_channels: int
    collnet_support: bool
    nvs_count: int
    nchannels: int                 # comm->nChannels after ncclTopoPostset and the env limits
    default_nchannels: int         # the same before the env limits (NCCL_MIN/MAX_CTAS, ...)
    net: str                       # "IB" | "Socket"
    intra: str                     # "NVL" | "P2P" | "SHM" | "NET" | "none"
    nic_types: tuple[str, ...]     # per local GPU: the path type its network traffic takes

    @property
    def max_tree_pattern(self) -> int:
        return self.graphs[TREE].pattern


def _speeds(min_cc: int, inter: bool) -> tuple[float, ...]:
    key = 100 if min_cc >= 100 else 90 if min_cc >= 90 else 0
    return (SPEEDS_INTER if inter else SPEEDS_INTRA)[key]


def _fits(limit: float, s: float) -> int:
    return int(math.floor(limit / s + 1e-9))


def comm_topology(cluster: SimCluster, p: NcclParams) -> CommTopo:
    sm = cluster.sm
    ppn, nodes = cluster.gpus_per_node, cluster.nodes
    # --- intra-node transport (nccl_facts 2.4): P2P if path <= NCCL_P2P_LEVEL, else SHM, else NET.
    level = PATH["LOC"] if p.p2p_disable else p.p2p_level
    if level is None:
        level = PATH["SYS"] if cluster.cpu_vendor == "AMD" and ppn <= 2 else PATH["PXB"]
    gg = cluster.gpu_gpu_path
    pcie = cluster.pcie_bw
    sys_bw = min(pcie, cluster.cpu_interconnect_gbs)
    intra, type_intra, intra_bw = "none", "LOC", LOC_BW
    if ppn > 1:
        if PATH[gg] <= level:
            intra, type_intra = ("NVL", "NVL") if gg == "NVL" else ("P2P", gg)
            intra_bw = cluster.nvlink_bw if gg == "NVL" else (sys_bw if gg == "SYS" else pcie)
        elif not p.shm_disable:
            intra, type_intra = "SHM", ("SYS" if gg == "SYS" else "PHB")
            intra_bw = sys_bw if gg == "SYS" else pcie
        else:   # neither P2P nor SHM: every GPU is a node of its own, talking through the NIC
            intra, nodes, ppn = "NET", nodes * ppn, 1
    nranks = nodes * ppn
    inter = nodes > 1
    # --- network side
    socket = p.net == "Socket"
    nics = 1 if socket else cluster.nics_per_node
    nic_bw = cluster.tcp_bw if socket else cluster.nic_bw
    nvlink = cluster.nvlink_bw > 0 and gg == "NVL"
    nic_types, path_bws = [], []
    for path in (("PHB",) * cluster.gpus_per_node if socket else cluster.nic_paths):
        if path in ("PHB", "SYS") and nvlink and not p.pxn_disable and not socket:
            nic_types.append("PXN")       # reach a NIC local to a peer GPU over NVLink
            path_bws.append(min(pcie, nic_bw))
        else:
            nic_types.append(path)
            path_bws.append(min(sys_bw if path == "SYS" else pcie, nic_bw))
    type_inter = max(nic_types, key=lambda t: PATH[t]) if inter else "PIX"
    total_bw = (cluster.nvlink_bw if nvlink else pcie) if (ppn > 1 or inter) else LOC_BW
    max_bw = max(path_bws) if inter else (intra_bw if ppn > 1 else LOC_BW)
    speeds = _speeds(sm, inter)

    def ring_fit(s: float) -> int:
        if not inter:
            return _fits(intra_bw, s) if ppn > 1 else MAXCHANNELS // 2
        n = nics * _fits(nic_bw, s) if s <= max_bw else 0
        if ppn > 1:   # NVLink carries (ppn-1)/ppn of a channel; PCIe-only GPUs carry all of it
            n = min(n, _fits(intra_bw, s * (ppn - 1) / ppn) if intra == "NVL" else _fits(pcie, s))
        return n

    def tree_fit(s: float) -> int:
        if not inter:
            return _fits(intra_bw * (2 if ppn == 2 else 1), s) if ppn > 1 else MAXCHANNELS // 2
        return ring_fit(s)

    # --- ring: pass 1 (first fit, then lower speeds while > .49 of it), dup, pass 2 (raise speed)
    start = next((i for i, s in enumerate(speeds) if s <= max_bw and s <= total_bw), len(speeds) - 1)
    best_n, best_s = 0, speeds[-1]
    for s in speeds[start:]:
        if best_n and s / best_s <= 0.49:
            break
        n = min(ring_fit(s), MAXCHANNELS // 2)
        if n and n * s > best_n * best_s:
            best_n, best_s = n, s
        if best_n and best_n * best_s >= total_bw:
            break
    ring_n, ring_s = max(best_n, 1), best_s
    if ring_s >= 25.0 and not (sm > 80 and ring_s < 50.0 and ring_n > 4):
        dup = min(2 * ring_n, MAXCHANNELS // 2)
        ring_s /= math.ceil(dup / ring_n)
        ring_n = dup
    for s in sorted((x for x in speeds if x > ring_s), reverse=False):
        if ring_fit(s) < ring_n:
            break
        ring_s = s
    same = 1 if (not inter or ppn == 1) else 0
    ring = Graph(PATTERN_RING, ring_n, ring_s, ring_s, type_intra, type_inter, same)

    # --- tree: as many channels as the ring, the highest speed that fits, then raise bwIntra
    tree_total = total_bw * ppn / (ppn - 1) if ppn > 1 else total_bw
    tree_s = next((s for s in speeds if s <= max_bw and s * ring_n <= tree_total and tree_fit(s) >= ring_n),
                  speeds[-1])
    tree_intra = tree_s
    if inter and ppn > 1:
        cap = intra_bw if intra == "NVL" else pcie
        for s in sorted(x for x in speeds if x > tree_s):
            if tree_intra >= 2 * tree_s or ring_n * s * (ppn - 1) / ppn > cap:
                break
            tree_intra = s
    elif inter:   # one GPU per node: nothing limits the intra side
        tree_intra = next((s for s in sorted(speeds) if s >= 2 * tree_s), max(speeds))
    pattern = PATTERN_TREE if ppn == 1 else PATTERN_BALANCED_TREE
    tree = Graph(pattern, ring_n, tree_intra, tree_s, type_intra, type_inter, same)

    # --- NVLS (src/graph/search.cc, src/transport/nvls.cc)
    nvls_ok = (cluster.nvswitch and sm >= 90 and ppn >= 2 and gg == "NVL" and p.nvls_enable != 0
               and (p.nvls_enable == 1 or cluster.nvls))
    nvls = replace(EMPTY, pattern=PATTERN_NVLS)
    if nvls_ok and not inter:
        n = min(16, ppn)
        intra_speeds = _speeds(sm, False)
        s = next((x for x in intra_speeds if x * n * ppn / (ppn - 1) <= cluster.nvlink_bw + 1e-9), intra_speeds[-1])
        up = [x for x in intra_speeds if x > s]
        nvls = Graph(PATTERN_NVLS, n, s, min(up) if up else s, "NVL", "PIX", 0)
    elif nvls_ok and not socket:
        n = min(ppn, nics, 16)
        s = next((x for x in speeds if x <= max_bw and _fits(nic_bw, x) >= 1), speeds[-1])
        nvls = Graph(PATTERN_NVLS, n, s, s, "NVL", type_inter, 0)
    nvls_channels = 0
    if nvls.nchannels:
        nvls_channels = 16 if sm < 100 else (32 if inter else 24)
        if p.nvls_nchannels is not None:
            nvls_channels = p.nvls_nchannels
        nvls_channels = max(p.min_ctas, min(p.max_ctas, nvls_channels))

    collnet = cluster.collnet and p.collnet_enable == 1 and inter and p.net == "IB" and ppn <= 8
    cn_chain = replace(tree, pattern=PATTERN_TREE) if collnet else EMPTY
    cn_direct = replace(tree, nchannels=min(ppn, nics)) if collnet else EMPTY
    graphs = [EMPTY] * 7
    graphs[TREE], graphs[RING], graphs[COLLNET_DIRECT], graphs[COLLNET_CHAIN] = tree, ring, cn_direct, cn_chain
    graphs[NVLS], graphs[NVLS_TREE], graphs[PAT] = nvls, nvls, tree

    # --- communicator channels (src/graph/connect.cc ncclTopoPostset; nccl_facts 2.7)
    nch = min(MAXCHANNELS, 2 * min(ring.nchannels, tree.nchannels))
    if sm >= 90 and inter and ring.bw_intra > 45.0 and nch < 16:
        nch = min(MAXCHANNELS, 2 * nch)
    default_nch = nch
    nch = min(p.max_nchannels, nch)
    nch = max(nch, min(p.min_nchannels, MAXCHANNELS))
    vendor = cluster.cpu_vendor if cluster.cpu_vendor in ("Intel", "AMD") else "other"
    return CommTopo(nranks=nranks, nnodes=nodes, ppn=ppn, min_cc=sm, max_cc=sm, cpu_vendor=vendor,
                    graphs=tuple(graphs), nvls_support=bool(nvls.nchannels), nvls_channels=nvls_channels,
                    collnet_support=collnet, nvs_count=1 if cluster.nvswitch else 0, nchannels=nch,
                    default_nchannels=default_nch,
                    net=p.net, intra=intra, nic_types=tuple(nic_types))
