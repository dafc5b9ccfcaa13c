"""`ncdoc topo`: exit codes, stdout and stderr checked separately."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paths import SHARED
from ncdoc.cli.main import main
from ncdoc.snapshot import (Gpu, GpuSection, Hca, HcaSection, NumaNode, NumaSection, PciDevice, PciSection,
                            Port, Snapshot, Status)

CORPUS = SHARED / "corpus"
NCCL_XML = SHARED / "topology" / "nccl-xml"

TOPO = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\tPIX\t0-47\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
        "NIC0\tPIX\tSYS\t X \t\t\t\t\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
IBSTAT = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
          "\t\tRate: 400\n\t\tBase lid: 7\n\t\tSM lid: 1\n\t\tLink layer: InfiniBand\n")


def run(capsys, *argv):
    rc = main(["topo", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def files(tmp_path):
    (tmp_path / "topo.txt").write_text(TOPO)
    (tmp_path / "ibstat.txt").write_text(IBSTAT)
    return tmp_path


def test_text_report(capsys, files):
    rc, out, err = run(capsys, files / "topo.txt", files / "ibstat.txt")
    assert rc == 0 and err == ""
    assert "NV18" in out and "NIC Legend" in out and "NIC0: mlx5_0" in out
    assert "mlx5_0" in out and "PIX" in out and "ACTIVE" in out and "400 Gb/s" in out


def test_json_facts(capsys, files):
    rc, out, err = run(capsys, files / "topo.txt", files / "ibstat.txt", "--json")
    assert rc == 0 and err == ""
    doc = json.loads(out)
    assert doc["schema_version"] == 1 and doc["truncated"] is False
    assert [i["kind"] for i in doc["inputs"]] == ["topo_matrix", "ibv_devinfo"]
    assert doc["inputs"][1]["tool"] == "ibstat"
    f = doc["facts"]
    assert f["matrix"]["GPU0"]["NIC0"] == "PIX" and f["nic_names"] == {"NIC0": "mlx5_0"}
    assert f["rails"]["GPU0"] == {"nics": ["mlx5_0"], "path": "PIX"}
    assert f["numa"] == {"GPU0": 0, "GPU1": 1, "NIC0": 0}
    assert f["ports"] == [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                           "rate_gbps": 400.0, "link_layer": "InfiniBand"}]


def test_truncated_input_is_said(capsys, files):
    (files / "cut.txt").write_text(TOPO[: TOPO.index("NIC0\tPIX")] + "NIC0\tPI")
    rc, out, err = run(capsys, files / "cut.txt", "--json")
    assert rc == 0 and json.loads(out)["truncated"] is True
    assert "truncated" in err and err.count("\n") == 1


@pytest.mark.parametrize("content,message", [
    (None, "no such file"), ("", "empty"), (b"\x7fELF\x00\x01\x02" * 50, "binary"),
    ("what a lovely day\n", "not a file ncdoc knows"), ('{"broken": ', "not valid JSON"),
    ("node:1:1 [0] NCCL INFO NET/IB : No device found.\n", "ncdoc triage"),
])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, content, message):
    f = tmp_path / "input"
    if isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    rc, out, err = run(capsys, f)
    assert rc == 2 and out == ""
    assert message in err and err.startswith("ncdoc: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2        # the message, and at most one "Cause:" line


def test_snapshot_option_and_bad_snapshot(capsys, tmp_path):
    snap = Snapshot(
        gpus=GpuSection(Status.ok("t"), (Gpu(0, "NVIDIA H100", "0000:18:00.0", numa_node=0),)),
        hcas=HcaSection(Status.ok("t"), (Hca("mlx5_0", pci_address="0000:19:00.0", ports=(Port(1, "DOWN"),)),)),
        pci=PciSection(Status.ok("t"), (PciDevice("0000:17:00.0", "pci0000:17", kind="bridge", numa_node=0),
                                        PciDevice("0000:18:00.0", "0000:17:00.0", kind="gpu", numa_node=0),
                                        PciDevice("0000:19:00.0", "0000:17:00.0", kind="nic", numa_node=0))),
        numa=NumaSection(Status.ok("t"), (NumaNode(0, "0-63"),)))
    (tmp_path / "s.json").write_text(snap.to_json())
    rc, out, err = run(capsys, "--snapshot", tmp_path / "s.json", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["source"] == "pci" and doc["facts"]["matrix"]["GPU0"]["NIC0"] == "PIX"
    assert doc["facts"]["ports"][0]["state"] == "DOWN"
    (tmp_path / "bad.json").write_text("{nope")
    rc, out, err = run(capsys, "--snapshot", tmp_path / "bad.json")
    assert rc == 2 and "not valid JSON" in err and out == ""


def test_live_probe_is_used_without_arguments(capsys, monkeypatch):
    live = pytest.importorskip("ncdoc.probes.live")
    snap = Snapshot(hcas=HcaSection(Status.ok("sysfs"), (Hca("mlx5_0", ports=(Port(1, "ACTIVE"),)),)))
    monkeypatch.setattr(live, "capture", lambda **kw: snap)
    rc, out, err = run(capsys, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["inputs"] == [{"path": None, "kind": "live"}]
    assert doc["status"]["state"] == "unknown" and doc["facts"]["ports"][0]["device"] == "mlx5_0"


@pytest.mark.skipif(not (CORPUS / "EXPECT.json").is_file(), reason="../shared/corpus not present")
def test_corpus_case_through_the_cli(capsys):
    rc, out, _ = run(capsys, CORPUS / "nccl-667-pxb-pix-p2p-hang-vtd" / "artifact.txt", "--json")
    m = json.loads(out)["facts"]["matrix"]
    assert rc == 0 and (m["GPU0"]["GPU1"], m["GPU0"]["GPU2"], m["GPU2"]["GPU3"]) == ("PXB", "SYS", "PIX")


@pytest.mark.skipif(not NCCL_XML.is_dir(), reason="../shared/topology not present")
def test_nccl_xml_through_the_cli(capsys):
    rc, out, err = run(capsys, NCCL_XML / "azure-ndv5-topo.xml")
    assert rc == 0 and "PIX" in out and "PHB" in out and "SYS" in out


def test_no_heavy_imports(files):
    code = ("import sys; from ncdoc.cli.main import main; "
            f"rc = main(['topo', {str(files / 'topo.txt')!r}, '--json']); "
            "heavy = [m for m in ('ray', 'optuna', 'pynvml', 'pyverbs') if m in sys.modules]; "
            "sys.stderr.write(repr((rc, heavy)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    rc, heavy = eval(p.stderr.strip().splitlines()[-1])
    assert rc == 0 and heavy == []


def test_bundled_example_machine(capsys):
    machines = pytest.importorskip("ncdoc.examples.machines")
    names = [n for n, _ in machines.list_examples()]
    if "dgx-h100" not in names:
        pytest.skip("no dgx-h100 example bundled")
    rc, out, err = run(capsys, "--example", "dgx-h100", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["source"] == "pci" and doc["inputs"] == [{"kind": "example", "name": "dgx-h100"}]
    m = doc["facts"]["matrix"]
    assert m["GPU0"]["GPU1"] == "NV18" and doc["facts"]["rails"]["GPU0"]["path"] == "PIX"
    assert all(doc["facts"]["rails"][f"GPU{i}"]["path"] == "PIX" for i in range(8))
