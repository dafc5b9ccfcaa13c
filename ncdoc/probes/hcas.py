"""RDMA devices (HCAs) and their ports from /sys/class/infiniband, with pyverbs when present.

sysfs carries nearly every port fact (state, rate, link layer, LIDs, the GID table with
RoCE types, counters). What it lacks is the port MTU: there is no mtu file for an IB port.
pyverbs' query_port gives it; without pyverbs a RoCE port's MTU follows from its netdev's
MTU exactly as the kernel derives it (iboe_get_mtu), and an IB port's MTU stays unknown.
Every other fact is the same on both paths (tests/probes/test_hca_sources.py compares them);
the section's source and a note say which path filled it and, when pyverbs did not, why.
"""

from __future__ import annotations

from ncdoc.probes.sysfs import SysfsReader, numa_of, pci_address_of
from ncdoc.snapshot import Gid, Hca, HcaSection, Port, Status
from ncdoc.topology import natural_key
from ncdoc.readers.numbers import float_or_none, is_digits

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
    gbps = float_or_none(number)          # "1.2.3", unicode digits or 400 of them (inf): no rate
    if gbps is None:
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
    for name in sorted((n for n in names if is_digits(n)), key=int):
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
    lid, sm_lid = fs.read_int(f"{port_dir}/lid"), fs.read_int(f"{port_dir}/sm_lid")
    return Port(
        num=num,
        state=_after_colon(fs.text(f"{port_dir}/state")) or verbs_port.get("state"),
        phys_state=_after_colon(fs.text(f"{port_dir}/phys_state")),
        rate_gbps=gbps, width=width, speed=speed, rate_text=rate_text,
        link_layer=link_layer,
        active_mtu=active_mtu, max_mtu=max_mtu,
        lid=verbs_port.get("lid") if lid is None else lid,
        sm_lid=verbs_port.get("sm_lid") if sm_lid is None else sm_lid,
        gids=gids,
        counters=_counters(fs, port_dir),
        netdevs=netdevs,
    )


# ---------------------------------------------------------------- pyverbs
# The probe reads only what sysfs lacks or may lack: query_device (ports, firmware, part id) and
# query_port (state, link layer, LIDs and the MTUs, which only verbs knows for an IB port). GIDs
# and their RoCE types stay with sysfs: libibverbs' query_gid / query_gid_type answer from the
# same kernel GID table sysfs prints (reading those very files where the ioctl is missing).

NOT_INSTALLED = "pyverbs is not installed (the 'verbs' extra)"
_VERBS_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_VERBS_LINK_LAYERS = {1: "InfiniBand", 2: "Ethernet"}     # 0 = unspecified: leave it to sysfs
# ibv_get_device_list() failing (pyverbs raises 'Failed to get devices list') means libibverbs
# found no uverbs ABI: no /sys/class/infiniband_verbs, so ib_uverbs is not loaded (or not visible).
_NO_UVERBS = "libibverbs lists no device ({error}: is ib_uverbs loaded?)"
# An empty list while sysfs shows devices: libibverbs saw them and no userspace provider claimed them.
_NO_PROVIDER = "libibverbs lists none of them (no userspace provider: ibverbs-providers missing or too old?)"


def _is_rdma_error(exc: BaseException) -> bool:
    """pyverbs' PyverbsRDMAError (or a subclass), matched by name: the probe never imports pyverbs."""
    return any(k.__name__ == "PyverbsRDMAError" for k in type(exc).__mro__)


def verbs_device_names(verbs: Any) -> tuple[set[str], str | None]:
    """The device names pyverbs lists and, when it lists none, why (its error, or no device at all).

    pyverbs raises PyverbsRDMAError when libibverbs finds no uverbs ABI and returns [] when it
    finds devices no provider claims: both mean "no devices here", never a probe failure.
    """
    try:
        devices = verbs.get_device_list()
    except Exception as exc:  # noqa: BLE001 - pyverbs is an extra; sysfs still answers
        if _is_rdma_error(exc):
            return set(), _NO_UVERBS.format(error=exc)
        return set(), f"pyverbs failed ({type(exc).__name__}: {exc})"
    names = set()
    for dev in devices:
        name = getattr(dev, "name", dev)
        names.add(name.decode() if isinstance(name, bytes) else str(name))
    return names, None if names else _NO_PROVIDER


