"""Evidence a person can follow: node facts quoted where the user's files show them, repeats folded, each
finding once.

Node rules cite the Snapshot ("hcas/mlx5_0/port 1", "topology"), which is right for a live node and a
snapshot file; when the facts came from a pasted ibv_devinfo / ibstat / ibstatus / show_gids listing or an
`nvidia-smi topo -m` matrix, triage points each such citation at the file and line that shows it, as log
citations are. Evidence that says the same of many devices ("GID[0] is fe80:: on all 8 rails") folds into one
line naming them, and a finding two checks of one rule report alike (the node side and the log side) prints once.
"""

from __future__ import annotations

import re

from ncdoc.evidence.lazy_re import lazy
from ncdoc.evidence.wrappers import strip_wrappers
from ncdoc.findings import Evidence, Report
from ncdoc.readers.numbers import is_digits
from ncdoc.startup.record import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable, Sequence

# record headers of the four RDMA tools (device, port)
_HCA_ID = lazy(r"^\s*hca_id:\s*(\S+)")
_IBV_PORT = lazy(r"^\s*port:\s*(\d{1,20}(?!\d))")
_CA = lazy(r"^\s*CA '([^']+)'")
_CA_PORT = lazy(r"^\s*Port (\d{1,20}(?!\d)):")
_IBSTATUS = lazy(r"^\s*Infiniband device '([^']+)' port (\d{1,20}(?!\d)) status:")
_SHOW_GIDS = lazy(r"^\s*(\S+)\s+(\d{1,20}(?!\d))\s+(\d{1,20}(?!\d))\s+([0-9a-fA-F:]{8,})")
_FIELD = lazy(r"^\s*([A-Za-z_][\w ]*?)\s*:\s")
_GID_LINE = lazy(r"^\s*GID\[\s*(\d{1,20}(?!\d))\]:")
_SOURCE = lazy(r"^hcas/([^/]+)/port (\d{1,20}(?!\d))(/gids)?$")
_TOPO_ROW = lazy(r"^\s*(?:[\w.-]+:\s+)?(GPU\d+|NIC\d+|mlx\w+)\s")
# words of a finding's evidence text -> the field line that shows it
_KEYWORDS = (("active_mtu", "active_mtu"), ("max_mtu", "max_mtu"), ("MTU", "active_mtu"), ("phys", "phys_state"),
             ("rate", "rate"), ("Gb/s", "rate"), ("link layer", "link_layer"), ("link_layer", "link_layer"),
             ("state", "state"), ("DOWN", "state"), ("ACTIVE", "state"), ("INIT", "state"))


def _field_name(name: str) -> str:
    n = name.strip().lower().replace(" ", "_")
    return {"physical_state": "phys_state", "phys_state": "phys_state", "link_layer": "link_layer"}.get(n, n)


