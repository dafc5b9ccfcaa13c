"""hwloc XML (`lstopo file.xml`, hwloc 1.x and 2.x) -> Snapshot with the PCI tree filled.

hwloc writes each PCI root bus as a host bridge (Bridge bridge_type="0-1", bridge_pci
"0000:[44-5c]"; named here "pci0000:44" as sysfs names it), then every PCI-to-PCI bridge
(root ports, switch upstream and downstream ports) as Bridge bridge_type="1-1", then devices
(PCIDev, pci_type "0302 [10de:2335] [10de:18be] a1"). I/O objects hang under the Package,
Group or NUMANode whose nodeset gives their NUMA node. GPUs are found by class 0x0300/0x0302
and vendor 0x10de (lstopo often runs without CUDA, so GPU OS devices are only card*/renderD*);
RDMA devices are OpenFabrics OS devices (osdev_type 3: mlx5_0, ibp115s0f0, rdmap85s0).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ncdoc.errors import InputError
from ncdoc.importers.xmldoc import mask_to_cpulist, parse_xml, pci_kind, single_bit
from ncdoc.snapshot import (Gpu, GpuSection, Hca, HcaSection, Host, NetIf, NetSection, NumaNode,
                            NumaSection, PciDevice, PciSection, Port, Snapshot, Status)
from ncdoc.topology import natural_key, normalize_bus_id

_OSDEV_NET, _OSDEV_OPENFABRICS = "2", "3"
_PORT_STATE = {"1": "DOWN", "2": "INIT", "3": "ARMED", "4": "ACTIVE", "5": "ACTIVE_DEFER"}


def _info(el: ET.Element) -> dict[str, str]:
    return {i.get("name", ""): i.get("value", "") for i in el.findall("info")}


def _pci_type(text: str | None) -> tuple[str | None, str | None, str | None]:
    """'0302 [10de:2335] [10de:18be] a1' -> ('0x0302', '0x10de', '0x2335')."""
    m = re.match(r"\s*([0-9a-fA-F]{4})\s*\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]", text or "")
    if not m:
        return None, None, None
    return f"0x{m.group(1).lower()}", f"0x{m.group(2).lower()}", f"0x{m.group(3).lower()}"


class _Walk:
    def __init__(self) -> None:
        self.devices: list[PciDevice] = []
        self.gpus: list[tuple[str, int | None, str]] = []
        self.hcas: list[Hca] = []
        self.netifs: list[NetIf] = []
        self.numa_nodes: dict[int, NumaNode] = {}
        self.info: dict[str, str] = {}

    def walk(self, el: ET.Element, parent: str | None, numa: int | None, depth: int = 0) -> None:
        if depth > 200:
            raise InputError("the hwloc XML nests objects deeper than any real machine")
        for obj in el.findall("object"):
            kind = obj.get("type")
            here = numa
            if obj.get("nodeset") and kind not in ("Bridge", "PCIDev", "OSDev"):
                here = single_bit(obj.get("nodeset"))
            if kind == "NUMANode" and re.fullmatch(r"[0-9]{1,6}", obj.get("os_index", "")):
                idx = int(obj.get("os_index"))
                self.numa_nodes[idx] = NumaNode(idx, mask_to_cpulist(obj.get("cpuset")))
            if kind in ("Machine", "Package"):
                self.info.update({k: v for k, v in _info(obj).items() if v})
            if kind == "Bridge" and obj.get("bridge_type", "").startswith("0-"):
                m = re.match(r"([0-9a-fA-F]{4}):\[([0-9a-fA-F]{2})", obj.get("bridge_pci", ""))
                host = f"pci{m.group(1).lower()}:{m.group(2).lower()}" if m else f"pci-host{depth}"
                self.walk(obj, host, here, depth + 1)
            elif kind in ("Bridge", "PCIDev") and obj.get("pci_busid"):
                self._device(obj, kind, parent, here, depth)
            else:
                self.walk(obj, parent, here, depth + 1)

    def _device(self, obj: ET.Element, kind: str, parent: str | None, numa: int | None, depth: int) -> None:
        addr = normalize_bus_id(obj.get("pci_busid")) or obj.get("pci_busid", "")
        cls, vendor, device = _pci_type(obj.get("pci_type"))
        dkind = "bridge" if kind == "Bridge" else pci_kind(cls, vendor)
        self.devices.append(PciDevice(address=addr, parent=parent, class_code=cls, vendor=vendor,
                                      device=device, kind=dkind, numa_node=numa))
        info = _info(obj)
        if dkind == "gpu":
            model = info.get("PCIDevice", "")
            m = re.search(r"\[([^\]]+)\]", model)
            self.gpus.append((addr, numa, f"NVIDIA {m.group(1)}" if m else (model or "NVIDIA GPU")))
        osdevs = [o for o in obj.findall("object") if o.get("type") == "OSDev"]
        fabric = [o for o in osdevs if o.get("osdev_type") == _OSDEV_OPENFABRICS]
        for o in fabric:
            self.hcas.append(_hca(o, addr, numa))
        for o in osdevs:
            if o.get("osdev_type") == _OSDEV_NET and o.get("name"):
                self.netifs.append(NetIf(name=o.get("name"), pci_address=addr,
                                         hca=fabric[0].get("name") if fabric else None))
        if kind == "Bridge":
            self.walk(obj, addr, numa, depth + 1)


def _lid(text: str | None) -> int | None:
    m = re.fullmatch(r"0x([0-9a-fA-F]{1,16})|([0-9]{1,20})", (text or "").strip())
    return None if not m else int(m.group(1), 16) if m.group(1) else int(m.group(2))


def _hca(o: ET.Element, addr: str, numa: int | None) -> Hca:
    info = _info(o)
    ports = []
    for key in sorted(info):
        m = re.fullmatch(r"Port(\d{1,20}(?!\d))State", key)
        if m:
            n = m.group(1)
            lid = info.get(f"Port{n}LID")
            ports.append(Port(num=int(n), state=_PORT_STATE.get(info[key], info[key] or None),
                              lid=_lid(lid)))
    guid = info.get("NodeGUID") or None
    return Hca(name=o.get("name", ""), pci_address=addr, numa_node=numa, node_guid=guid,
               ports=tuple(sorted(ports, key=lambda p: p.num)))


def parse_hwloc_xml(text: str, source: str = "") -> tuple[Snapshot, bool]:
    """(Snapshot with host, gpus, hcas, net, pci and numa filled, truncated)."""
    root, truncated = parse_xml(text, "hwloc topology")
    if root.tag != "topology":
        raise InputError(f"not an hwloc XML (root element <{root.tag}>, expected <topology>)")
    w = _Walk()
    w.walk(root, None, None)
    if not w.devices and not w.numa_nodes:
        raise InputError("the hwloc XML holds no PCI device and no NUMA node (was lstopo run with I/O?)")
    src = source
    gpus = tuple(Gpu(index=i, name=name, pci_bus_id=addr, numa_node=numa)
                 for i, (addr, numa, name) in enumerate(sorted(w.gpus)))
    hcas = tuple(sorted(w.hcas, key=lambda h: natural_key(h.name)))
    info = w.info
    snap = Snapshot(
        origin="import",
        host=Host(status=Status.ok(src), hostname=info.get("HostName"), kernel=info.get("OSRelease"),
                  os=info.get("OSName"), arch=info.get("Architecture"), cpu_vendor=info.get("CPUVendor"),
                  cpu_model=info.get("CPUModel")),
        gpus=GpuSection(Status.ok(src) if gpus else Status.absent("no NVIDIA GPU in the hwloc XML", src), gpus),
        hcas=HcaSection(Status.ok(src) if hcas else Status.absent("no OpenFabrics device in the hwloc XML", src),
                        hcas),
        net=NetSection(Status.ok(src) if w.netifs else Status.unknown("no network device in the hwloc XML", src),
                       tuple(w.netifs)),
        pci=PciSection(Status.ok(src) if w.devices else Status.unknown("lstopo ran without I/O devices", src),
                       tuple(w.devices)),
        numa=NumaSection(Status.ok(src) if w.numa_nodes else Status.unknown("no NUMA node in the hwloc XML", src),
                         tuple(w.numa_nodes[i] for i in sorted(w.numa_nodes))),
        notes=("the hwloc XML is cut short; only the objects before the cut are known",) if truncated else (),
    )
    return snap, truncated
