"""Facts from an NCCL_DEBUG=INFO log: version, transport, devices, GPUDirect RDMA, env, errors.

Any NCCL 2.x format, many ranks interleaved, launcher tags (mpirun --tag-output, srun -l,
torchrun), timestamps, truncated lines and framework noise around it. The parser streams:
it reads a few MiB at a time and keeps bounded summaries, so a 50 GB log costs the same
memory as a 50 kB one. Facts only; what they mean for a job is for the rules to say.

    facts = parse_nccl_log_file("job.log")
    facts.transport, facts.gdr.state, facts.to_facts()["net_devices"]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncdoc.evidence.citation import Evidence
from ncdoc.evidence.textfile import iter_file_blocks, iter_line_blocks


@dataclass(frozen=True)
class NetDevice:
    name: str                          # "mlx5_0:1" (IB/RoCE device:port) or "eth0" (socket transport)
    transport: str                     # "IB" | "Socket"
    link_layer: str | None = None      # "IB" | "RoCE" (IB transport only)
    index: int | None = None           # NCCL's net device index
    address: str | None = None         # socket devices: the IP NCCL uses
    speed_mbps: int | None = None      # when the log prints it (NCCL >= 2.23 device lines)
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SocketIface:
    name: str
    address: str | None
    role: str                          # "bootstrap" | "net" (socket transport) | "oob" (IB's side channel)
                                       # | "candidate" (old "IP Interfaces :" lists)
    classification: str                # "ok" | "loopback" | "link_local" | "virtual"
    kind: str                          # NetIf.kind guessed from the name: physical, loopback, docker, virbr, bond...
    hosts: tuple[str, ...]
    evidence: Evidence


@dataclass(frozen=True)
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
    evidence: Evidence | None = None


@dataclass(frozen=True)
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
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class CommFacts:
    comm_id: str                       # commId, or "nranks=<n>" for logs that print none
    nranks: int
    nnodes: int | None = None
    local_ranks: int | None = None
    init_start: int = 0
    init_complete: int = 0
    destroyed: int = 0
    missing_ranks: tuple[int, ...] = ()  # logged Init START but never Init COMPLETE


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class PluginFacts:
    requested: str | None = None       # NCCL_NET_PLUGIN / "Plugin name set by env to"
    missing: bool = False              # "Could not find: libnccl-net.so" / "No plugin found"
    missing_detail: tuple[str, ...] = ()
    loaded: tuple[str, ...] = ()       # "Loaded net plugin X (vN)", "P2P plugin X"
    collnet_loaded: tuple[str, ...] = ()
    external_paths: tuple[str, ...] = ()
    initialized: tuple[str, ...] = ()  # "Initialized NET plugin X"
    assigned: tuple[str, ...] = ()     # "Assigned NET plugin X to comm"
    internal: bool | None = None       # said it uses its internal implementation
    ofi_version: str | None = None
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
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
    evidence: dict[str, tuple[Evidence, ...]] = field(default_factory=dict)

    def problems_of(self, kind: str) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == kind)

    def to_facts(self) -> dict[str, Any]:
        """The JSON object `ncdoc triage` copies into its "facts" (keys documented in the module)."""
        from ncdoc.evidence.nccl_log_facts import log_facts_dict
        return log_facts_dict(self)


def parse_nccl_log(lines: Iterable[str], source: str = "") -> LogFacts:
    """Facts from the lines of an NCCL log (any iterable of str; newlines optional)."""
    from ncdoc.evidence.nccl_log_scan import LogScanner
    scanner = LogScanner()
    for block in iter_line_blocks(lines):
        scanner.feed(block)
    return scanner.result(source)


def parse_nccl_log_file(path: str | Path) -> LogFacts:
    """Facts from an NCCL log file; InputError (one line) when it is missing, empty or binary."""
    from ncdoc.evidence.nccl_log_scan import LogScanner
    scanner = LogScanner()
    for block in iter_file_blocks(path):
        scanner.feed(block)
    return scanner.result(str(path))
