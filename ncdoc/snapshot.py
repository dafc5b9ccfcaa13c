"""The Snapshot: every fact ncdoc knows about one node, as frozen, JSON-serialisable data.

Probes fill it on a live machine, importers fill parts of it from pasted evidence,
tests fill it from fixtures. Everything downstream (topology, rules, triage, tuning)
reads only this, so a snapshot file sent by a user behaves exactly like their node.

Each section carries a `Status`: `ok` (read), `absent` (looked, not there: "no GPUs"),
or `unknown` (could not look: no driver, no permission). Unknown is never absent:
a rule that needs an unknown fact is skipped with the reason, it does not pass.
"""

from __future__ import annotations

import sys

from ncdoc.errors import InputError
from ncdoc.startup.json_load import loads   # json's C scanner without json.decoder's `re`
from ncdoc.startup.record import field, Record, record
from ncdoc.startup import record as _record
from ncdoc.startup.typed_json import from_json_data

SCHEMA_VERSION = 1

OK, ABSENT, UNKNOWN = "ok", "absent", "unknown"


@record(frozen=True)
class Status(Record):
    state: str = OK           # ok | absent | unknown
    reason: str = ""          # why absent or unknown, in words a user understands
    source: str = ""          # provenance: "sysfs:/sys/class/infiniband", "pynvml", "import:topo_matrix:<file>"

    @classmethod
    def ok(cls, source: str = "") -> "Status":
        return cls(OK, "", source)

    @classmethod
    def absent(cls, reason: str, source: str = "") -> "Status":
        return cls(ABSENT, reason, source)

    @classmethod
    def unknown(cls, reason: str, source: str = "") -> "Status":
        return cls(UNKNOWN, reason, source)

    @property
    def known(self) -> bool:
        return self.state != UNKNOWN


def _unknown() -> Status:
    return Status.unknown("not probed")


# ---------------------------------------------------------------- host

@record(frozen=True)
class Host(Record):
    status: Status = field(default_factory=_unknown)
    hostname: str | None = None
    kernel: str | None = None
    os: str | None = None
    arch: str | None = None
    cpu_vendor: str | None = None              # "GenuineIntel", "AuthenticAMD", ... (NCCL's model depends on it)
    cpu_model: str | None = None
    hypervisor: str | None = None              # "Microsoft", "KVM", "Amazon EC2"...; None when bare metal or unknown
    container: tuple[str, ...] = ()            # hints: "docker", "kubernetes", "podman", "lxc"
    iommu: str | None = None                   # "off" | "on" | "passthrough"; None = unknown
    modules: dict[str, bool] = field(default_factory=dict)  # module of interest -> loaded
    dev_infiniband: tuple[str, ...] | None = None           # entries of /dev/infiniband; None = could not look
    dev_nvidia: tuple[str, ...] | None = None               # /dev/nvidia* entries (nvidia0, nvidiactl, ...); None = could not look
    proc_driver_nvidia: bool | None = None                  # /proc/driver/nvidia exists: the NVIDIA kernel driver is loaded


# ---------------------------------------------------------------- versions

@record(frozen=True)
class NcclLib(Record):
    path: str
    version: str | None = None                 # "2.21.5"
    origin: str = ""                           # "pip:nvidia-nccl-cu12", "torch", "system", "LD_LIBRARY_PATH"


@record(frozen=True)
class Versions(Record):
    status: Status = field(default_factory=_unknown)
    driver: str | None = None                  # "550.54.15"
    cuda_driver: str | None = None             # "12.4"
    nccl: str | None = None                    # the libnccl a job would load
    nccl_libs: tuple[NcclLib, ...] = ()        # every candidate found, the chosen one first
    net_plugins: tuple[str, ...] = ()          # paths of libnccl-net*.so found
    tuner_plugins: tuple[str, ...] = ()
    rdma_core: str | None = None


# ---------------------------------------------------------------- GPUs

@record(frozen=True)
class NvLink(Record):
    link: int
    active: bool
    remote_pci: str | None = None              # bus id of the far end (GPU or NVSwitch)
    remote_type: str | None = None             # "gpu" | "switch" | "ibmnpu"


@record(frozen=True)
class Gpu(Record):
    index: int
    name: str
    pci_bus_id: str                            # normalised "0000:18:00.0"
    uuid: str | None = None
    numa_node: int | None = None
    compute_capability: str | None = None      # "9.0"
    memory_mib: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    # GPU health NVML reports cheaply (None: not asked, or not supported on this GPU)
    retired_pages_pending: bool | None = None  # pages retired since the last reset: reset the GPU to apply
    remapped_rows_pending: bool | None = None  # HBM rows remapped since the last reset: reset the GPU to apply
    remapped_rows_failure: bool | None = None  # a row remap failed: the GPU needs service


