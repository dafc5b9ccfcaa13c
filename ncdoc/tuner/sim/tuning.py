"""NCCL's latency and bandwidth tables, as ncclTopoTuneModel builds them (src/graph/tuning.cc).

HEAD 2.30.7 formulas (nccl_facts.md 4.3-4.4) with each older release's constants and rules
from revisions.py. Units: latency in microseconds, bandwidth in GB/s (algorithm bandwidth,
as NCCL stores it in comm->bandwidths).
"""

from __future__ import annotations

from dataclasses import dataclass

from ncdoc.tuner.sim.graphs import CommTopo, Graph
from ncdoc.tuner.sim.params import NcclParams
from ncdoc.tuner.sim.revisions import (
    ALGOS, ALLGATHER, ALLREDUCE, BROADCAST, COLLNET_CHAIN, COLLNET_DIRECT, FUNCS, HW_NET, HW_NVLINK, HW_PCI,
    LL, LL128, LL128_MAX_NTHREADS, LL_MAX_NTHREADS, MAX_NTHREADS, NVLS, NVLS_TREE, PAT, PATH, PATTERN_TREE,
    PCI_BW, PROTOS, REDUCE, REDUCESCATTER, RING, SIMPLE, SIMPLE_MAX_NTHREADS, THREAD_THRESHOLDS, TREE, WARP_SIZE,
    Revision, cc_index)


@dataclass(frozen=True)
class ModelTables:
    """NCCL's tables for one communicator: [func][algo][proto] latency (us) and bandwidth (GB/s)."""
    latencies: tuple[tuple[tuple[float, ...], ...], ...]
    bandwidths: tuple[tuple[tuple[float, ...], ...], ...]
    max_threads: tuple[tuple[int, ...], ...]      # [algo][proto]
    thread_thresholds: tuple[tuple[int, ...], ...]
    topo: CommTopo
    revision: Revision
    params: NcclParams

    @property
    def nchannels(self) -> int:
        return self.topo.nchannels

    def lat(self, func: str, algo: str, proto: str) -> float:
        return self.latencies[FUNCS.index(func)][ALGOS.index(algo)][PROTOS.index(proto)]

    def bw(self, func: str, algo: str, proto: str) -> float:
        return self.bandwidths[FUNCS.index(func)][ALGOS.index(algo)][PROTOS.index(proto)]


def _nthreads(env: int, lo: int, hi: int, default: int) -> int:
    """getNthreads: non-multiple of 32 or above max -> max; below min -> min; unset -> default."""
    if env <= 0:
        return default
    if env % WARP_SIZE or env > hi:
        return hi
    return max(env, lo)


