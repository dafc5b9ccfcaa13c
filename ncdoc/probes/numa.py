"""NUMA nodes and their CPUs, from /sys/devices/system/node/node*/cpulist."""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader
from ncdoc.snapshot import NumaNode, NumaSection, Status


def _node_id(entry: str) -> int | None:
    """"node3" -> 3; None for anything else (has_cpu, possible, power, ...)."""
    digits = entry[4:]
    return int(digits) if entry.startswith("node") and digits.isdigit() and digits.isascii() else None


def probe_numa(fs: SysfsReader) -> tuple[NumaSection, list[str]]:
    base = "/sys/devices/system/node"
    entries = fs.listdir(base)
    if entries is None:
        reason = fs.why_not(base)
        return NumaSection(status=Status.unknown(reason)), [f"NUMA layout unknown: {reason}"]
    ids = sorted(i for i in map(_node_id, entries) if i is not None)
    if not ids:
        if not fs.is_dir(base):
            # Kernels built without NUMA support have no such folder: one memory domain.
            reason = f"{base} does not exist (kernel without NUMA support)"
            return NumaSection(status=Status.absent(reason)), []
        return NumaSection(status=Status.absent("no NUMA nodes listed", source=f"sysfs:{base}")), []
    nodes = tuple(NumaNode(id=i, cpulist=fs.text(f"{base}/node{i}/cpulist") or "") for i in ids)
    return NumaSection(status=Status.ok(source=f"sysfs:{base}"), nodes=nodes), []
