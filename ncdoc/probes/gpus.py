"""GPUs through NVML (pynvml): devices, NVLinks, P2P status, fabric manager, driver versions, and
the health states NVML reports cheaply (pending page retirement, row remapping, lost GPUs).

`nvml` is anything shaped like the pynvml module: the real one on a live node, a
`RecordedNvml` replay in tests and examples. Only NVMLError subclasses are expected from
it; whatever else goes wrong still ends as "unknown, because ...", never as a crash.
When NVML cannot be used, NVIDIA GPUs seen on the PCI bus are still listed (with the
section unknown, NVML's error kept), so the topology can place them.

The work is split in two so that NVML can run in a child process with a deadline
(ncdoc.probes.nvml_process): `ask_nvml` talks to NVML only and returns an NvmlAnswer of plain
data; `gpus_from` combines that answer with the PCI facts. ctypes is imported only by the
functions that call into NVML.
"""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader, numa_of
from ncdoc.snapshot import FailedGpu, Gpu, GpuSection, NvLink, P2PStatus, PciSection, Status

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any, Callable

# pynvml defines NVML_P2P_CAPS_INDEX_READ as the tuple (0,) (a stray comma), which ctypes
# rejects; the C enum values are used instead.
_P2P_READ, _P2P_WRITE = 0, 1
_P2P_NAMES = {0: "OK", 1: "chipset_not_supported", 2: "not_supported", 3: "topology_not_supported",
              4: "disabled_by_regkey", 5: "not_supported", 6: "unknown"}
_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}
_FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
_FM_ORDER = ("failed", "not_started", "in_progress", "completed", "not_supported")


class GpuProbe:
    """The GPU section with the driver versions NVML gave and notes for the snapshot."""
    __slots__ = ("section", "driver", "cuda_driver", "notes")

    def __init__(self, section: GpuSection, driver: str | None = None, cuda_driver: str | None = None,
                 notes: list[str] | None = None):
        self.section, self.driver, self.cuda_driver = section, driver, cuda_driver
        self.notes = list(notes or [])


class NvmlAnswer:
    """What NVML said: the GPU section when it started, else its error (kind and text) and the
    reason in words. Plain data, so a child process can send it back (see to_data)."""
    __slots__ = ("section", "driver", "cuda_driver", "notes", "error_kind", "error_text", "reason")

    def __init__(self, section: GpuSection | None = None, driver: str | None = None, cuda_driver: str | None = None,
                 notes: list[str] | None = None, error_kind: str = "", error_text: str = "", reason: str = ""):
        self.section, self.driver, self.cuda_driver = section, driver, cuda_driver
        self.notes = list(notes or [])
        self.error_kind, self.error_text, self.reason = error_kind, error_text, reason

    def to_data(self) -> dict:
        from ncdoc.startup.record import asdict
        return {"section": asdict(self.section) if self.section is not None else None, "driver": self.driver,
                "cuda_driver": self.cuda_driver, "notes": list(self.notes), "error_kind": self.error_kind,
                "error_text": self.error_text, "reason": self.reason}

    @classmethod
    def from_data(cls, data: dict) -> "NvmlAnswer":
        import ncdoc.snapshot as model
        from ncdoc.startup.typed_json import from_json_data
        section = data.get("section")
        return cls(from_json_data("GpuSection", section, model) if section is not None else None,
                   data.get("driver"), data.get("cuda_driver"), data.get("notes") or [], data.get("error_kind", ""),
                   data.get("error_text", ""), data.get("reason", ""))


def error_kind(exc: BaseException) -> str:
    """NVMLError_LibRmVersionMismatch -> "LibRmVersionMismatch" (the class name otherwise)."""
    name = type(exc).__name__
    return name[len("NVMLError_"):] if name.startswith("NVMLError_") else name


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


# NVML errors that mean the GPU itself is unusable, not that a query is unsupported.
_FATAL = ("GpuIsLost", "ResetRequired", "GpuRequiresReset")


