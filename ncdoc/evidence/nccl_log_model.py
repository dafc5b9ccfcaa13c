"""What an NCCL log says, as frozen records (LogFacts and the parts it holds), and their JSON view:
the object `ncdoc triage --json` carries under "facts" (LogFacts.to_facts, log_facts_dict).

Top-level keys (stable): nccl_version, nccl_versions, cuda_build, cuda_driver, transport,
transports, network, net_devices (names), net_device_details, link_layer, relaxed_ordering,
ib_no_device, ib_no_device_hosts, net_plugin, socket_ifaces, bootstrap, gdr (state),
gdr_detail, dma_buf, env, env_conflicts, channels, nvls_available, nranks, nnodes,
local_ranks, init_start, init_complete, comms, hosts, host_count, rank_count, ranks,
lines, recognised_lines, warn_lines, problems, problem_counts, nccl_results, nccl_result_sources, algorithms,
ib_qp, cross_nic, cloud, nvswitch_context, framework (watchdog_timeouts, watchdog_progress, ...), evidence. Nested objects never reuse a top-level
key name, so a key found anywhere in the facts means one thing.
"""

from __future__ import annotations

from ncdoc.startup.record import field, record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ncdoc.evidence.citation import Citation


@record
class NetDevice:
    name: str                          # "mlx5_0:1" (IB/RoCE device:port) or "eth0" (socket transport)
    transport: str                     # "IB" | "Socket"
    link_layer: str | None = None      # "IB" | "RoCE" (IB transport only)
    index: int | None = None           # NCCL's net device index
    address: str | None = None         # socket devices: the IP NCCL uses
    speed_mbps: int | None = None      # when the log prints it (NCCL >= 2.23 device lines)
    hosts: tuple[str, ...] = ()


@record
class SocketIface:
    name: str
    address: str | None
    role: str                          # "bootstrap" | "net" (socket transport) | "oob" (IB's side channel)
                                       # | "candidate" (old "IP Interfaces :" lists)
    classification: str                # "ok" | "loopback" | "link_local" | "virtual"
    kind: str                          # NetIf.kind guessed from the name: physical, loopback, docker, virbr, bond...
    hosts: tuple[str, ...]
    evidence: Citation


@record
class Problem:
    kind: str                          # "ib_completion_error", "socket_connect_error", "cuda_failure", ...
    meaning: str                       # what the code or message means, in words
    message: str                       # NCCL's message, trimmed
    level: str                         # "WARN" | "INFO" | "framework" (PyTorch c10d and friends) | "last_error"
    code: int | None = None            # ibv_wc_status, errno, CUDA error or ncclResult_t, by kind
    code_name: str | None = None       # "IBV_WC_RETRY_EXC_ERR", "ETIMEDOUT", "cudaErrorUnknown", ...
    details: dict[str, Any] = field(default_factory=dict)
    host: str | None = None
    rank: str | None = None            # host:pid:dev
    source_file: str | None = None     # NCCL source file:line of a WARN ("transport/nvls.cc:223")
    evidence: Citation | None = None


@record
class GdrFacts:
    state: str = "unknown"             # "enabled" | "disabled" | "partial" | "unknown"
    basis: str = ""                    # "channels" | "gpu_nic_pairs" | "hca" | "ring" | ""
    reason: str = ""                   # why it is off, in NCCL's terms, when it is
    channels_on: int = 0               # NET channel lines with /GDRDMA (IB or plugin, not Socket)
    channels_off: int = 0
    pairs_on: int = 0                  # "GPU Direct RDMA Enabled|Disabled for GPU ... / HCA ..." lines
    pairs_off: int = 0
    hcas_on: tuple[str, ...] = ()      # "NET/IB : GPU Direct RDMA Enabled|Disabled for HCA n 'name'"
    hcas_off: tuple[str, ...] = ()
    off_reasons: tuple[str, ...] = ()
    ranks_off: tuple[str, ...] = ()    # ranks with NET channels without GDR
    directions_off: tuple[str, ...] = ()  # "send" (GDR read) | "receive" (GDR write)
    ring_flags: dict[str, int] = field(default_factory=dict)   # "Connected all rings ... GDR n" -> lines
    dma_buf: bool | None = None        # "DMA-BUF is available on GPU device n" seen
    evidence: tuple[Citation, ...] = ()


