"""RDMA device listings -> HcaSection: ibv_devinfo (plain, -v, -l), ibstat, ibstatus, show_gids.

Rates: ibstat "Rate: 400", ibstatus "25 Gb/sec (1X EDR)", ibv_devinfo -v width x per-lane
speed (plain ibv_devinfo has none). Shell prompt lines, several tools' output pasted together
and output cut off mid-record are all tolerated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncdoc.errors import InputError
from ncdoc.evidence.lazy_re import lazy
from ncdoc.importers.detect import ibv_tools_present
from ncdoc.importers.ibstat import read_ibstat, read_ibstatus, read_show_gids
from ncdoc.importers.rdma_fields import (LANE_SPEED, SPEED_CODE, HcaBuild, ends_record, gid_text, gid_type,
                                         int_value, link_layer, phys_state, port_state)
from ncdoc.snapshot import Gid, HcaSection, Status
from ncdoc.topology import natural_key


@dataclass(frozen=True)
class IbvResult:
    hcas: HcaSection
    tool: str
    truncated: bool
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------- ibv_devinfo

# fields ibv_devinfo prints under a port (with -v), and its GID table lines
_PORT_FIELDS = ("state", "phys_state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer",
                "active_width", "active_speed", "max_msg_sz", "port_cap_flags", "gid_tbl_len", "subnet_timeout")
_PORT_LINE = lazy(rf"^\s*(?:GID\[\s*\d+\]|{'|'.join(_PORT_FIELDS)}):")
_DEV_OPTION = lazy(r"(?:^|\s)(?:-d|--ib-dev)(?:=|\s+)([\w.\-]+)")
_PORT_OPTION = lazy(r"(?:^|\s)(?:-i|--ib-port)(?:=|\s+)(\d{1,20}(?!\d))")
_ANY_HEADER = lazy(r"^\s*(?:hca_id:|CA '|Infiniband device '|DEV\s+PORT\s+INDEX\b|\d+ HCAs? found)")
FRAGMENT_NAME = "(unnamed)"
_SOFT_ROCE = lazy(r"rxe\d")


def _fragment(lines: list[str], at: int) -> tuple[HcaBuild, int, str]:
    """A device for port lines pasted without their hca_id line: named and numbered from an
    `ibv_devinfo -d NAME [-i PORT]` command line above them when there is one."""
    name, port = FRAGMENT_NAME, 1
    for ln in reversed(lines[:at]):
        if re.search(r"(?:^|[\s$#>])ibv_devinfo(?:\s|$)", ln):
            m, mp = _DEV_OPTION.search(ln), _PORT_OPTION.search(ln)
            name = m.group(1) if m else name
            port = int(mp.group(1)) if mp else port
            break
    if name == FRAGMENT_NAME:
        note = (f"ibv_devinfo port lines without their hca_id line: read as one device of unknown name "
                f"{FRAGMENT_NAME}, port {port}")
    else:
        note = f"ibv_devinfo port lines without their hca_id line: read as {name} port {port} (from the command line)"
    return HcaBuild(name, {"_fragment": True}), port, note


def read_ibv_devinfo(lines: list[str]) -> tuple[list[HcaBuild], bool, list[str]]:
    hcas: list[HcaBuild] = []
    notes: list[str] = []
    cur: HcaBuild | None = None
    port: int | None = None
    width: dict[int, int] = {}
    lane: dict[int, float] = {}
    listed = False
    no_driver: list[str] = []
    # port lines before any record header, in a text with no header of any RDMA tool: a pasted fragment
    headerless = not any(_ANY_HEADER.match(ln) for ln in lines)
    for i, ln in enumerate(lines):
        s = ln.strip()
        if headerless and cur is None and not hcas and _PORT_LINE.match(ln):
            cur, port, note = _fragment(lines, i)
            cur.port(port)
            hcas.append(cur)
            notes.append(note)
        if m := re.match(r"(\d{1,20}(?!\d)) HCAs? found", s):
            listed = True
            if int(m.group(1)) == 0:
                notes.append("ibv_devinfo found no RDMA devices (0 HCAs found)")
            continue
        if listed and re.fullmatch(r"[\w.\-]+", s) and not s.endswith(":") and cur is None and ln[:1].isspace():
            hcas.append(HcaBuild(s, {"_listed": True}))  # `ibv_devinfo -l`: names, one per line
            continue
        if m := re.match(r"libibverbs: Warning: no userspace device-specific driver found for (\S+)", s):
            no_driver.append(m.group(1).rsplit("/", 1)[-1])
            continue
        if s.startswith("No IB devices found") or s.startswith("Failed to get IB devices list"):
            notes.append(s)
            continue
        m = re.match(r"hca_id:\s*(\S+)", s)
        if m:
            cur, port = HcaBuild(m.group(1)), None
            hcas.append(cur)
            continue
        if ends_record(ln, "hca_id:"):
            cur, port = None, None
        if cur is None:
            continue
        m = re.match(r"port:\s*(\d{1,20}(?!\d))", s)
        if m:
            port = int(m.group(1))
            cur.port(port)
            continue
        m = re.match(r"(GID\[\s*(\d{1,20}(?!\d))\]):\s*(\S+?)(?:,\s*(.+))?$", s)
        if m and port is not None:
            g = gid_text(m.group(3))
            if g:
                cur.port(port)["gids"].append(Gid(int(m.group(2)), g, gid_type(m.group(4))))
            continue
        m = re.match(r"([A-Za-z_][\w ]*?):\s*(.*)$", s)
        if not m:
            continue
        key, val = m.group(1).strip(), m.group(2).strip()
        if port is None:
            if key == "fw_ver" and val:
                cur.attrs["fw_ver"] = val
            elif key == "node_guid" and val:
                cur.attrs["node_guid"] = val
            elif key == "board_id" and val:
                cur.attrs["board_id"] = val
            elif key == "vendor_part_id" and int_value(val) is not None:
                cur.attrs["vendor_part_id"] = int_value(val)
            continue
        p = cur.port(port)
        if key == "state" and val:
            p["state"] = port_state(val)
        elif key == "phys_state" and val:
            p["phys_state"] = phys_state(val)
        elif key in ("max_mtu", "active_mtu") and int_value(val) is not None:
            p[key] = int_value(val)
        elif key == "sm_lid" and int_value(val) is not None:
            p["sm_lid"] = int_value(val)
        elif key == "port_lid" and int_value(val) is not None:
            p["lid"] = int_value(val)
        elif key == "link_layer" and val:
            p["link_layer"] = link_layer(val)
        elif key == "active_width" and (mw := re.match(r"(\d{1,20}(?!\d))X", val)):
            width[id(p)] = int(mw.group(1))
            p["width"] = f"{mw.group(1)}X"
        elif key == "active_speed" and (ms := re.match(r"([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*Gbps(?:\s*\(([0-9]{1,20})\))?", val)):
            lane[id(p)] = float(ms.group(1))
            code = int(ms.group(2)) if ms.group(2) else None
            p["speed"] = SPEED_CODE.get(code) or LANE_SPEED.get(float(ms.group(1)))
    if no_driver:
        notes.append("libibverbs found no userspace driver (rdma-core provider) for "
                     + ", ".join(sorted(no_driver, key=natural_key)))
    for h in hcas:  # -v prints width and per-lane speed; the rate is their product
        for p in h.ports.values():
            if h.attrs.get("_fragment") and p.get("link_layer") is None and p["gids"] and \
                    all((g.type or "").endswith(("v1", "v2")) for g in p["gids"]):
                p["link_layer"] = "Ethernet"     # RoCE GID types exist only on an Ethernet link layer
                notes.append(f"{h.name} port {p['num']}: link layer taken as Ethernet from its RoCE GID types")
            elif p.get("link_layer") is None and _SOFT_ROCE.match(h.name):
                # older ibv_devinfo prints no link_layer line; rdma_rxe (Soft-RoCE) devices are RoCE by definition
                p["link_layer"] = "Ethernet"
                notes.append(f"{h.name} port {p['num']}: link layer taken as Ethernet (a Soft-RoCE rxe device)")
            if id(p) in width and id(p) in lane:
                p["rate_gbps"] = width[id(p)] * lane[id(p)]
                p["rate_text"] = f"{p['rate_gbps']:g} Gb/sec ({p['width']}{' ' + p['speed'] if p.get('speed') else ''})"
            if p.get("speed") is None:
                p.pop("speed", None)
    return hcas, listed, notes


# ---------------------------------------------------------------- entry point

_PARSERS = {"show_gids": read_show_gids, "ibstatus": read_ibstatus, "ibstat": read_ibstat,
            "ibv_devinfo": read_ibv_devinfo}


def parse_ibv(text: str, source: str = "", tool: str | None = None) -> IbvResult:
    """Parse ibv_devinfo / ibstat / ibstatus / show_gids output into an HcaSection.

    Without `tool`, every tool whose output appears is read and the devices merged by name
    (people paste ibstat and show_gids together); `tool` of the result is the most specific one.
    """
    tools = (tool,) if tool else ibv_tools_present(text)
    if not tools:
        raise InputError("not ibv_devinfo, ibstat, ibstatus or show_gids output")
    lines = text.replace("\r\n", "\n").split("\n")
    notes: list[str] = []
    truncated = False
    listed = False
    merged: dict[str, HcaBuild] = {}
    for t in tools:
        if t not in _PARSERS:
            raise InputError(f"unknown RDMA tool {t!r}")
        if t == "show_gids":
            builds, cut = read_show_gids(lines)
        elif t == "ibv_devinfo":
            builds, was_listed, found = read_ibv_devinfo(lines)
            listed = listed or was_listed
            notes.extend(found)
            cut = _cut_short(builds)
        else:
            builds = _PARSERS[t](lines)
            cut = _cut_short(builds)
        if cut:
            truncated = True
            notes.append(f"the {t} output is cut short; the last device is incomplete")
        for b in builds:
            merged[b.name] = _merge_build(merged[b.name], b) if b.name in merged else b
    if not merged and not listed and not any("No IB devices" in n for n in notes):
        raise InputError(f"no device found in the {' / '.join(tools)} output")
    for b in merged.values():
        b.attrs.pop("_listed", None)
        b.attrs.pop("_fragment", None)
    hcas = tuple(sorted((b.build() for b in merged.values()), key=lambda h: natural_key(h.name)))
    if hcas:
        status = Status.ok(source)
    else:
        status = Status.absent("; ".join(notes) or f"{tools[0]} lists no RDMA device", source)
    return IbvResult(HcaSection(status, hcas), tools[0], truncated, tuple(notes))


def _merge_build(a: HcaBuild, b: HcaBuild) -> HcaBuild:
    """Fields a lacks, taken from b (a was read from the more specific tool)."""
    for k, v in b.attrs.items():
        a.attrs.setdefault(k, v)
    if not b.attrs.get("_listed"):
        a.attrs.pop("_listed", None)
    for num, pb in b.ports.items():
        pa = a.port(num)
        have = {g.index for g in pa["gids"]}
        pa["gids"].extend(g for g in pb["gids"] if g.index not in have)
        for k, v in pb.items():
            if k != "gids" and pa.get(k) is None:
                pa[k] = v
    return a


def _cut_short(builds: list[HcaBuild]) -> bool:
    """A full record that stops before its port's link layer (the last field) was cut off."""
    for b in builds:
        if b.attrs.get("_listed") or b.attrs.get("_fragment"):
            continue  # `ibv_devinfo -l` names only; a pasted fragment (noted as such)
        if not b.ports:
            return True
        if any(p.get("link_layer") is None for p in b.ports.values()):
            return True
    return False