class _Calls:
    """Calls into NVML where "not supported" (or a missing function) simply means no answer.
    Errors saying the GPU is lost or needs a reset are kept for the GPU being queried."""

    def __init__(self, nvml: Any):
        import ctypes
        self.nvml = nvml
        self.error_type = getattr(nvml, "NVMLError", None) or Exception
        self._plain_errors = (AttributeError, TypeError, ValueError, OSError, ctypes.ArgumentError)
        self.current: int | None = None
        self.fatal: dict[int, tuple[str, str]] = {}

    def get(self, name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.nvml, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self.error_type as exc:
            kind = error_kind(exc)
            if self.current is not None and kind in _FATAL:
                self.fatal.setdefault(self.current, (kind, str(exc)))
            return None
        except self._plain_errors:
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
    import ctypes
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


def without_nvml(reason: str, pci: PciSection, *, kind: str = "", text: str = "") -> GpuProbe:
    """The GPU section when NVML gave nothing: GPUs seen on the PCI bus listed, NVML's error kept."""
    seen = _from_pci(pci)
    extra = {"nvml_error": text, "nvml_error_kind": kind}
    if seen:
        return GpuProbe(GpuSection(status=Status.unknown(
            f"{reason}; {len(seen)} NVIDIA GPU(s) seen on the PCI bus, details unknown", source="sysfs"),
            gpus=seen, **extra), notes=[f"NVIDIA GPUs present but not queried: {reason}"])
    if pci.status.state == "ok" and pci.devices:
        return GpuProbe(GpuSection(status=Status.absent(
            f"no NVIDIA GPU on the PCI bus; {reason}", source="sysfs:/sys/bus/pci"), **extra),
            notes=[f"no NVIDIA GPU found on the PCI bus ({reason})"])
    return GpuProbe(GpuSection(status=Status.unknown(reason), **extra), notes=[f"no NVIDIA GPU found: {reason}"])


def ask_nvml(fs: SysfsReader, nvml: Any) -> NvmlAnswer:
    """Start NVML, read every GPU, shut it down. `nvml` is a pynvml-like module."""
    error_type = getattr(nvml, "NVMLError", None) or Exception
    try:
        nvml.nvmlInit()
    except error_type as exc:
        return NvmlAnswer(error_kind=error_kind(exc), error_text=str(exc), reason=_init_reason(exc))
    except OSError as exc:
        return NvmlAnswer(error_kind="LibraryNotLoaded", error_text=str(exc), reason=f"NVML could not be loaded: {exc}")
    try:
        return _query(fs, nvml)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down must never hide the answer
            pass


def import_and_ask(fs: SysfsReader, module: str = "pynvml") -> NvmlAnswer:
    """ask_nvml with the pynvml-like module named `module`, imported here (heavy: only where used)."""
    try:
        nvml = __import__(module)
    except ImportError as exc:
        return NvmlAnswer(error_kind="NotInstalled", error_text=str(exc),
                          reason="pynvml (nvidia-ml-py) is not installed" if module == "pynvml"
                          else f"{module} cannot be imported: {exc}")
    return ask_nvml(fs, nvml)


def gpus_from(answer: NvmlAnswer, pci: PciSection) -> GpuProbe:
    """The GPU probe's result from NVML's answer and the PCI bus."""
    if answer.section is not None:
        return GpuProbe(answer.section, answer.driver, answer.cuda_driver, answer.notes)
    probe = without_nvml(answer.reason or "NVML gave no answer", pci, kind=answer.error_kind,
                         text=answer.error_text)
    probe.notes = list(answer.notes) + probe.notes
    return probe


def probe_gpus(fs: SysfsReader, nvml: Any, pci: PciSection) -> GpuProbe:
    """Query NVML in this process; `nvml` None on a live root means "import pynvml"; on another root,
    skip NVML. (capture() runs NVML in a child process with a deadline instead, see nvml_process.)"""
    if nvml is None:
        if not fs.live:
            return without_nvml("NVML not queried: the snapshot root is not this machine", pci)
        return gpus_from(import_and_ask(fs), pci)
    return gpus_from(ask_nvml(fs, nvml), pci)


def _health(calls: _Calls, handle: Any) -> dict[str, bool | None]:
    """Pending page retirement and row remapping (HBM GPUs; None where NVML does not support them)."""
    pending = calls.get("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    rows = calls.get("nvmlDeviceGetRemappedRows", handle)
    remap_pending = remap_failed = None
    if isinstance(rows, (tuple, list)) and len(rows) >= 4:
        remap_pending, remap_failed = bool(rows[2]), bool(rows[3])
    return {"retired_pages_pending": bool(pending) if isinstance(pending, int) else None,
            "remapped_rows_pending": remap_pending, "remapped_rows_failure": remap_failed}


def _query(fs: SysfsReader, nvml: Any) -> NvmlAnswer:
    calls = _Calls(nvml)
    driver = calls.get("nvmlSystemGetDriverVersion")
    cuda = calls.get("nvmlSystemGetCudaDriverVersion")
    driver = _text(driver) if driver is not None else None
    cuda_text = f"{cuda // 1000}.{(cuda % 1000) // 10}" if isinstance(cuda, int) and cuda > 0 else None
    try:
        count = nvml.nvmlDeviceGetCount()
    except calls.error_type as exc:
        return NvmlAnswer(GpuSection(status=Status.unknown(f"NVML cannot count GPUs: {exc}", source="pynvml"),
                                     nvml_error=str(exc), nvml_error_kind=error_kind(exc)),
                          driver, cuda_text, [f"GPUs unknown: NVML cannot count them ({exc})"])
    if count == 0:
        return NvmlAnswer(GpuSection(status=Status.absent("NVML reports no GPUs", source="pynvml")),
                          driver, cuda_text, ["no NVIDIA GPU found: NVML reports none"])
    gpus: list[Gpu] = []
    handles: list[Any] = []
    fabric: list[tuple[str, int | None]] = []
    notes: list[str] = []
    failed: list[FailedGpu] = []
    for index in range(count):
        calls.current = index
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except calls.error_type as exc:
            failed.append(FailedGpu(index=index, error=str(exc), kind=error_kind(exc)))
            notes.append(f"GPU {index}: NVML gives no handle ({exc})")
            continue
        except calls._plain_errors:
            handle = None
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
            **_health(calls, handle),
        ))
        handles.append(handle)
        fabric.append(_fabric(calls, handle))
        if index in calls.fatal:
            kind, text = calls.fatal[index]
            failed.append(FailedGpu(index=index, error=text, kind=kind))
    calls.current = None
    fm, fm_detail = _fabric_summary(fabric)
    section = GpuSection(status=Status.ok(source="pynvml"), gpus=tuple(gpus), p2p=_p2p(calls, handles),
                         fabric_manager=fm, fabric_manager_detail=fm_detail, failed=tuple(failed))
    return NvmlAnswer(section, driver, cuda_text, notes)
