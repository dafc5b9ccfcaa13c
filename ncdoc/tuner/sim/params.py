"""The NCCL environment as NCCL itself would read it, for the variables the simulator models.

Integer variables follow `NCCL_PARAM` (strtoll base 0: "0x40" = 64, "010" = 8, "12abc" = 12,
garbage = 0, empty = default; nccl_facts.md section 1.1). Integers, path levels and the
NCCL_ALGO / NCCL_PROTO lists are read by ncdoc.nccl.parse, the same code `ncdoc lint` uses.
A value NCCL rejects at init raises SimTrialError with the line NCCL would WARN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ncdoc.nccl.parse import parse_algo_proto, parse_level
from ncdoc.nccl.parse import strtoll as nccl_strtoll
from ncdoc.tuner.sim.errors import SimTrialError
from ncdoc.tuner.sim.revisions import ALGOS, FUNCS, PATH, PROTOS

_SOCKET_MAX_THREADS, _SOCKET_MAX_SOCKETS = 16, 64   # src/transport/net_socket.cc


def strtoll(text: str | None, default: int) -> int:
    """NCCL_PARAM's reading of a value: strtoll base 0; unset, empty or overflowing -> default."""
    if text is None:
        return default
    parsed = nccl_strtoll(text)
    return default if parsed.value is None else parsed.value


def path_level(text: str | None, version: str | None = None) -> int | None:
    """NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL as the path index NCCL compares with, read by
    ncdoc.nccl.parse (exact names of that release, legacy integers); None: NCCL ignores it."""
    if text is None:
        return None
    name, _ = parse_level(text, version=version)
    return None if name is None else PATH[name]


def _enable(value: str, items: tuple[str, ...], version: str) -> tuple[tuple[int, ...], ...]:
    """NCCL_ALGO / NCCL_PROTO as a [func][item] enable matrix, read by ncdoc.nccl.parse in the
    grammar of `version`; a value NCCL rejects raises the line NCCL WARNs."""
    parsed = parse_algo_proto(value, "proto" if items == PROTOS else "algo", version=version)
    if parsed.warn:
        raise SimTrialError(parsed.warn[0], kind="init")
    rows = []
    for func in FUNCS:
        on = parsed.enabled[func]
        if "CollNet" in on:                       # before 2.14 one name stood for both CollNet algorithms
            on = on | {"CollNetDirect", "CollNetChain"}
        rows.append(tuple(int(item in on) for item in items))
    return tuple(rows)


@dataclass(frozen=True)
class NcclParams:
    algo_env: str | None
    proto_env: str | None
    algo_enable: tuple[tuple[int, ...], ...]    # [func][algo]: 0/1
    proto_enable: tuple[tuple[int, ...], ...]   # [func][proto]: 0/1, LL128 2 = auto
    min_nchannels: int                          # effective: max(MIN_NCHANNELS, MIN_CTAS)
    max_nchannels: int                          # effective: min(MAX_NCHANNELS, MAX_CTAS)
    min_ctas: int
    max_ctas: int
    nthreads: int                               # -2 = default
    ll128_nthreads: int
    thread_thresholds: str | None
    buffsize: int                               # Simple buffer, bytes
    p2p_net_chunksize: int
    p2p_nvl_chunksize: int
    nvls_enable: int
    nvls_nchannels: int | None
    cross_nic: int
    gdr_level: int | None                       # path index; None = NCCL's default
    gdr_read: int
    net: str                                    # "IB" | "Socket"
    socket_threads: int                         # resolved, after auto-detection and clamps
    socket_per_thread: int
    ib_qps: int
    ib_split: int
    ib_ar_threshold: int
    ib_adaptive_routing: int
    pxn_disable: bool
    pxn_level: int                              # NCCL_P2P_PXN_LEVEL: 0 never, 1 when needed, 2 always
    net_peer_channels: int | None               # NCCL_NCHANNELS_PER_NET_PEER; None: NCCL's default
    ib_tc: int                                  # NCCL_IB_TC (-1: the comm's traffic class, else 0)
    ib_sl: int
    ib_relaxed_ordering: int                    # NCCL_IB_PCI_RELAXED_ORDERING: 0 off, 1 on, 2 if available
    nvls_chunksize: int
    nvlstree_max_chunksize: int | None          # None: NCCL's auto (64 KiB from 4 nodes)
    p2p_level: int | None
    p2p_disable: bool
    shm_disable: bool
    collnet_enable: int
    pat_enable: int
    net_overhead: int
    notes: tuple[str, ...]                      # what NCCL would WARN/INFO about the values

    @property
    def socket_count(self) -> int:
        return max(0, self.socket_threads * self.socket_per_thread)