@record(frozen=True)
class FailedGpu(Record):
    """A GPU NVML counts but cannot use: lost (XID 79 "fallen off the bus"), needing a reset, ..."""
    index: int
    error: str                                 # NVML's error text: "GPU is lost"
    kind: str = ""                             # NVML's error class, without the NVMLError_ prefix: "GpuIsLost"


@record(frozen=True)
class P2PStatus(Record):
    a: int
    b: int
    status: str                                # "OK" | "not_supported" | "chipset_not_supported" | "topology_not_supported" | "disabled_by_regkey" | "unknown"


@record(frozen=True)
class GpuSection(Record):
    status: Status = field(default_factory=_unknown)
    gpus: tuple[Gpu, ...] = ()
    p2p: tuple[P2PStatus, ...] = ()
    fabric_manager: str | None = None          # "completed" | "in_progress" | "not_started" | "failed" | "not_supported"; None unknown
    fabric_manager_detail: str = ""
    nvml_error: str = ""                       # NVML's error text when it could not start (or a query hung)
    nvml_error_kind: str = ""                  # its error class without NVMLError_: "LibRmVersionMismatch",
                                               # "DriverNotLoaded", ...; "Timeout" when the probe was stopped
    failed: tuple[FailedGpu, ...] = ()


# ---------------------------------------------------------------- RDMA devices

