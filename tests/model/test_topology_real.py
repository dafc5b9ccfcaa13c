"""The classifier against real servers' topologies (hwloc XML of AWS instances, vendors' NCCL XML).

Expected paths are derived here straight from the XML by a different route than the importer
takes (shared switch / host bridge / package), so the two must agree.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ncdoc.importers import import_evidence, import_evidence_detail
from ncdoc.topology import classify
from paths import SHARED

HWLOC = SHARED / "topology" / "hwloc-xml"
NCCL = SHARED / "topology" / "nccl-xml"

pytestmark = pytest.mark.skipif(not (SHARED / "topology").is_dir(), reason="../shared/topology not present")


def _hwloc_facts(path: Path):
    """busid -> (switch upstream port busid or None, host bridge range, package index, kind, osdev names)."""
    root = ET.parse(path).getroot()
    out = {}

    def walk(el, chain, package):
        for obj in el.findall("object"):
            t = obj.get("type")
            pkg = obj.get("os_index") if t == "Package" else package
            if t == "Bridge":
                walk(obj, chain + [obj.get("pci_busid") or obj.get("bridge_pci")], pkg)
            elif t == "PCIDev":
                cls = obj.get("pci_type", "")[:4]
                names = [o.get("name") for o in obj.findall("object") if o.get("osdev_type") == "3"]
                if cls == "0302" and "[10de:" in obj.get("pci_type", ""):
                    kind = "gpu"
                elif names:
                    kind = "rdma"
                else:
                    kind = None
                if kind:
                    # AWS trees are host bridge > root port > switch upstream > downstream > device
                    usp = chain[2] if len(chain) >= 4 else None
                    out[obj.get("pci_busid")] = (usp, chain[0] if chain else None, pkg, kind, names)
            else:
                walk(obj, chain, pkg)

    walk(root, [], None)
    return out


def _expected(a, b):
    usp_a, hb_a, pkg_a, *_ = a
    usp_b, hb_b, pkg_b, *_ = b
    if pkg_a != pkg_b:
        return "SYS"
    if hb_a != hb_b:
        return "NODE"
    return "PIX" if usp_a is not None and usp_a == usp_b else "PHB"


@pytest.mark.parametrize("name", ["aws-p4d.xml", "aws-p5en.xml", "aws-p6-b200.xml", "aws-p6-b300.xml",
                                  "aws-p6e-gb200.xml"])
def test_hwloc_paths_match_the_tree(name):
    path = HWLOC / name
    facts = _hwloc_facts(path)
    imp = import_evidence_detail(path)
    assert imp.kind == "hwloc_xml" and not imp.truncated
    topo = classify(imp.snapshot)
    by_pci = {e.pci: e for e in topo.endpoints}
    gpus = [b for b, f in facts.items() if f[3] == "gpu"]
    nics = [b for b, f in facts.items() if f[3] == "rdma"]
    assert len(topo.gpus()) == len(gpus) and len(topo.nics()) == len(nics)
    checked = 0
    for a in gpus + nics:
        for b in gpus + nics:
            if a != b:
                assert topo.path(by_pci[a].label, by_pci[b].label) == _expected(facts[a], facts[b]), (a, b)
                checked += 1
    assert checked > 50
    for g in topo.gpus():  # every GPU's rail is the RDMA devices behind its own switch (or host bridge)
        want = sorted(facts[n][4][0] for n in nics if _expected(facts[g.pci], facts[n]) ==
                      min((_expected(facts[g.pci], facts[m]) for m in nics),
                          key=["PIX", "PHB", "NODE", "SYS"].index))
        assert sorted(topo.rails[g.label]) == want


def test_p5en_h200_have_efa_at_pix_and_other_socket_at_sys():
    topo = classify(import_evidence(HWLOC / "aws-p5en.xml"))
    gpus, nics = topo.gpus(), topo.nics()
    assert len(gpus) == 8 and all("H200" in g.name for g in gpus)
    assert len(nics) == 16 and all(n.name.startswith("rdmap") for n in nics)
    assert {g.numa for g in gpus} == {0, 1}
    for g in gpus:
        rail = topo.rails[g.label]
        assert len(rail) == 4 and topo.nearest_nic(g.label)[1] in ("PIX", "PXB")
        for other in gpus:
            if other.numa != g.numa:
                assert topo.path(g.label, other.label) == "SYS"
    # ENA (plain Ethernet, no RDMA) devices are not NICs here, as nvidia-smi would not list them
    snap = import_evidence(HWLOC / "aws-p5en.xml")
    assert any(n.name.startswith("enp") and n.hca is None for n in snap.net.interfaces)


def test_p6_b200_connectx7_sits_with_gpus_4_and_5():
    topo = classify(import_evidence(HWLOC / "aws-p6-b200.xml"))
    ib = [n for n in topo.nics() if n.name.startswith("ibp")]
    assert len(ib) == 2
    for g in ("GPU4", "GPU5"):
        assert all(topo.path(g, n.label) == "PIX" for n in ib)
    assert all(topo.path("GPU0", n.label) == "SYS" for n in ib)


def test_p4d_vm_puts_gpus_and_efa_on_the_root_bus():
    topo = classify(import_evidence(HWLOC / "aws-p4d.xml"))
    assert topo.path("GPU0", "GPU1") == "PHB"     # same host bridge, no switch visible in the VM
    assert topo.nearest_nic("GPU0") == ("rdmap16s27", "PHB")
    assert topo.path("GPU0", "GPU2") == "NODE"
    assert topo.path("GPU0", "GPU4") == "SYS"


def _nccl_xml_groups(path: Path):
    """busid -> (switch busid or None, numaid, class) read from the NCCL XML directly."""
    root = ET.fromstring(path.read_text())
    out = {}
    for cpu in root.iter("cpu"):
        for sw in cpu.findall("pci"):
            children = sw.findall("pci")
            if children:
                for d in children:
                    out[d.get("busid")] = (sw.get("busid"), cpu.get("numaid"), d.get("class"))
            else:
                out[sw.get("busid")] = (None, cpu.get("numaid"), sw.get("class"))
    return out


@pytest.mark.parametrize("name", ["azure-ndv5-topo.xml", "azure-ndv4-topo.xml", "azure-ndv2-topo.xml",
                                  "aws-p4d-24xl-topo.xml", "aws-p4de-24xl-topo.xml"])
def test_nccl_xml_paths_match_the_file(name):
    path = NCCL / name
    groups = _nccl_xml_groups(path)
    imp = import_evidence_detail(path)
    assert imp.kind == "nccl_topo_xml"
    topo = classify(imp.snapshot)
    by_pci = {e.pci: e for e in topo.endpoints}
    devs = [b for b, (_, _, cls) in groups.items() if re.match(r"0x0(302|207|200)", cls or "")]
    assert len(topo.endpoints) == len(devs)
    for a in devs:
        for b in devs:
            if a == b:
                continue
            sa, na, _ = groups[a]
            sb, nb, _ = groups[b]
            want = "SYS" if na != nb else "PIX" if sa is not None and sa == sb else "PHB"
            assert topo.path(by_pci[a].label, by_pci[b].label) == want, (a, b)


def test_azure_ndv5_each_gpu_owns_one_hca():
    topo = classify(import_evidence(NCCL / "azure-ndv5-topo.xml"))
    assert len(topo.gpus()) == 8 and len(topo.nics()) == 8
    for i in range(8):
        assert topo.rails[f"GPU{i}"] == (f"NIC{i}",)
        assert topo.path(f"GPU{i}", f"NIC{i}") == "PIX"
        same = [j for j in range(8) if j // 4 == i // 4 and j != i]
        other = [j for j in range(8) if j // 4 != i // 4]
        assert all(topo.path(f"GPU{i}", f"NIC{j}") == "PHB" for j in same)
        assert all(topo.path(f"GPU{i}", f"NIC{j}") == "SYS" for j in other)
    assert {topo.numa[f"GPU{i}"] for i in range(4)} == {0}


def test_every_vendor_nccl_xml_imports():
    for path in sorted(NCCL.glob("*.xml")):
        imp = import_evidence_detail(path)
        assert imp.snapshot.pci.status.state == "ok", path
        classify(imp.snapshot)
