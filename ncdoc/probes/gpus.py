"""GPUs through NVML (pynvml): devices, NVLinks, P2P status, fabric manager, driver versions.

`nvml` is anything shaped like the pynvml module: the real one on a live node, a
`RecordedNvml` replay in tests and examples. Only NVMLError subclasses are expected from
it; whatever else goes wrong still ends as "unknown, because ...", never as a crash.
When NVML cannot be used, NVIDIA GPUs seen on the PCI bus are still listed (with the
section unknown), so the topology can place them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable

from ncdoc.probes.sysfs import SysfsReader, numa_of
from ncdoc.snapshot import Gpu, GpuSection, NvLink, P2PStatus, PciSection, Status

# pynvml defines NVML_P2P_CAPS_INDEX_READ as the tuple (0,) (a stray comma), which ctypes
# rejects; the C enum values are used instead.
_P2P_READ, _P2P_WRITE = 0, 1
_P2P_NAMES = {0: "OK", 1: "chipset_not_supported", 2: "not_supported", 3: "topology_not_supported",
              4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}
_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_FM_ORDER = ("failed", "not_started", "in_progress", "completed", "not_supported")


@dataclass
class GpuProbe:
    section: GpuSection
    driver: str | None = None
    cuda_driver: str | None = None
    notes: list[str] = field(default_factory=list)


def normalise_bus_id(bus_id: Any) -> str:
    """NVML's "00000000:1B:00.0" (str or bytes) as sysfs writes it: "0000:1b:00.0"."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    text = text.strip().lower()
    domain, _, rest = text.partition(":")
    if not rest:
        return text
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:
        return text


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _init_reason(exc: BaseException) -> str:
    kind = type(exc).__name__
    if kind.endswith("LibraryNotFound"):
        return "NVML library not found (no NVIDIA driver installed)"
    if kind.endswith("DriverNotLoaded"):
        return "NVIDIA driver not loaded"
    if kind.endswith("NoPermission"):
        return "no permission to use NVML"
    if kind.endswith("LibRmVersionMismatch"):
        return "NVML library and kernel driver versions differ (reboot or reload the driver)"
    return f"NVML could not start: {exc}"


