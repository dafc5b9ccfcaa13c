"""Field normalisers shared by the RDMA tool parsers (ibv_devinfo, ibstat, ibstatus, show_gids).

States become upper case (PORT_ACTIVE (4), "4: ACTIVE" and "Active" are all ACTIVE), rates
Gb/s, MTUs bytes, GIDs sysfs' full form; HcaBuild collects one device's fields as they come.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from ncdoc.snapshot import Hca, Port
from ncdoc.startup.compiled_patterns import precompiled

# IB per-lane signalling name for a per-lane Gb/s figure (ibv_devinfo prints only the figure)
LANE_SPEED = {2.5: "SDR", 5.0: "DDR", 10.0: "QDR", 14.0: "FDR", 25.0: "EDR", 50.0: "HDR",
              100.0: "NDR", 200.0: "XDR"}
# ibv_port_attr.active_speed codes (verbs.h); 4 and 8 both print "10.0 Gbps"
SPEED_CODE = {1: "SDR", 2: "DDR", 4: "QDR", 8: "FDR10", 16: "FDR", 32: "EDR", 64: "HDR", 128: "NDR",
              256: "XDR"}
_PHYS = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
         6: "LinkErrorRecovery", 7: "PhyTest"}
_STATES = {"active": "ACTIVE", "down": "DOWN", "init": "INIT", "initializing": "INIT", "initialize": "INIT",
           "armed": "ARMED", "active_defer": "ACTIVE_DEFER", "nop": "NOP"}


# a line that starts another tool's record, or a shell prompt: the current record is over
_RECORD_END = precompiled(r"^\s*(?:hca_id:|CA '|Infiniband device '|DEV\s+PORT\s+INDEX\b)|"
                         r"^[\w.-]*@[\w.-]+:\S*\s*[$#]|^\s*[$#]\s+\w")


def ends_record(line: str, own: str) -> bool:
    """True for a line that closes the current record (another tool's header, a shell prompt)."""
    return not line.lstrip().startswith(own) and _RECORD_END.match(line) is not None


@dataclass
class HcaBuild:
    """One device's fields as a parser meets them; build() makes the frozen Hca."""
    name: str
    attrs: dict = field(default_factory=dict)
    ports: dict[int, dict] = field(default_factory=dict)

    def port(self, num: int) -> dict:
        return self.ports.setdefault(num, {"num": num, "gids": []})

    def build(self) -> Hca:
        ports = []
        for num in sorted(self.ports):
            p = dict(self.ports[num])
            gids = tuple(sorted(p.pop("gids"), key=lambda g: g.index))
            ports.append(Port(gids=gids, **p))
        return Hca(name=self.name, ports=tuple(ports), **self.attrs)


def port_state(text: str) -> str | None:
    """PORT_ACTIVE (4) / 4: ACTIVE / Active -> ACTIVE."""
    t = re.sub(r"\(\d+\)", "", text).strip()
    t = re.sub(r"^\d+\s*:\s*", "", t)
    t = re.sub(r"^PORT_", "", t, flags=re.I).strip().lower()
    if not t:
        return None
    return _STATES.get(t, t.upper())


def phys_state(text: str) -> str | None:
    m = re.search(r"\((\d{1,20}(?!\d))\)", text) or re.match(r"\s*(\d{1,20}(?!\d))\s*:", text)
    if m and int(m.group(1)) in _PHYS:
        return _PHYS[int(m.group(1))]
    t = re.sub(r"^\d+\s*:\s*", "", text).strip()
    return {"LINK_UP": "LinkUp", "POLLING": "Polling", "DISABLED": "Disabled", "SLEEP": "Sleep"}.get(
        t.upper(), t or None)


def int_value(text: str) -> int | None:
    """'0x22' -> 34, '4096 (5)' -> 4096 (hex LIDs from ibstatus, decimal elsewhere)."""
    m = re.match(r"\s*(?:0x([0-9a-fA-F]{1,16})(?![0-9a-fA-F])|([0-9]{1,20})(?![0-9]))", text)
    if not m:
        return None
    return int(m.group(1), 16) if m.group(1) else int(m.group(2))


def gid_text(text: str) -> str | None:
    try:
        return ipaddress.IPv6Address(text.strip()).exploded
    except ValueError:
        return None


def gid_type(text: str | None) -> str | None:
    if not text:
        return None
    t = text.strip().lower()
    if t in ("v2", "roce v2", "rocev2", "roce_v2"):
        return "RoCE v2"
    if t in ("v1", "roce v1", "ib/roce v1", "rocev1"):
        return "IB/RoCE v1"
    return text.strip() or None


def rate_text(b: HcaBuild, num: int, text: str) -> None:
    """ibstatus "200 Gb/sec (4X HDR)" (possibly cut short) -> rate, width, speed."""
    p = b.port(num)
    p["rate_text"] = text.strip()
    m = re.match(r"\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)(?![0-9])", text)
    if m:
        p["rate_gbps"] = float(m.group(1))
    m = re.search(r"\((\d+X)\s*([A-Z0-9]+)?\)?", text)
    if m:
        p["width"] = m.group(1)
        if m.group(2):
            p["speed"] = m.group(2)


def link_layer(val: str) -> str | None:
    v = val.strip().lower()
    if v.startswith("infiniband") or v == "ib":
        return "InfiniBand"
    if v.startswith("ethernet") or v == "eth":
        return "Ethernet"
    return val.strip() or None