def _log2i(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else 0


def tune_tables(topo: CommTopo, rev: Revision, p: NcclParams, *, cpu_arch: str = "x86") -> ModelTables:
    """ncclTopoTuneModel over given graphs (topo.graphs may be NCCL's own printed graphs)."""
    g = topo.graphs
    ring = g[RING]
    simple_def = 256 if ring.bw_intra * ring.nchannels <= PCI_BW else SIMPLE_MAX_NTHREADS
    mt = [[0, 0, 0] for _ in ALGOS]
    mt[RING][SIMPLE] = _nthreads(p.nthreads, 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, simple_def)
    mt[TREE][SIMPLE] = _nthreads(p.nthreads, 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, SIMPLE_MAX_NTHREADS)
    for a in (COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE):
        mt[a][SIMPLE] = MAX_NTHREADS
    mt[RING][LL] = mt[TREE][LL] = _nthreads(p.nthreads, 2 * WARP_SIZE, LL_MAX_NTHREADS, LL_MAX_NTHREADS)
    mt[RING][LL128] = mt[TREE][LL128] = _nthreads(p.ll128_nthreads, LL128_MAX_NTHREADS // 4, LL128_MAX_NTHREADS,
                                                  LL128_MAX_NTHREADS)
    n = topo.nranks
    lat = [[[0.0] * 3 for _ in ALGOS] for _ in FUNCS]
    bws = [[[0.0] * 3 for _ in ALGOS] for _ in FUNCS]
    if n > 1:
        _fill(lat, bws, topo, rev, p, cpu_arch)
        _disable(bws, topo, rev, p)
    th = [[THREAD_THRESHOLDS[q] for q in range(3)] for _ in ALGOS]
    th[RING][LL] *= n
    th[COLLNET_DIRECT][SIMPLE] = th[COLLNET_CHAIN][SIMPLE] = 512
    if p.thread_thresholds:
        vals = p.thread_thresholds.split()
        for k, v in enumerate(vals[:6]):
            try:
                val = int(v)
            except ValueError:
                break
            if val >= 0:
                th[TREE if k < 3 else RING][k % 3] = val
    freeze = lambda t: tuple(tuple(tuple(r) for r in f) for f in t)  # noqa: E731
    return ModelTables(freeze(lat), freeze(bws), tuple(tuple(r) for r in mt), tuple(tuple(r) for r in th),
                       topo, rev, p)


def _fill(lat, bws, topo: CommTopo, rev: Revision, p: NcclParams, cpu_arch: str) -> None:
    g, n, nn = topo.graphs, topo.nranks, topo.nnodes
    ppn = n / nn
    cci = cc_index(topo.min_cc)
    idx2 = nn - 1 if nn <= 2 else 2
    idx1 = cci if nn == 1 else (1 if topo.cpu_vendor in ("AMD", "mixed") else 0)
    # Releases before 2.26 have no Blackwell row; NCCL of that age would not run there anyway.
    cci, idx1 = min(cci, len(rev.per_ch_tree) - 1), min(idx1, len(rev.ll_max_bws) - 1)
    ll_max = rev.ll_max_bws[idx1][idx2]
    tree_max = rev.per_ch_tree[cci][idx2]
    ring_ll128_max = rev.per_ch_ring_ll128[cci][idx2]
    tree_ll128_max = rev.per_ch_tree_ll128[cci][idx2]
    nvlstree_max = rev.per_ch_nvls_tree[cci][idx2] if rev.per_ch_nvls_tree else float("inf")
    hw_lat = [list(map(list, t)) for t in rev.hw_lat]
    if cpu_arch == "power":
        hw_lat[HW_PCI][TREE][SIMPLE] = hw_lat[HW_PCI][RING][SIMPLE]
    intra_hw = [HW_NVLINK if gr.type_intra == "NVL" else HW_PCI for gr in g]
    hw = [ih if nn == 1 else HW_NET for ih in intra_hw]
    overhead = p.net_overhead * .001 if p.net_overhead != -2 else (2.0 if topo.cpu_vendor == "AMD" else 1.0)
    pat_on = _pat_enabled(topo, rev, p)
    for c in range(len(FUNCS)):
        nsteps = 2 * (n - 1) if c == ALLREDUCE else n - 1 if c in (ALLGATHER, REDUCESCATTER) else n
        for a in range(len(ALGOS)):
            gr = g[a]
            if c in (BROADCAST, REDUCE) and a != RING:
                continue
            if c in (ALLGATHER, REDUCESCATTER):
                allowed = (RING, NVLS, COLLNET_DIRECT, PAT) if rev.agrs_nvls_collnet else (RING,)
                if a not in allowed or (a == PAT and rev.pat_factor is None):
                    continue
            if c == ALLREDUCE and a == PAT:
                continue
            if a == PAT and rev.pat_factor is None:
                continue
            for q in range(3):
                if a in (NVLS, NVLS_TREE) and q != SIMPLE:
                    continue
                if a == PAT and (q != SIMPLE or not pat_on):
                    continue
                collnet = a in (COLLNET_DIRECT, COLLNET_CHAIN)
                bw = gr.bw_intra if (nn <= 2 or collnet) else gr.bw_inter
                if a in (NVLS, NVLS_TREE):
                    if rev.nvls_bw_rule == "eff":
                        if gr.nchannels < 2:
                            continue
                        intra = gr.bw_intra * rev.nvls_eff[cci] * (gr.nchannels - 1) / gr.nchannels
                        intra *= 2.0 if c == ALLREDUCE else (ppn - 1) / ppn
                        inter = gr.bw_inter * (2 if (nn <= 2 and a == NVLS_TREE) else 1)
                        bw = min(intra, inter, nvlstree_max if a == NVLS_TREE else float("inf"))
                    elif a == NVLS and rev.nvls_bw_rule in ("min", "min_agrs"):
                        if rev.nvls_bw_rule == "min_agrs" and c != ALLREDUCE:
                            bw = min(gr.bw_intra * (ppn - 1.0) / ppn, gr.bw_inter * 0.9)
                        else:
                            bw = min(gr.bw_intra, gr.bw_inter)
                    elif a == NVLS_TREE and rev.nvls_bw_rule != "graph":
                        bw = min(gr.bw_intra, gr.bw_inter if nn <= 2 else gr.bw_inter / 2)
                bus = gr.nchannels * bw
                if a == RING and q == LL:
                    if rev.ring_ll_quarter:
                        bus = min(ll_max, bus * (0.25 if (nn > 1 or c in (ALLREDUCE, REDUCE)) else 1.0 / 3.0))
                    else:
                        bus = min(ll_max, bus * .5)
                if a == RING and q == LL128:
                    f = 0.7 if (rev.ring_ll128_ppn1 and ppn < 2) else 0.92
                    bus = min(bus * f, gr.nchannels * ring_ll128_max)
                if a == TREE and c == ALLREDUCE:
                    bus = min(bus * .92, gr.nchannels * tree_max)
                if a == TREE and q == LL:
                    bus = min(bus / 3.8, ll_max)
                if a == TREE and q == LL128:
                    bus = min(bus * (7.0 / 9.0 if nn == 1 else 120.0 / 128.0), gr.nchannels * tree_ll128_max)
                if a == TREE and rev.tree_pattern_factor and topo.max_tree_pattern == PATTERN_TREE:
                    bus *= .85
                if a == PAT:
                    bus *= rev.pat_factor
                if collnet and q != SIMPLE:
                    bus = 0.0
                if a == COLLNET_DIRECT and q == SIMPLE:
                    bus = _collnet_direct(bus, bw, gr, c, ppn, topo, rev)
                if a in (NVLS, COLLNET_DIRECT) and q == SIMPLE and c in (ALLGATHER, REDUCESCATTER) and nn > 1:
                    if rev.collnet_agrs_rule == "min09" or a == NVLS:
                        bus = 0.0     # needs a CollNet plugin with iallgather/ireducescatter; none is modelled
                if not (a != RING and c in (ALLGATHER, REDUCESCATTER)) or rev.convert_skip == "none" or \
                        (rev.convert_skip == "collnet_agrs" and a != COLLNET_DIRECT):
                    bus *= _ratio(a, n, nn, nsteps, rev)
                bws[c][a][q] = bus
                lat[c][a][q] = _latency(c, a, q, gr, topo, rev, hw_lat, intra_hw, hw, nsteps, overhead, ppn)


def _ratio(a: int, n: int, nn: int, nsteps: int, rev: Revision) -> float:
    if a == RING:
        return n / nsteps
    if a in (NVLS, NVLS_TREE):
        if rev.nvls_ratio_rule == "nsteps":
            return n / nsteps
        if rev.nvls_ratio_rule == "5/6":
            return 5.0 / 6.0
        return .75 if a == NVLS else (.70 * nn / (2 * (nn - 1)) if nn > 1 else 0.0)
    return .5


def _collnet_direct(bus: float, bw: float, gr: Graph, c: int, ppn: float, topo: CommTopo, rev: Revision) -> float:
    if c in (ALLGATHER, REDUCESCATTER) and rev.agrs_nvls_collnet:
        if rev.collnet_agrs_rule == "min09":
            return ppn * min(gr.bw_intra, gr.bw_inter * 0.9)
        w = (ppn - 1) / (8 - 1)
        return ppn * bw * (w * 0.85 + (1 - w) * 0.95) if topo.nnodes <= 1 else 0.0
    if gr.nchannels == 0:
        return 0.0
    factor = ppn / gr.nchannels
    factor -= (factor - 1) / 2
    bus /= factor
    return bus * .85 if topo.min_cc >= 90 else bus


def _latency(c, a, q, gr, topo, rev, hw_lat, intra_hw, hw, nsteps, overhead, ppn) -> float:
    n, nn = topo.nranks, topo.nnodes
    lat = rev.base_lat[a][q]
    intra = hw_lat[intra_hw[a]][a][q]
    if rev.ppn1_tree_net_lat and ppn == 1:
        inter = hw_lat[HW_NET][TREE][q]
    else:
        inter = hw_lat[HW_NET][a][q]
    inter += gr.latency_inter + (gr.latency_inter if q == SIMPLE else 0.0)
    lppn = n // nn - 1
    if a == RING:
        h = hw_lat[hw[a]][a][q]
        if c in (REDUCE, BROADCAST):
            if gr.same_channels:
                return lat + h
            if q == SIMPLE:
                h = hw_lat[hw[a]][TREE][q]
            return lat + nsteps * h
        net_ovh = (overhead * (3 if q == SIMPLE else 1)) if nn > 1 else 0.0
        intra = max(intra, net_ovh)
        if rev.ring_inter_2n:
            n_inter = (2 * nn if nn > 1 else 0) if c == ALLREDUCE else nn - 1
        else:
            n_inter = 0 if nn == 1 else (2 * (nn - 1) if c == ALLREDUCE else nn - 1)
        return lat + (nsteps - n_inter) * intra + n_inter * inter
    if a == TREE:
        return lat + 2 * (lppn * intra + _log2i(nn) * inter) if c == ALLREDUCE else lat
    if a == COLLNET_DIRECT:
        return lat + 2 * (min(1, lppn) * intra + lppn * rev.collnet_arity) + inter
    if a == COLLNET_CHAIN:
        return lat + 2 * lppn * intra + inter
    if rev.old_nvls_lat and a in (NVLS, NVLS_TREE):
        if a == NVLS:
            return lat + (hw_lat[HW_NET][a][q] if nn > 1 else 0.0)
        return lat + 2 * (nn - 1) * hw_lat[HW_NET][a][q]
    if a == NVLS:
        return intra + (inter if nn > 1 else 0.0)
    if a == NVLS_TREE:
        return lat + intra + 2 * _log2i(nn) * inter
    if a == PAT:
        return lat + _log2i(nn) * (inter / 3.5) + n * 2.8    # base 8; 2.23-2.27 wrote the 8 inline
    return lat


def _pat_enabled(topo: CommTopo, rev: Revision, p: NcclParams) -> bool:
    if rev.pat_needs_sm60 and topo.min_cc < 60:
        return False
    if p.pat_enable != 2:
        return p.pat_enable != 0
    return topo.nnodes == topo.nranks


def _disable(bws, topo: CommTopo, rev: Revision, p: NcclParams) -> None:
    """Protocol/algorithm enables: LL128 auto rule, NCCL_ALGO/NCCL_PROTO, NVLSTree, CollNet."""
    g = topo.graphs
    algo_en = [list(r) for r in p.algo_enable]
    for f in range(len(FUNCS)):
        for a in range(len(ALGOS)):
            off = (topo.nnodes == 1 and a == NVLS_TREE) or \
                  (not topo.collnet_support and (a in (COLLNET_DIRECT, COLLNET_CHAIN) or
                                                 (a == NVLS and topo.nnodes > 1))) or \
                  (topo.nvs_count == 0 and a == COLLNET_DIRECT)
            if off:
                algo_en[f][a] = 0
    for c in range(len(FUNCS)):
        for a in range(len(ALGOS)):
            for q in range(3):
                pe = p.proto_enable[c][q]
                if pe == 2 and q == LL128:
                    pe = int(_ll128_default(g[a], topo, rev, c, a))
                if pe == 0:
                    bws[c][a][q] = 0.0
                if rev.ring_never_disabled_nonallreduce and a == RING and c != ALLREDUCE:
                    continue
                if algo_en[c][a] == 0:
                    bws[c][a][q] = 0.0


def ll128_supported(t: ModelTables, func: int, algo: int) -> bool:
    """Would NCCL's own rule enable LL128 here? Where it would not, LL128 forced on through
    NCCL_PROTO can corrupt data (NVIDIA/nccl#831 on sockets, #281, #1261, PR#2053)."""
    return _ll128_default(t.topo.graphs[algo], t.topo, t.revision, func, algo)


def _ll128_default(gr: Graph, topo: CommTopo, rev: Revision, c: int, a: int) -> bool:
    lo, hi = topo.min_cc, topo.max_cc
    ti, tx = PATH[gr.type_intra], PATH[gr.type_inter]
    if rev.ll128_rule in ("2.27", "2.30"):
        ok = tx <= PATH["PXN"] if lo >= 90 else tx <= PATH["PXB"]
        ok = ok and ti <= PATH["NVB"]
        ok = ok and (lo == hi or (rev.ll128_rule == "2.30" and lo >= 90))
        return ok and lo >= 70
    ok = tx <= PATH["PXB"] or (lo >= 90 and tx <= PATH["PXN"])
    ok = ok and ti <= (PATH["NVL"] if rev.ll128_rule == "2.18" else PATH["NVB"])
    ok = ok and lo == hi
    arches = (70, 80, 90, 100, 120) if rev.ll128_rule == "2.26" else (70, 80, 90)
    return ok and lo in arches
