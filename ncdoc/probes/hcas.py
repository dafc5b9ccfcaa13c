"""RDMA devices (HCAs) and their ports from /sys/class/infiniband, with pyverbs when present.

sysfs carries nearly every port fact (state, rate, link layer, LIDs, the GID table with
RoCE types, counters). What it lacks is the port MTU: there is no mtu file for an IB port.
pyverbs' query_port gives it; without pyverbs a RoCE port's MTU follows from its netdev's
MTU exactly as the kernel derives it (iboe_get_mtu), and an IB port's MTU stays unknown.
"""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader, numa_of, pci_address_of
from ncdoc.snapshot import Gid, Hca, HcaSection, Port, Status
from ncdoc.topology import natural_key

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any

CLASS_DIR = "/sys/class/infiniband"
IB_MTU = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
# GRH + UDP + BTH + XRC ext + AtomicETH + ICRC: what include/rdma/ib_addr.h iboe_get_mtu subtracts
_ROCE_OVERHEAD = 40 + 8 + 12 + 4 + 28 + 4
_ZERO_GIDS = {"0000:0000:0000:0000:0000:0000:0000:0000", "fe80:0000:0000:0000:0000:0000:0000:0000"}


def _after_colon(value: str | None) -> str | None:
    """"4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"."""
    if value is None:
        return None
    return value.split(":", 1)[1].strip() if ":" in value else value.strip()


def parse_rate(text: str | None) -> tuple[float | None, str | None, str | None]:
    """"400 Gb/sec (4X NDR)" -> (400.0, "4X", "NDR")."""
    if not text:
        return None, None, None
    rest = text.lstrip()
    n = 0
    while n < len(rest) and (rest[n].isdigit() or rest[n] == "."):
        n += 1
    number, rest = rest[:n], rest[n:].lstrip()
    if not number or not rest.startswith("Gb/sec"):
        return None, None, None
    try:
        gbps = float(number)
    except ValueError:
        return None, None, None
    width = speed = None
    inner = rest[6:].lstrip()
    if inner.startswith("(") and ")" in inner:
        parts = inner[1:inner.index(")")].split()
        if parts and parts[0][:-1].isdigit() and parts[0].endswith("X") and len(parts) <= 2 \
                and (len(parts) == 1 or parts[1].isalnum() and parts[1].isascii()):
            width, speed = parts[0], (parts[1] if len(parts) == 2 else None)
    return gbps, width, speed


def roce_mtu(netdev_mtu: int | None) -> int | None:
    """The RoCE path MTU the kernel gives a port whose netdev has this MTU (0 -> None)."""
    if not netdev_mtu:
        return None
    usable = netdev_mtu - _ROCE_OVERHEAD
    for mtu in (4096, 2048, 1024, 512, 256):
        if usable >= mtu:
            return mtu
    return None


def _gids(fs: SysfsReader, port_dir: str, link_layer: str | None) -> tuple[Gid, ...]:
    names = fs.listdir(f"{port_dir}/gids") or []
    gids: list[Gid] = []
    for name in sorted((n for n in names if n.isdigit()), key=int):
        value = fs.text(f"{port_dir}/gids/{name}")
        if not value or value.lower() in _ZERO_GIDS:
            continue
        gid_type = fs.text(f"{port_dir}/gid_attrs/types/{name}")
        netdev = fs.text(f"{port_dir}/gid_attrs/ndevs/{name}")
        if link_layer == "InfiniBand":
            gid_type = None          # the RoCE type is meaningless on an IB link layer
        gids.append(Gid(index=int(name), gid=value.lower(), type=gid_type or None, netdev=netdev or None))
    return tuple(gids)


def _counters(fs: SysfsReader, port_dir: str) -> dict[str, int]:
    counters: dict[str, int] = {}
    for folder in ("hw_counters", "counters"):       # counters/ wins a name clash: read it last
        for name in fs.listdir(f"{port_dir}/{folder}") or []:
            value = fs.read_int(f"{port_dir}/{folder}/{name}")
            if value is not None:
                counters[name] = value
    return dict(sorted(counters.items()))


def _port_netdevs(fs: SysfsReader, dev_dir: str, port: int, nports: int, gids: tuple[Gid, ...]) -> tuple[str, ...]:
    names: list[str] = [g.netdev for g in gids if g.netdev]
    if not names:
        for net in fs.listdir(f"{dev_dir}/device/net") or []:
            if nports > 1:
                dev_port = fs.read_int(f"{dev_dir}/device/net/{net}/dev_port")
                if dev_port is None:
                    dev_port = fs.read_int(f"{dev_dir}/device/net/{net}/dev_id")
                if dev_port is not None and dev_port != port - 1:
                    continue
            names.append(net)
    return tuple(dict.fromkeys(names))


