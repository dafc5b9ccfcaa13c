"""Writes a fake /sys (and the RDMA/netdev parts of it) for a machine spec, the way the kernel lays it out.

A spec names devices by PCI address and the bridges above them as a path from the host
bridge ("pci0000:15/15:01.0/16:00.0/17:03.0"); this module expands that into the real
structure: directories under /sys/devices, relative symlinks from /sys/bus/pci/devices,
/sys/class/infiniband and /sys/class/net, the files each driver exposes, and config space
bytes with the ACS capability where a root-run probe would read it.
See ncdoc/examples/machines.py for the spec format and the public API.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import struct
from dataclasses import dataclass, field
from typing import Any

ROLE_DEFAULT_PARTS = {"root_port": "intel-spr-root-port", "switch_up": "broadcom-pex890xx",
                      "switch_down": "broadcom-pex890xx"}
PORT_STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
PHYS_STATES = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5,
               "LinkErrorRecovery": 6, "Phy Test": 7}
_DEFAULT_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                     "port_rcv_remote_physical_errors", "port_xmit_discards", "port_xmit_constraint_errors",
                     "port_rcv_constraint_errors", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_wait")
_DEFAULT_HW_COUNTERS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err",
                        "duplicate_request", "implied_nak_seq_err")


@dataclass
class PciNode:
    address: str
    dir: str                  # root-relative: "sys/devices/pci0000:15/0000:15:01.0/..."
    parent: str
    role: str                 # root_port | switch_up | switch_down | device
    part: dict[str, Any]
    numa: int | None
    entry: dict[str, Any] = field(default_factory=dict)

    @property
    def bus(self) -> int:
        return int(self.address.split(":")[1], 16)

    @property
    def slot_fn(self) -> tuple[int, int]:
        slot, fn = self.address.split(":")[2].split(".")
        return int(slot, 16), int(fn)


def digest(*parts: object) -> bytes:
    return hashlib.sha256("|".join(map(str, parts)).encode()).digest()


def full_address(short: str, domain: str) -> str:
    return short.lower() if short.count(":") == 2 else f"{domain}:{short.lower()}"


def expand_pci(spec: dict[str, Any], parts: dict[str, Any]) -> dict[str, PciNode]:
    """Every PCI function of the spec (bridges implied by device paths included), by address."""
    host_bridges = spec.get("host_bridges") or {}
    bridge_parts = {**ROLE_DEFAULT_PARTS, **(spec.get("bridge_parts") or {})}
    overrides = spec.get("bridges") or {}
    nodes: dict[str, PciNode] = {}
    for addr, entry in sorted((spec.get("devices") or {}).items()):
        if entry is None:
            continue
        hb, *chain = entry["path"].split("/")
        hb_spec = host_bridges.get(hb) or {}
        domain = hb[3:].split(":")[0]
        under = hb_spec.get("under") or ""
        if hb_spec.get("vmbus"):
            under = f"LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/{hb_spec['vmbus']}"
        path = "sys/devices/" + (f"{under}/" if under else "") + hb
        parent = hb
        for depth, short in enumerate(chain):
            baddr = full_address(short, domain)
            path = f"{path}/{baddr}"
            if baddr not in nodes:
                role = "root_port" if depth == 0 else "switch_up" if depth % 2 else "switch_down"
                extra = overrides.get(baddr) or {}
                part = parts[extra.get("part") or bridge_parts[role]]
                nodes[baddr] = PciNode(baddr, path, parent, role, part, hb_spec.get("numa"), extra)
            parent = baddr
        daddr = full_address(addr, domain)
        nodes[daddr] = PciNode(daddr, f"{path}/{daddr}", parent, "device", parts[entry["part"]],
                               entry.get("numa", hb_spec.get("numa")), entry)
    return nodes


def config_space(node: PciNode, acs_ctrl: str | None, readable: bool) -> bytes:
    """Config space as the `config` file returns it: 64 bytes unless read by root."""
    part = node.part
    data = bytearray(4096 if readable else 64)
    struct.pack_into("<HH", data, 0, int(part["vendor"], 16), int(part["device"], 16))
    cls = int(part["class"], 16)
    data[9], data[10], data[11] = cls & 0xFF, (cls >> 8) & 0xFF, cls >> 16
    data[0x0E] = 0x01 if node.role != "device" else 0x00
    if readable:
        has_acs = acs_ctrl is not None
        # AER first, then (where the port has one) ACS: a probe must walk the list
        struct.pack_into("<I", data, 0x100, 0x0001 | (2 << 16) | ((0x148 if has_acs else 0) << 20))
        if has_acs:
            struct.pack_into("<IHH", data, 0x148, 0x000D | (1 << 16), 0x005F, int(acs_ctrl, 16))
    return bytes(data)


def mac_for(seed: str, oui: str = "b8:3f:d2") -> str:
    tail = digest("mac", seed)[:3]
    return oui + ":" + ":".join(f"{b:02x}" for b in tail)


def link_local_gid(mac: str) -> str:
    b = [int(x, 16) for x in mac.split(":")]
    eui = [b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]
    return "fe80:0000:0000:0000:" + ":".join(f"{eui[i]:02x}{eui[i + 1]:02x}" for i in range(0, 8, 2))


def ipv4_gid(cidr: str) -> str:
    ip = ipaddress.IPv4Interface(cidr).ip.packed
    return f"0000:0000:0000:0000:0000:ffff:{ip[0]:02x}{ip[1]:02x}:{ip[2]:02x}{ip[3]:02x}"


def guid_for(seed: str) -> str:
    d = digest("guid", seed)
    return f"946d:ae03:00{d[0]:02x}:{d[1]:02x}{d[2]:02x}"


class TreeWriter:
    """Creates files and relative symlinks below one root; paths are root-relative.

    Paths come from a spec, which may be anyone's file (its `files:` and `links:` keys, device and
    interface names), so nothing is written outside the root: a path with a '..' that climbs out of
    it, one that reaches out through a symlink, and a link whose target lies outside are refused
    (InputError), and a file is never written through a symlink in its own name."""

    def __init__(self, root: str):
        self.root = root
        self._real_root = os.path.realpath(root)
        self._dirs: set[str] = set()

    def _inside(self, rel: str, what: str = "path") -> str:
        """`rel` made root-relative and normal; InputError when it climbs out of the root."""
        from ncdoc.errors import InputError, shown
        rel = rel.lstrip("/")
        norm = os.path.normpath(rel) if rel else "."
        if "\0" in rel or norm == ".." or norm.startswith("../"):
            raise InputError(f"machine spec {what} {shown(rel)} leaves the machine's root folder")
        if len(norm) > 3000 or norm.count("/") > 64:    # past PATH_MAX (and os.makedirs recurses per folder)
            raise InputError(f"machine spec {what} {shown(rel)} is deeper than any sysfs path")
        return norm

    def _real_check(self, full: str, rel: str) -> None:
        from ncdoc.errors import InputError, shown
        real = os.path.realpath(full)
        if real != self._real_root and not real.startswith(self._real_root + os.sep):
            raise InputError(f"machine spec path {shown(rel)} reaches outside the machine's root folder "
                             "through a symbolic link")

    def _os(self, action, rel: str):
        from ncdoc.errors import InputError, shown
        try:
            return action()
        except (OSError, ValueError) as exc:
            raise InputError(f"machine spec path {shown(rel)} cannot be written",
                             cause=getattr(exc, "strerror", None) or str(exc)) from None

    def mkdir(self, rel: str) -> None:
        if rel not in self._dirs:
            norm = self._inside(rel)
            full = os.path.join(self.root, norm)
            self._real_check(full, rel)
            self._os(lambda: os.makedirs(full, exist_ok=True), rel)
            self._dirs.add(rel)

    def file(self, rel: str, content: str | bytes) -> None:
        rel = self._inside(rel)
        self.mkdir(os.path.dirname(rel))
        full = os.path.join(self.root, rel)
        self._real_check(full, rel)
        data = content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content

        def write() -> None:
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        self._os(write, rel)

    def link(self, rel: str, target: str) -> None:
        """Symlink `rel` -> `target` (both root-relative), written relative as sysfs does."""
        rel, target = self._inside(rel), self._inside(target, "link target")
        self.raw_link(rel, os.path.relpath(target, os.path.dirname(rel) or "."))

    def raw_link(self, rel: str, target: str) -> None:
        """Symlink `rel` -> `target` as given (a spec's `links:`): relative to the link's folder, and
        inside the root once resolved there; InputError otherwise."""
        from ncdoc.errors import InputError, shown
        rel = self._inside(rel)
        if os.path.isabs(target):
            raise InputError(f"machine spec link {shown(rel)}: the target {shown(target)} must be relative "
                             "(an absolute one points at the real machine, not the fake root)")
        self._inside(os.path.join(os.path.dirname(rel), target), "link target")
        self.mkdir(os.path.dirname(rel))
        full = os.path.join(self.root, rel)
        self._real_check(os.path.dirname(full), rel)
        self._os(lambda: os.symlink(target, full), rel)
        try:                      # '..' after another link climbs from where that one points: resolve it
            self._real_check(full, rel)
        except InputError:
            os.unlink(full)
            raise


@dataclass
class NetDev:
    name: str
    dir: str
    kind: str                 # ether | infiniband | loopback | bond | bridge | vlan
    mtu: int
    mac: str
    operstate: str = "up"
    addresses: list[str] = field(default_factory=list)
    speed: int | None = None
    master: str | None = None
    ifindex: int = 0
    device_dir: str | None = None
    driver: str | None = None


@dataclass
class Rdma:
    name: str
    node: PciNode
    netdev: NetDev | None
    ports: dict[int, dict[str, Any]]      # port -> resolved port facts (for the verbs recording)


@dataclass
class Built:
    nodes: dict[str, PciNode]
    gpus: list[PciNode]
    rdma: list[Rdma]
    netdevs: list[NetDev]


def _link_files(tw: TreeWriter, node: PciNode) -> None:
    link = {**node.part.get("link", {}), **(node.entry.get("link") or {})}
    speed, width = link.get("speed", "Unknown"), int(link.get("width", 0))
    tw.file(f"{node.dir}/current_link_speed", speed + "\n")
    tw.file(f"{node.dir}/current_link_width", f"{width}\n")
    tw.file(f"{node.dir}/max_link_speed", link.get("max_speed", node.part.get("link", {}).get("speed", speed)) + "\n")
    tw.file(f"{node.dir}/max_link_width", f"{link.get('max_width', node.part.get('link', {}).get('width', width))}\n")


def write_pci(tw: TreeWriter, spec: dict[str, Any], nodes: dict[str, PciNode], cpulists: dict[int, str]) -> None:
    acs_defaults = spec.get("acs") or {}
    root_reads = (spec.get("host") or {}).get("probe_as_root", True)
    for node in nodes.values():
        part, d = node.part, node.dir
        for key in ("class", "vendor", "device"):
            tw.file(f"{d}/{key}", part[key] + "\n")
        numa = node.numa if node.numa is not None else -1
        tw.file(f"{d}/numa_node", f"{numa}\n")
        if node.role == "device":
            tw.file(f"{d}/local_cpulist", cpulists.get(numa, "") + "\n")
        _link_files(tw, node)
        acs = None
        if part.get("acs") is True or (part.get("acs") == "downstream" and node.role == "switch_down"):
            acs = node.entry.get("acs_ctrl") or acs_defaults.get(node.role, "0x0000")
        tw.file(f"{d}/config", config_space(node, acs, root_reads))
        driver = node.entry.get("driver", part.get("driver"))
        tw.file(f"{d}/uevent", (f"DRIVER={driver}\n" if driver else "") +
                f"PCI_CLASS={part['class'][2:].upper()}\nPCI_ID={part['vendor'][2:].upper()}:"
                f"{part['device'][2:].upper()}\nPCI_SLOT_NAME={node.address}\n")
        if driver:
            tw.mkdir(f"sys/bus/pci/drivers/{driver}")
            tw.link(f"{d}/driver", f"sys/bus/pci/drivers/{driver}")
        tw.link(f"sys/bus/pci/devices/{node.address}", d)


def auto_netdev_name(node: PciNode, nodes: dict[str, PciNode], infiniband: bool) -> str:
    """systemd's predictable name for a PCI NIC: ibp24s0, enp41s0f0np0, enp2s0f1."""
    slot, fn = node.slot_fn
    multi = any(a != node.address and a.rsplit(".", 1)[0] == node.address.rsplit(".", 1)[0] for a in nodes)
    domain = int(node.address.split(":")[0], 16)
    base = ("ibP" if infiniband else "enP") + f"{domain}p" if domain else ("ibp" if infiniband else "enp")
    name = f"{base}{node.bus}s{slot}" + (f"f{fn}" if multi else "")
    if not infiniband and node.part.get("driver") == "mlx5_core":
        name += f"np{fn}"             # phys_port_name p<n>: each port of a ConnectX is its own function
    return name


def port_facts(entry: dict[str, Any], rdma_part: dict[str, Any], lid: int) -> dict[str, Any]:
    port = {"state": "ACTIVE", "phys_state": "LinkUp", "rate": rdma_part["rate"], "lid": lid, "sm_lid": 1,
            "link_layer": rdma_part["link_layer"]}
    if rdma_part["link_layer"] == "Ethernet":
        port.update(lid=0, sm_lid=0)
    given = entry.get("port") or {}
    port.update(given)
    if port["state"] != "ACTIVE":                 # no subnet manager has swept a dead link
        port["lid"] = given.get("lid", 0)
        port["sm_lid"] = given.get("sm_lid", 0)
    return port


def _gid_table(port: dict[str, Any], netdev: NetDev | None, guid: str) -> list[tuple[str, str | None, str | None]]:
    if port.get("gids") is not None:
        return [tuple(g) + (None,) * (3 - len(g)) for g in port["gids"]]
    if port["link_layer"] == "InfiniBand":
        return [("fe80:0000:0000:0000:" + guid, "IB/RoCE v1", None)]
    if netdev is None:
        return []
    gids = [(link_local_gid(netdev.mac), "IB/RoCE v1", netdev.name), (link_local_gid(netdev.mac), "RoCE v2", netdev.name)]
    for cidr in netdev.addresses:
        if ":" not in cidr:
            gids += [(ipv4_gid(cidr), "IB/RoCE v1", netdev.name), (ipv4_gid(cidr), "RoCE v2", netdev.name)]
    return gids


def write_rdma(tw: TreeWriter, spec: dict[str, Any], rdma: Rdma) -> None:
    node, part, entry = rdma.node, rdma.node.part["rdma"], rdma.node.entry
    host = spec.get("host") or {}
    d = f"{node.dir}/infiniband/{rdma.name}"
    guid = guid_for(f"{host.get('hostname')}/{node.address}")
    for key, value in (("fw_ver", entry.get("fw_ver", part["fw_ver"])), ("board_id", part["board_id"]),
                       ("hca_type", part["hca_type"]), ("hw_rev", "0x0"), ("node_type", "1: CA"),
                       ("node_desc", f"{host.get('hostname', 'node')} {rdma.name}"),
                       ("node_guid", guid), ("sys_image_guid", guid)):
        tw.file(f"{d}/{key}", f"{value}\n")
    tw.link(f"{d}/device", node.dir)
    tw.link(f"sys/class/infiniband/{rdma.name}", d)
    for num, port in rdma.ports.items():
        p = f"{d}/ports/{num}"
        tw.file(f"{p}/state", f"{PORT_STATES[port['state']]}: {port['state']}\n")
        tw.file(f"{p}/phys_state", f"{PHYS_STATES[port['phys_state']]}: {port['phys_state']}\n")
        tw.file(f"{p}/rate", port["rate"] + "\n")
        tw.file(f"{p}/link_layer", port["link_layer"] + "\n")
        tw.file(f"{p}/lid", f"0x{port['lid']:x}\n")
        tw.file(f"{p}/sm_lid", f"0x{port['sm_lid']:x}\n")
        tw.file(f"{p}/sm_sl", "0\n")
        tw.file(f"{p}/lid_mask_count", "0\n")
        tw.file(f"{p}/cap_mask", "0xa651e848\n" if port["link_layer"] == "InfiniBand" else "0x04010000\n")
        table = _gid_table(port, rdma.netdev, guid)
        for i, (gid, gid_type, ndev) in enumerate(table):
            tw.file(f"{p}/gids/{i}", gid + "\n")
            if gid_type:
                tw.file(f"{p}/gid_attrs/types/{i}", gid_type + "\n")
            if ndev:
                tw.file(f"{p}/gid_attrs/ndevs/{i}", ndev + "\n")
        for i in range(len(table), len(table) + 2):     # unused slots read as zero GIDs
            tw.file(f"{p}/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000\n")
        counters = {name: 0 for name in _DEFAULT_COUNTERS}
        counters.update(port_rcv_data=18446744073, port_xmit_data=18446744000,
                        port_rcv_packets=29412394, port_xmit_packets=29412011)
        counters.update((port.get("counters") or {}))
        for name, value in counters.items():
            folder = "hw_counters" if name in _DEFAULT_HW_COUNTERS else "counters"
            tw.file(f"{p}/{folder}/{name}", f"{value}\n")
        for name in _DEFAULT_HW_COUNTERS:
            if name not in counters:
                tw.file(f"{p}/hw_counters/{name}", "0\n")


def ib_hw_address(guid: str) -> str:
    raw = "80:00:00:48:fe:80:00:00:00:00:00:00:" + guid.replace(":", "")
    hexes = raw.replace(":", "")
    return ":".join(hexes[i:i + 2] for i in range(0, len(hexes), 2))


def write_netdev(tw: TreeWriter, dev: NetDev, slaves: list[str]) -> None:
    d = dev.dir
    arp = {"infiniband": 32, "loopback": 772}.get(dev.kind, 1)
    devtype = {"bond": "bond", "bridge": "bridge", "vlan": "vlan"}.get(dev.kind)
    tw.file(f"{d}/type", f"{arp}\n")
    tw.file(f"{d}/mtu", f"{dev.mtu}\n")
    tw.file(f"{d}/operstate", dev.operstate + "\n")
    tw.file(f"{d}/address", dev.mac + "\n")
    tw.file(f"{d}/addr_len", f"{len(dev.mac.split(':'))}\n")
    tw.file(f"{d}/ifindex", f"{dev.ifindex}\n")
    tw.file(f"{d}/dev_port", "0\n")
    tw.file(f"{d}/dev_id", "0x0\n")
    tw.file(f"{d}/carrier", ("1" if dev.operstate == "up" else "0") + "\n")
    tw.file(f"{d}/uevent", (f"DEVTYPE={devtype}\n" if devtype else "") + f"INTERFACE={dev.name}\nIFINDEX={dev.ifindex}\n")
    if dev.speed and dev.operstate == "up":
        tw.file(f"{d}/speed", f"{dev.speed}\n")      # reading speed of a down link fails (EINVAL)
    if dev.device_dir:
        tw.link(f"{d}/device", dev.device_dir)
        if dev.driver and not dev.device_dir.split("/")[-1].count(":") == 2:
            tw.mkdir(f"sys/bus/vmbus/drivers/{dev.driver}")
            tw.link(f"{dev.device_dir}/driver", f"sys/bus/vmbus/drivers/{dev.driver}")
    if dev.kind == "bond":
        tw.file(f"{d}/bonding/slaves", " ".join(slaves) + "\n")
        tw.file(f"{d}/bonding/mode", "802.3ad 4\n")
    if dev.kind == "bridge":
        tw.file(f"{d}/bridge/stp_state", "0\n")
        tw.mkdir(f"{d}/brif")
    tw.link(f"sys/class/net/{dev.name}", d)


def ip_json(netdevs: list[NetDev]) -> list[dict[str, Any]]:
    """What `ip -j addr show` prints for these interfaces."""
    out = []
    for dev in netdevs:
        up = dev.operstate in ("up", "unknown")
        infos = []
        addresses = list(dev.addresses)
        if up and dev.kind in ("ether", "bond", "bridge", "vlan") and not dev.master:
            ll = ipaddress.IPv6Address(bytes.fromhex("fe80000000000000" + link_local_gid(dev.mac)[20:].replace(":", "")))
            addresses.append(f"{ll}/64")
        for cidr in addresses:
            iface = ipaddress.ip_interface(cidr)
            info = {"family": "inet" if iface.version == 4 else "inet6", "local": str(iface.ip),
                    "prefixlen": iface.network.prefixlen,
                    "scope": "host" if iface.ip.is_loopback else "link" if iface.ip.is_link_local else "global"}
            if iface.version == 4:
                info["label"] = dev.name
            infos.append(info | {"valid_life_time": 4294967295, "preferred_life_time": 4294967295})
        flags = (["LOOPBACK"] if dev.kind == "loopback" else ["BROADCAST", "MULTICAST"])
        flags += ["UP", "LOWER_UP"] if up else []
        if dev.master:
            flags.insert(-2 if up else len(flags), "SLAVE")
        entry = {"ifindex": dev.ifindex, "ifname": dev.name, "flags": flags, "mtu": dev.mtu,
                 "qdisc": "noqueue" if dev.kind in ("loopback", "bridge", "bond") else "mq"}
        if dev.master:
            entry["master"] = dev.master
        entry |= {"operstate": dev.operstate.upper(), "group": "default", "txqlen": 1000,
                  "link_type": {"infiniband": "infiniband", "loopback": "loopback"}.get(dev.kind, "ether"),
                  "address": dev.mac, "addr_info": infos}
        out.append(entry)
    return out