@record(frozen=True)
class Gid(Record):
    index: int
    gid: str                                   # as sysfs prints it: "fe80:0000:0000:0000:9cbb:b7ff:feb3:937a"
    type: str | None = None                    # "RoCE v2" | "IB/RoCE v1" | None (IB link layer or unknown)
    netdev: str | None = None

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), else None."""
        parts = self.gid.lower().split(":")
        if len(parts) != 8 or any(p.strip("0") for p in parts[:5]) or parts[5] != "ffff":
            return None
        hi, lo = int(parts[6], 16), int(parts[7], 16)
        return f"{hi >> 8}.{hi & 255}.{lo >> 8}.{lo & 255}"

    @property
    def link_local(self) -> bool:
        return self.gid.lower().startswith("fe80")

    @property
    def roce_version(self) -> int | None:
        if not self.type:
            return None
        return 2 if "v2" in self.type else 1 if "v1" in self.type else None


@record(frozen=True)
class Port(Record):
    num: int
    state: str | None = None                   # "ACTIVE", "DOWN", "INIT", "ARMED", "POLLING"
    phys_state: str | None = None              # "LinkUp", "Polling", "Disabled", ...
    rate_gbps: float | None = None             # 400.0
    width: str | None = None                   # "4X"
    speed: str | None = None                   # "NDR", "HDR", "EDR"
    rate_text: str | None = None               # verbatim: "400 Gb/sec (4X NDR)"
    link_layer: str | None = None              # "InfiniBand" | "Ethernet"
    active_mtu: int | None = None              # bytes
    max_mtu: int | None = None
    lid: int | None = None
    sm_lid: int | None = None
    gids: tuple[Gid, ...] = ()
    counters: dict[str, int] = field(default_factory=dict)
    netdevs: tuple[str, ...] = ()


@record(frozen=True)
class Hca(Record):
    name: str                                  # "mlx5_0"
    pci_address: str | None = None
    numa_node: int | None = None
    fw_ver: str | None = None
    board_id: str | None = None
    node_guid: str | None = None
    hca_type: str | None = None                # "MT4129"
    vendor_part_id: int | None = None
    driver: str | None = None                  # "mlx5_core", "efa"
    ports: tuple[Port, ...] = ()


@record(frozen=True)
class HcaSection(Record):
    status: Status = field(default_factory=_unknown)
    hcas: tuple[Hca, ...] = ()


# ---------------------------------------------------------------- IP interfaces

@record(frozen=True)
class NetIf(Record):
    name: str
    addresses: tuple[str, ...] = ()            # "10.0.0.11/24", "fe80::1/64"
    mtu: int | None = None
    operstate: str | None = None               # "up", "down", "unknown"
    speed_mbps: int | None = None
    driver: str | None = None
    kind: str = "physical"                     # physical|loopback|bridge|bond|veth|docker|virbr|vlan|ipoib|tun|virtual
    virtual: bool = False
    master: str | None = None                  # the bond or bridge this interface is enslaved to
    slaves: tuple[str, ...] = ()
    hca: str | None = None                     # RDMA device behind it
    pci_address: str | None = None


@record(frozen=True)
class NetSection(Record):
    status: Status = field(default_factory=_unknown)
    interfaces: tuple[NetIf, ...] = ()


# ---------------------------------------------------------------- PCIe tree

@record(frozen=True)
class PciDevice(Record):
    address: str                               # "0000:18:00.0"
    parent: str | None                         # upstream bridge address, or host bridge "pci0000:00"
    class_code: str | None = None              # "0x060400"
    vendor: str | None = None                  # "0x10de"
    device: str | None = None
    kind: str = "other"                        # bridge|gpu|nic|nvswitch|storage|other
    numa_node: int | None = None
    link_speed: str | None = None              # current, verbatim: "32.0 GT/s PCIe"
    link_width: int | None = None
    max_link_speed: str | None = None
    max_link_width: int | None = None
    acs_ctrl: str | None = None                # ACS control register, hex, where readable
    driver: str | None = None


@record(frozen=True)
class PciSection(Record):
    status: Status = field(default_factory=_unknown)
    devices: tuple[PciDevice, ...] = ()


# ---------------------------------------------------------------- NUMA

@record(frozen=True)
class NumaNode(Record):
    id: int
    cpulist: str = ""                          # "0-47,96-143"


@record(frozen=True)
class NumaSection(Record):
    status: Status = field(default_factory=_unknown)
    nodes: tuple[NumaNode, ...] = ()


# ---------------------------------------------------------------- NCCL environment

@record(frozen=True)
class EnvValue(Record):
    name: str
    value: str
    source: str                                # "env" | "file:/etc/nccl.conf" | "cli" | "<path>"
    line: int | None = None


@record(frozen=True)
class NcclEnv(Record):
    status: Status = field(default_factory=_unknown)
    values: tuple[EnvValue, ...] = ()          # effective: one per name, in NCCL's precedence
    shadowed: tuple[EnvValue, ...] = ()        # set somewhere but overridden by a higher source
    files: tuple[str, ...] = ()                # config files NCCL would read, in order

    def get(self, name: str) -> str | None:
        for v in self.values:
            if v.name == name:
                return v.value
        return None

    def as_dict(self) -> dict[str, str]:
        return {v.name: v.value for v in self.values}


# ---------------------------------------------------------------- the job

# The launcher variables a job section is read from (ncdoc.probes.job reads them; a command that
# loads a node from a file asks whether any is set before importing it).
JOB_GPU_COUNTS = ("SLURM_GPUS_ON_NODE",)
JOB_GPU_LISTS = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
JOB_NODE_COUNTS = ("SLURM_NNODES", "SLURM_JOB_NUM_NODES", "NNODES")
JOB_NODE_LISTS = ("SLURM_JOB_NODELIST",)
JOB_RANK_COUNTS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
JOB_LOCAL_RANK_COUNTS = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")
JOB_VARIABLES = (JOB_GPU_COUNTS + JOB_GPU_LISTS + JOB_NODE_COUNTS + JOB_NODE_LISTS + JOB_RANK_COUNTS
                 + JOB_LOCAL_RANK_COUNTS)

@record(frozen=True)
class JobClaim(Record):
    """One statement of what the job was given: "SLURM_GPUS_ON_NODE=8", "--nodes 4"."""
    source: str                                # "SLURM_GPUS_ON_NODE", "CUDA_VISIBLE_DEVICES", "--expect-gpus", "config:<file>"
    value: int                                 # the count it states
    text: str = ""                             # the value as given
    items: tuple[str, ...] = ()                # for device lists (CUDA_VISIBLE_DEVICES=0,1,...): the entries


@record(frozen=True)
class JobSection(Record):
    """What the job that is about to start expects of this node, from its launcher's variables and
    ncdoc's own options. Rules compare these claims with the node; they never read the environment."""
    status: Status = field(default_factory=_unknown)
    gpus: tuple[JobClaim, ...] = ()            # GPUs the job was given on this node
    nodes: tuple[JobClaim, ...] = ()           # nodes the job spans
    ranks: tuple[JobClaim, ...] = ()           # ranks in the whole job (WORLD_SIZE, OMPI_COMM_WORLD_SIZE)
    local_ranks: tuple[JobClaim, ...] = ()     # ranks on this node (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE)
    ignored: tuple[str, ...] = ()              # variables set to something that is not a count, in words


# ---------------------------------------------------------------- how the probes went

