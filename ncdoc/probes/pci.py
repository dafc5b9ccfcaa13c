"""The PCIe tree from /sys/bus/pci/devices: every device with its upstream bridge.

Each entry of /sys/bus/pci/devices links into /sys/devices, and the resolved path *is*
the tree: /sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0
says 0000:18:00.0 hangs below bridge 0000:17:00.0, and so on up to host bridge pci0000:15.
Virtual machines put host bridges under other devices (Hyper-V: .../VMBUS:00/<guid>/pci0001:00),
which the same rule handles: the parent is the path component above the device.
"""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader, is_host_bridge, is_pci_address, numa_of
from ncdoc.snapshot import PciDevice, PciSection, Status

_ACS_CAP_ID = 0x000D
_EXT_CAP_START = 0x100
_CONFIG_SPACE = 4096


def _kind(class_code: str | None, vendor: str | None) -> str:
    if not class_code:
        return "other"
    cls = class_code.lower().removeprefix("0x")
    base, sub = cls[:2], cls[2:4]
    if base == "06" and sub == "04":
        return "bridge"
    if base == "03" and vendor == "0x10de":
        return "gpu"
    if base == "06" and sub == "80" and vendor == "0x10de":
        return "nvswitch"
    if base == "02" or (base == "0c" and sub == "06"):     # network, or InfiniBand serial bus (qib)
        return "nic"
    if base == "01":
        return "storage"
    return "other"


def acs_control(config: bytes | None) -> str | None:
    """ACS Control register from a device's config space, as "0x001d"; None where unreadable.

    Only root reads past the first 64 bytes of `config`; the extended capabilities (where ACS
    lives) start at 0x100, so a short read means "unknown", not "no ACS".
    """
    if config is None or len(config) <= _EXT_CAP_START:
        return None
    import struct           # only for the bridges whose config space is readable
    offset, seen = _EXT_CAP_START, set()
    while offset and offset + 8 <= len(config) and offset not in seen:
        seen.add(offset)
        (header,) = struct.unpack_from("<I", config, offset)
        if header in (0, 0xFFFFFFFF):
            return None
        cap_id, nxt = header & 0xFFFF, (header >> 20) & 0xFFC
        if cap_id == _ACS_CAP_ID:
            (ctrl,) = struct.unpack_from("<H", config, offset + 6)
            return f"0x{ctrl:04x}"
        if nxt and nxt < _EXT_CAP_START:
            return None
        offset = nxt
    return "none"  # walked the whole list: the device has no ACS capability


def _parent(resolved: str | None) -> str | None:
    if not resolved:
        return None
    parts = resolved.rstrip("/").split("/")
    if len(parts) < 2:
        return None
    above = parts[-2]
    if is_pci_address(above) or is_host_bridge(above):
        return above
    return None


def _width(fs: SysfsReader, rel: str) -> int | None:
    value = fs.text(rel)
    if value is None:
        return None
    try:
        width = int(value.lower().removeprefix("x"))
    except ValueError:
        return None
    return width if width > 0 else None


def _speed(fs: SysfsReader, rel: str) -> str | None:
    value = fs.text(rel)
    return value if value and not value.lower().startswith("unknown") else None


def read_device(fs: SysfsReader, address: str) -> PciDevice:
    base = f"/sys/bus/pci/devices/{address}"
    class_code = fs.text(f"{base}/class")
    vendor = fs.text(f"{base}/vendor")
    kind = _kind(class_code, vendor)
    acs = None
    if kind == "bridge":
        acs = acs_control(fs.read_bytes(f"{base}/config", _CONFIG_SPACE))
        if acs == "none":
            acs = None
    return PciDevice(
        address=address,
        parent=_parent(fs.realpath(base)),
        class_code=class_code,
        vendor=vendor,
        device=fs.text(f"{base}/device"),
        kind=kind,
        numa_node=numa_of(fs.read_int(f"{base}/numa_node")),
        link_speed=_speed(fs, f"{base}/current_link_speed"),
        link_width=_width(fs, f"{base}/current_link_width"),
        max_link_speed=_speed(fs, f"{base}/max_link_speed"),
        max_link_width=_width(fs, f"{base}/max_link_width"),
        acs_ctrl=acs,
        driver=fs.link_name(f"{base}/driver"),
    )


def probe_pci(fs: SysfsReader) -> tuple[PciSection, list[str]]:
    entries = fs.listdir("/sys/bus/pci/devices")
    if entries is None:
        reason = fs.why_not("/sys/bus/pci/devices")
        return PciSection(status=Status.unknown(reason)), [f"PCIe tree unknown: {reason}"]
    if not entries:
        if not fs.is_dir("/sys/bus/pci"):
            reason = "/sys/bus/pci does not exist (no PCI bus visible, e.g. inside a sandbox)"
            return PciSection(status=Status.unknown(reason)), [f"PCIe tree unknown: {reason}"]
        return (PciSection(status=Status.absent("no PCI devices", source="sysfs:/sys/bus/pci/devices")),
                ["no PCI devices found in /sys/bus/pci/devices"])
    devices = tuple(read_device(fs, a) for a in entries if is_pci_address(a))
    return PciSection(status=Status.ok(source="sysfs:/sys/bus/pci/devices"), devices=devices), []
