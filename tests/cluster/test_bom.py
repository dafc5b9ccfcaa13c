"""The acceptance record: a BOM of the cluster and its benchmark results; diff says what changed and
whether the acceptance benchmark must be rerun."""

import json

import pytest

from cluster_helpers import write_snapshots
from ncdoc.cli.main import main

TESTS_OUT = """\
# nccl-tests version 2.19.6 nccl-headers=22105 nccl-library=22105
# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on     node01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1001 on     node02 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
  1073741824     268435456     float     sum      -1   5600.0  191.74  191.74       0   5600.0  191.74  191.74       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 191.74 
#
"""


@pytest.fixture()
def recorded(tmp_path, capsys):
    before = tmp_path / "before"
    write_snapshots(before, {"example": "dgx-h100", "nodes": 8})
    (tmp_path / "all_reduce.txt").write_text(TESTS_OUT)
    bom = tmp_path / "bom.json"
    assert main(["cluster", "bom", str(before), "--results", str(tmp_path / "all_reduce.txt"), "-o", str(bom)]) == 0
    capsys.readouterr()
    return bom


def test_the_bom_holds_shape_attributes_and_results(recorded):
    doc = json.loads(recorded.read_text())
    assert doc["kind"] == "ncdoc-bom" and doc["shape"]["node_count"] == 8 and doc["shape"]["ranks"] == 64
    assert doc["reference"]["versions.nccl"] == "2.21.5"
    assert doc["nodes"]["node03"] == {}                         # identical nodes cost nothing
    assert doc["results"][0]["peak_busbw_gbps"] == 191.74 and doc["results"][0]["nranks"] == 2


def test_unchanged_cluster_keeps_the_result(tmp_path, recorded, capsys):
    assert main(["cluster", "diff", str(recorded), str(tmp_path / "before")]) == 0
    assert "no change since the record" in capsys.readouterr().out


def test_a_firmware_change_asks_for_a_rerun(tmp_path, recorded, capsys):
    now = tmp_path / "now"
    write_snapshots(now, {"example": "dgx-h100", "nodes": 8,
                          "patch": {"node04": {"hcas.hcas.3.fw_ver": "28.41.1000"}}})
    assert main(["cluster", "diff", str(recorded), str(now)]) == 1
    out = capsys.readouterr().out
    assert "* node04  mlx5_3 firmware: 28.39.1002 -> 28.41.1000" in out
    assert out.strip().splitlines()[-1].startswith("rerun the acceptance benchmark:")


def test_a_change_that_does_not_touch_nccl(tmp_path, recorded, capsys):
    now = tmp_path / "now"
    write_snapshots(now, {"example": "dgx-h100", "nodes": 8, "patch": {"node02": {"host.os": "Ubuntu 22.04.5 LTS"}}})
    assert main(["cluster", "diff", str(recorded), str(now), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rerun"] is False and [c["attribute"] for c in doc["changes"]] == ["host.os"]


def test_nodes_added_or_gone(tmp_path, recorded, capsys):
    now = tmp_path / "now"
    write_snapshots(now, {"example": "dgx-h100", "nodes": 9})
    (now / "node02.json").unlink()
    assert main(["cluster", "diff", str(recorded), str(now), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["added_nodes"] == ["node09"] and doc["removed_nodes"] == ["node02"]


def test_env_set_on_one_node_since(tmp_path, recorded, capsys):
    now = tmp_path / "now"
    write_snapshots(now, {"example": "dgx-h100", "nodes": 8, "env": {"node05": {"NCCL_IB_QPS_PER_CONNECTION": "4"}}})
    assert main(["cluster", "diff", str(recorded), str(now), "--json"]) == 1
    change = json.loads(capsys.readouterr().out)["changes"][0]
    assert change == {"node": "node05", "attribute": "env.NCCL_IB_QPS_PER_CONNECTION", "label":
                      "NCCL_IB_QPS_PER_CONNECTION", "before": "(unset)", "after": "4", "affects_nccl": True}


def test_not_a_bom(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    assert main(["cluster", "diff", str(tmp_path / "x.json"), str(tmp_path)]) == 2
    assert "not an ncdoc bill of materials" in capsys.readouterr().err
