"""Recorded pyverbs answers (the few calls the HCA probe makes), for fixture machines.

`RecordedVerbs(answers)` stands where `pyverbs.device` would: get_device_list() and
Context(name=...).query_device() / query_port(n) / close(). Attribute values are the verbs
enums (port state 4 = ACTIVE, MTU 5 = 4096, link layer 1 = InfiniBand, 2 = Ethernet).

Built two ways, behaving alike:

- `RecordedVerbs(answers)`: stand-ins shaped like pyverbs (rdma-core 44 to 56): the exception
  classes PyverbsError > PyverbsRDMAError (with `.error_code`) / PyverbsUserError, rdma-core's
  message texts, `Device` with bytes names, plain ints as a Cython 0.29 build (Debian's
  python3-pyverbs) returns them, or with `enum_types=True` IntFlag members as a Cython 3 build
  (the PyPI sdist) returns `state`, `active_mtu` and `max_mtu`.
- `RecordedVerbs(answers, pyverbs=pyverbs.device)`: on the installed module's own types: real
  `Device` objects, the real exception classes, each recorded value converted to the type the
  real getter returns, and every recorded or requested attribute checked against the real
  DeviceAttr / PortAttr. A pyverbs that renames or retypes what the probe reads fails here.

An attribute the probe reads that the recording lacks raises NotRecorded (not AttributeError,
which `getattr(x, name, default)` would swallow), so a recording cannot silently fall short.

Answers format: {"devices": {"mlx5_0": {"phys_port_cnt": 1, "fw_version": "28.39.1002",
"vendor_part_id": 4129, "ports": {"1": {"state": 4, "active_mtu": 5, "max_mtu": 5, "link_layer": 1,
"lid": 16, "sm_lid": 1}}}}, "uverbs": true}

- "uverbs": whether the node has /sys/class/infiniband_verbs (ib_uverbs loaded; default: true when
  devices are recorded, false when none). libibverbs fails without it, and get_device_list()
  raises PyverbsRDMAError('Failed to get devices list'); with it and no device, it returns [].
- per device, besides DeviceAttr values and "ports": "open_errno" (ibv_open_device fails with
  this errno, as in a container without /dev/infiniband), "guid", "node_type" (1 = CA),
  "transport_type" (0 = IB), the Device fields get_device_list() reports.
"""

from __future__ import annotations

import enum
import errno
import importlib
import json
import os
from pathlib import Path
from typing import Any

# Device keys in a recording that are not DeviceAttr values.
_DEVICE_KEYS = {"ports", "open_errno", "guid", "node_type", "transport_type"}


class NotRecorded(LookupError):
    """The probe read an attribute pyverbs has but the recording does not answer."""


# ---------------------------------------------------------------- stand-ins for pyverbs' own types

class PyverbsError(Exception):
    """pyverbs' base exception: an error_code other than -1 appends '. Errno: N, strerror'."""

    def __init__(self, msg: str, error_code: int = -1):
        if error_code != -1:
            msg = f"{msg}. Errno: {error_code}, {os.strerror(error_code)}"
        super().__init__(msg)


class PyverbsRDMAError(PyverbsError):
    """Raised where rdma-core returns an error; error_code is its errno, -1 when it gave none."""

    def __init__(self, msg: str, error_code: int = -1):
        super().__init__(msg, error_code)
        self._error_code = error_code

    @property
    def error_code(self) -> int:
        return self._error_code


class PyverbsUserError(PyverbsError):
    """Raised for a caller's mistake (no device name)."""

    def __init__(self, msg: str):
        super().__init__(msg)


class ibv_port_state(enum.IntFlag):  # noqa: N801 - pyverbs' spelling
    IBV_PORT_NOP = 0
    IBV_PORT_DOWN = 1
    IBV_PORT_INIT = 2
    IBV_PORT_ARMED = 3
    IBV_PORT_ACTIVE = 4
    IBV_PORT_ACTIVE_DEFER = 5


class ibv_mtu(enum.IntFlag):  # noqa: N801 - pyverbs' spelling
    IBV_MTU_256 = 1
    IBV_MTU_512 = 2
    IBV_MTU_1024 = 3
    IBV_MTU_2048 = 4
    IBV_MTU_4096 = 5


class Device:
    """What get_device_list() lists: name (bytes), node_type, transport_type, guid, index."""

    def __init__(self, name: bytes, guid: int, node_type: int, transport_type: int, index: int):
        self.name, self.guid, self.node_type = name, guid, node_type
        self.transport_type, self.index = transport_type, index


class _Kind:
    """One pyverbs attribute class (DeviceAttr, PortAttr): its attribute names and how a recorded
    value becomes what its getter returns."""

    def __init__(self, name: str, getters: dict[str, type], where: str):
        self.name, self.getters, self.where = name, getters, where

    @classmethod
    def of_real(cls, real_class: type) -> "_Kind":
        """Names and value types read off the real class: a fresh instance is all zeros, and each
        getter's zero has the type it returns for any value (int, str, or an IntFlag in a Cython 3
        build), so no device is needed to learn them."""
        zero = real_class()
        getters = {}
        for name in dir(real_class):
            if name.startswith("_"):
                continue
            value = getattr(zero, name)
            if not callable(value):
                getters[name] = type(value)
        return cls(real_class.__name__, getters, f"{real_class.__module__}.{real_class.__name__}")

    def typed(self, attr: str, value: Any) -> Any:
        kind = self.getters.get(attr)
        if kind is None:
            raise ValueError(f"the recording answers {self.name}.{attr}, which {self.where} does not have")
        if issubclass(kind, enum.Enum) or kind in (int, str):
            return kind(value)
        raise TypeError(f"{self.where}.{attr} returns {kind.__name__}, which a recording cannot give")


