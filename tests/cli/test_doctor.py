"""`ncdoc doctor`: topology summary, findings in the expert's order with evidence and fix, skips."""

from __future__ import annotations

import json

import pytest

from ncdoc.cli.main import main


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NCDOC_RULES", raising=False)


def test_report_sections_in_order(capsys):
    rc = main(["doctor", "--example", "dgx-h100-port-down", "--env", "NCCL_IB_GID_INDEX=3", "--color", "never"])
    out = capsys.readouterr().out
    assert rc == 1
    order = [out.index(s) for s in ("Node", "GPUs", "RDMA ports", "GPU to nearest NIC",
                                    "RDMA path or TCP fallback", "Link health", "Settings", "Skipped")]
    assert order == sorted(order)
    assert "evidence: mlx5_4 port 1: DOWN / Polling" in out and "fix:" in out
    assert "no NCCL log given (" in out                           # skipped, grouped by reason
    assert "mlx5_4:1" in out and "GPU2" in out


def test_json_and_markdown(capsys):
    assert main(["doctor", "--example", "l40s-nic-other-socket", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1 and "RDMA ports" in data["facts"]
    assert [f["name"] for f in data["findings"]] == ["gpu-without-local-nic"]
    assert main(["doctor", "--example", "l40s-nic-other-socket", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "## GPU to nearest NIC" in md and "| GPU0" in md


def test_env_show(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for k in [k for k in __import__("os").environ if k.startswith("NCCL_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    (tmp_path / ".nccl.conf").write_text("NCCL_DEBUG=WARN\nNCCL_IB_TIMEOUT=22\n")
    assert main(["env", "show", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    vals = {v["name"]: v for v in data["values"]}
    assert vals["NCCL_DEBUG"]["source"] == "env" and vals["NCCL_IB_TIMEOUT"]["line"] == 2
    assert data["shadowed"][0]["value"] == "WARN"
    assert main(["env", "show"]) == 0
    out = capsys.readouterr().out
    assert "NCCL_IB_TIMEOUT" in out and "overridden" in out


def test_env_needs_an_action(capsys):
    assert main(["env"]) == 2
    assert "show or generate" in capsys.readouterr().err


def test_the_job_section_says_why_network_findings_are_info(capsys, monkeypatch):
    monkeypatch.setenv("SLURM_NNODES", "1")
    rc = main(["doctor", "--example", "dgx-h100-port-down", "--color", "never"])
    out = capsys.readouterr().out
    assert rc == 0
    job = out[out.index("\nJob\n"):out.index("RDMA path or TCP fallback")]
    assert "one node (SLURM_NNODES=1)" in job and "3 findings judged so" in job
    assert "INFO NC4004 port-down" in out and "info here: the job runs on one node" in out
    monkeypatch.delenv("SLURM_NNODES")
    assert main(["doctor", "--example", "dgx-h100-port-down", "--color", "never"]) == 1
    out = capsys.readouterr().out
    assert "not stated" in out and "at their own severity" in out and "ERROR NC4004 port-down" in out