def _read_port(fs: SysfsReader, dev_dir: str, num: int, nports: int, verbs_port: dict[str, Any]) -> Port:
    port_dir = f"{dev_dir}/ports/{num}"
    link_layer = fs.text(f"{port_dir}/link_layer") or verbs_port.get("link_layer")
    rate_text = fs.text(f"{port_dir}/rate")
    gbps, width, speed = parse_rate(rate_text)
    gids = _gids(fs, port_dir, link_layer)
    netdevs = _port_netdevs(fs, dev_dir, num, nports, gids)
    active_mtu, max_mtu = verbs_port.get("active_mtu"), verbs_port.get("max_mtu")
    if active_mtu is None and link_layer == "Ethernet" and netdevs:
        active_mtu = roce_mtu(fs.read_int(f"/sys/class/net/{netdevs[0]}/mtu"))
    return Port(
        num=num,
        state=_after_colon(fs.text(f"{port_dir}/state")) or verbs_port.get("state"),
        phys_state=_after_colon(fs.text(f"{port_dir}/phys_state")),
        rate_gbps=gbps, width=width, speed=speed, rate_text=rate_text,
        link_layer=link_layer,
        active_mtu=active_mtu, max_mtu=max_mtu,
        lid=fs.read_int(f"{port_dir}/lid"),
        sm_lid=fs.read_int(f"{port_dir}/sm_lid"),
        gids=gids,
        counters=_counters(fs, port_dir),
        netdevs=netdevs,
    )


_VERBS_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_VERBS_LINK_LAYERS = {1: "InfiniBand", 2: "Ethernet"}


def _verbs_ports(verbs: Any, name: str) -> dict[int, dict[str, Any]]:
    """Port attributes from pyverbs for one device; {} when verbs cannot open it."""
    ports: dict[int, dict[str, Any]] = {}
    ctx = verbs.Context(name=name)
    try:
        count = int(ctx.query_device().phys_port_cnt)
        for num in range(1, count + 1):
            attr = ctx.query_port(num)
            ports[num] = {
                "active_mtu": IB_MTU.get(int(attr.active_mtu)),
                "max_mtu": IB_MTU.get(int(attr.max_mtu)),
                "state": _VERBS_STATES.get(int(attr.state)),
                "link_layer": _VERBS_LINK_LAYERS.get(int(attr.link_layer)),
            }
    finally:
        close = getattr(ctx, "close", None)
        if close:
            close()
    return ports


def _verbs_devices(verbs: Any) -> tuple[set[str] | None, str | None]:
    """Names pyverbs can open; (None, reason) when pyverbs itself fails."""
    try:
        devices = verbs.get_device_list()
    except Exception as exc:  # noqa: BLE001 - pyverbs raises PyverbsRDMAError for "no devices"
        if type(exc).__name__ == "PyverbsRDMAError":
            return set(), None
        return None, f"pyverbs: {exc}"
    names = set()
    for dev in devices:
        name = getattr(dev, "name", dev)
        names.add(name.decode() if isinstance(name, bytes) else str(name))
    return names, None


def _read_hca(fs: SysfsReader, name: str, verbs_ports: dict[int, dict[str, Any]]) -> Hca:
    dev_dir = f"{CLASS_DIR}/{name}"
    address = pci_address_of(fs.realpath(f"{dev_dir}/device"))
    pci_dir = f"/sys/bus/pci/devices/{address}" if address else f"{dev_dir}/device"
    port_names = sorted((p for p in fs.listdir(f"{dev_dir}/ports") or [] if p.isdigit()), key=int)
    ports = tuple(_read_port(fs, dev_dir, int(p), len(port_names), verbs_ports.get(int(p), {}))
                  for p in port_names)
    return Hca(
        name=name,
        pci_address=address,
        numa_node=numa_of(fs.read_int(f"{pci_dir}/numa_node")),
        fw_ver=fs.text(f"{dev_dir}/fw_ver"),
        board_id=fs.text(f"{dev_dir}/board_id"),
        node_guid=fs.text(f"{dev_dir}/node_guid"),
        hca_type=fs.text(f"{dev_dir}/hca_type"),
        vendor_part_id=fs.read_int(f"{pci_dir}/device"),
        driver=fs.link_name(f"{pci_dir}/driver"),
        ports=ports,
    )


def probe_hcas(fs: SysfsReader, verbs: Any = None) -> tuple[HcaSection, list[str]]:
    names = fs.listdir(CLASS_DIR)
    if names is None:
        reason = fs.why_not(CLASS_DIR)
        return HcaSection(status=Status.unknown(reason)), [f"RDMA devices unknown: {reason}"]
    if not names:
        if fs.exists(CLASS_DIR):
            reason = f"{CLASS_DIR} is empty"
        else:
            reason = f"{CLASS_DIR} does not exist (no RDMA driver loaded)"
        return (HcaSection(status=Status.absent(reason, source=f"sysfs:{CLASS_DIR}")),
                [f"no RDMA devices: {reason}"])
    notes: list[str] = []
    openable: set[str] = set()
    source = f"sysfs:{CLASS_DIR}"
    if verbs is not None:
        found, problem = _verbs_devices(verbs)
        if problem:
            notes.append(f"port MTUs from sysfs only: {problem}")
        else:
            openable = found or set()
            source += "+pyverbs"
    hcas = []
    for name in sorted(names, key=natural_key):
        ports: dict[int, dict[str, Any]] = {}
        if name in openable:
            try:
                ports = _verbs_ports(verbs, name)
            except Exception as exc:  # noqa: BLE001 - verbs is an extra; sysfs still answers
                notes.append(f"{name}: pyverbs could not query it ({exc})")
        hcas.append(_read_hca(fs, name, ports))
    if verbs is None and any(p.link_layer == "InfiniBand" and p.active_mtu is None
                             for h in hcas for p in h.ports):
        notes.append("InfiniBand port MTUs unknown: pyverbs is not installed (the 'verbs' extra)")
    return HcaSection(status=Status.ok(source=source), hcas=tuple(hcas)), notes
