"""Pieces both topology XML formats (NCCL's and hwloc's) need: safe parsing and CPU masks."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ncdoc.errors import InputError
from ncdoc.readers.numbers import is_digits


def parse_xml(text: str, what: str) -> tuple[ET.Element, bool]:
    """(root element, truncated). A file cut off part-way keeps the elements read before the cut;
    XML that breaks before its root element opens is an InputError naming the line."""
    parser = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    error: ET.ParseError | None = None
    try:
        parser.feed(text.lstrip("\ufeff"))
        parser.close()
    except ET.ParseError as exc:
        error = exc
    except (ValueError, RecursionError) as exc:
        raise InputError(f"unreadable {what} XML", cause=str(exc)) from None
    try:
        for _event, el in parser.read_events():
            if root is None:
                root = el
    except ET.ParseError as exc:  # the pull parser hands its error back here too
        error = error or exc
    if root is None:
        line = error.position[0] if error is not None and getattr(error, "position", None) else None
        raise InputError(f"not well-formed {what} XML", line=line,
                         cause=str(error) if error else "no element") from None
    return root, error is not None


def mask_to_cpulist(mask: str | None) -> str:
    """CPU mask -> cpulist: NCCL "0000ffff,ffffffff" or hwloc "0x0000ffff,,0xffffffff" -> "0-47,96-143".

    Both print 32-bit words most significant first; hwloc leaves zero words empty. An infinite
    hwloc set ("0xf...f") or anything unparsable gives "".
    """
    if not mask or "..." in mask:
        return ""
    bits: list[int] = []
    words = mask.strip().split(",")
    if len(words) > 4096:           # 131072 CPUs: more is no machine's mask
        return ""
    try:
        for i, w in enumerate(reversed(words)):
            w = w.strip()
            value = int(w, 16) if w else 0
            for b in range(32):
                if value >> b & 1:
                    bits.append(i * 32 + b)
    except ValueError:
        return ""
    ranges: list[str] = []
    start = prev = None
    for b in bits:
        if start is None:
            start = prev = b
        elif b == prev + 1:
            prev = b
        else:
            ranges.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = b
    if start is not None:
        ranges.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(ranges)


def single_bit(mask: str | None) -> int | None:
    """The one set bit of a hwloc nodeset ("0x00000002" -> 1); None for zero or several bits."""
    lst = mask_to_cpulist(mask)
    return int(lst) if is_digits(lst) else None


def pci_kind(class_code: str | None, vendor: str | None) -> str:
    """PciDevice.kind from a class code ("0x0302", "0x030200") and vendor ("0x10de")."""
    c = (class_code or "").lower().removeprefix("0x")[:4]
    v = (vendor or "").lower()
    if c.startswith("0604"):
        return "bridge"
    if c in ("0300", "0302") and v in ("0x10de", "10de", ""):
        return "gpu"
    if c == "0680" and v in ("0x10de", "10de"):
        return "nvswitch"
    if c.startswith("02"):
        return "nic"
    if c.startswith("01"):
        return "storage"
    return "other"