@record
class ChannelFacts:
    nchannels: int | None = None       # from "Channel 00/08 :" ring listings
    by_transport: dict[str, int] = field(default_factory=dict)   # P2P / SHM / NET / COLLNET -> lines
    kinds: dict[str, int] = field(default_factory=dict)          # "P2P/IPC", "NET/IB/GDRDMA", "SHM" ...
    net_names: dict[str, int] = field(default_factory=dict)      # "IB", "Socket", plugin names -> lines
    net_gdr: int = 0
    net_no_gdr: int = 0                # NET lines without GDRDMA, Socket excluded
    pxn: int = 0                       # NET sends proxied through another GPU (PXN)
    coll_channels: int | None = None   # "16 coll channels, 16 collnet channels, 0 nvls channels, 16 p2p channels"
    collnet_channels: int | None = None
    nvls_channels: int | None = None
    p2p_channels: int | None = None


@record
class CommFacts:
    comm_id: str                       # commId, or "nranks=<n>" for logs that print none
    nranks: int
    nnodes: int | None = None
    local_ranks: int | None = None
    init_start: int = 0
    init_complete: int = 0
    destroyed: int = 0
    missing_ranks: tuple[int, ...] = ()  # logged Init START but never Init COMPLETE


@record
class RankFacts:
    key: str                           # host:pid:dev
    host: str
    pid: str | None
    dev: int | None
    ranks: tuple[int, ...] = ()        # global ranks this GPU had in the comms logged
    nccl_version: str | None = None
    transport: str | None = None
    net_devices: tuple[str, ...] = ()
    bootstrap: str | None = None
    init_start: int = 0
    init_complete: int = 0
    warns: int = 0


@record
class PluginFacts:
    requested: str | None = None       # NCCL_NET_PLUGIN / "Plugin name set by env to"
    missing: bool = False              # "Could not find: libnccl-net.so" / "No plugin found"
    missing_detail: tuple[str, ...] = ()
    loaded: tuple[str, ...] = ()       # "Loaded net plugin X (vN)", "P2P plugin X"
    collnet_loaded: tuple[str, ...] = ()
    external_paths: tuple[str, ...] = ()
    initialized: tuple[str, ...] = ()  # "Initialized NET plugin X"
    failed: tuple[str, ...] = ()       # "Failed to initialize NET plugin X" (2.27+)
    assigned: tuple[str, ...] = ()     # "Assigned NET plugin X to comm"
    internal: bool | None = None       # said it uses its internal implementation
    ofi_version: str | None = None
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    evidence: tuple[Citation, ...] = ()


@record
class WatchdogTimeout:
    """One collective a framework's watchdog gave up on (PyTorch: "Watchdog caught collective operation timeout")."""
    rank: int | None                   # the rank the framework names ("[Rank 3]", "[rank3]:")
    pg: str | None                     # its process group ("PG 1"), when named
    seq: int                           # SeqNum: the collective's number in that process group
    op: str                            # OpType: ALLREDUCE, BROADCAST, ALLGATHER, _ALLGATHER_BASE, GATHER, SEND...
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    evidence: Citation | None = None


@record
class WatchdogProgress:
    """"... at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807"."""
    rank: int | None
    pg: str | None
    seq: int
    last_enqueued: int
    last_completed: int
    evidence: Citation | None = None


@record
class FrameworkFacts:
    timeouts: tuple[WatchdogTimeout, ...] = ()
    progress: tuple[WatchdogProgress, ...] = ()
    timeout_lines: int = 0             # every watchdog-timeout line, repeats included
    terminated: int = 0                # "Process group watchdog thread terminated with exception"
    stuck_s: int | None = None         # "watchdog got stuck for N seconds" (heartbeat monitor)
    stuck_line: Citation | None = None
    env_named: dict[str, Citation] = field(default_factory=dict)   # TORCH_NCCL_* / NCCL_ASYNC_* the lines name


