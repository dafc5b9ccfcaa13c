"""infiniband-diags' ibstat and ibstatus, and MOFED's show_gids -> per-device field builds."""

from __future__ import annotations

import re

from ncdoc.importers.rdma_fields import (HcaBuild, ends_record, gid_text, gid_type, int_value, link_layer,
                                         phys_state, port_state, rate_text)
from ncdoc.snapshot import Gid

# ---------------------------------------------------------------- ibstat / ibstatus

def read_ibstat(lines: list[str]) -> list[HcaBuild]:
    hcas: list[HcaBuild] = []
    cur: HcaBuild | None = None
    port: int | None = None
    for ln in lines:
        s = ln.strip()
        m = re.match(r"CA '([^']+)'", s)
        if m:
            cur, port = HcaBuild(m.group(1)), None
            hcas.append(cur)
            continue
        if ends_record(ln, "CA '"):
            cur, port = None, None
        if cur is None:
            continue
        m = re.match(r"Port (\d{1,20}(?!\d)):\s*$", s)
        if m:
            port = int(m.group(1))
            cur.port(port)
            continue
        m = re.match(r"([A-Za-z][\w ]*?):\s*(.*)$", s)
        if not m:
            continue
        key, val = m.group(1).lower(), m.group(2).strip()
        if port is None:
            if key == "ca type" and val:
                cur.attrs["hca_type"] = val
            elif key == "firmware version" and val:
                cur.attrs["fw_ver"] = val
            elif key == "node guid" and val:
                cur.attrs["node_guid"] = val
            continue
        p = cur.port(port)
        if key == "state" and val:
            p["state"] = port_state(val)
        elif key == "physical state" and val:
            p["phys_state"] = phys_state(val)
        elif key == "rate" and (mr := re.match(r"([0-9]{1,20}(?:\.[0-9]{1,20})?)", val)):
            p["rate_gbps"] = float(mr.group(1))
            p["rate_text"] = val
        elif key == "base lid" and int_value(val) is not None:
            p["lid"] = int_value(val)
        elif key == "sm lid" and int_value(val) is not None:
            p["sm_lid"] = int_value(val)
        elif key == "link layer" and val:
            p["link_layer"] = link_layer(val)
    return hcas


def read_ibstatus(lines: list[str]) -> list[HcaBuild]:
    hcas: dict[str, HcaBuild] = {}
    cur: HcaBuild | None = None
    port = 0
    for ln in lines:
        s = ln.strip()
        m = re.match(r"Infiniband device '([^']+)' port (\d{1,20}(?!\d)) status:", s)
        if m:
            cur = hcas.setdefault(m.group(1), HcaBuild(m.group(1)))
            port = int(m.group(2))
            cur.port(port)
            continue
        if ends_record(ln, "Infiniband device '"):
            cur = None
        if cur is None:
            continue
        m = re.match(r"([a-z_ ]+?):\s*(.*)$", s)
        if not m:
            continue
        key, val = m.group(1), m.group(2).strip()
        p = cur.port(port)
        if key == "default gid" and (g := gid_text(val)):
            p["gids"].append(Gid(0, g))
        elif key == "base lid" and int_value(val) is not None:
            p["lid"] = int_value(val)
        elif key == "sm lid" and int_value(val) is not None:
            p["sm_lid"] = int_value(val)
        elif key == "state" and val:
            p["state"] = port_state(val)
        elif key == "phys state" and val:
            p["phys_state"] = phys_state(val)
        elif key == "rate" and val:
            rate_text(cur, port, val)
        elif key == "link_layer" and val:
            p["link_layer"] = link_layer(val)
    return list(hcas.values())


# ---------------------------------------------------------------- show_gids

def read_show_gids(lines: list[str]) -> tuple[list[HcaBuild], bool]:
    hcas: dict[str, HcaBuild] = {}
    cut = False
    in_table = False
    for ln in lines:
        t = ln.split()
        if len(t) >= 4 and t[:3] == ["DEV", "PORT", "INDEX"]:
            in_table = True
            continue
        if ends_record(ln, "DEV"):
            in_table = False
        if not in_table or not t or set(t[0]) <= {"-"}:
            continue
        if not (len(t) >= 3 and re.fullmatch(r"[0-9]{1,4}", t[1]) and re.fullmatch(r"[0-9]{1,6}", t[2])):
            continue
        b = hcas.setdefault(t[0], HcaBuild(t[0]))
        p = b.port(int(t[1]))
        g = gid_text(t[3]) if len(t) > 3 else None
        ver = next((x for x in t[4:] if re.fullmatch(r"v\d", x)), None)
        if g is None or ver is None:
            cut = True
            if g is None:
                continue
        netdev = t[t.index(ver) + 1] if ver and t.index(ver) + 1 < len(t) else None
        p["gids"].append(Gid(int(t[2]), g, gid_type(ver), netdev))
        if netdev and netdev not in p.setdefault("netdevs", ()):
            p["netdevs"] = p["netdevs"] + (netdev,)
    return list(hcas.values()), cut