def index_listing(numbered: Iterable[tuple[int, str]]) -> dict[tuple[str, int], dict[str, int]]:
    """(device, port) -> {field: line number} over the RDMA tool records in the (line number, text) pairs
    ("_port" = the port's header, "_device" = the device's, "gid:N" = GID index N)."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    dev, port, dev_line = None, None, 0
    for n, raw in numbered:
        s = strip_wrappers(raw)
        m = _IBSTATUS.match(s)
        if m:
            dev, port, dev_line = m.group(1), int(m.group(2)), n
            out.setdefault((dev, port), {"_device": n, "_port": n})
            continue
        m = _HCA_ID.match(s) or _CA.match(s)
        if m:
            dev, port, dev_line = m.group(1), None, n
            continue
        m = (_IBV_PORT.match(s) or _CA_PORT.match(s)) if dev else None
        if m:
            port = int(m.group(1))
            out.setdefault((dev, port), {"_device": dev_line, "_port": n})
            continue
        m = _SHOW_GIDS.match(s)
        if m and is_digits(m.group(2)):
            rec = out.setdefault((m.group(1), int(m.group(2))), {"_device": n, "_port": n})
            rec.setdefault(f"gid:{m.group(3)}", n)
            rec.setdefault("gids", n)
            continue
        if dev is None or port is None:
            continue
        rec = out[(dev, port)]
        m = _GID_LINE.match(s)
        if m:
            rec.setdefault(f"gid:{m.group(1)}", n)
            rec.setdefault("gids", n)
            continue
        m = _FIELD.match(s)
        if m:
            rec.setdefault(_field_name(m.group(1)), n)
    return out


def _field_for(text: str, gids: bool) -> list[str]:
    """The fields of a record an evidence text is about, most specific first."""
    want = []
    m = re.search(r"GID\[\s*(\d{1,20}(?!\d))\]", text)
    if m:
        want.append(f"gid:{m.group(1)}")
        if m.group(1) == "0":
            want.append("default_gid")          # ibstatus prints GID 0 as its "default gid"
    if gids or m:
        want.append("gids")
    want += [f for k, f in _KEYWORDS if k in text]
    return want + ["_port", "_device"]


def _quoted(e: Evidence, path: str, line: int, text: str) -> Evidence:
    """The citation at `path`:`line`, showing that line as it is (as every file:line citation does)."""
    raw = text.strip()
    return replace(e, source=path, line=line, text=raw if len(raw) <= 300 else raw[:297] + "...")


def locate(report: Report, node_ev: Sequence) -> Report:
    """`report` with node-fact citations pointing at the pasted listing or matrix line that shows them."""
    listings = [(ne.source, index_listing(ne.numbered_lines()), dict(ne.numbered_lines())) for ne in node_ev
                if ne.kind == "ibv_devinfo" and (ne.lines or ne.numbered)]
    matrices = [ne for ne in node_ev if ne.kind == "topo_matrix" and (ne.lines or ne.numbered)]
    if not listings and not matrices:
        return report

    def place(e: Evidence) -> Evidence:
        if e.line:
            return e
        m = _SOURCE.match(e.source or "")
        if m and listings:
            key = (m.group(1), int(m.group(2)))
            for path, index, lines in listings:
                rec = index.get(key) or next((r for (d, p), r in index.items() if p == key[1] and d == "(unnamed)"),
                                             None)
                if rec:
                    line = next((rec[f] for f in _field_for(e.text, bool(m.group(3))) if f in rec), None)
                    if line:
                        return _quoted(e, path, line, lines[line])
        if e.source == "topology" and matrices:
            row = e.text.split(" ", 1)[0]
            for ne in matrices:
                for n, raw in ne.numbered_lines():
                    mm = _TOPO_ROW.match(strip_wrappers(raw))
                    if mm and mm.group(1) == row:
                        return _quoted(e, ne.source, n, raw)
        return e

    findings = tuple(replace(f, evidence=tuple(place(e) for e in f.evidence)) for f in report.findings)
    return replace(report, findings=findings)


# ---------------------------------------------------------------- folding and once-only

# what differs between the same statement about several devices: their names, numbers, addresses
_DEVICE = lazy(r"\b[0-9a-fA-F]{1,4}(?::[0-9a-fA-F]{0,4}){3,7}\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|"
                     r"\b[A-Za-z][A-Za-z0-9_]{0,30}?\d+(?::\d+)?\b")
FOLD_FROM = 3          # this many alike evidence lines fold into one


def _shape(text: str) -> str:
    return _DEVICE.sub("*", text)


def _names(text: str) -> str:
    """The device a folded line is about: its first device-like word ("mlx5_3", "GPU2", "rxe0")."""
    m = re.search(r"\b([A-Za-z][A-Za-z0-9_]{0,30}?\d+(?::\d+)?)\b", text)
    return m.group(1) if m else text.split(" ", 1)[0]


def fold(evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """Evidence lines that say the same of different devices, folded into the first, which names the rest."""
    groups: dict[str, list[Evidence]] = {}
    for e in evidence:
        groups.setdefault(_shape(e.text), []).append(e)
    out: list[Evidence] = []
    done: set[str] = set()
    for e in evidence:
        key = _shape(e.text)
        group = groups[key]
        if len(group) < FOLD_FROM:
            out.append(e)
            continue
        if key in done:
            continue
        done.add(key)
        names = list(dict.fromkeys(_names(x.text) for x in group))
        shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        lines = [x.line for x in group if x.line]
        where = f" (lines {', '.join(map(str, lines[:8]))}{' ...' if len(lines) > 8 else ''})" if lines else ""
        out.append(e)
        out.append(Evidence(f"the same on all {len(group)}: {shown}{where}", e.source))
    return tuple(out)


def once(report: Report) -> Report:
    """Each finding once (a rule's node and log checks may say the same), with alike evidence folded."""
    seen: set[tuple] = set()
    kept = []
    for f in report.findings:
        key = (f.code, f.subject, f.message)
        if key in seen:
            continue
        seen.add(key)
        kept.append(replace(f, evidence=fold(f.evidence)))
    return replace(report, findings=tuple(kept))


__all__ = ["index_listing", "locate", "fold", "once", "FOLD_FROM"]