@record
class LogFacts:
    source: str = ""
    lines: int = 0
    recognised_lines: int = 0          # lines the parser read a fact from (NCCL INFO/WARN of interest)
    warn_lines: int = 0
    nccl_version: str | None = None    # the most common one
    nccl_versions: tuple[str, ...] = ()
    cuda_build: str | None = None      # the CUDA NCCL was built with ("12.9" from "+cuda12.9")
    cuda_driver: str | None = None     # "12.4" from "cudaDriverVersion 12040"
    transport: str | None = None       # "IB" | "Socket" | an external plugin's name; most ranks' choice
    transports: dict[str, int] = field(default_factory=dict)   # transport -> ranks using it
    network: str | None = None         # the network's name as NCCL printed it ("IBext_v8", "AWS Libfabric")
    net_devices: tuple[NetDevice, ...] = ()
    link_layer: str | None = None      # "IB" | "RoCE" | "mixed"
    relaxed_ordering: bool | None = None
    ib_no_device: bool = False         # "NET/IB : No device found."
    ib_no_device_hosts: tuple[str, ...] = ()
    plugin: PluginFacts = field(default_factory=PluginFacts)
    socket_ifaces: tuple[SocketIface, ...] = ()
    gdr: GdrFacts = field(default_factory=GdrFacts)
    env: dict[str, str] = field(default_factory=dict)
    env_conflicts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    channels: ChannelFacts = field(default_factory=ChannelFacts)
    nvls_available: bool | None = None
    comms: tuple[CommFacts, ...] = ()
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    init_start: int = 0
    init_complete: int = 0
    hosts: tuple[str, ...] = ()
    host_count: int = 0
    ranks: tuple[RankFacts, ...] = ()
    rank_count: int = 0
    problems: tuple[Problem, ...] = ()
    problem_counts: dict[str, int] = field(default_factory=dict)
    nccl_results: dict[str, int] = field(default_factory=dict)   # ncclSystemError...: "-> N" traces, frameworks' reports
    nccl_result_sources: dict[str, dict[str, int]] = field(default_factory=dict)  # result -> file:line of traces
    algorithms: dict[str, Any] = field(default_factory=dict)
    ib: dict[str, Any] = field(default_factory=dict)              # RoCE GID indexes, MTUs from QP lines
    cross_nic: tuple[int, ...] = ()    # crossNic values of the graph search lines
    cloud: dict[str, Any] = field(default_factory=dict)           # {"aws": bool, "reasons": [...]}
    nvswitch_context: tuple[str, ...] = ()  # why NVSwitch/NVLS is involved, when it is
    framework: FrameworkFacts = field(default_factory=FrameworkFacts)   # a framework's watchdog lines
    evidence: dict[str, tuple[Citation, ...]] = field(default_factory=dict)

    def problems_of(self, kind: str) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == kind)

    def to_facts(self) -> dict[str, Any]:
        """The JSON object `ncdoc triage` copies into its "facts" (keys documented in the module)."""
        return log_facts_dict(self)


_RANKS_OUT = 256