# What the stand-ins know: the attributes recordings answer, typed as a Cython 0.29 build types them.
_STAND_IN_DEVICE_ATTR = {"phys_port_cnt": int, "fw_version": str, "vendor_part_id": int, "vendor_id": int,
                         "node_guid": int, "sys_image_guid": int, "hw_ver": int}
_STAND_IN_PORT_ATTR = {"state": int, "active_mtu": int, "max_mtu": int, "link_layer": int, "lid": int,
                       "sm_lid": int, "phys_state": int, "active_width": int, "active_speed": int,
                       "gid_tbl_len": int, "port_cap_flags": int}


class _Answer:
    """One recorded DeviceAttr / PortAttr."""

    def __init__(self, kind: _Kind, values: dict[str, Any]):
        self._kind = kind
        self._values = {k: kind.typed(k, v) for k, v in values.items()}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        values = self.__dict__["_values"]
        if name in values:
            return values[name]
        kind = self.__dict__["_kind"]
        if name in kind.getters:
            raise NotRecorded(f"the recording has no answer for {kind.name}.{name}")
        raise AttributeError(f"'{kind.where}' object has no attribute '{name}'")


def _device_attr_values(record: dict[str, Any]) -> dict[str, Any]:
    values = {k: v for k, v in record.items() if k not in _DEVICE_KEYS}
    values.setdefault("phys_port_cnt", len(record.get("ports") or {}))
    return values


class _Context:
    """An opened device: query_device(), query_port(n), close()."""

    def __init__(self, replay: "RecordedVerbs", name: str, record: dict[str, Any]):
        self.name = name
        self._replay, self._record = replay, record
        self._open = True

    def query_device(self) -> _Answer:
        return _Answer(self._replay._device_attr, _device_attr_values(self._record))

    def query_port(self, port_num: int) -> _Answer:
        port = (self._record.get("ports") or {}).get(str(port_num))
        if port is None:      # ibv_query_port returns EINVAL for a port the device does not have
            raise self._replay._rdma_error(f"Failed to query port {port_num}", errno.EINVAL)
        return _Answer(self._replay._port_attr, port)

    def close(self) -> None:
        self._open = False


class RecordedVerbs:
    """A pyverbs.device look-alike answering from a recording (see the module docstring)."""

    def __init__(self, answers: dict[str, Any] | str | Path, *, pyverbs: Any = None, enum_types: bool = False):
        if not isinstance(answers, dict):
            answers = json.loads(Path(answers).read_text(encoding="utf-8"))
        self._devices: dict[str, Any] = dict(answers.get("devices") or {})
        self._uverbs = bool(answers.get("uverbs", bool(self._devices)))
        self.real = pyverbs is not None
        if pyverbs is not None:
            errors = importlib.import_module(pyverbs.__name__.rsplit(".", 1)[0] + ".pyverbs_error")
            self._rdma_error, self._user_error = errors.PyverbsRDMAError, errors.PyverbsUserError
            self._device = pyverbs.Device
            self._device_attr = _Kind.of_real(pyverbs.DeviceAttr)
            self._port_attr = _Kind.of_real(pyverbs.PortAttr)
        else:
            self._rdma_error, self._user_error, self._device = PyverbsRDMAError, PyverbsUserError, Device
            port_getters = dict(_STAND_IN_PORT_ATTR)
            if enum_types:
                port_getters.update(state=ibv_port_state, active_mtu=ibv_mtu, max_mtu=ibv_mtu)
            self._device_attr = _Kind("DeviceAttr", dict(_STAND_IN_DEVICE_ATTR), "pyverbs.device.DeviceAttr")
            self._port_attr = _Kind("PortAttr", port_getters, "pyverbs.device.PortAttr")
        for record in self._devices.values():       # a recording pyverbs could not give fails here
            _Answer(self._device_attr, _device_attr_values(record))
            for port in (record.get("ports") or {}).values():
                _Answer(self._port_attr, port)

    def get_device_list(self) -> list[Any]:
        if not self._uverbs:
            raise self._rdma_error("Failed to get devices list")
        return [self._device(name.encode(), int(rec.get("guid", 0)), int(rec.get("node_type", 1)),
                             int(rec.get("transport_type", 0)), index)
                for index, (name, rec) in enumerate(sorted(self._devices.items()))]

    def Context(self, **kwargs: Any) -> _Context:  # noqa: N802 - pyverbs' spelling (a class there)
        name = kwargs.get("name")
        if name is None:
            raise self._user_error("Device name must be provided")
        if not self._uverbs:
            raise self._rdma_error("Failed to get devices list")
        # pyverbs compares the str it is given with each device's decoded name: bytes never match
        record = self._devices.get(name) if isinstance(name, str) else None
        if record is None:
            raise self._rdma_error(f"Failed to find device {name}")
        if record.get("open_errno"):
            raise self._rdma_error(f"Failed to open device {name}", int(record["open_errno"]))
        return _Context(self, name, record)

