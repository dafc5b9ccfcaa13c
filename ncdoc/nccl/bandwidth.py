"""What bandwidth this hardware should reach, so a measured busbw can be read as a percentage.

Every figure here is calibrated against published numbers (shared/reference/anchors.md);
the comment beside each names its row. Units: nccl-tests prints GB/s (1e9 bytes/s), port
rates are Gb/s (1e9 bits/s), so a port's bytes per second is simply rate / 8.
"""

from __future__ import annotations

import re

from ncdoc.startup.record import field, record
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Sequence

from ncdoc.snapshot import Port, Snapshot
from ncdoc.readers.numbers import is_digits

# anchors.md "Multi-node": ring all-reduce across nodes reaches about 92 % of the aggregate
# rate of the rail NICs (Together AI acceptance threshold quoted in CRE ADR-021: ~370 GB/s
# on 8 x 400G). It agrees with the per-NIC rows: NDR 400G gives 46-48 GB/s per NIC
# (nccl-tests #290) and 200G gives 24 GB/s per NIC (sjeaugey, nccl-tests #119).
RING_EFFICIENCY = 0.92

# Below these fractions of the expectation a measurement is a problem, not noise.
# SuperBench flags 5 % below a *measured* baseline; a line-rate estimate is coarser, so
# ncdoc warns at 80 % and calls it an error at half.
WARN_FRACTION = 0.80
ERROR_FRACTION = 0.50

# Peak-bandwidth checks need large messages (anchors.md: ">= 1-8 GB"); below this size
# a low busbw says more about latency than about the links.
MIN_PEAK_BYTES = 64 * 1024 * 1024


@record
class NvlinkFigure:
    generation: str
    expected: float            # busbw GB/s a healthy 8-GPU node reaches
    threshold: float           # pass threshold used in practice
    source: str


# anchors.md "Single node, NVLink" (all-reduce busbw, large messages, 8 GPUs).
NVLINK_FIGURES: dict[str, NvlinkFigure] = {
    "A100": NvlinkFigure("A100", 235.0, 228.0,
                         "SuperBench NDv4 baseline 235 GB/s @ 8 GB; Azure NHC threshold 228"),
    "H100": NvlinkFigure("H100", 476.0, 460.0,
                         "nccl-tests #290 ~476 GB/s (NVLS); Azure NHC ND H100 v5 threshold 460"),
    "H200": NvlinkFigure("H200", 480.0, 431.0,
                         "Azure NHC ND H200 v5: README 480 GB/s, conf threshold 431"),
    "GB200": NvlinkFigure("GB200", 680.0, 680.0, "CRE ADR-054 intra-node >= 680 GB/s"),
}


def gpu_generation(name: str | None) -> str | None:
    """The NVSwitch-class generation of a GPU model name, None for PCIe parts and the unknown.

    Only SXM-class parts get a figure: the anchors are for NVSwitch systems, and a PCIe
    A100/H100 (or an NVL bridge pair) cannot reach them.
    """
    if not name:
        return None
    n = name.upper()
    if re.search(r"PCIE|\bNVL\b", n):
        return None
    for gen in ("GB200", "H200", "H100", "A100"):
        if gen in n:
            return gen
    return None


