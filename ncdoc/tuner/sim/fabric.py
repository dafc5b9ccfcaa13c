"""Layer (b): what the hardware and fabric actually deliver, which NCCL's own model does not see.

NCCL picks an algorithm, protocol and channel count from its model (nccl_model.py); this module
says how long that choice really takes on the simulated cluster. It starts from NCCL's latency
table (NCCL calibrated it on clean systems) and replaces the bandwidth term by what the links
deliver. Gains a tuner finds come from here, as on real clusters, so every term is tied to a
public paired measurement (one variable changed, busbw before and after): the figures below
name their source (owner/repo#N or a URL), and anchors.py holds each pair with the tolerance
the tests reproduce it to (docs/simulator.md prints the table). A term without a public pair
says so.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

from ncdoc.tuner.sim.cluster import SimCluster
from ncdoc.tuner.sim.errors import SimTrialError
from ncdoc.tuner.sim.nccl_model import Choice, ModelTables, busbw_factor
from ncdoc.tuner.sim.revisions import (
    ALGOS, ALLREDUCE, LL, LL128, NCCL_STEPS, NVLS, NVLS_TREE, PATH, PROTOS, RING, SIMPLE, TREE, TREE_CORRECTION,
    cc_index, parse_version)

# Achieved share of the line rate through NCCL with 3+ channels per NIC. With NCCL's usual 2 per
# NIC (CH_PER_NIC) NDR 400G gives 50 x 0.995 x 0.975 = 48.5 GB/s: 46-48 GB/s per NIC and 8 NICs at
# 385-391 GB/s (NVIDIA/nccl-tests#290, NVIDIA/nccl#1222); HDR 200G gives 24.3 (ib_write_bw 23.7).
NIC_EFF = {"IB": 0.995, "RoCE": 0.985}
# Channels per NIC: one cannot hide NCCL's per-step bubbles (flush, sync): half the NIC, as one
# ring against two on one NIC pair (NVIDIA/nccl#439: 24 vs 48 GB/s; sjeaugey in nccl#438: two
# per NIC); two reach 0.97; a third adds the last ~3 % (NVIDIA/nccl-tests#309: MIN_CTAS 24 on
# 8 NICs, ~370 -> above 380 GB/s); beyond four they contend for the proxy and NIC.
CH_PER_NIC = ((1.0, 0.5), (2.0, 0.975), (3.0, 1.0), (4.0, 1.0))
# Ring over NVLink: 8x A100 NDv4 235 GB/s of NCCL's 240 (anchors.md "Single node": SuperBench v0.4.0).
NVLINK_RING_EFF = 0.98
# NVLS on 8x H100: ~476-480 GB/s against ~370 for the ring (NVIDIA/nccl#2140, NVIDIA/nccl-tests#290)
# = 370.8 x 2(n-1)/n x 0.734.
NVLS_EFF = 0.734
# One channel (one CTA + its proxy connection) moves at most this much, GB/s, by compCapIndex.
CH_RATE = (15.0, 24.0, 40.0, 60.0)
NET_CH_RATE = 49.5                 # one channel's network stream (RDMA, GDR), GB/s: a 400G NIC
# One p2p channel to a remote peer: NCCL_NCHANNELS_PER_NET_PEER=1 reaches 18.3 GB/s, two or more
# fill a 200G NIC (NVIDIA/nccl#1272: 18.32 with the 2.20 auto value, 24.24 with 2 or 4).
P2P_NET_CH_RATE = 18.3
# TCP: with no helper threads the proxy thread pushes one socket per connection (~2.5 GB/s);
# 2 channels cross each node -> ~5 GB/s busbw (anchors.md "Multi-node": TCP/socket fallback
# ~5 GB/s vs ~25 expected, AReaL #639). With helper threads, nSocks x the slowest socket
# (sjeaugey in NVIDIA/nccl-tests#83).
SOCK_PROXY_RATE, SOCK_RATE, SOCK_THREAD_RATE, TCP_EFF = 1.45, 1.2, 3.0, 0.85
# Simple-protocol latency at large sizes: 4 nodes x 8 H100 run all-reduce at 385.41 GB/s at 1 GiB
# against 390.60 at 8 GiB (NVIDIA/nccl#1222), ~70 us of latency where NCCL's own table says ~430:
# a step's latency hides behind the chunks streaming after it. Mid sizes keep NCCL's latencies
# (16 nodes, 64 MiB: ~150 GB/s, NVIDIA/nccl#1469).
PIPELINE_LAT = 0.17
# Per-chunk overheads (us) for the Simple protocol, and per p2p chunk.
CHUNK_OVERHEAD = {"NVL": 0.3, "IB": 1.5, "RoCE": 2.0, "Socket": 10.0}
P2P_CHUNK_OVERHEAD = {"IB": 0.5, "RoCE": 0.65, "Socket": 8.0}
# RoCE ECMP across the spine (tuner_anchors.md 1a). 5-tuple hashing of one QP per connection
# leaves `ecmp_base_eff` of the line rate (default 0.71: Meta's +40 % from fixing it, SIGCOMM'24;
# ~0.55 in NVIDIA/cluster-readiness-engine PR#287; 0.845 in Asterfusion's test). Where switches
# hash the QP (`ecmp_qp_hash`: the RoCE v2 UDP source port, or Meta's E-ECMP), several QPs give
# the hash entropy: QP-hash ECMP reaches 0.88 (Asterfusion), reached at 4 QPs, nothing more from
# 8 (cluster-readiness-engine PR#287: QPS 4 -> 8 no improvement; pegaflow PR#291: 2 QPs saturate
# a NIC). Switch adaptive routing with NCCL_IB_ADAPTIVE_ROUTING=1: 0.97 (Asterfusion 97 %;
# PR#287: +70 % over the untuned plateau).
ECMP_QP_EFF, ECMP_AR_EFF, ECMP_JITTER = 0.88, 0.97, 0.03
# What more QPs cost (NCCL's env docs: SPLIT_DATA_ON_QPS=1 adds latency with many QPs; no public
# busbw loss at scale exists, so the cost is kept at <= 3 % for 16 split QPs at large sizes and
# a few us at small ones). QP contexts beyond a NIC's cache: a modelling assumption (RCCL's QP
# sharing, ROCm PR#9335, exists for that limit), with no public paired measurement.
QP_SPLIT_BW, QP_RR_BW, QP_SPLIT_LAT_US, QP_RR_LAT_US, QP_CACHE = 0.002, 0.0005, 0.05, 0.0, 4096
QP_SPLIT_MIN = 128           # NCCL splits a message over the QPs in 128-byte aligned parts: tiny ones use one
# CROSS_NIC on rail-optimised fabrics: 2 (default) lets NCCL alternate rings over the rails,
# 370 -> 390 GB/s against rail-aligned rings only (oci-hpc PR#48 citing sjeaugey, GTC24 S62129).
CROSS_NIC0_EFF = 370.0 / 390.0
# PXN aggregates all-to-all messages over NVLink onto the rail NIC: +20 % at 8 nodes
# (NVIDIA/nccl-tests#187: 10 -> 12 GB/s with PXN on), fading with size (sjeaugey in nccl#1189).
PXN_GAIN, PXN_S0 = 0.25, 16 << 20
# RoCE where PFC covers one traffic class: traffic outside it is dropped under incast and
# bandwidth collapses, with high variance (NVIDIA/nccl#378, #306, #173: 0.x GB/s without PFC).
LOSSY_TC_EFF, LOSSY_TC_SIGMA = 0.3, 0.25
# Relaxed ordering off in a VM with ACS/ATS: ~56 % of the expected rate (NVIDIA/nccl#949, the
# closest pair: the ACS/ATS fix took 2x HDR from ~56 % to 48 GB/s); bare metal: no effect
# (sjeaugey in NVIDIA/nccl#1205).
VM_NO_RO_EFF = 0.56
# A network message's fixed cost against the NVLSTree chunk (from 4 nodes NCCL uses 64 KiB
# chunks unless NCCL_NVLSTREE_MAX_CHUNKSIZE says otherwise): on 8x AWS P5 (EFA) 64 KiB -> 512 KiB
# took NVLSTree all-reduce 104 -> 280 GB/s (NVIDIA/nccl PR#1112), ~9.4 us per message. No public
# IB or RoCE pair exists: their figure keeps 64 KiB chunks within 2 % of larger ones.
NET_MSG_OVERHEAD = {"IB": 0.05, "RoCE": 0.07, "Socket": 10.0}


@dataclass(frozen=True)
class FabricView:
    """Per cluster and environment: the capacities the ground truth uses (GB/s)."""
    cluster: SimCluster
    tables: ModelTables
    intra_ring: float        # ring busbw the GPUs' intra-node links give
    nvls: float              # NVLS allreduce busbw within a node
    p2p_intra: float         # one GPU-to-GPU stream
    nic_rate: float          # achieved rate of one NIC, before channel limits
    direct_cap: float        # per-NIC cap for GPUs near their NIC (inf with GPUDirect RDMA)
    sys_cap: float           # per-NIC cap for GPUs reaching their NIC across the CPU interconnect
    host_cap: float          # per-node cap when anything is staged through host memory
    sys_share: float         # share of GPUs reaching their NIC over the CPU interconnect
    pxn_share: float
    lat_net: float           # multiplier on network latency terms
    socket_conn: float       # TCP: one connection's rate
    pxn_a2a: bool            # PXN aggregates all-to-all over NVLink (rail-optimised, 4+ GPUs)
    lossy: bool              # RoCE traffic outside the lossless class
    net_peer_channels: int   # p2p channels per remote peer in effect


def view(cluster: SimCluster, tables: ModelTables) -> FabricView:
    return _view(cluster, tables)


def net_peer_channels_default(cluster: SimCluster, nnodes: int, ppn: int) -> int:
    """NCCL_NCHANNELS_PER_NET_PEER when unset: 2 before 2.20; from 2.20 max(NICs per GPU,
    ceil(NIC GB/s / 14)), at least 2, halved with many peers (8 nodes and more), as nccl#1272 shows."""
    version = parse_version(cluster.nccl_version)
    if version < (2, 20, 0):
        return 2
    nics_per_gpu = max(1, cluster.nics_per_node // max(1, ppn))
    auto = max(2, nics_per_gpu, math.ceil(cluster.nic_bw / 14.0))
    return max(1, auto // 2) if nnodes >= 8 else auto


@lru_cache(maxsize=512)
def _view(cluster: SimCluster, tables: ModelTables) -> FabricView:
    topo, p = tables.topo, tables.params
    if p.nvls_enable == 1 and cluster.nvswitch and cluster.sm >= 90 and not cluster.nvls and topo.ppn > 1:
        size = (topo.nvls_channels or 16) * 2 * 131072 * topo.ppn
        raise SimTrialError(
            f"Failed to bind NVLink SHARP (NVLS) Multicast memory of size {size} : CUDA error 801 'operation not "
            "supported'.\nThis is usually caused by a system or configuration error in the Fabric Manager or "
            "NVSwitches.\nDisable NVLS (NCCL_NVLS_ENABLE=0) if you wish to avoid this error in the future.",
            kind="init")
    socket = topo.net == "Socket"
    if not socket and p.ib_relaxed_ordering == 1 and cluster.relaxed_ordering == "none" and topo.nnodes > 1:
        raise SimTrialError("NET/IB : NCCL_IB_PCI_RELAXED_ORDERING=1 but PCIe relaxed ordering is not available "
                            "on this system (ibv_reg_mr_iova2 with IBV_ACCESS_RELAXED_ORDERING fails)", kind="init")
    pcie = cluster.pcie_bw
    sys_bw = min(pcie, cluster.cpu_interconnect_gbs)
    intra = {"NVL": cluster.nvlink_bw * NVLINK_RING_EFF,
             "P2P": (sys_bw * 0.75 if cluster.gpu_gpu_path == "SYS" else pcie * 0.85),
             "SHM": (sys_bw if cluster.gpu_gpu_path == "SYS" else pcie) * 0.45}.get(topo.intra, math.inf)
    ppn = topo.ppn
    nvls = cluster.nvlink_bw * 2 * (ppn - 1) / ppn * NVLS_EFF if ppn > 1 else math.inf
    p2p_intra = cluster.nvlink_bw * 0.8 if topo.intra == "NVL" else intra
    link = "Socket" if socket else cluster.link_layer
    nic_rate = cluster.tcp_bw * TCP_EFF if socket else cluster.nic_bw * NIC_EFF[cluster.link_layer]
    if not socket and cluster.nic_ceiling_gbs:
        nic_rate = min(nic_rate, cluster.nic_ceiling_gbs)
    if not socket and cluster.vm:
        ro_on = p.ib_relaxed_ordering == 1 or (p.ib_relaxed_ordering == 2 and cluster.relaxed_ordering == "visible")
        if not ro_on:
            nic_rate *= VM_NO_RO_EFF
    # GPUDirect RDMA (nccl_facts 2.4): needs support and distance(GPU, NIC) <= NCCL_NET_GDR_LEVEL
    # (default PXB, P2C in 2.29+, the same for PCIe paths); a PXN path counts the peer GPU's.
    level = p.gdr_level if p.gdr_level is not None else PATH["P2C"]
    types = topo.nic_types or ("PIX",)
    near = [("PIX" if t == "PXN" else t) for t in types if t != "SYS"] or ["PIX"]
    n_sys = sum(t == "SYS" for t in types)

    def gdr_on(path_type: str) -> bool:
        return not socket and cluster.gdr and PATH[path_type] <= level

    direct_gdr = gdr_on(max(near, key=lambda t: PATH[t]))
    sys_gdr = gdr_on("SYS")
    read_cap = 0.8 * pcie if p.gdr_read == 0 else math.inf     # NCCL_NET_GDR_READ=0: sends staged
    stage_cap = 0.6 * pcie    # staged through host memory: PCIe twice, host memory once more
    direct_cap = math.inf if socket else (read_cap if direct_gdr else stage_cap)
    # NICs reached across QPI/xGMI share it (nccl_facts 4.2: Intel SPR 22 GB/s, AMD 16 GB/s).
    sys_nics = max(1, min(cluster.nics_per_node, n_sys))
    sys_cap = min(read_cap if sys_gdr else stage_cap, cluster.cpu_interconnect_gbs / sys_nics) if n_sys else math.inf
    staged = not socket and (not direct_gdr or (n_sys > 0 and not sys_gdr))
    host_cap = cluster.host_mem_gbs / 2 if staged else math.inf
    lat_net = {"IB": 1.0, "RoCE": 1.1, "Socket": 3.0}[link] * (1.3 if staged else 1.0)
    conn = SOCK_PROXY_RATE if p.socket_count == 0 else min(p.socket_count * SOCK_RATE,
                                                           max(1, p.socket_threads) * SOCK_THREAD_RATE)
    nvlink = topo.intra == "NVL"
    pxn_a2a = (not socket and nvlink and cluster.rail_optimized and ppn >= 4 and topo.nnodes > 1
               and not p.pxn_disable and p.pxn_level == 2)
    # RoCE: NCCL_IB_TC (-1 from 2.26: the communicator's traffic class, else 0) picks the class.
    tc = 0 if p.ib_tc < 0 else p.ib_tc
    lossy = (not socket and cluster.link_layer == "RoCE" and cluster.lossless_tc is not None
             and topo.nnodes > 1 and tc != cluster.lossless_tc)
    npp = p.net_peer_channels or net_peer_channels_default(cluster, topo.nnodes, ppn)
    return FabricView(cluster=cluster, tables=tables, intra_ring=intra, nvls=nvls, p2p_intra=p2p_intra,
                      nic_rate=nic_rate, direct_cap=direct_cap, sys_cap=sys_cap, host_cap=host_cap,
                      sys_share=n_sys / len(types),
                      pxn_share=sum(t == "PXN" for t in types) / len(types), lat_net=lat_net,
                      socket_conn=conn, pxn_a2a=pxn_a2a, lossy=lossy, net_peer_channels=npp)


def channels_per_nic_eff(per_nic: float) -> float:
    """Share of a NIC's achieved rate that `per_nic` channels drive (CH_PER_NIC, interpolated)."""
    pts = CH_PER_NIC
    if per_nic <= pts[0][0]:
        return pts[0][1] * per_nic / pts[0][0]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if per_nic <= x1:
            return y0 + (y1 - y0) * (per_nic - x0) / (x1 - x0)
    return 1.0 / (1 + 0.04 * (per_nic - pts[-1][0]))


def crosses_spine(cluster: SimCluster, nnodes: int) -> bool:
    """Does a job's traffic leave its leaf? Only when it spans more nodes than one leaf holds."""
    return nnodes > 1 and 0 < cluster.leaf_nodes < nnodes


def ecmp_efficiency(v: FabricView, in_flight: int, run_seed: int) -> float:
    """Share of the line rate hashing onto spine paths leaves (1.0 inside a leaf, on IB, without ECMP)."""
    c, topo, p = v.cluster, v.tables.topo, v.tables.params
    if topo.net == "Socket" or c.link_layer != "RoCE" or c.ecmp_paths <= 1 or not crosses_spine(c, topo.nnodes):
        return 1.0
    # RoCE: AR is off unless asked for; a threshold at or above a network chunk leaves it nothing.
    if c.switch_ar and p.ib_adaptive_routing == 1 and p.ib_ar_threshold < p.buffsize // NCCL_STEPS:
        mean = ECMP_AR_EFF
    else:
        q = max(1, p.ib_qps) if c.ecmp_qp_hash else 1      # plain 5-tuple hashing: QPs add no entropy
        # Round-robin (SPLIT_DATA_ON_QPS=0) uses as many QPs as messages are in flight.
        q_eff = q if p.ib_split else min(q, max(1, in_flight))
        e1 = c.ecmp_base_eff
        mean = e1 + max(0.0, ECMP_QP_EFF - e1) * min(1.0, math.log2(q_eff) / 2.0)
    # Which flows collide changes from run to run (part of the measurement noise: none with --noise 0).
    if c.noise_sigma <= 0:
        return mean
    rng = random.Random(run_seed ^ 0x5EED)
    return min(1.0, mean * math.exp(ECMP_JITTER * rng.gauss(0.0, 1.0)))


def qp_bandwidth_factor(v: FabricView, qp_contexts_per_nic: float) -> float:
    """What extra QPs cost at large sizes: per-message work, and QP contexts beyond the NIC's cache."""
    p = v.tables.params
    if v.tables.topo.net == "Socket" or v.tables.topo.nnodes == 1:
        return 1.0
    q = max(1, p.ib_qps)
    f = 1.0 / (1.0 + (QP_SPLIT_BW if p.ib_split else QP_RR_BW) * (q - 1))
    contexts = q * qp_contexts_per_nic
    if contexts > QP_CACHE:
        f /= 1.0 + 0.15 * math.log2(contexts / QP_CACHE)
    return f


def qp_latency_us(v: FabricView, message: float) -> float:
    """Per network step: posting a message as several work requests (split mode) costs each extra QP."""
    p = v.tables.params
    if v.tables.topo.net == "Socket" or v.tables.topo.nnodes == 1:
        return 0.0
    q = max(1, p.ib_qps)
    if p.ib_split and message < q * QP_SPLIT_MIN:
        return 0.0
    return (QP_SPLIT_LAT_US if p.ib_split else QP_RR_LAT_US) * (q - 1)


def node_network(v: FabricView, nchannels: int, run_seed: int, *, in_flight: int = NCCL_STEPS,
                 peers_per_channel: float = 2.0) -> float:
    """Bytes per second one node's network can move for a collective using `nchannels` channels."""
    c, topo, p = v.cluster, v.tables.topo, v.tables.params
    if topo.nnodes == 1:
        return math.inf
    if topo.net == "Socket":
        # One NIC (the bond); each channel that crosses the node is one connection.
        return min(v.nic_rate, nchannels * v.socket_conn)
    nics = c.nics_per_node
    if topo.intra == "NET":   # no P2P, no SHM: every GPU is a node of its own and they share the NICs
        nics = max(1, nics // c.gpus_per_node)
    nics = min(nics, max(1, nchannels))
    per_nic_ch = max(1.0, nchannels / nics)
    nic = min(v.nic_rate, per_nic_ch * NET_CH_RATE) * channels_per_nic_eff(per_nic_ch)
    # Data is split evenly over the channels, so the slowest NIC path sets every channel's pace.
    nic = min(nic, v.direct_cap, v.sys_cap if v.sys_share else math.inf)
    total = nics * nic * (1 - 0.03 * v.pxn_share)
    total = min(total, v.host_cap, c.nics_per_node * c.nic_bw / max(1.0, c.oversubscription))
    total *= ecmp_efficiency(v, in_flight, run_seed)
    total *= qp_bandwidth_factor(v, per_nic_ch * peers_per_channel)
    if c.nics_per_node > 1 and c.rail_optimized:
        if p.cross_nic == 0:
            total *= CROSS_NIC0_EFF
        elif p.cross_nic == 1:
            total *= 0.95 if c.fabric == "roce" else 0.98   # traffic leaves its rail and crosses the spine
    if v.lossy:
        total *= LOSSY_TC_EFF
    if topo.nnodes > 2 and c.congestion:
        # Stress presets: background traffic takes a share of the uplinks, more with channels per NIC.
        spread = 0.05 + 0.1 * max(0.0, per_nic_ch - 1)
        total /= 1 + c.congestion * math.log2(topo.nnodes / 2) * spread
    return total


def _proto_bus(bus: float, a: int, q: int, nc: int, v: FabricView) -> float:
    t = v.tables
    cci = min(cc_index(t.topo.min_cc), len(t.revision.ll_max_bws) - 1)
    nn = t.topo.nnodes
    idx2 = nn - 1 if nn <= 2 else 2
    ll_max = t.revision.ll_max_bws[cci if nn == 1 else (1 if t.topo.cpu_vendor == "AMD" else 0)][idx2]
    if q == LL:
        return min(bus * (0.5 if a != TREE else 0.5 / 1.9), ll_max)
    if q == LL128:
        # LL128 peaks at ~95 % of a link, LL at 50 % (sjeaugey in NVIDIA/nccl#281).
        per_ch = (t.revision.per_ch_tree_ll128 if a == TREE else t.revision.per_ch_ring_ll128)[cci][idx2]
        return min(bus * 0.92, nc * per_ch)
    return bus


def _nvlstree_chunk_eff(v: FabricView, nc: int, bus: float) -> float:
    """From 4 nodes NVLSTree moves NCCL_NVLSTREE_MAX_CHUNKSIZE (auto 64 KiB) chunks over the
    network; each costs the link's per-message overhead (NVIDIA/nccl PR#1112)."""
    topo, p, c = v.tables.topo, v.tables.params, v.cluster
    if topo.nnodes < 4:
        return 1.0
    chunk = p.nvlstree_max_chunksize or 65536
    chunk = min(chunk, p.nvls_chunksize) if p.nvlstree_max_chunksize is None else chunk
    link = "Socket" if topo.net == "Socket" else c.link_layer
    overhead = c.net_msg_overhead_us or NET_MSG_OVERHEAD[link]
    per_channel = bus / max(1, nc) * 1000.0                    # bytes per us
    return chunk / (chunk + overhead * per_channel)


def collective_bus(v: FabricView, coll: int, choice: Choice, run_seed: int) -> float:
    """Large-message bus bandwidth (nccl-tests busbw units) the chosen algorithm achieves."""
    topo = v.tables.topo
    a, q = ALGOS.index(choice.algo), PROTOS.index(choice.proto)
    nc, n, nn, ppn = choice.nchannels, topo.nranks, topo.nnodes, topo.ppn
    ch = CH_RATE[cc_index(topo.min_cc)] * min(1.0, (choice.nthreads - (32 if q == SIMPLE else 0)) / 512) ** 0.7
    net = node_network(v, nc, run_seed)
    ring_intra = v.intra_ring * (ppn / (ppn - 1) if (nn > 1 and ppn > 1) else 1.0)
    if a == RING:
        bus = min(ring_intra, net, nc * ch)
    elif a == TREE:
        # Tree sends each byte over the network once per node on 2 nodes (twice beyond), and twice
        # over the intra-node chain: 2-node tree busbw can exceed the network rate.
        # Beyond 2 nodes Tree runs at ~0.8 of Ring at large sizes (NVIDIA/nccl#1368: 190 -> 150 GB/s
        # at 5 nodes; NVIDIA/nccl#319: 0.57-0.85).
        f = 2.0 * (n - 1) / n
        net_equiv = net * f / (1.0 if nn == 2 else 2.0)
        bus = min(net_equiv, v.intra_ring * f / 2, nc * ch) * (0.92 if nn <= 2 else 0.8)
    elif a == NVLS:
        bus = min(v.nvls, nc * ch) if coll == ALLREDUCE else min(v.intra_ring * 0.97, nc * ch)
    elif a == NVLS_TREE:
        # 2x8 H100 default NVLSTree: ~470 GB/s, NVLS-bound (anchors.md: nccl#2409 citing nccl-tests
        # #309); where the network binds, 2(n-1)/n its rate (each byte crosses once): ~104 GB/s per node gave
        # 216-231 GB/s at 1-8 GiB (NVIDIA/nccl#2409, a host stuck at 13 GB/s per rail);
        # 330 -> 430 GB/s NVLS off -> on at 2 nodes of 8x400G RoCE (NVIDIA/nccl#1221).
        f = 2.0 * (n - 1) / n
        net_equiv = net * f / (1.0 if nn == 2 else 2.0) * (1.0 if nn == 2 else 0.98)
        bus = min(v.nvls * 0.99, net_equiv, nc * ch)
        bus *= _nvlstree_chunk_eff(v, nc, bus)
    else:   # PAT, CollNet (not modelled beyond the network rate)
        bus = min(net, nc * ch) * 0.85
    return max(1e-3, _proto_bus(bus, a, q, nc, v))


def true_time_us(v: FabricView, collective: str, coll: int | None, choice: Choice, nbytes: int,
                 run_seed: int) -> float:
    """Time one call of `nbytes` (NCCL's nBytes) really takes, before noise."""
    if nbytes <= 0:
        return 1.0
    t, topo = v.tables, v.tables.topo
    if coll is None:
        return _p2p_time(v, collective, choice, nbytes, run_seed)
    a, q = ALGOS.index(choice.algo), PROTOS.index(choice.proto)
    n, nn = topo.nranks, topo.nnodes
    lat = t.latencies[coll][a][q]
    if a == RING and q == SIMPLE and nn > 1 and coll == ALLREDUCE and nbytes // max(1, topo.nchannels * n) >= 64:
        lat *= 1.9 if topo.min_cc < 80 else 1.4
    if q == SIMPLE and nn > 1 and a in (RING, TREE):
        # Large messages: a step's latency overlaps the chunks streaming behind it (PIPELINE_LAT).
        chunk = t.params.buffsize / NCCL_STEPS * (4 if coll == ALLREDUCE else 2)
        overlap = min(1.0, nbytes / max(1, choice.nchannels) / (4 * chunk))
        lat *= 1 - overlap * (1 - PIPELINE_LAT)
    if nn > 1:
        net_mult = v.lat_net * (1.1 if (q == SIMPLE and v.cluster.fabric == "roce") else 1.0)
        if nn > 2 and v.cluster.congestion:
            # Every network step waits for the slowest flow; rings take 2(N-1) of them, trees log N.
            net_mult *= 1 + v.cluster.congestion * math.log2(nn) * (0.5 if a == RING else 0.15)
        ar = t.params.ib_adaptive_routing
        ar_on = ar == 1 or (ar != 0 and v.cluster.link_layer == "IB")   # AR defaults on for IB, off on RoCE
        steps = (2 * (nn - 1) if a == RING else 2 * max(1, math.ceil(math.log2(nn))))
        per_step = nbytes / max(1, choice.nchannels) / (n if a == RING else 1)
        if topo.net == "IB" and ar_on and per_step > t.params.ib_ar_threshold:
            # Above NCCL_IB_AR_THRESHOLD a send is a write plus a write-with-immediate: one more
            # message (AddyLaddy in NVIDIA/nccl#1050); latency only, no bandwidth lever.
            lat += 0.3 * steps
        lat *= 0.4 + 0.6 * net_mult
        lat += qp_latency_us(v, per_step) * steps
    bus = collective_bus(v, coll, choice, run_seed)
    log_size = (nbytes >> 6).bit_length() - 1
    if a == TREE and coll == ALLREDUCE and 0 <= log_size < 23:
        bus *= TREE_CORRECTION[q][log_size]      # NCCL's measured mid-size tree inefficiency
    factor = busbw_factor(collective, n)
    traffic = nbytes * factor                    # bytes each rank moves, in busbw terms
    if q == SIMPLE:
        bus *= _chunk_efficiency(v, choice, traffic, bus, coll)
    # Forcing more channels than NCCL would use costs each small message a little per channel.
    extra = max(0, choice.nchannels - v.tables.topo.default_nchannels)
    lat += 0.05 * extra
    return lat + traffic / (1000.0 * bus)


def _chunk_efficiency(v: FabricView, choice: Choice, traffic: float, bus: float, coll: int) -> float:
    """Simple protocol moves chunks of BUFFSIZE/NCCL_STEPS*CHUNKSTEPS; each costs a fixed overhead."""
    p, topo = v.tables.params, v.tables.topo
    chunk = p.buffsize / NCCL_STEPS * (4 if coll == ALLREDUCE else 2)
    link = "NVL" if topo.nnodes == 1 else ("Socket" if topo.net == "Socket" else v.cluster.link_layer)
    rate = bus / max(1, choice.nchannels) * 1000.0            # bytes per us per channel
    per_channel = traffic / max(1, choice.nchannels)
    fill = min(1.0, per_channel / chunk)
    return 1.0 / (1.0 + CHUNK_OVERHEAD[link] * rate / chunk * fill)


def _p2p_time(v: FabricView, collective: str, choice: Choice, nbytes: int, run_seed: int) -> float:
    """alltoall and sendrecv, on NCCL's p2p channels: LL below a threshold, else Simple chunks."""
    topo, p, c = v.tables.topo, v.tables.params, v.cluster
    n, nn, ppn = topo.nranks, topo.nnodes, topo.ppn
    ll = choice.proto == "LL"
    link = "Socket" if topo.net == "Socket" else c.link_layer
    chunk = p.p2p_net_chunksize
    if nn > 1:
        # Per peer connection, several chunks in flight; all-to-all talks to every remote rank.
        per_peer = nbytes if collective == "sendrecv" else nbytes / n
        in_flight = max(1, min(NCCL_STEPS, math.ceil(per_peer / max(1, chunk))))
        remote = (n - ppn) if collective == "alltoall" else 1
        contexts = remote * v.net_peer_channels * ppn / max(1, c.nics_per_node)
        net = node_network(v, max(2, topo.nchannels), run_seed, in_flight=in_flight,
                           peers_per_channel=contexts / max(1.0, topo.nchannels / max(1, c.nics_per_node)))
        per_gpu = net / ppn
        if collective == "sendrecv":
            # One remote peer per crossing GPU (nccl-tests' ring pattern), on NCCL_NCHANNELS_PER_NET_PEER
            # channels (NVIDIA/nccl#1272); over TCP one socket connection per channel.
            if topo.net == "Socket":
                per_gpu = min(v.nic_rate, v.net_peer_channels * v.socket_conn)
            else:
                per_gpu = min(net / max(1, min(c.nics_per_node, ppn)), v.net_peer_channels * P2P_NET_CH_RATE)
        eff = chunk / (chunk + P2P_CHUNK_OVERHEAD[link] * per_gpu / 2 * 1000.0)
        per_gpu *= 0.5 if ll else eff
    if collective == "sendrecv":
        if nn > 1:
            rate, lat = per_gpu, 8.0 * v.lat_net + 4.0 + qp_latency_us(v, nbytes / max(1, v.net_peer_channels))
        else:
            rate, lat = v.p2p_intra * (0.5 if ll else 1.0), 6.0
        return lat + nbytes / (1000.0 * rate)
    # alltoall: every rank sends nbytes/n to each peer; the inter-node share leaves through the NICs.
    intra = v.p2p_intra * 0.5 if ll else v.p2p_intra
    if ppn > 1 and not ll:    # NVLink/PCIe p2p chunks (NCCL_P2P_NVL_CHUNKSIZE) cost a fixed overhead each
        peer_rate = v.p2p_intra / (ppn - 1) * 1000.0
        intra *= p.p2p_nvl_chunksize / (p.p2p_nvl_chunksize + CHUNK_OVERHEAD["NVL"] * peer_rate)
    intra_t = nbytes * (ppn - 1) / n / (1000.0 * intra) if ppn > 1 else 0.0
    inter_t = nbytes * (n - ppn) / n / (1000.0 * per_gpu) if nn > 1 else 0.0
    if nn > 1 and not v.pxn_a2a and ppn >= 4 and c.rail_optimized and topo.intra == "NVL":
        # Without PXN every message to another rail goes out on its own; PXN aggregates them.
        inter_t *= 1.0 + PXN_GAIN * PXN_S0 / (nbytes + PXN_S0)
    lat = 5.0 + (ppn - 1) * 0.4 + (n - ppn) * 1.5 * v.lat_net
    return lat + max(intra_t, inter_t)