@record(frozen=True)
class ProbeTiming(Record):
    name: str                                  # "host", "NVML", "PCI", ...
    ms: float
    timed_out: bool = False


@record(frozen=True)
class ProbeRun(Record):
    """How long each probe took and which one did not finish in time (live captures only)."""
    deadline_s: float | None = None            # the time the capture was given (None: no deadline)
    timings: tuple[ProbeTiming, ...] = ()
    timed_out: tuple[str, ...] = ()            # what did not answer in time, in words


# ---------------------------------------------------------------- imported path matrix

@record(frozen=True)
class PathMatrix(Record):
    """A GPU/NIC path matrix taken as given (e.g. pasted `nvidia-smi topo -m`)."""
    status: Status = field(default_factory=lambda: Status.absent("no matrix imported"))
    labels: tuple[str, ...] = ()               # "GPU0", ..., "NIC0", ...
    matrix: dict[str, dict[str, str]] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)      # "NIC0" -> "mlx5_0"
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    truncated: bool = False


# ---------------------------------------------------------------- the snapshot

@record(frozen=True)
class Snapshot(Record):
    schema_version: int = SCHEMA_VERSION
    origin: str = "live"                       # "live" | "example:<name>" | "import" | "file:<path>"
    created: str = ""                          # ISO 8601, UTC
    host: Host = field(default_factory=Host)
    versions: Versions = field(default_factory=Versions)
    gpus: GpuSection = field(default_factory=GpuSection)
    hcas: HcaSection = field(default_factory=HcaSection)
    net: NetSection = field(default_factory=NetSection)
    pci: PciSection = field(default_factory=PciSection)
    numa: NumaSection = field(default_factory=NumaSection)
    env: NcclEnv = field(default_factory=NcclEnv)
    paths: PathMatrix = field(default_factory=PathMatrix)
    job: JobSection = field(default_factory=JobSection)
    probes: ProbeRun = field(default_factory=ProbeRun)
    notes: tuple[str, ...] = ()                # what the probes did not find, in words

    # -- convenience lookups used by topology and rules
    def hca(self, name: str) -> Hca | None:
        return self._by("_hca_index", self.hcas.hcas, "name").get(name)

    def netif(self, name: str) -> NetIf | None:
        return self._by("_netif_index", self.net.interfaces, "name").get(name)

    def pci_device(self, address: str) -> PciDevice | None:
        return self._by("_pci_index", self.pci.devices, "address").get(address)

    def _by(self, slot: str, items: tuple, key: str) -> dict:
        # The checks look devices up by name or address hundreds of times on a big node: each table
        # is indexed once, on first use, and kept beside the fields (not one: equality, hashing,
        # repr and the JSON leave it out). The first item of a name wins, as a search from the front.
        index = self.__dict__.get(slot)
        if index is None:
            index = {}
            for item in items:
                index.setdefault(getattr(item, key), item)
            self.__dict__[slot] = index
        return index

    def replace(self, **changes) -> "Snapshot":
        return _record.replace(self, **changes)

    # -- serialisation
    def to_dict(self) -> dict:
        return _record.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        import json
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data, *, path: str | None = None) -> "Snapshot":
        if not isinstance(data, dict) or "schema_version" not in data:
            raise InputError("not an ncdoc snapshot (no schema_version)", path=path)
        version = data.get("schema_version")
        if type(version) is int and version > SCHEMA_VERSION:
            raise InputError(f"snapshot written by a newer ncdoc (schema_version {version}; this ncdoc reads "
                             f"{SCHEMA_VERSION}): upgrade ncdoc to read it", path=path)
        if version != SCHEMA_VERSION:
            raise InputError(f"snapshot schema_version {version!r} is not supported "
                             f"(this ncdoc reads {SCHEMA_VERSION})", path=path)
        try:
            return from_json_data("Snapshot", data, sys.modules[__name__])
        except (TypeError, ValueError, KeyError) as exc:
            hint = " (written by a newer ncdoc?)" if isinstance(exc, KeyError) and "unknown field" in str(exc) else ""
            raise InputError("malformed snapshot" + hint, path=path, cause=str(exc).strip("'\"")) from None

    @classmethod
    def load(cls, path) -> "Snapshot":
        from ncdoc.readers.textfile import display_name, read_user_text
        p = display_name(path)
        text = read_user_text(path, "a snapshot file")
        try:
            data = loads(text)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            raise InputError(f"not valid JSON ({msg} at line {getattr(exc, 'lineno', '?')})", path=p) from None
        return cls.from_dict(data, path=p)