class _Calls:
    """Calls into NVML where "not supported" (or a missing function) simply means no answer."""

    def __init__(self, nvml: Any):
        self.nvml = nvml
        self.error_type = getattr(nvml, "NVMLError", None) or Exception

    def get(self, name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.error_type:
            return None
        except (AttributeError, TypeError, ValueError, OSError, ctypes.ArgumentError):
            return None


def _nvlinks(calls: _Calls, handle: Any) -> tuple[NvLink, ...]:
    links: list[NvLink] = []
    max_links = int(getattr(calls.nvml, "NVML_NVLINK_MAX_LINKS", 18))
    for link in range(max_links):
        state = calls.get("nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            break                     # past the device's last link (or no NVLink at all)
        remote_pci = remote_type = None
        if state:
            kind = calls.get("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            remote_type = _REMOTE_TYPES.get(kind) if kind is not None else None
            info = calls.get("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            if info is not None and getattr(info, "busId", None):
                remote_pci = normalise_bus_id(info.busId)
        links.append(NvLink(link=link, active=bool(state), remote_pci=remote_pci, remote_type=remote_type))
    return tuple(links)


def read_fabric_info(nvml: Any, handle: Any, error_type: type) -> tuple[Any, str | None]:
    """(fabric info structure, None) from the newest entry point the driver has, or (None, the
    NVMLError class name) when NVML refuses; (None, "FunctionNotFound") when none exists."""
    for fn_name, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t"),
                                 ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
        fn, struct = getattr(nvml, fn_name, None), getattr(nvml, struct_name, None)
        if fn is None or struct is None:
            continue
        info = struct()
        try:
            fn(handle, ctypes.byref(info))
        except error_type as exc:
            kind = type(exc).__name__
            if kind.endswith("FunctionNotFound"):
                continue              # older driver: try the older entry point
            return None, kind
        except (AttributeError, TypeError, ctypes.ArgumentError):
            continue
        return info, None
    return None, "FunctionNotFound"


def _fabric(calls: _Calls, handle: Any) -> tuple[str, int | None]:
    """(state, clique id) of one GPU's registration with the NVLink fabric manager."""
    info, error = read_fabric_info(calls.nvml, handle, calls.error_type)
    if info is None:
        return ("not_supported" if (error or "").endswith("NotSupported") else "unknown"), None
    if info.status != 0 and info.state == 3:
        return "failed", int(info.cliqueId)
    return _FABRIC_STATES.get(int(info.state), "unknown"), int(info.cliqueId)


def _fabric_summary(states: list[tuple[str, int | None]]) -> tuple[str | None, str]:
    known = [s for s, _ in states if s != "unknown"]
    if not known:
        return None, "NVML gave no fabric information"
    worst = min(known, key=_FM_ORDER.index)
    if worst == "not_supported":
        return worst, "GPUs are not on an NVSwitch fabric (or the driver does not report it)"
    done = sum(1 for s in known if s == "completed")
    cliques = sorted({c for s, c in states if c is not None and s == "completed"})
    detail = f"{done} of {len(states)} GPUs registered with the fabric manager"
    if cliques:
        detail += f" (clique {', '.join(map(str, cliques))})"
    return worst, detail


def _p2p(calls: _Calls, handles: list[Any]) -> tuple[P2PStatus, ...]:
    pairs: list[P2PStatus] = []
    for a in range(len(handles)):
        for b in range(a + 1, len(handles)):
            codes = [calls.get("nvmlDeviceGetP2PStatus", handles[a], handles[b], idx)
                     for idx in (_P2P_READ, _P2P_WRITE)]
            if any(c is None for c in codes):
                status = "unknown"
            else:
                bad = [c for c in codes if c != 0]
                status = _P2P_NAMES.get(bad[0], "unknown") if bad else "OK"
            pairs.append(P2PStatus(a=a, b=b, status=status))
    return tuple(pairs)


def _sysfs_numa(fs: SysfsReader, address: str) -> int | None:
    return numa_of(fs.read_int(f"/sys/bus/pci/devices/{address}/numa_node"))


def _from_pci(pci: PciSection) -> tuple[Gpu, ...]:
    gpus = [d for d in pci.devices if d.kind == "gpu"]
    return tuple(Gpu(index=i, name=f"NVIDIA GPU [{(d.vendor or '')[2:]}:{(d.device or '')[2:]}]",
                     pci_bus_id=d.address, numa_node=d.numa_node)
                 for i, d in enumerate(sorted(gpus, key=lambda d: d.address)))


def _without_nvml(reason: str, pci: PciSection) -> GpuProbe:
    seen = _from_pci(pci)
    if seen:
        return GpuProbe(GpuSection(status=Status.unknown(
            f"{reason}; {len(seen)} NVIDIA GPU(s) seen on the PCI bus, details unknown", source="sysfs"),
            gpus=seen), notes=[f"NVIDIA GPUs present but not queried: {reason}"])
    if pci.status.state == "ok" and pci.devices:
        return GpuProbe(GpuSection(status=Status.absent(
            f"no NVIDIA GPU on the PCI bus; {reason}", source="sysfs:/sys/bus/pci")),
            notes=[f"no NVIDIA GPU found on the PCI bus ({reason})"])
    return GpuProbe(GpuSection(status=Status.unknown(reason)), notes=[f"no NVIDIA GPU found: {reason}"])


def probe_gpus(fs: SysfsReader, nvml: Any, pci: PciSection) -> GpuProbe:
    """Query NVML; `nvml` None on a live root means "import pynvml"; on another root, skip NVML."""
    if nvml is None:
        if not fs.live:
            return _without_nvml("NVML not queried: the snapshot root is not this machine", pci)
        try:
            import pynvml as nvml  # noqa: PLC0415  (heavy, optional at run time)
        except ImportError:
            return _without_nvml("pynvml (nvidia-ml-py) is not installed", pci)
    error_type = getattr(nvml, "NVMLError", None) or Exception
    try:
        nvml.nvmlInit()
    except error_type as exc:
        return _without_nvml(_init_reason(exc), pci)
    except OSError as exc:
        return _without_nvml(f"NVML could not be loaded: {exc}", pci)
    try:
        return _query(fs, nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down must never hide the answer
            pass


def _query(fs: SysfsReader, nvml: Any) -> GpuProbe:
    calls = _Calls(nvml)
    driver = calls.get("nvmlSystemGetDriverVersion")
    cuda = calls.get("nvmlSystemGetCudaDriverVersion")
    driver = _text(driver) if driver is not None else None
    cuda_text = f"{cuda // 1000}.{(cuda % 1000) // 10}" if isinstance(cuda, int) and cuda > 0 else None
    try:
        count = nvml.nvmlDeviceGetCount()
    except calls.error_type as exc:
        return GpuProbe(GpuSection(status=Status.unknown(f"NVML cannot count GPUs: {exc}", source="pynvml")),
                        driver, cuda_text, [f"GPUs unknown: NVML cannot count them ({exc})"])
    if count == 0:
        return GpuProbe(GpuSection(status=Status.absent("NVML reports no GPUs", source="pynvml")),
                        driver, cuda_text, ["no NVIDIA GPU found: NVML reports none"])
    gpus: list[Gpu] = []
    handles: list[Any] = []
    fabric: list[tuple[str, int | None]] = []
    notes: list[str] = []
    for index in range(count):
        handle = calls.get("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            notes.append(f"GPU {index}: NVML gives no handle (GPU lost or inaccessible)")
            continue
        pci = calls.get("nvmlDeviceGetPciInfo", handle)
        bus_id = normalise_bus_id(pci.busId) if pci is not None else f"unknown:{index}"
        numa = calls.get("nvmlDeviceGetNumaNodeId", handle)
        if numa is None or numa < 0:
            numa = _sysfs_numa(fs, bus_id)
        cc = calls.get("nvmlDeviceGetCudaComputeCapability", handle)
        mem = calls.get("nvmlDeviceGetMemoryInfo", handle)
        uuid = calls.get("nvmlDeviceGetUUID", handle)
        name = calls.get("nvmlDeviceGetName", handle)
        gpus.append(Gpu(
            index=index,
            name=_text(name) if name is not None else "unknown",
            pci_bus_id=bus_id,
            uuid=_text(uuid) if uuid is not None else None,
            numa_node=numa,
            compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
            memory_mib=int(mem.total) // (1024 * 1024) if mem is not None else None,
            nvlinks=_nvlinks(calls, handle),
        ))
        handles.append(handle)
        fabric.append(_fabric(calls, handle))
    fm, fm_detail = _fabric_summary(fabric)
    section = GpuSection(status=Status.ok(source="pynvml"), gpus=tuple(gpus), p2p=_p2p(calls, handles),
                         fabric_manager=fm, fabric_manager_detail=fm_detail)
    return GpuProbe(section, driver, cuda_text, notes)