def verbs_facts(verbs: Any, name: str) -> dict[str, Any]:
    """What pyverbs says about one device, in the snapshot's words: fw_ver, vendor_part_id and, per
    port number, state, link_layer, lid, sm_lid, active_mtu, max_mtu. Raises what pyverbs raises."""
    ctx = verbs.Context(name=name)
    try:
        dev = ctx.query_device()
        ports: dict[int, dict[str, Any]] = {}
        # int(): a Cython 3 build returns IntFlag members for state and the MTUs, Cython 0.29 plain ints
        for num in range(1, int(dev.phys_port_cnt) + 1):
            attr = ctx.query_port(num)
            ports[num] = {
                "state": _VERBS_STATES.get(int(attr.state)),
                "link_layer": _VERBS_LINK_LAYERS.get(int(attr.link_layer)),
                "lid": int(attr.lid),
                "sm_lid": int(attr.sm_lid),
                "active_mtu": IB_MTU.get(int(attr.active_mtu)),
                "max_mtu": IB_MTU.get(int(attr.max_mtu)),
            }
        return {"fw_ver": str(dev.fw_version) or None, "vendor_part_id": int(dev.vendor_part_id), "ports": ports}
    finally:
        ctx.close()


def _failures(failed: dict[str, Exception], total: int) -> list[str]:
    """One line per kind of failure (a container without /dev/infiniband fails every device alike)."""
    groups: dict[tuple[str, Any], list[str]] = {}
    for name, exc in failed.items():
        groups.setdefault((type(exc).__name__, getattr(exc, "error_code", None)), []).append(name)
    lines = []
    for names in groups.values():
        which = f"any of the {total} devices" if len(names) == total > 1 else ", ".join(names)
        lines.append(f"pyverbs could not query {which} ({failed[names[0]]})")
    return lines


# ---------------------------------------------------------------- the section

def _read_hca(fs: SysfsReader, name: str, verbs: dict[str, Any]) -> Hca:
    dev_dir = f"{CLASS_DIR}/{name}"
    address = pci_address_of(fs.realpath(f"{dev_dir}/device"))
    pci_dir = f"/sys/bus/pci/devices/{address}" if address else f"{dev_dir}/device"
    port_names = sorted((p for p in fs.listdir(f"{dev_dir}/ports") or [] if is_digits(p)), key=int)
    verbs_ports = verbs.get("ports") or {}
    ports = tuple(_read_port(fs, dev_dir, int(p), len(port_names), verbs_ports.get(int(p), {}))
                  for p in port_names)
    vendor_part_id = fs.read_int(f"{pci_dir}/device")
    return Hca(
        name=name,
        pci_address=address,
        numa_node=numa_of(fs.read_int(f"{pci_dir}/numa_node")),
        fw_ver=fs.text(f"{dev_dir}/fw_ver") or verbs.get("fw_ver"),
        board_id=fs.text(f"{dev_dir}/board_id"),
        node_guid=fs.text(f"{dev_dir}/node_guid"),
        hca_type=fs.text(f"{dev_dir}/hca_type"),
        vendor_part_id=verbs.get("vendor_part_id") if vendor_part_id is None else vendor_part_id,
        driver=fs.link_name(f"{pci_dir}/driver"),
        ports=ports,
    )


def probe_hcas(fs: SysfsReader, verbs: Any = None, *, no_verbs: str = NOT_INSTALLED) -> tuple[HcaSection, list[str]]:
    """The RDMA section from sysfs, with pyverbs' answers where it gives them.

    verbs: a pyverbs.device-like module, or None; no_verbs: why there is none (a note says it).
    The section's source names what filled it: "sysfs:/sys/class/infiniband", plus "+pyverbs"
    when pyverbs answered for at least one device; a note says why pyverbs filled nothing.
    """
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
    names = sorted(names, key=natural_key)
    listed, why_not = (set(), no_verbs) if verbs is None else verbs_device_names(verbs)
    answers: dict[str, dict[str, Any]] = {}
    failed: dict[str, Exception] = {}
    for name in names:
        if name in listed:
            try:
                answers[name] = verbs_facts(verbs, name)
            except Exception as exc:  # noqa: BLE001 - verbs is an extra; sysfs still answers
                failed[name] = exc
    hcas = tuple(_read_hca(fs, name, answers.get(name, {})) for name in names)

    problems = [why_not] if why_not else []
    problems += _failures(failed, len(names))
    unlisted = [n for n in names if n not in listed]
    if listed and unlisted:
        problems.append(f"pyverbs does not list {', '.join(unlisted)}")
    notes = []
    mtus_unknown = any(p.link_layer == "InfiniBand" and p.active_mtu is None for h in hcas for p in h.ports)
    if not answers:
        what = "HCA facts from sysfs only" + (", InfiniBand port MTUs unknown" if mtus_unknown else "")
        notes.append(f"{what}: {'; '.join(problems)}")
    elif problems:
        what = "InfiniBand port MTUs unknown for some devices" if mtus_unknown else "some HCA facts from sysfs only"
        notes.append(f"{what}: {'; '.join(problems)}")
    source = f"sysfs:{CLASS_DIR}" + ("+pyverbs" if answers else "")
    return HcaSection(status=Status.ok(source=source), hcas=hcas), notes