def parse_env(env: Mapping[str, str], version: str, *, rdma: bool, socket_vendor: str) -> NcclParams:
    """Read the modelled variables; raise SimTrialError where NCCL fails init."""
    g = env.get
    notes: list[str] = []

    def i(name: str, default: int) -> int:
        return strtoll(g(name), default)

    algo_env, proto_env = g("NCCL_ALGO"), g("NCCL_PROTO")
    # Unset: everything on, LL128 "auto" (2: NCCL's own rule decides). Set: each item on or off,
    # so a list that names LL128 (or excludes only LL) forces it on where NCCL would not.
    algo = _enable(algo_env, ALGOS, version) if algo_env else tuple((1,) * len(ALGOS) for _ in FUNCS)
    proto = _enable(proto_env, PROTOS, version) if proto_env else tuple((1, 2, 1) for _ in FUNCS)

    # Channels (src/graph/connect.cc ncclMin/MaxNchannels; src/init.cc CTAs, nccl_facts 1.4 #10).
    # The new names win over the old NRINGS ones when both are set.
    min_nch = i("NCCL_MIN_NCHANNELS", i("NCCL_MIN_NRINGS", -2))
    min_nch = max(0, min(64, 0 if min_nch == -2 else min_nch))
    max_nch = i("NCCL_MAX_NCHANNELS", i("NCCL_MAX_NRINGS", -2))
    max_nch = max(1, min(64, 64 if max_nch == -2 else max_nch))
    min_ctas, max_ctas = 1, 64
    v = i("NCCL_MIN_CTAS", -(2**31))
    if v != -(2**31) and v > 0:
        min_ctas = v
    v = i("NCCL_MAX_CTAS", -(2**31))
    if v != -(2**31) and v > 0:
        max_ctas = v
    min_ctas, max_ctas = min(min_ctas, 64), min(max_ctas, 64)
    min_ctas = min(min_ctas, max_ctas)

    # Network selection (section 2.6): NCCL_NET names the plugin; the internal IB needs RDMA.
    ib_disable = i("NCCL_IB_DISABLE", 0) != 0
    want = g("NCCL_NET")
    ib_ok = rdma and not ib_disable
    if want:
        if want.lower() == "ib" and ib_ok:
            net = "IB"
        elif want.lower() == "socket":
            net = "Socket"
        else:
            raise SimTrialError("Failed to initialize any NET plugin", kind="init")
    else:
        net = "IB" if ib_ok else "Socket"

    # Socket helper threads (section 2.9): auto only where a value is -2; 0 threads outside AWS/GCP.
    nt, ns = i("NCCL_SOCKET_NTHREADS", -2), i("NCCL_NSOCKS_PERTHREAD", -2)
    if nt > _SOCKET_MAX_THREADS:
        notes.append(f"NET/Socket : NCCL_SOCKET_NTHREADS is greater than the maximum allowed, setting to "
                     f"{_SOCKET_MAX_THREADS}")
        nt = _SOCKET_MAX_THREADS
    if nt == -2 or ns == -2:
        auto = {"aws": (2, 8), "gcp": (4, 1)}.get(socket_vendor, (0, 1))
        nt = auto[0] if nt == -2 else nt
        ns = auto[1] if ns == -2 else ns
    if nt > 0 and ns * nt > _SOCKET_MAX_SOCKETS:
        ns = _SOCKET_MAX_SOCKETS // nt
        notes.append("NET/Socket : the total number of sockets is greater than the maximum allowed, setting "
                     f"NCCL_NSOCKS_PERTHREAD to {ns}")

    qps = i("NCCL_IB_QPS_PER_CONNECTION", 1)
    if net == "IB" and not 1 <= qps <= 128:
        # No clamp in NCCL: nqps indexes qps[NCCL_IB_MAX_QPS=128] (nccl_facts 1.4 #7).
        raise SimTrialError(f"NCCL_IB_QPS_PER_CONNECTION={g('NCCL_IB_QPS_PER_CONNECTION')} gives {qps} queue "
                            "pairs per connection, outside 1..128: NCCL does not check it and the connection "
                            "setup fails or corrupts memory", kind="crash")

    buffsize = i("NCCL_BUFFSIZE", -2)
    buffsize = 1 << 22 if buffsize == -2 else buffsize
    if buffsize <= 0:
        raise SimTrialError(f"NCCL_BUFFSIZE={g('NCCL_BUFFSIZE')} gives a {buffsize}-byte Simple buffer; NCCL "
                            "does not validate it and the first collective never completes", kind="hang")
    # P2P chunks are capped to BUFFSIZE/NCCL_STEPS (src/init.cc).
    net_chunk = i("NCCL_P2P_NET_CHUNKSIZE", 1 << 17)
    nvl_chunk = i("NCCL_P2P_NVL_CHUNKSIZE", 1 << 19)
    net_chunk = max(1, min(net_chunk, buffsize // 8))
    nvl_chunk = max(1, min(nvl_chunk, buffsize // 8))

    nvls_nch = i("NCCL_NVLS_NCHANNELS", -(2**31))
    npp = i("NCCL_NCHANNELS_PER_NET_PEER", -1)
    nvlstree = i("NCCL_NVLSTREE_MAX_CHUNKSIZE", -2)
    return NcclParams(
        algo_env=algo_env, proto_env=proto_env, algo_enable=algo, proto_enable=proto,
        min_nchannels=max(min_nch, min_ctas), max_nchannels=min(max_nch, max_ctas),
        min_ctas=min_ctas, max_ctas=max_ctas,
        nthreads=i("NCCL_NTHREADS", -2), ll128_nthreads=i("NCCL_LL128_NTHREADS", -2),
        thread_thresholds=g("NCCL_THREAD_THRESHOLDS"),
        buffsize=buffsize,
        p2p_net_chunksize=net_chunk, p2p_nvl_chunksize=nvl_chunk,
        nvls_enable=i("NCCL_NVLS_ENABLE", 2),
        nvls_nchannels=None if nvls_nch == -(2**31) else nvls_nch,
        cross_nic=i("NCCL_CROSS_NIC", 2),
        gdr_level=path_level(g("NCCL_NET_GDR_LEVEL"), version), gdr_read=i("NCCL_NET_GDR_READ", -2),
        net=net, socket_threads=nt, socket_per_thread=ns,
        ib_qps=qps, ib_split=i("NCCL_IB_SPLIT_DATA_ON_QPS", 0), ib_ar_threshold=i("NCCL_IB_AR_THRESHOLD", 8192),
        ib_adaptive_routing=i("NCCL_IB_ADAPTIVE_ROUTING", -2),
        pxn_disable=i("NCCL_PXN_DISABLE", 0) != 0, pxn_level=i("NCCL_P2P_PXN_LEVEL", 2),
        net_peer_channels=npp if npp >= 1 else None,
        ib_tc=i("NCCL_IB_TC", -1), ib_sl=i("NCCL_IB_SL", -1),
        ib_relaxed_ordering=i("NCCL_IB_PCI_RELAXED_ORDERING", 2),
        nvls_chunksize=max(1, i("NCCL_NVLS_CHUNKSIZE", 1 << 17)),
        nvlstree_max_chunksize=nvlstree if nvlstree > 0 else None,
        p2p_level=path_level(g("NCCL_P2P_LEVEL"), version), p2p_disable=i("NCCL_P2P_DISABLE", 0) == 1,
        shm_disable=i("NCCL_SHM_DISABLE", 0) == 1,
        collnet_enable=1 if i("NCCL_COLLNET_ENABLE", 0) == 1 else 0,
        pat_enable=i("NCCL_PAT_ENABLE", 2), net_overhead=i("NCCL_NET_OVERHEAD", -2),
        notes=tuple(notes),
    )
