"""Each fixture machine, captured and reloaded, shows the matrix `nvidia-smi topo -m` shows on such a machine."""

import json

import pytest

from ncdoc.examples.machines import list_examples, load_example
from ncdoc.snapshot import Snapshot
from ncdoc.topology import classify

EXAMPLES = [name for name, _ in list_examples()]


@pytest.fixture(scope="module")
def topologies():
    out = {}
    for name in EXAMPLES:
        snap = load_example(name)
        again = Snapshot.from_dict(json.loads(snap.to_json()))
        out[name] = (classify(snap), classify(again))
    return out


@pytest.mark.parametrize("name", EXAMPLES)
def test_topology_survives_the_snapshot_file(name, topologies):
    live, loaded = topologies[name]
    assert loaded.matrix == live.matrix
    assert loaded.rails == live.rails
    assert loaded.nic_names == live.nic_names


def _gpu_rows(topo):
    return [e.label for e in topo.endpoints if e.kind == "gpu"]


def test_dgx_h100_matches_nvidia_smi(topologies):
    topo, _ = topologies["dgx-h100"]
    gpus = _gpu_rows(topo)
    assert len(gpus) == 8
    for g in gpus:
        row = topo.matrix[g]
        assert all(row[h] == "NV18" for h in gpus if h != g)          # NVSwitch: NV18 between all GPUs
        assert sum(1 for k, v in row.items() if k.startswith("NIC") and v == "PIX") == 1
        assert set(v for k, v in row.items() if k.startswith("NIC")) == {"PIX", "NODE", "SYS"}


def test_l40s_has_no_nvlink_and_pairs_under_switches(topologies):
    topo, _ = topologies["l40s-pcie"]
    gpus = _gpu_rows(topo)
    cells = [topo.matrix[a][b] for a in gpus for b in gpus if a != b]
    assert not any(c.startswith("NV") for c in cells)
    assert "PIX" in cells and "SYS" in cells


def test_workstation_has_no_nic_columns(topologies):
    topo, _ = topologies["workstation-2gpu"]
    assert not [e for e in topo.endpoints if e.kind == "nic"]


def test_azure_vm_hides_the_real_pairing(topologies):
    topo, _ = topologies["azure-ndv5"]
    cells = {v for g in _gpu_rows(topo) for k, v in topo.matrix[g].items() if k.startswith("NIC")}
    assert cells and cells <= {"NODE", "SYS", "PHB"}                 # flat virtual PCI: no PIX/PXB