@record
class Expectation:
    """Expected bandwidth of one job, and how it was worked out."""
    nic_gbps: float | None = None              # port rate of one rail NIC, Gb/s
    nics: int | None = None                    # rail NICs per node the job can use
    per_nic_gbytes: float | None = None        # nic_gbps / 8, GB/s
    aggregate_gbytes: float | None = None      # per node: nics x per_nic_gbytes
    network_busbw: float | None = None         # ring busbw across nodes: RING_EFFICIENCY x aggregate
    nvlink_busbw: float | None = None          # single-node NVLink all-reduce expectation
    nvlink_threshold: float | None = None
    gpu_generation: str | None = None
    nodes: int | None = None
    collective: str = "all_reduce"
    tree_overstates: bool | None = None        # 2 nodes, default algorithm: busbw is not the network's
    devices: tuple[str, ...] = ()              # the rail ports counted ("mlx5_0:1")
    basis: tuple[str, ...] = field(default=())  # how each number was obtained, with sources

    @property
    def expected_busbw(self) -> float | None:
        """The figure to hold a measurement against: NVLink on one node, the network across nodes."""
        if self.nodes == 1:
            return self.nvlink_busbw
        return self.network_busbw

    @property
    def known(self) -> bool:
        return self.expected_busbw is not None

    def summary(self) -> str:
        """How the expected figure was reached, in one short phrase."""
        if self.nodes == 1 and self.nvlink_busbw:
            return f"{self.gpu_generation} NVLink, ~{self.nvlink_busbw:g} GB/s as published for it"
        if self.network_busbw:
            return f"{self.nics} x {self.nic_gbps:g} Gb/s NIC(s) per node, ring ~{RING_EFFICIENCY:.0%} of line rate"
        return "unknown"

    def achieved_pct(self, busbw: float | None) -> float | None:
        exp = self.expected_busbw
        if busbw is None or not exp:
            return None
        return round(100.0 * busbw / exp, 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nic_gbps": self.nic_gbps, "nics": self.nics,
            "per_nic_gbytes": _r(self.per_nic_gbytes), "aggregate_gbytes": _r(self.aggregate_gbytes),
            "network_busbw_gbps": _r(self.network_busbw), "nvlink_busbw_gbps": _r(self.nvlink_busbw),
            "expected_busbw_gbps": _r(self.expected_busbw), "gpu_generation": self.gpu_generation,
            "nodes": self.nodes, "collective": self.collective, "tree_overstates": self.tree_overstates,
            "devices": list(self.devices), "basis": list(self.basis),
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


# ---------------------------------------------------------------- choosing the rail NICs

def hca_filter(spec: str | None) -> Callable[[str, int | None], bool]:
    """A predicate over (device, port) for an NCCL_IB_HCA value (nccl_facts.md §2.1).

    `^` excludes, `=` asks for exact names, otherwise each entry is a name prefix;
    an entry may end with `:port`.
    """
    if not spec or not spec.strip():
        return lambda dev, port: True
    s = spec.strip()
    exclude = s.startswith("^")
    s = s.lstrip("^")
    exact = s.startswith("=")
    s = s.lstrip("=")
    entries = []
    for item in s.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, port = item.partition(":")
        entries.append((name, int(port) if is_digits(port) else None))

    def match(dev: str, port: int | None) -> bool:
        hit = any((dev == n if exact else dev.startswith(n)) and (p is None or port is None or p == port)
                  for n, p in entries)
        return not hit if exclude else hit
    return match


def _rail_nics(snapshot: Snapshot) -> set[str] | None:
    """HCA names of NICs on some GPU's PCIe switch (PIX/PXB): the rails, when the topology is known."""
    from ncdoc.topology import classify
    topo = classify(snapshot)
    if not topo.status.known:
        return None
    rails = set()
    for gpu, nics in topo.rails.items():
        for nic in nics:
            if (topo.path(gpu, nic) or "").upper() in ("PIX", "PXB"):
                rails.add(nic)
    return rails or None


def _ports(snapshot: Snapshot) -> list[tuple[str, Port]]:
    if not snapshot.hcas.status.known:
        return []
    return [(h.name, p) for h in snapshot.hcas.hcas for p in h.ports]


def rail_ports(snapshot: Snapshot, *, ib_hca: str | None = None,
               net_devices: Sequence[str] = ()) -> list[tuple[str, Port]]:
    """The ports a job's rings would run over: active, of the fastest port's link layer,
    inside NCCL_IB_HCA, and (when known) the devices NCCL said it uses or the NICs next to GPUs."""
    ports = [(d, p) for d, p in _ports(snapshot)
             if p.rate_gbps and (p.state is None or p.state.upper() == "ACTIVE")]
    if net_devices:
        used = {nd.split(":")[0] for nd in net_devices}
        chosen = [(d, p) for d, p in ports if d in used]
        if chosen:
            return chosen
    keep = hca_filter(ib_hca)
    ports = [(d, p) for d, p in ports if keep(d, p.num)]
    rails = _rail_nics(snapshot)
    if rails:
        near = [(d, p) for d, p in ports if d in rails]
        ports = near or ports
    if not ports:
        return []
    fastest = max(ports, key=lambda dp: dp[1].rate_gbps or 0.0)[1]
    # A slower second fabric (a 40G Ethernet port beside 200G IB rails) is not a rail:
    # NCCL cannot mix link layers in one ring and the slow port would only drag it down.
    return [(d, p) for d, p in ports
            if (p.link_layer or "") == (fastest.link_layer or "")
            and (p.rate_gbps or 0.0) >= 0.5 * (fastest.rate_gbps or 0.0)]


def _gpu_names(snapshot: Snapshot | None) -> list[str]:
    if snapshot is None or not snapshot.gpus.status.known:
        return []
    return [g.name for g in snapshot.gpus.gpus]


def _has_nvlink(snapshot: Snapshot | None) -> bool | None:
    """True/False when the snapshot says whether GPUs talk over NVLink, None when it cannot."""
    if snapshot is None:
        return None
    if snapshot.paths.status.known and snapshot.paths.matrix:
        cells = [v.upper() for row in snapshot.paths.matrix.values() for v in row.values()]
        if any(c.startswith("NV") for c in cells):
            return True
        gpu_labels = [lbl for lbl in snapshot.paths.labels if lbl.upper().startswith("GPU")]
        if len(gpu_labels) > 1:
            return False
    if snapshot.gpus.status.known and snapshot.gpus.gpus:
        return any(link.active for g in snapshot.gpus.gpus for link in g.nvlinks)
    return None


# ---------------------------------------------------------------- the expectation

def expected_bandwidth(snapshot: Snapshot | None = None, *, nic_gbps: float | None = None,
                       nics: int | None = None, nodes: int | None = None,
                       collective: str = "all_reduce", gpu_name: str | None = None,
                       ib_hca: str | None = None, net_devices: Iterable[str] = (),
                       local_ranks: int | None = None, algo: str | None = None,
                       nic_source: str = "the command line") -> Expectation:
    """Work out what busbw this job should reach.

    `nic_gbps`/`nics` (from the command line) win over the snapshot's ports; `ib_hca`
    (NCCL_IB_HCA) and `net_devices` (the NICs an NCCL log says it uses) narrow the ports;
    `local_ranks` caps the NIC count, since one GPU drives about one NIC (anchors.md:
    1 H100 per node with 4 NICs reached 41-50 GB/s, nccl-tests #232 / nccl#1357).
    """
    basis: list[str] = []
    devices: tuple[str, ...] = ()
    net_devices = tuple(net_devices)
    if nic_gbps is not None and nic_gbps <= 0:
        nic_gbps = None
    if nic_gbps is not None:
        nics = nics if nics and nics > 0 else 1
        basis.append(f"{nics} NIC(s) x {nic_gbps:g} Gb/s from {nic_source}")
    elif snapshot is not None:
        ports = rail_ports(snapshot, ib_hca=ib_hca, net_devices=net_devices)
        if ports:
            rates = sorted(p.rate_gbps for _, p in ports if p.rate_gbps)
            nic_gbps = rates[len(rates) // 2]           # the typical rail, not the odd one
            nics = len(ports)
            devices = tuple(f"{d}:{p.num}" for d, p in ports)
            basis.append(f"{nics} active rail port(s) at {nic_gbps:g} Gb/s: {', '.join(devices)}")
    if nics is None and net_devices:
        nics = len(net_devices)
        devices = net_devices
    if nics is not None and local_ranks and nics > local_ranks:
        basis.append(f"capped at {local_ranks} NIC(s): {local_ranks} GPU(s) per node drive about one NIC each")
        nics = local_ranks

    per_nic = nic_gbps / 8.0 if nic_gbps else None
    aggregate = per_nic * nics if per_nic and nics else None
    network = RING_EFFICIENCY * aggregate if aggregate else None
    if network is not None:
        basis.append(f"ring busbw ~{RING_EFFICIENCY:.0%} of {aggregate:g} GB/s aggregate "
                     "(NVIDIA's acceptance figures: 92 %, 46-48 GB/s per 400G NIC, 24 GB/s per 200G)")

    names = [gpu_name] if gpu_name else _gpu_names(snapshot)
    gen = next((g for g in (gpu_generation(n) for n in names) if g), None)
    nvlink_ok = _has_nvlink(snapshot)
    fig = NVLINK_FIGURES.get(gen) if gen and nvlink_ok is not False else None
    if fig and nodes in (None, 1):
        basis.append(f"single-node NVLink {fig.generation}: ~{fig.expected:g} GB/s ({fig.source})")

    tree = None
    if nodes is not None:
        forced = (algo or "").strip().lower()
        ring_only = forced in ("ring", "^tree,nvlstree,nvls,collnetdirect,collnetchain,pat")
        tree = bool(nodes == 2 and collective == "all_reduce" and not ring_only)
        if tree:
            basis.append("2 nodes with the default algorithm: Tree/NVLSTree all-reduce busbw can exceed "
                         "the network rate (nccl-tests #196, #309); use NCCL_ALGO=Ring to measure the network")
    return Expectation(nic_gbps=nic_gbps, nics=nics, per_nic_gbytes=per_nic, aggregate_gbytes=aggregate,
                       network_busbw=network, nvlink_busbw=fig.expected if fig else None,
                       nvlink_threshold=fig.threshold if fig else None, gpu_generation=gen,
                       nodes=nodes, collective=collective, tree_overstates=tree,
                       devices=devices, basis=tuple(basis))
