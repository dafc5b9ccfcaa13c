"""Layer (b): what the hardware and fabric actually deliver, which NCCL's own model does not see.

NCCL picks an algorithm, protocol and channel count from its model (nccl_model.py); this module
says how long that choice really takes on the simulated cluster. It starts from NCCL's latency
table (NCCL calibrated it on clean systems) and replaces the bandwidth term by what the links
deliver: achieved per-NIC rates, NVLink/NVLS rates, per-channel limits, ECMP flow collisions on
RoCE, congestion and stragglers at scale, staging through host memory without GPUDirect RDMA,
NICs reached over the CPU interconnect, the TCP socket transport, and chunking. Gains a tuner
finds come from here, as on real clusters. Calibration figures cite anchors.md rows.
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
    cc_index)

# Achieved share of the line rate through NCCL. NDR 400G: 50 GB/s line -> 47 GB/s
# (anchors.md "Per NIC / RDMA": NDR 400G through NCCL 46-48 GB/s per NIC, nccl-tests #290);
# HDR 200G: 25 -> 23.7 GB/s (anchors.md: HDR ib_write_bw 23.7 GB/s, SuperBench NDv4 baseline).
NIC_EFF = {"IB": 0.955, "RoCE": 0.945}
# Ring over NVLink: 8x A100 NDv4 235 GB/s of NCCL's 240 (anchors.md "Single node": SuperBench v0.4.0).
NVLINK_RING_EFF = 0.98
# NVLS on 8x H100: ~476 GB/s (anchors.md: NVIDIA maintainer, nccl-tests #290) = 370.8 x 2(n-1)/n x 0.734.
NVLS_EFF = 0.734
# One channel (one CTA + its proxy connection) moves at most this much, GB/s, by compCapIndex.
CH_RATE = (15.0, 24.0, 40.0, 60.0)
NET_CH_RATE = 40.0                 # one channel's network stream (RDMA, GDR), GB/s
# TCP: with no helper threads the proxy thread pushes one socket per connection (~2.5 GB/s);
# 2 channels cross each node -> ~5 GB/s busbw (anchors.md "Multi-node": TCP/socket fallback
# ~5 GB/s vs ~25 expected, AReaL #639).
SOCK_PROXY_RATE, SOCK_RATE, SOCK_THREAD_RATE, TCP_EFF = 1.45, 1.2, 3.0, 0.85
# Per-chunk overheads (us) for the Simple protocol, and per p2p chunk.
CHUNK_OVERHEAD = {"NVL": 0.3, "IB": 1.5, "RoCE": 2.0, "Socket": 10.0}
P2P_CHUNK_OVERHEAD = {"IB": 1.0, "RoCE": 1.3, "Socket": 8.0}


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
    flows_per_channel: float  # RDMA flows one channel contributes (queue pairs in flight)
    socket_conn: float       # TCP: one connection's rate


def view(cluster: SimCluster, tables: ModelTables) -> FabricView:
    return _view(cluster, tables)


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
    pcie = cluster.pcie_bw
    sys_bw = min(pcie, cluster.cpu_interconnect_gbs)
    intra = {"NVL": cluster.nvlink_bw * NVLINK_RING_EFF,
             "P2P": (sys_bw * 0.75 if cluster.gpu_gpu_path == "SYS" else pcie * 0.85),
             "SHM": (sys_bw if cluster.gpu_gpu_path == "SYS" else pcie) * 0.45}.get(topo.intra, math.inf)
    ppn = topo.ppn
    nvls = cluster.nvlink_bw * 2 * (ppn - 1) / ppn * NVLS_EFF if ppn > 1 else math.inf
    p2p_intra = cluster.nvlink_bw * 0.8 if topo.intra == "NVL" else intra
    socket = topo.net == "Socket"
    link = "Socket" if socket else cluster.link_layer
    nic_rate = cluster.tcp_bw * TCP_EFF if socket else cluster.nic_bw * NIC_EFF[cluster.link_layer]
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
    qps = max(1, p.ib_qps)
    # With SPLIT_DATA_ON_QPS=0 messages go to the QPs in turn, so only some are busy at once.
    flows = qps if p.ib_split else 1 + 0.5 * (qps - 1)
    conn = SOCK_PROXY_RATE if p.socket_count == 0 else min(p.socket_count * SOCK_RATE,
                                                           max(1, p.socket_threads) * SOCK_THREAD_RATE)
    return FabricView(cluster=cluster, tables=tables, intra_ring=intra, nvls=nvls, p2p_intra=p2p_intra,
                      nic_rate=nic_rate, direct_cap=direct_cap, sys_cap=sys_cap, host_cap=host_cap,
                      sys_share=n_sys / len(types),
                      pxn_share=sum(t == "PXN" for t in types) / len(types), lat_net=lat_net,
                      flows_per_channel=flows, socket_conn=conn)


@lru_cache(maxsize=4096)
def ecmp_efficiency(flows: int, paths: int, draw_seed: int) -> float:
    """Throughput share left when `flows` equal flows hash onto `paths` equal links (balls in bins).

    Channels finish together only as fast as the most loaded link lets them: efficiency is
    flows / (paths * max_load). Anchor: nccl#2409, 2x8 H100 on 8x400G RoCE misbehaving at
    216-231 GB/s where ~370 is expected (anchors.md "Multi-node").
    """
    if paths <= 1 or flows <= 0:
        return 1.0
    rng = random.Random(draw_seed)
    load = [0] * paths
    for _ in range(flows):
        load[rng.randrange(paths)] += 1
    return min(1.0, flows / (paths * max(load)))


def expected_ecmp_efficiency(flows: int, paths: int, samples: int = 256) -> float:
    return sum(ecmp_efficiency(flows, paths, s) for s in range(samples)) / samples


def node_network(v: FabricView, nchannels: int, run_seed: int) -> float:
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
    nic = min(v.nic_rate, per_nic_ch * NET_CH_RATE)
    if per_nic_ch > 4:     # channels beyond saturation add proxy and NIC contention
        nic /= 1 + 0.04 * (per_nic_ch - 4)
    # Data is split evenly over the channels, so the slowest NIC path sets every channel's pace.
    nic = min(nic, v.direct_cap, v.sys_cap if v.sys_share else math.inf)
    total = nics * nic * (1 - 0.03 * v.pxn_share)
    total = min(total, v.host_cap, c.nics_per_node * c.nic_bw / max(1.0, c.oversubscription))
    if c.fabric == "roce" and c.ecmp_paths > 1:
        flows = int(round(nics * math.ceil(per_nic_ch) * v.flows_per_channel))
        total *= ecmp_efficiency(flows, c.ecmp_paths, run_seed)
    if p.cross_nic == 1 and c.nics_per_node > 1:
        total *= 0.95 if c.fabric == "roce" else 0.98   # traffic leaves its rail and crosses the spine
    if topo.nnodes > 2 and c.congestion:
        spread = 0.15 + 0.25 * max(0.0, per_nic_ch - 1)
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
        per_ch = (t.revision.per_ch_tree_ll128 if a == TREE else t.revision.per_ch_ring_ll128)[cci][idx2]
        return min(bus * 0.92, nc * per_ch)
    return bus


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
        f = 2.0 * (n - 1) / n
        net_equiv = net * f / (1.0 if nn == 2 else 2.0)
        bus = min(net_equiv, v.intra_ring * f / 2, nc * ch) * 0.92
    elif a == NVLS:
        bus = min(v.nvls, nc * ch) if coll == ALLREDUCE else min(v.intra_ring * 0.97, nc * ch)
    elif a == NVLS_TREE:
        # 2x8 H100 default NVLSTree: ~470 GB/s (anchors.md: nccl#2409 citing nccl-tests #309).
        f = 2.0 * (n - 1) / n
        net_equiv = net * f / (1.0 if nn == 2 else 2.0) * (0.7 if nn == 2 else 0.98)
        bus = min(v.nvls * 0.99, net_equiv, nc * ch)
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
    if nn > 1:
        net_mult = v.lat_net * (1.1 if (q == SIMPLE and v.cluster.fabric == "roce") else 1.0)
        if nn > 2 and v.cluster.congestion:
            # Every network step waits for the slowest flow; rings take 2(N-1) of them, trees log N.
            net_mult *= 1 + v.cluster.congestion * math.log2(nn) * (0.5 if a == RING else 0.15)
        ar = t.params.ib_adaptive_routing
        ar_on = ar == 1 or (ar != 0 and v.cluster.link_layer == "IB")   # AR defaults on for IB, off on RoCE
        if topo.net == "IB" and ar_on and nbytes > t.params.ib_ar_threshold:
            net_mult *= 1.02      # AR splits a send above NCCL_IB_AR_THRESHOLD into write + write-with-imm
        lat *= 0.4 + 0.6 * net_mult
    bus = collective_bus(v, coll, choice, run_seed)
    log_size = (nbytes >> 6).bit_length() - 1
    if a == TREE and coll == ALLREDUCE and 0 <= log_size < 23:
        bus *= TREE_CORRECTION[q][log_size]      # NCCL's measured mid-size tree inefficiency
    factor = busbw_factor(collective, n)
    traffic = nbytes * factor                    # bytes each rank moves, in busbw terms
    if q == SIMPLE:
        bus *= _chunk_efficiency(v, choice, traffic, bus, coll)
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
    if nn > 1:
        net = node_network(v, max(2, topo.nchannels), run_seed)
        chunk = p.p2p_net_chunksize
        per_gpu = net / ppn
        eff = chunk / (chunk + P2P_CHUNK_OVERHEAD[link] * per_gpu / 2 * 1000.0)
        per_gpu *= 0.5 if ll else eff
    if collective == "sendrecv":
        if nn > 1:
            rate, lat = per_gpu, 8.0 * v.lat_net + 4.0
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
    lat = 5.0 + (ppn - 1) * 0.4 + (n - ppn) * 1.5 * v.lat_net
    return lat + max(intra_t, inter_t)
