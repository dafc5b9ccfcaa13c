"""Property: on any text, detection and every importer either succeed or raise InputError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncdoc.errors import InputError
from ncdoc.importers import NODE_KINDS, import_text
from ncdoc.importers import detect_kind
from ncdoc.topology import classify

# fragments of the real formats, so generated texts get deep into each parser
FRAGMENTS = [
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n", "GPU0\t X \tNV18\tPIX\t0-3\t0\n", "GPU1 SOC X PHB 0\n",
    "NIC0\tPIX\tSYS\t X \n", "NIC Legend:\n  NIC0: mlx5_0\n", "mlx5_0  PHB  SOC  X\n", "PIXNODE", " X ",
    "hca_id:\tmlx5_0\n", "\t\tport:\t1\n", "\t\t\tstate:\t\tPORT_ACTIVE (4)\n", "active_width: 4X (2)\n",
    "active_speed: 25.0 Gbps (32)\n", "GID[  0]:\tfe80::1, RoCE v2\n", "link_layer: Ethernet\n",
    "CA 'mlx5_1'\n", "\tPort 1:\n", "\t\tState: Active\n", "\t\tRate: 400\n", "Base lid: 0x1a\n",
    "Infiniband device 'mlx5_0' port 1 status:\n", "\trate:\t 200 Gb/sec (4X HDR)\n",
    "DEV\tPORT\tINDEX\tGID\tIPv4\tVER\tDEV\n", "mlx5_0\t1\t3\t::ffff:10.0.0.1\t10.0.0.1\tv2\teth0\n",
    "0 HCAs found:\n", '<system version="1">', '<cpu numaid="0" affinity="ff">', '<pci busid="0000:18:00.0" class="0x030200">',
    '<gpu dev="0" sm="90"><nvlink target="0000:05:00.0" count="18" tclass="0x068000"/></gpu>',
    '<nic><net name="mlx5_0" speed="400000" port="1"/></nic>', "</pci>", "</cpu>", "</system>",
    '<topology version="2.0">', '<object type="Package" nodeset="0x1">',
    '<object type="Bridge" bridge_type="0-1" bridge_pci="0000:[44-5c]">',
    '<object type="PCIDev" pci_busid="0000:59:00.0" pci_type="0302 [10de:2335] [10de:18be] a1">',
    '<object type="OSDev" name="mlx5_0" osdev_type="3"><info name="Port1State" value="4"/></object>',
    "</object>", "</topology>", '{"schema_version": 1, "host": {}}', "NCCL INFO", "export NCCL_X=1\n",
    "\t\tRate: 1..2\n", "\trate:\t 1.2.3 Gb/sec (4X\n", "active_speed: 1.5.0 Gbps (99)\n",
    "\x00", "\ufffd", "²", "٣", "0x", "08", "\n", "\t", " ",
]

texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=25).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.sampled_from((None,) + NODE_KINDS))
def test_importers_raise_only_input_errors(text, kind):
    try:
        imp = import_text(text, source="fuzz", kind=kind)
    except InputError:
        return
    classify(imp.snapshot)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_detect_kind_raises_only_input_errors(text):
    try:
        detect_kind(text)
    except InputError:
        pass