def log_facts_dict(f: LogFacts) -> dict[str, Any]:
    g = f.gdr
    return {
        "nccl_version": f.nccl_version,
        "nccl_versions": list(f.nccl_versions),
        "cuda_build": f.cuda_build,
        "cuda_driver": f.cuda_driver,
        "transport": f.transport,
        "transports": dict(f.transports),
        "network": f.network,
        "net_devices": [d.name for d in f.net_devices],
        "net_device_details": [
            {"name": d.name, "via": d.transport, "link_layer": d.link_layer, "index": d.index,
             "address": d.address, "speed_mbps": d.speed_mbps, "hosts": list(d.hosts)} for d in f.net_devices],
        "link_layer": f.link_layer,
        "relaxed_ordering": f.relaxed_ordering,
        "ib_no_device": f.ib_no_device,
        "ib_no_device_hosts": list(f.ib_no_device_hosts),
        "net_plugin": {
            "requested": f.plugin.requested, "missing": f.plugin.missing,
            "missing_detail": list(f.plugin.missing_detail), "loaded": list(f.plugin.loaded),
            "collnet_loaded": list(f.plugin.collnet_loaded), "external_paths": list(f.plugin.external_paths),
            "initialized": list(f.plugin.initialized), "assigned": list(f.plugin.assigned),
            "failed": list(f.plugin.failed),
            "internal": f.plugin.internal, "ofi_version": f.plugin.ofi_version,
            "ofi_provider": f.plugin.ofi_provider, "ofi_nics": f.plugin.ofi_nics,
            "lines": [e.to_dict() for e in f.plugin.evidence]},
        "socket_ifaces": [
            {"name": s.name, "address": s.address, "role": s.role, "classification": s.classification,
             "kind": s.kind, "hosts": list(s.hosts), "line": s.evidence.line, "text": s.evidence.text}
            for s in f.socket_ifaces],
        "bootstrap": [f"{s.name}:{s.address}" if s.address else s.name
                      for s in f.socket_ifaces if s.role == "bootstrap"],
        "gdr": g.state,
        "gdr_detail": {
            "basis": g.basis, "reason": g.reason, "channels_on": g.channels_on, "channels_off": g.channels_off,
            "pairs_on": g.pairs_on, "pairs_off": g.pairs_off, "hcas_on": list(g.hcas_on),
            "hcas_off": list(g.hcas_off), "off_reasons": list(g.off_reasons), "ranks_off": list(g.ranks_off),
            "directions_off": list(g.directions_off), "ring_flags": dict(g.ring_flags),
            "lines": [e.to_dict() for e in g.evidence]},
        "dma_buf": g.dma_buf,
        "env": dict(f.env),
        "env_conflicts": {k: list(v) for k, v in f.env_conflicts.items()},
        "channels": {
            "nchannels": f.channels.nchannels, "by_transport": dict(f.channels.by_transport),
            "kinds": dict(f.channels.kinds), "net_names": dict(f.channels.net_names),
            "net_gdr": f.channels.net_gdr, "net_no_gdr": f.channels.net_no_gdr, "pxn": f.channels.pxn,
            "coll_channels": f.channels.coll_channels, "collnet_channels": f.channels.collnet_channels,
            "nvls_channels": f.channels.nvls_channels, "p2p_channels": f.channels.p2p_channels},
        "nvls_available": f.nvls_available,
        "nranks": f.nranks,
        "nnodes": f.nnodes,
        "local_ranks": f.local_ranks,
        "init_start": f.init_start,
        "init_complete": f.init_complete,
        "comms": [
            {"comm_id": c.comm_id, "size": c.nranks, "nodes": c.nnodes, "local": c.local_ranks,
             "started": c.init_start, "completed": c.init_complete, "destroyed": c.destroyed,
             "missing_ranks": list(c.missing_ranks)} for c in f.comms],
        "hosts": list(f.hosts),
        "host_count": f.host_count,
        "rank_count": f.rank_count,
        "ranks": [
            {"key": r.key, "host": r.host, "pid": r.pid, "dev": r.dev, "comm_ranks": list(r.ranks),
             "version": r.nccl_version, "net": r.transport, "devices": list(r.net_devices),
             "bootstrap_iface": r.bootstrap, "started": r.init_start, "completed": r.init_complete,
             "warns": r.warns} for r in f.ranks[:_RANKS_OUT]],
        "lines": f.lines,
        "recognised_lines": f.recognised_lines,
        "warn_lines": f.warn_lines,
        "problems": [
            {"kind": p.kind, "meaning": p.meaning, "message": p.message, "level": p.level, "code": p.code,
             "code_name": p.code_name, "details": dict(p.details), "host": p.host, "rank": p.rank,
             "source_file": p.source_file, "line": p.evidence.line if p.evidence else None,
             "text": p.evidence.text if p.evidence else None} for p in f.problems],
        "problem_counts": dict(f.problem_counts),
        "nccl_results": dict(f.nccl_results),
        "nccl_result_sources": {k: dict(v) for k, v in f.nccl_result_sources.items()},
        "algorithms": {k: (dict(v) if isinstance(v, dict) else v) for k, v in f.algorithms.items()},
        "ib_qp": {k: dict(v) for k, v in f.ib.items()},
        "cross_nic": list(f.cross_nic),
        "cloud": dict(f.cloud),
        "nvswitch_context": list(f.nvswitch_context),
        "framework": framework_facts_dict(f.framework),
        "evidence": {k: [e.to_dict() for e in v] for k, v in f.evidence.items()},
    }


def framework_facts_dict(fw: FrameworkFacts) -> dict[str, Any]:
    def line(c: Citation | None) -> int | None:
        return c.line if c is not None else None
    return {
        "watchdog_timeouts": [{"rank": t.rank, "pg": t.pg, "seq": t.seq, "op": t.op, "numel_in": t.numel_in,
                               "numel_out": t.numel_out, "timeout_ms": t.timeout_ms, "ran_ms": t.ran_ms,
                               "line": line(t.evidence)} for t in fw.timeouts],
        "watchdog_progress": [{"rank": p.rank, "pg": p.pg, "seq": p.seq, "last_enqueued": p.last_enqueued,
                               "last_completed": p.last_completed, "line": line(p.evidence)} for p in fw.progress],
        "watchdog_timeout_lines": fw.timeout_lines,
        "watchdog_terminated": fw.terminated,
        "watchdog_stuck_s": fw.stuck_s,
        "framework_env_named": sorted(fw.env_named),
    }
