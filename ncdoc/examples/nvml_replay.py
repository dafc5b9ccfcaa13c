"""Recorded NVML answers, replayed at the pynvml import boundary.

`RecordedNvml(answers)` stands where the pynvml module would: the probes call the same
function names and get the same shapes back (nvmlPciInfo_t / c_nvmlMemory_t structures,
str versions, tuples for compute capability), and failures are raised as the real
pynvml.NVMLError subclasses, built by pynvml itself, so `except pynvml.NVMLError_NotSupported`
behaves exactly as on a node. Constants and structure types are pynvml's own.

Answers format (JSON): {"init_error": null | "LibraryNotFound" | ..., "driver_version": "...",
"cuda_driver_version": 12020, "devices": [{"name", "uuid", "pci": {busId, domain, bus, device,
pciDeviceId, pciSubSystemId}, "numa_node", "cuda_compute_capability": [9, 0], "memory_total",
"nvlinks": [{"state", "remote_type", "remote_pci"}] | {"error": "NotSupported"},
"fabric": {"state", "status", "clique_id"} | {"error": "NotSupported"}, "retired_pages_pending": 0 | 1,
"remapped_rows": {"corrected", "uncorrected", "pending", "failure"}, "handle_error": "GpuIsLost"}],
"p2p": {"0-1": {"0": 0, "1": 0}}}. Any recorded value may be {"error": "<NVML error name>"}; a device
without retired_pages_pending / remapped_rows answers NotSupported, as a GPU without HBM does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# Error names as the NVMLError_<Name> classes spell them -> NVML_ERROR_* codes.
_ERROR_CODES = {
    "Uninitialized": "NVML_ERROR_UNINITIALIZED", "InvalidArgument": "NVML_ERROR_INVALID_ARGUMENT",
    "NotSupported": "NVML_ERROR_NOT_SUPPORTED", "NoPermission": "NVML_ERROR_NO_PERMISSION",
    "NotFound": "NVML_ERROR_NOT_FOUND", "DriverNotLoaded": "NVML_ERROR_DRIVER_NOT_LOADED",
    "LibraryNotFound": "NVML_ERROR_LIBRARY_NOT_FOUND", "FunctionNotFound": "NVML_ERROR_FUNCTION_NOT_FOUND",
    "GpuIsLost": "NVML_ERROR_GPU_IS_LOST", "LibRmVersionMismatch": "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    "ResetRequired": "NVML_ERROR_RESET_REQUIRED",
    "Unknown": "NVML_ERROR_UNKNOWN",
}


def _bus_key(bus_id: str) -> tuple[int, str]:
    """"00000000:1B:00.0" and "0000:1b:00.0" name the same function."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    try:
        return int(domain, 16), rest
    except ValueError:
        return -1, bus_id.lower()


class _Handle:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<recorded nvmlDevice {self.index}>"


