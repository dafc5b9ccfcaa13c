"""Golden tests on the real evidence corpus: every case's kind is detected, and every node-evidence
case imports and yields the facts EXPECT.json names (matrix cells, port states)."""

from __future__ import annotations

import json

import pytest

from ncdoc.importers import import_evidence_detail
from ncdoc.importers import detect_kind
from ncdoc.readers.textfile import read_user_text
from ncdoc.topology import classify, port_facts
from paths import SHARED

CORPUS = SHARED / "corpus"
EXPECT = json.loads((CORPUS / "EXPECT.json").read_text()) if (CORPUS / "EXPECT.json").is_file() else {}

pytestmark = pytest.mark.skipif(not EXPECT, reason="../shared/corpus not present")

ALL = sorted(EXPECT)
NODE = sorted(c for c, e in EXPECT.items() if e["kind"] in ("topo_matrix", "ibv_devinfo"))


@pytest.mark.parametrize("case", ALL)
def test_kind_is_detected(case):
    assert detect_kind(read_user_text(CORPUS / case / "artifact.txt")) == EXPECT[case]["kind"]


def _facts(imp):
    topo = classify(imp.snapshot)
    return {**topo.facts(), "ports": port_facts(imp.snapshot)}, topo


@pytest.mark.parametrize("case", NODE)
def test_node_evidence_imports_with_expected_facts(case):
    imp = import_evidence_detail(CORPUS / case / "artifact.txt")
    facts, topo = _facts(imp)
    want = EXPECT[case].get("facts", {})
    for row, cols in want.get("matrix", {}).items():
        for col, path in cols.items():
            assert facts["matrix"][row][col] == path, (row, col)
    for port in want.get("ports", []):
        got = [p for p in facts["ports"] if p["device"] == port["device"]]
        assert got, port["device"]
        for key, value in port.items():
            assert got[0][key] == value, (port["device"], key)
    if imp.kind == "topo_matrix":
        assert topo.status.state == "ok" and topo.gpus()


def test_matrix_cells_match_the_raw_text_everywhere():
    """Every cell of every corpus matrix equals the token in the text (SOC read as SYS)."""
    for case in (c for c in NODE if EXPECT[c]["kind"] == "topo_matrix"):
        lines = (CORPUS / case / "artifact.txt").read_text().splitlines()
        pm = import_evidence_detail(CORPUS / case / "artifact.txt").snapshot.paths
        labels = list(pm.labels)
        for ln in lines:
            tok = ln.split()
            if tok and tok[0] in pm.matrix and (len(tok) < 2 or tok[1] not in labels):
                for col, cell in zip(labels, tok[1:]):
                    if col in pm.matrix[tok[0]]:
                        assert pm.matrix[tok[0]][col] == ("SYS" if cell == "SOC" else cell), (case, tok[0], col)


def test_corpus_specifics():
    def imp(case):
        return import_evidence_detail(CORPUS / case / "artifact.txt")

    cut = imp("nccl-1264-hgx-h100-10nic-topo")
    assert cut.truncated and cut.snapshot.paths.truncated
    assert classify(cut.snapshot).rails["GPU3"] == ("NIC5",)
    assert not imp("nccl-595-a100-4gpu-2nic-topo-nic-locality").truncated
    assert imp("nccl-tests-251-v100-4gpu-2nic-topo").truncated        # cut inside the Legend
    old = classify(imp("nccl-243-6gpu-2nic-topo-ib-5.7GBps").snapshot)
    assert old.nearest_nic("GPU2") == ("mlx5_0", "PIX") and old.path("GPU0", "mlx5_1") == "SYS"
    slurm = classify(imp("slurmv4-hgx-nv18-12nic-topo-pix-per-gpu").snapshot)
    assert [slurm.rails[f"GPU{i}"] for i in range(8)] == [
        ("mlx5_0",), ("mlx5_1",), ("mlx5_2",), ("mlx5_5",), ("mlx5_6",), ("mlx5_7",), ("mlx5_8",), ("mlx5_11",)]
    none = imp("caffe-590-container-no-userspace-verbs-driver")
    assert none.snapshot.hcas.status.state == "absent" and "0 HCAs" in none.snapshot.hcas.status.reason
    down = imp("deepep-38-ibv-devinfo-port-down")
    assert down.truncated and port_facts(down.snapshot)[0]["state"] == "DOWN"
    gids = imp("nccl-1510-show-gids-rocev1-v2").snapshot.hcas.hcas[0].ports[0].gids
    assert [(g.index, g.type, g.ipv4) for g in gids][:2] == [(4, "IB/RoCE v1", "10.12.0.21"),
                                                             (5, "RoCE v2", "10.12.0.21")]
    mixed = port_facts(imp("nccl-1412-ibstatus-mixed-ib-and-eth-ports").snapshot)
    assert [p["rate_gbps"] for p in mixed] == [200.0, 200.0, 200.0, 40.0]
    gb10 = {p["device"]: p for p in port_facts(imp("sbc-reviews-92-gb10-ibstat-one-port-down").snapshot)}
    assert gb10["roceP2p1s0f1"]["state"] == "DOWN" and gb10["rocep1s0f0"]["link_layer"] == "Ethernet"
