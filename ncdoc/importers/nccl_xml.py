"""NCCL topology XML (what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE reads) -> Snapshot.

<system><cpu numaid affinity arch vendor><pci busid class ...> nested <pci> ... <gpu dev sm>
<nvlink target count tclass/></gpu> <nic><net name dev speed port guid gdr/></nic>.

NCCL records one <pci> node per PCIe *switch* (it skips the downstream ports and root ports
when it reads sysfs), so bridges here become PciDevice(kind="switch"): the classifier counts
each as one bridge. NCCL's XML has no host bridges either: each <cpu> becomes one host "cpu<N>",
so devices that meet only at the CPU are PHB, as NCCL itself computes them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ncdoc.errors import InputError
from ncdoc.importers.xmldoc import mask_to_cpulist, parse_xml, pci_kind
from ncdoc.snapshot import (Gpu, GpuSection, Hca, HcaSection, Host, NumaNode, NumaSection, NvLink,
                            PciDevice, PciSection, Port, Snapshot, Status)
from ncdoc.topology import natural_key, normalize_bus_id

_NVLINK_REMOTE = {"0x068000": "switch", "0x068001": "ibmnpu"}
_MAX_LINKS = 64  # more NVLinks than any GPU has (18 on Hopper/Blackwell): a corrupt count


def _int(s: str | None) -> int | None:
    """NCCL writes decimal ints, hex classes and the odd float ("0.000000"); junk -> None."""
    s = (s or "").strip()
    m = re.fullmatch(r"0x([0-9a-fA-F]{1,16})|([0-9]{1,20})(?:\.[0-9]{0,20})?", s)
    if not m:
        return None
    return int(m.group(1), 16) if m.group(1) else int(m.group(2))


def parse_nccl_topo_xml(text: str, source: str = "") -> tuple[Snapshot, bool]:
    """(Snapshot with host, gpus, hcas, pci and numa filled, truncated)."""
    root, truncated = parse_xml(text, "NCCL topology")
    if root.tag != "system":
        raise InputError(f"not an NCCL topology XML (root element <{root.tag}>, expected <system>)")
    devices: list[PciDevice] = []
    gpus: list[dict] = []
    nets: dict[str, dict] = {}
    numa_nodes: dict[int, NumaNode] = {}
    host = {"arch": None, "cpu_vendor": None}
    cpus = root.iter("cpu")
    for k, cpu in enumerate(cpus):
        numa = _int(cpu.get("numaid"))
        hostname = f"cpu{numa if numa is not None else k}"
        if numa is not None:
            numa_nodes[numa] = NumaNode(numa, mask_to_cpulist(cpu.get("affinity")))
        host["arch"] = host["arch"] or cpu.get("arch")
        host["cpu_vendor"] = host["cpu_vendor"] or cpu.get("vendor")
        _walk(cpu, hostname, numa, devices, gpus, nets, depth=0)
    if not devices and not nets:
        raise InputError("the NCCL topology XML lists no PCI device and no net device")
    src = source
    gpus_sec = _gpu_section(gpus, src)
    if nets:
        hcas = HcaSection(Status.ok(src), tuple(sorted((_hca(n) for n in nets.values()),
                                                      key=lambda h: natural_key(h.name))))
    elif any(d.kind == "nic" for d in devices):
        hcas = HcaSection(Status.unknown("the NCCL topology XML lists NIC PCI devices but no <net> names", src))
    else:
        hcas = HcaSection(Status.unknown("the NCCL topology XML names no net device", src))
    return Snapshot(
        origin="import",
        host=Host(status=Status.ok(src), arch=host["arch"], cpu_vendor=host["cpu_vendor"]),
        gpus=gpus_sec, hcas=hcas,
        pci=PciSection(Status.ok(src), tuple(devices)),
        numa=NumaSection(Status.ok(src) if numa_nodes else Status.unknown("no numaid in the XML", src),
                         tuple(numa_nodes[i] for i in sorted(numa_nodes))),
        notes=("the NCCL topology XML is cut short; only the devices before the cut are known",)
        if truncated else (),
    ), truncated


def _walk(el: ET.Element, parent: str, numa: int | None, devices, gpus, nets, depth: int) -> None:
    if depth > 64:
        raise InputError("the NCCL topology XML nests PCI devices deeper than any real machine")
    for child in el:
        if child.tag == "pci":
            addr = normalize_bus_id(child.get("busid")) or f"pci{len(devices)}"
            cls, vendor = child.get("class"), child.get("vendor")
            kind = pci_kind(cls, vendor)
            if child.find("gpu") is not None:
                kind = "gpu"
            elif child.find("nic") is not None:
                kind = "nic"
            elif kind == "bridge":
                kind = "switch"
            devices.append(PciDevice(
                address=addr, parent=parent, class_code=cls, vendor=vendor, device=child.get("device"),
                kind=kind, numa_node=numa, link_speed=child.get("link_speed") or None,
                link_width=_int(child.get("link_width")) or None))
            if kind == "gpu":
                gpus.append({"el": child.find("gpu"), "addr": addr, "numa": numa})
            _walk(child, addr, numa, devices, gpus, nets, depth + 1)
        elif child.tag == "nic":
            for net in child.iter("net"):
                name = net.get("name")
                if not name:
                    continue
                entry = nets.setdefault(name, {"name": name, "pci": parent if parent in
                                               {d.address for d in devices} else None,
                                               "numa": numa, "guid": net.get("guid"), "ports": {}})
                port = _int(net.get("port")) or 1
                speed = _int(net.get("speed"))
                entry["ports"][port] = speed / 1000.0 if speed else None


def _gpu_section(gpus: list[dict], src: str) -> GpuSection:
    if not gpus:
        return GpuSection(Status.unknown("the NCCL topology XML names no GPU", src))
    # <gpu dev=".."> gives NCCL's index; static vendor files have none: PCI order, as nvidia-smi
    have_dev = all(g["el"] is not None and _int(g["el"].get("dev")) is not None for g in gpus)
    order = sorted(gpus, key=(lambda g: _int(g["el"].get("dev"))) if have_dev else (lambda g: g["addr"]))
    out = []
    for i, g in enumerate(order):
        el = g["el"]
        sm = _int(el.get("sm")) if el is not None else None
        links: list[NvLink] = []
        if el is not None:
            for nv in el.iter("nvlink"):
                target = normalize_bus_id(nv.get("target"))
                if not target or target == g["addr"]:
                    continue  # some vendor files point a GPU's links at itself: no peer to count
                cls = (nv.get("tclass") or "").lower()
                remote = _NVLINK_REMOTE.get(cls, "gpu" if cls.startswith("0x03") else None)
                for _ in range(min(_int(nv.get("count")) or 1, _MAX_LINKS)):
                    links.append(NvLink(len(links), True, target, remote))
        index = _int(el.get("dev")) if have_dev else i
        out.append(Gpu(index=index, name=f"NVIDIA GPU (sm_{sm})" if sm else "NVIDIA GPU",
                       pci_bus_id=g["addr"], numa_node=g["numa"],
                       compute_capability=f"{sm // 10}.{sm % 10}" if sm else None, nvlinks=tuple(links)))
    return GpuSection(Status.ok(src), tuple(out))


def _hca(n: dict) -> Hca:
    ports = tuple(Port(num=p, rate_gbps=r, rate_text=f"{r:g} Gb/sec" if r else None)
                  for p, r in sorted(n["ports"].items()))
    guid = n["guid"] if n["guid"] not in (None, "", "0x0") else None
    return Hca(name=n["name"], pci_address=n["pci"], numa_node=n["numa"], node_guid=guid, ports=ports)
