"""`ncdoc cluster check` over files: the drift matrix in three formats, golden nodes, exit codes, and
the bad inputs (mixed schema versions, a hostname twice, an empty folder) that exit 2 after the report."""

import json
import re

import pytest

from cluster_helpers import write_snapshots
from ncdoc.cli.main import main


@pytest.fixture(scope="module")
def drifted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snaps")
    write_snapshots(folder, {"example": "dgx-h100", "nodes": 12,
                             "patch": {"node07": {"host.modules.nvidia_peermem": False},
                                       "node11": {"hcas.hcas.3.ports.0.rate_gbps": 200.0}},
                             "env": {"node04": {"NCCL_IB_HCA": None}}})
    return folder


def test_text_report_names_the_odd_nodes_in_the_matrix_and_the_findings(drifted, capsys):
    rc = main(["cluster", "check", str(drifted), "--color", "never"])
    out = capsys.readouterr().out
    assert rc == 1                                    # peermem drift is an error
    matrix = out.split("Drift matrix")[1].split("\n\n")[0]
    rows = {line.split()[0]: line for line in matrix.splitlines()[3:]}
    assert set(rows) == {"(reference)", "node04", "node07", "node11"}
    assert "not loaded" in rows["node07"] and "200 Gb/s" in rows["node11"] and "(unset)" in rows["node04"]
    assert "peermem-drift" in out and "link-rate-drift" in out and "nccl-env-drift" in out


def test_json_carries_reference_odd_nodes_and_the_matrix(drifted, capsys):
    rc = main(["cluster", "check", str(drifted), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["schema_version"] == 1
    drift = {d["attribute"]: d for d in doc["facts"]["drift"]}
    assert drift["host.peermem"]["reference"] == "nvidia_peermem" and drift["host.peermem"]["odd"] == ["node07"]
    assert doc["facts"]["matrix"]["rows"]["node11"]["port.mlx5_3:1.rate"] == "200 Gb/s"
    assert len(doc["facts"]["matrix"]["rows"]) == 12
    assert {f["name"] for f in doc["findings"]} >= {"peermem-drift", "link-rate-drift", "nccl-env-drift"}


def test_markdown_table(drifted, capsys):
    main(["cluster", "check", str(drifted), "--format", "markdown"])
    out = capsys.readouterr().out
    assert "| node07 |" in out.replace("  ", " ") or "| node07" in out


def test_golden_node_overrides_the_majority(tmp_path, capsys):
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 4,
                               "patch": {n: {"versions.nccl": "2.23.4"} for n in ("node02", "node03", "node04")}})
    main(["cluster", "check", str(tmp_path), "--golden", "node01", "--json"])
    doc = json.loads(capsys.readouterr().out)
    nccl = next(d for d in doc["facts"]["drift"] if d["attribute"] == "versions.nccl")
    assert nccl["basis"] == "golden" and nccl["reference"] == "2.21.5"
    assert nccl["odd"] == ["node02", "node03", "node04"]


def test_fail_on_and_clean_clusters(tmp_path, capsys):
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 4})
    assert main(["cluster", "check", str(tmp_path)]) == 0
    assert "every node agrees" in capsys.readouterr().out
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 4, "patch": {"node02": {"host.kernel": "6.8.0"}}})
    assert main(["cluster", "check", str(tmp_path)]) == 0          # kernel drift is info
    assert main(["cluster", "check", str(tmp_path), "--fail-on", "info"]) == 1


def test_mixed_schema_versions_and_duplicate_hostnames_exit_2_after_the_report(tmp_path, capsys):
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 3})
    old = json.loads((tmp_path / "node03.json").read_text())
    old["schema_version"] = 0
    (tmp_path / "node03.json").write_text(json.dumps(old))
    (tmp_path / "copy-of-node02.json").write_text((tmp_path / "node02.json").read_text())
    rc = main(["cluster", "check", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.startswith("ncdoc: error:")]
    assert len(lines) == 2
    assert any("node03.json" in ln and "schema_version 0" in ln for ln in lines)
    assert any("duplicate hostname node02" in ln for ln in lines)
    assert "Traceback" not in err
    assert "Not read" in out and re.search(r"answered:\s+2\b", out)          # the rest was still compared


def test_empty_folder_and_missing_path(tmp_path, capsys):
    assert main(["cluster", "check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no usable node snapshot" in err and "no *.json" in err
    assert main(["cluster", "check", str(tmp_path / "nope")]) == 2


def test_srun_per_node_files_read_back(tmp_path, capsys):
    """`ncdoc snapshot -o snaps/%h.json` (what srun runs on each node) writes the folder check reads."""
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    assert main(["snapshot", "--example", "dgx-h100", "-o", str(snaps / "%h.json")]) == 0
    assert main(["snapshot", "--example", "l40s-pcie", "-o", str(snaps / "%h.json")]) == 0
    names = sorted(p.name for p in snaps.iterdir())
    assert len(names) == 2 and all(not n.startswith("%") for n in names)
    capsys.readouterr()
    assert main(["cluster", "check", str(snaps), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert {f["name"] for f in doc["findings"]} >= {"gpu-inventory-drift"}


def test_percent_h_expansion():
    from ncdoc.cli.commands.snapshot import output_path
    from ncdoc.engine.cases import fixture
    snap = fixture("dgx-h100")
    assert output_path("snaps/%h.json", snap) == f"snaps/{snap.host.hostname}.json"
    assert output_path("100%%-%h", snap) == f"100%-{snap.host.hostname}"
    assert output_path("plain.json", snap) == "plain.json"


def test_checking_files_needs_no_ray(tmp_path):
    """Comparing snapshots is pure: neither Ray nor the launchers are imported for it."""
    import subprocess
    import sys
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 2})
    code = ("import sys; from ncdoc.cli.main import main; rc = main(['cluster', 'check', %r]); "
            "bad = [m for m in ('ray', 'optuna', 'ncdoc.cluster.ray_nodes', 'ncdoc.cluster.slurm') if m in sys.modules]; "
            "print('LOADED', bad); sys.exit(0 if not bad and rc == 0 else 3)" % str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]


def test_per_node_findings_are_reported_once_with_their_nodes(tmp_path, capsys):
    write_snapshots(tmp_path, {"example": "dgx-h100", "nodes": 6,
                               "patch": {n: {"hcas.hcas.4.ports.0.state": "DOWN"} for n in ("node02", "node05")}})
    main(["cluster", "check", str(tmp_path), "--per-node", "--json"])
    doc = json.loads(capsys.readouterr().out)
    down = [f for f in doc["findings"] if f["name"] == "port-down"]
    assert len(down) == 1 and down[0]["message"].startswith("on node02, node05: ")
    assert any(f["name"] == "port-state-drift" for f in doc["findings"])
