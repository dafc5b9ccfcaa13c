"""Importers on hand-written samples that mirror the real tools' output formats."""

from __future__ import annotations

import json

import pytest

from ncdoc.errors import InputError
from ncdoc.importers import import_evidence, import_evidence_detail, import_text, merge
from ncdoc.importers import detect_ibv_tool, detect_kind
from ncdoc.importers.ibv import parse_ibv
from ncdoc.importers.topo_matrix import parse_topo_matrix
from ncdoc.snapshot import Hca, HcaSection, Port, Snapshot, Status
from ncdoc.topology import classify, port_facts

# `nvidia-smi topo -m`, driver 535+ (tabs, GPU NUMA ID column, NIC Legend)
TOPO_NEW = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tPIX\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tPIX\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPIX\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")

# 2017-era driver: space-separated, SOC, NICs named by device in the header, no legend for NICs
TOPO_OLD = """root@node:~# nvidia-smi topo -m
        GPU0    GPU1    mlx5_0  CPU Affinity
GPU0     X      SOC     PHB     0-11
GPU1    SOC      X      SOC     12-23
mlx5_0  PHB     SOC      X
"""


def test_topo_matrix_new_format():
    pm = parse_topo_matrix(TOPO_NEW, "s")
    assert pm.labels == ("GPU0", "GPU1", "NIC0", "NIC1")
    assert pm.matrix["GPU0"] == {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX", "NIC1": "SYS"}
    assert pm.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert pm.cpu_affinity == {"GPU0": "0-55,112-167", "GPU1": "56-111,168-223"}
    assert pm.numa_affinity == {"GPU0": "0", "GPU1": "1"}
    assert not pm.truncated
    topo = classify(Snapshot(paths=pm))
    assert topo.rails == {"GPU0": ("mlx5_0",), "GPU1": ("mlx5_1",)}
    assert topo.numa["NIC1"] == 1


def test_topo_matrix_old_format_soc_and_device_columns():
    pm = parse_topo_matrix(TOPO_OLD)
    assert pm.labels == ("GPU0", "GPU1", "mlx5_0")
    assert pm.matrix["GPU0"]["GPU1"] == "SYS" and pm.matrix["GPU1"]["mlx5_0"] == "SYS"
    assert pm.nic_names == {"mlx5_0": "mlx5_0"}
    assert classify(Snapshot(paths=pm)).nearest_nic("GPU0") == ("mlx5_0", "PHB")


def test_topo_matrix_cut_short_keeps_what_is_there():
    cut = TOPO_NEW.split("NIC1\tSYS")[0] + "NIC1\tSYS\tPI"
    pm = parse_topo_matrix(cut)
    assert pm.truncated
    assert pm.matrix["NIC1"] == {"GPU0": "SYS"}
    assert pm.matrix["GPU1"]["NIC1"] == "PIX"
    # rows missing entirely
    assert parse_topo_matrix(TOPO_NEW.split("\nNIC0\t")[0]).truncated
    # the NIC Legend cut off
    assert parse_topo_matrix(TOPO_NEW[: TOPO_NEW.index("NIC1: mlx5_1")]).truncated


def test_topo_matrix_glued_cells_and_missing_header():
    glued = TOPO_NEW.replace("NV18\tPIX\tSYS\t0-55", "NV18\tPIXSYS\t0-55")
    assert parse_topo_matrix(glued).matrix["GPU0"]["NIC1"] == "SYS"
    headless = "GPU0\t X \tPXB\nGPU1\tPXB\t X \n"
    pm = parse_topo_matrix(headless)
    assert pm.labels == ("GPU0", "GPU1") and pm.matrix["GPU1"]["GPU0"] == "PXB" and pm.truncated


def test_topo_matrix_from_pdsh_keeps_the_first_host():
    text = "".join(f"{h}: {ln}\n" for h in ("gpu01", "gpu02") for ln in TOPO_OLD.splitlines()[1:])
    assert detect_kind(text) == "topo_matrix"
    pm = parse_topo_matrix(text)
    assert pm.labels == ("GPU0", "GPU1", "mlx5_0") and pm.matrix["mlx5_0"]["GPU0"] == "PHB"


def test_topo_matrix_rejects_text_without_a_matrix():
    with pytest.raises(InputError):
        parse_topo_matrix("GPU0 is fine\n")
    with pytest.raises(InputError):
        parse_topo_matrix("hello")


IBV_PLAIN = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t28.39.2048
\tnode_guid:\t\t\t58a2:e103:002a:09b8
\tvendor_part_id:\t\t\t4129
\tboard_id:\t\t\tMT_0000000838
\tphys_port_cnt:\t\t\t1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t1
\t\t\tport_lid:\t\t12
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tInfiniBand

"""

IBV_VERBOSE_ROCE = """$ ibv_devinfo -v -d mlx5_2
hca_id:\tmlx5_2
\ttransport:\t\t\tInfiniBand (0)
\tphys_port_cnt:\t\t\t1
\tgeneral_odp_caps:
\t\t\t\t\tODP_SUPPORT
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_DOWN (1)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t1024 (3)
\t\t\tsm_lid:\t\t\t0
\t\t\tport_lid:\t\t0
\t\t\tlink_layer:\t\tEthernet
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t25.0 Gbps (32)
\t\t\tphys_state:\t\tDISABLED (3)
\t\t\tGID[  0]:\t\tfe80::ba59:9fff:fe3e:1b2c, RoCE v1
\t\t\tGID[  1]:\t\tfe80:0000:0000:0000:ba59:9fff:fe3e:1b2c, RoCE v2
\t\t\tGID[  3]:\t\t::ffff:10.0.0.11, RoCE v2
"""

IBSTAT = """CA 'mlx5_1'
\tCA type: MT4123
\tNumber of ports: 1
\tFirmware version: 20.31.1014
\tPort 1:
\t\tState: Initializing
\t\tPhysical state: LinkUp
\t\tRate: 200
\t\tBase lid: 65535
\t\tSM lid: 0
\t\tLink layer: InfiniBand
"""

IBSTATUS = """Infiniband device 'mlx5_3' port 1 status:
\tdefault gid:\t fe80:0000:0000:0000:0c42:a103:0075:4d8e
\tbase lid:\t 0x1a
\tsm lid:\t\t 0x1
\tstate:\t\t 4: ACTIVE
\tphys state:\t 5: LinkUp
\trate:\t\t 100 Gb/sec (4X EDR)
\tlink_layer:\t InfiniBand
"""

SHOW_GIDS = """DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV
---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---
mlx5_0\t1\t0\tfe80:0000:0000:0000:9cbb:b7ff:feb3:937a\t\t\tv1\tens1f0
mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a0c:0015\t10.12.0.21  \tv2\tens1f0
n_gids_found=2
"""


def test_ibv_devinfo_plain_has_no_rate():
    r = parse_ibv(IBV_PLAIN)
    (h,) = r.hcas.hcas
    assert (h.name, h.fw_ver, h.vendor_part_id, h.board_id) == ("mlx5_0", "28.39.2048", 4129, "MT_0000000838")
    (p,) = h.ports
    assert (p.state, p.rate_gbps, p.link_layer, p.active_mtu, p.lid, p.sm_lid) == \
        ("ACTIVE", None, "InfiniBand", 4096, 12, 1)
    assert not r.truncated and r.tool == "ibv_devinfo"


def test_ibv_devinfo_verbose_rate_and_gids():
    r = parse_ibv(IBV_VERBOSE_ROCE)
    (p,) = r.hcas.hcas[0].ports
    assert (p.state, p.phys_state, p.rate_gbps, p.width, p.speed) == ("DOWN", "Disabled", 100.0, "4X", "EDR")
    assert [(g.index, g.type) for g in p.gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2"), (3, "RoCE v2")]
    assert p.gids[0].gid == "fe80:0000:0000:0000:ba59:9fff:fe3e:1b2c" == p.gids[1].gid
    assert p.gids[2].ipv4 == "10.0.0.11"


def test_ibstat_ibstatus_show_gids():
    (h,) = parse_ibv(IBSTAT).hcas.hcas
    assert h.hca_type == "MT4123" and h.ports[0].state == "INIT" and h.ports[0].rate_gbps == 200.0
    (h,) = parse_ibv(IBSTATUS).hcas.hcas
    p = h.ports[0]
    assert (p.state, p.lid, p.sm_lid, p.rate_gbps, p.width, p.speed) == ("ACTIVE", 26, 1, 100.0, "4X", "EDR")
    r = parse_ibv(SHOW_GIDS)
    assert r.tool == "show_gids"
    gids = r.hcas.hcas[0].ports[0].gids
    assert [(g.index, g.type, g.netdev) for g in gids] == [(0, "IB/RoCE v1", "ens1f0"), (3, "RoCE v2", "ens1f0")]


def test_ibv_tools_are_detected():
    assert detect_ibv_tool(IBV_PLAIN) == "ibv_devinfo"
    assert detect_ibv_tool(IBSTAT) == "ibstat"
    assert detect_ibv_tool(IBSTATUS) == "ibstatus"
    assert detect_ibv_tool(SHOW_GIDS) == "show_gids"
    for text in (IBV_PLAIN, IBSTAT, IBSTATUS, SHOW_GIDS, IBV_VERBOSE_ROCE):
        assert detect_kind(text) == "ibv_devinfo"


def test_ibv_cut_short_and_empty_listings():
    cut = parse_ibv(IBSTAT[: IBSTAT.index("\t\tRate")])
    assert cut.truncated and cut.hcas.hcas[0].ports[0].state == "INIT"
    none = parse_ibv("$ ibv_devinfo -l\n0 HCAs found:\n\n")
    assert none.hcas.status.state == "absent" and none.hcas.hcas == ()
    listed = parse_ibv("2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\n")
    assert [h.name for h in listed.hcas.hcas] == ["mlx5_0", "mlx5_1"] and not listed.truncated
    assert parse_ibv("No IB devices found\n", tool="ibv_devinfo").hcas.status.state == "absent"
    with pytest.raises(InputError):
        parse_ibv("hello\n")


GID_FRAGMENT = ("\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0e42:a1ff:fe5b:7c10, RoCE v1\n"
                "\t\t\tGID[  1]:\t\tfe80::e42:a1ff:fe5b:7c10, RoCE v2\n"
                "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:0a14:0b07, RoCE v1\n"
                "\t\t\tGID[  3]:\t\t::ffff:10.20.11.7, RoCE v2\n")


def test_headerless_ibv_devinfo_gid_fragment():
    assert detect_kind(GID_FRAGMENT) == "ibv_devinfo"
    r = parse_ibv(GID_FRAGMENT)
    assert r.tool == "ibv_devinfo" and not r.truncated
    (h,) = r.hcas.hcas
    assert h.name == "(unnamed)" and h.ports[0].num == 1 and h.ports[0].state is None
    assert h.ports[0].link_layer == "Ethernet"           # RoCE GID types: an Ethernet link layer
    assert [(g.index, g.type) for g in h.ports[0].gids] == [(0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"),
                                                            (3, "RoCE v2")]
    assert h.ports[0].gids[3].ipv4 == "10.20.11.7"
    assert any("without their hca_id line" in n for n in r.notes)


def test_headerless_fragment_named_by_its_command_line():
    text = "root@gpu01:~# ibv_devinfo -d mlx5_bond_0 -i 1 -v\n\t\t\tphys_state:\t\tLINK_UP (5)\n" + GID_FRAGMENT
    (h,) = parse_ibv(text).hcas.hcas
    assert h.name == "mlx5_bond_0" and h.ports[0].phys_state == "LinkUp" and len(h.ports[0].gids) == 4
    # a full record is read as before: its own hca_id names it, no fragment note
    full = parse_ibv(IBV_VERBOSE_ROCE)
    assert not any("hca_id line" in n for n in full.notes)
    # another tool's record with lower-case "state:" lines is no headerless ibv_devinfo fragment
    mixed = parse_ibv(IBSTATUS + "$ ibv_devinfo\n")
    assert [h.name for h in mixed.hcas.hcas] == [h.name for h in parse_ibv(IBSTATUS).hcas.hcas]


def test_several_tools_pasted_together_are_merged():
    text = ("user@gpu01:~$ ibstat\n" + IBSTAT.replace("mlx5_1", "mlx5_0") + "user@gpu01:~$ show_gids\n"
            + SHOW_GIDS + "user@gpu01:~$ ibv_devinfo\n" + IBV_PLAIN.replace("PORT_ACTIVE (4)", "PORT_INIT (2)"))
    r = parse_ibv(text)
    assert r.tool == "show_gids" and not r.truncated
    (h,) = r.hcas.hcas
    p = h.ports[0]
    assert (p.state, p.rate_gbps, p.link_layer, h.fw_ver, h.hca_type) == ("INIT", 200.0, "InfiniBand", "20.31.1014",
                                                                         "MT4123")
    assert [g.index for g in p.gids] == [0, 3]
    # the prompt ends the ibstat record: show_gids' table is not read as ibstat fields
    assert p.lid == 65535


@pytest.mark.parametrize("text,kind", [
    ('{"schema_version": 1, "origin": "live"}', "snapshot_json"),
    ('<?xml version="1.0"?>\n<!-- c -->\n<system version="1"><cpu numaid="0"/></system>', "nccl_topo_xml"),
    ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology/>', "hwloc_xml"),
    (TOPO_NEW, "topo_matrix"),
    (IBSTATUS, "ibv_devinfo"),
    ("node1:12:12 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nexport NCCL_DEBUG=INFO\n", "nccl_log"),
    ("# nThread 1 nGpus 8 minBytes 8 maxBytes 128M\n#       size         count      type\n"
     "node1:1:1 [0] NCCL INFO comm 0x1 rank 0\n     8388608       2097152     float     sum      -1"
     "   123.4   67.98  127.46      0   120.1   69.84  130.95      0\n", "nccl_tests"),
    ("export NCCL_IB_HCA=mlx5_0,mlx5_1\nexport NCCL_DEBUG=WARN\n", "env"),
    ("mpirun -np 16 -x NCCL_IB_GID_INDEX=3 -x LD_LIBRARY_PATH ./all_reduce_perf\n", "env"),
    ("srun --export=ALL,NCCL_SOCKET_IFNAME=eth0 python train.py\n", "env"),
    ("env:\n  - name: NCCL_IB_HCA\n    value: mlx5\n", "env"),
    ('{"NCCL_DEBUG": "INFO"}', "env"),
])
def test_detect_kind(text, kind):
    assert detect_kind(text) == kind


@pytest.mark.parametrize("text,msg", [
    ("", "empty"), ("  \n\t\n", "empty"), ("abc\x00def", "binary"),
    ("just some notes\nnothing else\n", "not a file ncdoc knows"),
    ('{"a": 1', "not valid JSON"), ('{"a": 1}', "neither an ncdoc snapshot"),
])
def test_detect_kind_refuses_with_one_line(text, msg):
    with pytest.raises(InputError) as exc:
        detect_kind(text)
    assert msg in str(exc.value) and "\n" not in exc.value.message


def test_import_text_sections_and_provenance():
    imp = import_text(TOPO_NEW, source="topo.txt")
    assert imp.kind == "topo_matrix" and imp.source == "import:topo_matrix:topo.txt"
    assert imp.snapshot.paths.status.source == "import:topo_matrix:topo.txt"
    assert imp.snapshot.hcas.status.state == "unknown"
    imp = import_text(IBSTATUS, source="ibs.txt")
    assert imp.tool == "ibstatus" and imp.snapshot.hcas.status.state == "ok"
    assert imp.snapshot.pci.status.state == "unknown"
    with pytest.raises(InputError, match="triage"):
        import_text("x:1:1 [0] NCCL INFO NET/IB : No device found.\n")


def test_import_evidence_reads_files_and_snapshots(tmp_path):
    f = tmp_path / "topo.txt"
    f.write_text(TOPO_NEW)
    assert import_evidence(f).paths.labels[0] == "GPU0"
    snap = Snapshot(origin="live", hcas=HcaSection(Status.ok("sysfs"), (Hca("mlx5_0"),)))
    j = tmp_path / "snap.json"
    j.write_text(snap.to_json())
    assert import_evidence_detail(j).kind == "snapshot_json"
    assert import_evidence(j) == snap
    with pytest.raises(InputError, match="snap2.json"):
        (tmp_path / "snap2.json").write_text(json.dumps({"schema_version": 99, "host": {}}))
        import_evidence(tmp_path / "snap2.json")


def test_nccl_topo_xml_with_gpu_nic_and_nvlink_elements():
    xml = """<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:15:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1"><nvlink target="0000:05:00.0" count="18" tclass="0x068000"/></gpu>
      </pci>
      <pci busid="0000:17:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x1234" maxconn="131072" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffff0000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:9a:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1" gdr="1"><nvlink target="0000:05:00.0" count="18" tclass="0x068000"/></gpu>
    </pci>
  </cpu>
</system>"""
    imp = import_text(xml, source="dump.xml")
    snap = imp.snapshot
    assert imp.kind == "nccl_topo_xml" and not imp.truncated
    g0 = snap.gpus.gpus[0]
    assert (g0.compute_capability, g0.numa_node, len(g0.nvlinks), g0.nvlinks[0].remote_type) == ("9.0", 0, 18, "switch")
    (h,) = snap.hcas.hcas
    assert (h.name, h.pci_address, h.numa_node, h.ports[0].rate_gbps) == ("mlx5_0", "0000:17:00.0", 0, 400.0)
    assert snap.numa.nodes[0].cpulist == "0-15" and snap.numa.nodes[1].cpulist == "16-31"
    topo = classify(snap)
    assert topo.path("GPU0", "GPU1") == "NV18"
    assert topo.nearest_nic("GPU0") == ("mlx5_0", "PIX")
    assert topo.path("GPU1", "mlx5_0") == "SYS"
    cut = import_text(xml[: xml.index("<cpu numaid=\"1\"")], source="cut.xml")
    assert cut.truncated and len(cut.snapshot.gpus.gpus) == 1


def test_merge_combines_evidence_of_one_node():
    topo = import_text(TOPO_NEW, source="t").snapshot
    ports = import_text(IBSTATUS.replace("mlx5_3", "mlx5_0"), source="s").snapshot
    gids = import_text(SHOW_GIDS, source="g").snapshot
    m = merge(merge(topo, ports), gids)
    assert m.paths.labels == topo.paths.labels
    (h,) = m.hcas.hcas
    p = h.ports[0]
    assert p.state == "ACTIVE" and p.rate_gbps == 100.0
    assert {g.index for g in p.gids} == {0, 3}
    assert next(g for g in p.gids if g.index == 0).netdev == "ens1f0"   # filled in from show_gids
    assert "s" in m.hcas.status.source and "g" in m.hcas.status.source
    assert port_facts(m)[0]["device"] == "mlx5_0"
    # an unknown section never beats a known one, whichever side it is on
    assert merge(ports, topo).paths.status.state == "ok"
    assert merge(Snapshot(), ports).hcas == ports.hcas


def test_merge_keeps_different_hcas_and_ports():
    a = Snapshot(hcas=HcaSection(Status.ok("a"), (Hca("mlx5_0", ports=(Port(1, state="ACTIVE"),)),)))
    b = Snapshot(hcas=HcaSection(Status.ok("b"), (Hca("mlx5_0", fw_ver="1.2", ports=(Port(2),)),
                                                 Hca("mlx5_1"))))
    m = merge(a, b)
    assert [h.name for h in m.hcas.hcas] == ["mlx5_0", "mlx5_1"]
    assert m.hcas.hcas[0].fw_ver == "1.2" and [p.num for p in m.hcas.hcas[0].ports] == [1, 2]
