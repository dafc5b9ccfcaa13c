"""Layer (a): NCCL's own cost model, deciding what NCCL would pick for an environment.

The tables come from tuning.py (ncclTopoTuneModel); the per-call choice here follows
src/graph/tuning.cc `ncclTopoGetAlgoTime` and src/enqueue.cc `updateCollCostTable`,
`topoGetAlgoInfo` of HEAD 2.30.7 (nccl_facts.md 4.5): time = lat * latCount + nBytes / (1000 * bw)
with the tree correction and the ring plateau, the argmin, then channels and threads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ncdoc.errors import UsageError
from ncdoc.tuner.sim.cluster import SimCluster
from ncdoc.tuner.sim.errors import SimTrialError
from ncdoc.tuner.sim.graphs import CommTopo, comm_topology
from ncdoc.tuner.sim.params import NcclParams, parse_env
from ncdoc.tuner.sim.revisions import (
    ALGOS, ALLGATHER, ALLREDUCE, BROADCAST, COLLNET_CHAIN, COLLNET_DIRECT, FUNCS, MAX_NTHREADS, NVLS, NVLS_TREE,
    PAT, PROTOS, REDUCE, REDUCESCATTER, RING, SIMPLE, SIMPLE_MAX_NTHREADS, TREE, TREE_CORRECTION, WARP_SIZE,
    Revision, parse_version, revision_for, with_example_plugin)
from ncdoc.tuner.sim.tuning import ModelTables, tune_tables

# nccl-tests collective names -> NCCL function index (None: no NCCL collective cost model).
COLLECTIVES = {"all_reduce": ALLREDUCE, "all_gather": ALLGATHER, "reduce_scatter": REDUCESCATTER,
               "broadcast": BROADCAST, "reduce": REDUCE, "alltoall": None, "sendrecv": None}


@dataclass(frozen=True)
class Choice:
    algo: str
    proto: str
    nchannels: int
    nthreads: int
    model_time_us: float


@lru_cache(maxsize=512)
def _tables_cached(cluster: SimCluster, env_items: tuple[tuple[str, str], ...], plugin: bool = False) -> ModelTables:
    rev = revision_for(parse_version(cluster.nccl_version))
    if plugin:
        rev = with_example_plugin(rev)
    params = parse_env(dict(env_items), cluster.nccl_version, rdma=cluster.fabric != "socket", socket_vendor=cluster.socket_vendor)
    topo = comm_topology(cluster, params)
    tables = tune_tables(topo, rev, params)
    if rev.ring_backup:
        tables = _with_ring_backup(tables, topo, rev, params)
    return tables


def _with_ring_backup(tables: ModelTables, topo: CommTopo, rev: Revision, p: NcclParams) -> ModelTables:
    """Before 2.24 a function left with no algorithm got its Ring bandwidths back (comm->ringbdw,
    taken before NCCL_ALGO; protocols NCCL_PROTO disabled stay off, as in 2.23)."""
    bws = [[list(r) for r in f] for f in tables.bandwidths]
    if not any(b for f in bws for r in f for b in r):
        return tables
    full = None
    for c in range(len(FUNCS)):
        if not any(b for r in bws[c] for b in r):
            if full is None:   # Ring bandwidths before the enables (comm->ringbdw)
                open_p = replace(p, algo_enable=tuple((1,) * len(ALGOS) for _ in FUNCS))
                full = tune_tables(topo, rev, open_p).bandwidths
            bws[c][RING] = list(full[c][RING])
    return ModelTables(tables.latencies, tuple(tuple(tuple(r) for r in f) for f in bws), tables.max_threads,
                       tables.thread_thresholds, topo, rev, p)


def env_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in env.items() if k.startswith("NCCL_")))


def model_tables(cluster: SimCluster, env: Mapping[str, str], *, plugin: bool = False) -> ModelTables:
    """NCCL's latency/bandwidth tables, channels and threads for this cluster and environment
    (`plugin`: with NCCL's example tuner plugin loaded, which changes three constants)."""
    return _tables_cached(cluster, env_key(env), plugin)


def nccl_choice(cluster: SimCluster, env: Mapping[str, str], collective: str, nbytes: int) -> Choice:
    """What NCCL would run for one call: algorithm, protocol, channels, threads and its own estimate.

    `nbytes` is NCCL's nBytes: the total buffer for all_gather/reduce_scatter, the message otherwise.
    """
    return choose(model_tables(cluster, env), collective, nbytes)


def cost_table(t: ModelTables, c: int, nbytes: int) -> dict[tuple[int, int], float]:
    """NCCL's time estimate (us) per usable (algorithm, protocol) for one call of function `c`:
    the collCostTable a tuner plugin sees, without its IGNORE entries."""
    topo = t.topo
    out: dict[tuple[int, int], float] = {}
    log_size = (nbytes >> 6).bit_length() - 1          # log2i; -1 below 64 bytes
    nvlstree_corr = topo.min_cc >= 100 and t.revision.tree_corr_len == 24
    for a in range(len(ALGOS)):
        if a in (COLLNET_DIRECT, COLLNET_CHAIN) and not topo.collnet_support:
            continue
        if a in (NVLS, NVLS_TREE) and (not topo.nvls_support or (c != ALLREDUCE and topo.ppn > 32)):
            continue
        if a == NVLS and not topo.collnet_support and topo.nnodes > 1:
            continue
        for q in range(3):
            bw, lat = t.bandwidths[c][a][q], t.latencies[c][a][q]
            if bw == 0:
                continue
            if a == TREE and c == ALLREDUCE and 0 <= log_size < 23:
                bw *= TREE_CORRECTION[q][log_size]
            if a == NVLS_TREE and c == ALLREDUCE and nvlstree_corr and 0 <= log_size < 24:
                bw *= TREE_CORRECTION[q][log_size]      # sm100 on x86 only (2.29+)
            if a == RING and q == SIMPLE and topo.nnodes > 1 and c == ALLREDUCE and \
                    nbytes // max(1, topo.nchannels * topo.nranks) >= 64:
                lat *= 1.9 if topo.min_cc < 80 else 1.4
            out[(a, q)] = lat + nbytes / (1000 * bw)
    return out


def choose(t: ModelTables, collective: str, nbytes: int, table: Sequence[Any] | None = None) -> Choice:
    """NCCL's choice for one call; with `table` (ncdoc.tuner.table rules) as NCCL's example tuner
    plugin steers it: a matching usable rule forces its algorithm, protocol and channel count, any
    other call keeps NCCL's cheapest algorithm on the ONE channel the plugin leaves it."""
    if collective not in COLLECTIVES:
        raise UsageError(f"unknown collective {collective!r}; expected one of {', '.join(COLLECTIVES)}")
    c = COLLECTIVES[collective]
    topo = t.topo
    if c is None:   # send/recv based: NCCL runs them on its p2p channels, without the cost table
        return _p2p_choice(t, collective, nbytes)
    if topo.nranks == 1:
        return Choice("Ring", "Simple", 1, SIMPLE_MAX_NTHREADS, 0.0)
    costs = cost_table(t, c, nbytes)
    if not costs:
        extra = "".join(f" {k} was set to {v}." for k, v in (("NCCL_ALGO", t.params.algo_env),
                                                              ("NCCL_PROTO", t.params.proto_env)) if v)
        raise SimTrialError(f"No algorithm/protocol available for function {FUNCS[c]} with datatype "
                            f"ncclFloat32.{extra}", kind="call")
    if table:
        from ncdoc.tuner.table import plugin_pick
        pick = plugin_pick(table, collective, nbytes, topo.nnodes, topo.nranks,
                           lambda algo, proto: (ALGOS.index(algo), PROTOS.index(proto)) in costs)
        if pick is not None:
            a, q, nc = ALGOS.index(pick[0]), PROTOS.index(pick[1]), pick[2]
        else:
            (a, q), nc = min(costs, key=costs.get), 1
        return Choice(ALGOS[a], PROTOS[q], nc, _threads(t, a, q, nbytes, nc), costs[(a, q)])
    a, q = min(costs, key=costs.get)
    nc = nccl_channels(t, a, q, nbytes)
    return Choice(ALGOS[a], PROTOS[q], nc, _threads(t, a, q, nbytes, nc), costs[(a, q)])


def nccl_channels(t: ModelTables, a: int, q: int, nbytes: int) -> int:
    """The channel count NCCL gives algorithm `a` with protocol `q` for a call of `nbytes`
    (topoGetAlgoInfo): what a tuner-table rule must carry to keep NCCL's choice."""
    topo = t.topo
    nc, nt, th = topo.nchannels, t.max_threads[a][q], t.thread_thresholds[a][q]
    if a in (NVLS, NVLS_TREE):
        return min(topo.nvls_channels, topo.nchannels) if (topo.nnodes > 1 and a == NVLS) else topo.nvls_channels
    if a == COLLNET_DIRECT:
        return max(1, min(nc, 16))     # NCCL steps this down by nHeads; CollNet runs are not modelled further
    while nbytes < nc * nt * th and nc >= 2:
        nc -= 1
    return nc


def _threads(t: ModelTables, a: int, q: int, nbytes: int, nc: int) -> int:
    nt, th = t.max_threads[a][q], t.thread_thresholds[a][q]
    if a not in (NVLS, NVLS_TREE, COLLNET_DIRECT):
        while nbytes < nc * nt * th and nt % 128 == 0:
            nt //= 2
    if q == SIMPLE:
        nt += WARP_SIZE if a == RING else 4 * WARP_SIZE if a == TREE else 0
    nt = max(nt, 3 * WARP_SIZE)
    if a in (TREE, PAT):
        nt = MAX_NTHREADS
    return nt


def _p2p_choice(t: ModelTables, collective: str, nbytes: int) -> Choice:
    """Send/recv: LL when a peer's bytes <= its channels x NCCL_P2P_LL_THRESHOLD (16384), else Simple.

    src/enqueue.cc; a peer gets at least 2 p2p channels (nccl_facts 2.7). NCCL keeps no cost table
    for p2p, so there is no model time.
    """
    topo = t.topo
    per_peer = nbytes // topo.nranks if collective == "alltoall" else nbytes
    proto = "LL" if per_peer <= 2 * 16384 else "Simple"
    return Choice("P2P", proto, max(1, topo.nchannels), SIMPLE_MAX_NTHREADS, 0.0)


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md; nccl_facts 5.1)."""
    if collective == "all_reduce":
        return 2.0 * (nranks - 1) / nranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (nranks - 1) / nranks
    return 1.0

