"""Recorded pyverbs answers (the few calls the HCA probe makes), for fixture machines.

`RecordedVerbs(answers)` stands where `pyverbs.device` would: get_device_list() and
Context(name=...).query_device() / query_port(n) / close(). Attribute values are the verbs
enums (port state 4 = ACTIVE, MTU 5 = 4096, link layer 1 = InfiniBand, 2 = Ethernet).
An empty recording raises as pyverbs does when there is no device.

Answers format: {"devices": {"mlx5_0": {"phys_port_cnt": 1, "fw_version": "28.39.1002",
"ports": {"1": {"state": 4, "active_mtu": 5, "max_mtu": 5, "link_layer": 1, "lid": 16, "sm_lid": 1}}}}}
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any


class PyverbsRDMAError(Exception):
    """Named as pyverbs names it; raised where pyverbs raises it."""


class _Device(SimpleNamespace):
    pass


class _Context:
    def __init__(self, name: str, record: dict[str, Any]):
        self.name = name
        self._record = record

    def query_device(self) -> SimpleNamespace:
        return SimpleNamespace(phys_port_cnt=self._record.get("phys_port_cnt", len(self._record.get("ports", {}))),
                               fw_version=self._record.get("fw_version", ""),
                               vendor_part_id=self._record.get("vendor_part_id", 0))

    def query_port(self, port_num: int) -> SimpleNamespace:
        port = (self._record.get("ports") or {}).get(str(port_num))
        if port is None:
            raise PyverbsRDMAError(f"Failed to query port {port_num}. Errno: 22, Invalid argument")
        return SimpleNamespace(**port)

    def close(self) -> None:
        pass


class RecordedVerbs:
    def __init__(self, answers: dict[str, Any] | str | Path):
        if not isinstance(answers, dict):
            answers = json.loads(Path(answers).read_text(encoding="utf-8"))
        self._devices: dict[str, Any] = dict(answers.get("devices") or {})

    def get_device_list(self) -> list[_Device]:
        if not self._devices:
            raise PyverbsRDMAError("Failed to get devices list")
        return [_Device(name=name.encode()) for name in sorted(self._devices)]

    def Context(self, *, name: str) -> _Context:  # noqa: N802 - pyverbs' spelling
        if name not in self._devices:
            raise PyverbsRDMAError(f"Failed to open device {name}")
        return _Context(name, self._devices[name])