class RecordedNvml:
    """A pynvml stand-in answering from a recording (a dict or a JSON file path)."""

    def __init__(self, answers: dict[str, Any] | str | Path):
        import pynvml  # noqa: PLC0415 - the real module supplies error classes, constants, structs

        if not isinstance(answers, dict):
            answers = json.loads(Path(answers).read_text(encoding="utf-8"))
        self._pynvml = pynvml
        self._answers = answers
        self._devices: list[dict[str, Any]] = list(answers.get("devices") or [])
        self._initialised = 0
        self.NVMLError = pynvml.NVMLError

    # Constants, structure types and NVMLError_* classes come from pynvml; an NVML function this
    # recording does not implement answers as an old driver would.
    def __getattr__(self, name: str) -> Any:
        value = getattr(self._pynvml, name)
        if name.startswith("nvml") and callable(value):
            def missing(*_args: Any, **_kwargs: Any) -> Any:
                self._raise("FunctionNotFound")
            return missing
        return value

    # ---------------------------------------------------------------- helpers

    def _raise(self, name: str) -> None:
        code = getattr(self._pynvml, _ERROR_CODES.get(name, "NVML_ERROR_UNKNOWN"))
        raise self._pynvml.NVMLError(code)

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"error"}:
            self._raise(value["error"])
        return value

    def _check(self) -> None:
        if not self._initialised:
            self._raise("Uninitialized")

    def _device(self, handle: Any) -> dict[str, Any]:
        self._check()
        if not isinstance(handle, _Handle) or not 0 <= handle.index < len(self._devices):
            self._raise("InvalidArgument")
        return self._devices[handle.index]

    def _field(self, handle: Any, key: str) -> Any:
        dev = self._device(handle)
        if key not in dev:
            self._raise("NotSupported")
        return self._value(dev[key])

    # ---------------------------------------------------------------- init / system

    def nvmlInit(self) -> None:
        error = self._answers.get("init_error")
        if error:
            self._raise(error)
        self._initialised += 1

    def nvmlInitWithFlags(self, _flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self._check()
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check()
        return self._value(self._answers.get("driver_version", {"error": "NotSupported"}))

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check()
        return self._value(self._answers.get("cuda_driver_version", {"error": "NotSupported"}))

    nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion

    # ---------------------------------------------------------------- devices

    def nvmlDeviceGetCount(self) -> int:
        self._check()
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check()
        if not 0 <= index < len(self._devices):
            self._raise("InvalidArgument")
        if self._devices[index].get("handle_error"):
            self._raise(self._devices[index]["handle_error"])
        return _Handle(index)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> _Handle:
        self._check()
        wanted = _bus_key(bus_id.decode() if isinstance(bus_id, bytes) else bus_id)
        for i, dev in enumerate(self._devices):
            if _bus_key(dev["pci"]["busId"]) == wanted:
                return _Handle(i)
        self._raise("NotFound")
        raise AssertionError  # unreachable: _raise always raises

    def nvmlDeviceGetName(self, handle: Any) -> str:
        return self._field(handle, "name")

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self._field(handle, "uuid")

    def _pci_struct(self, rec: dict[str, Any]) -> Any:
        info = self._pynvml.nvmlPciInfo_t()
        bus_id = rec["busId"].encode()
        info.busId = bus_id
        info.busIdLegacy = bus_id[-16:] if len(bus_id) >= 16 else bus_id
        for key in ("domain", "bus", "device", "pciDeviceId", "pciSubSystemId"):
            setattr(info, key, int(rec.get(key, 0)))
        return info

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        return self._pci_struct(self._field(handle, "pci"))

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        value = self._field(handle, "numa_node")
        if value is None:
            self._raise("NotSupported")
        return value

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        major, minor = self._field(handle, "cuda_compute_capability")
        return int(major), int(minor)

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        total = int(self._field(handle, "memory_total"))
        mem = self._pynvml.c_nvmlMemory_t()
        mem.total, mem.free, mem.used = total, total, 0
        return mem

    # ---------------------------------------------------------------- health

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        return int(self._field(handle, "retired_pages_pending"))

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        rows = self._field(handle, "remapped_rows")
        return (int(rows.get("corrected", 0)), int(rows.get("uncorrected", 0)), int(bool(rows.get("pending"))),
                int(bool(rows.get("failure"))))

    # ---------------------------------------------------------------- NVLink

    def _link(self, handle: Any, link: int) -> dict[str, Any]:
        links = self._field(handle, "nvlinks")
        if not 0 <= link < len(links):
            self._raise("InvalidArgument")   # what NVML answers past a device's last link
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        return int(self._value(self._link(handle, link)["state"]))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        return int(self._value(self._link(handle, link).get("remote_type", {"error": "NotSupported"})))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> Any:
        remote = self._value(self._link(handle, link).get("remote_pci") or {"error": "NotSupported"})
        return self._pci_struct(remote if isinstance(remote, dict) else {"busId": remote})

    nvmlDeviceGetNvLinkRemotePciInfo_v2 = nvmlDeviceGetNvLinkRemotePciInfo

    # ---------------------------------------------------------------- P2P, fabric

    def nvmlDeviceGetP2PStatus(self, handle1: Any, handle2: Any, index: Any) -> int:
        a, b = self._device(handle1), self._device(handle2)
        i, j = sorted((handle1.index, handle2.index))
        if isinstance(index, tuple):      # pynvml's NVML_P2P_CAPS_INDEX_READ is the tuple (0,)
            index = index[0]
        pair = (self._answers.get("p2p") or {}).get(f"{i}-{j}")
        if pair is None or str(index) not in pair or a is b:
            self._raise("NotSupported" if a is not b else "InvalidArgument")
        return int(self._value(pair[str(index)]))

    def _fill_fabric(self, handle: Any, ref: Any) -> int:
        info = self._value(self._field(handle, "fabric"))
        target = getattr(ref, "_obj", ref)           # ctypes.byref(x) keeps x in ._obj
        target.state = int(info["state"])
        target.status = int(info.get("status", 0))
        if hasattr(target, "cliqueId"):
            target.cliqueId = int(info.get("clique_id", 0))
        return self._pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, handle: Any, ref: Any) -> int:
        return self._fill_fabric(handle, ref)

    def nvmlDeviceGetGpuFabricInfoV(self, handle: Any, ref: Any) -> int:
        return self._fill_fabric(handle, ref)
