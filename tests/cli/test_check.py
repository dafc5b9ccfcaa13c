"""`ncdoc check`: the pre-launch gate: problems only, one line each, exit 0 / 1 / 2, --json, speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncdoc.cli.main import main
from paths import ROOT



@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    import os
    for k in list(os.environ):
        if k.startswith("NCDOC_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def run(capsys, *argv):
    rc = main(["check", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_healthy_node_prints_nothing(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100")
    assert rc == 0 and out == "" and "0 problems" in err


def test_broken_node_one_line_per_problem(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down")
    lines = out.splitlines()
    assert rc == 1 and len(lines) == 3
    assert lines[0].startswith("ERROR   NC4004 port-down: mlx5_4 port 1 is DOWN")
    assert all(" NC" in line for line in lines)


def test_fail_on_threshold(capsys):
    assert run(capsys, "--example", "dgx-h100-half-rate")[0] == 0          # warnings only
    assert run(capsys, "--example", "dgx-h100-half-rate", "--fail-on", "warning")[0] == 1
    assert run(capsys, "--example", "dgx-h100-port-down", "--fail-on", "none")[0] == 0


def test_quiet(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--quiet")
    assert rc == 1 and out == "" and err == ""


def test_json_schema(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--json")
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["summary"]["error"] == 1
    f = next(x for x in data["findings"] if x["code"] == "NC4004")
    for key in ("code", "name", "severity", "message", "evidence", "fix", "docs", "subject", "stage"):
        assert key in f
    assert f["docs"] == "docs/rules/NC4004-port-down.md" and (ROOT / f["docs"]).is_file()


def test_env_overlay_and_snapshot_file(capsys, tmp_path):
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example("dgx-h100").to_json())
    rc, out, err = run(capsys, "--snapshot", str(snap), "--env", "NCCL_IB_DISABLE=1")
    assert rc == 1 and "NC1007 ib-disabled-by-env" in out
    rc, out, err = run(capsys, "--snapshot", str(snap), "--env-file", str(tmp_path / "nope.env"))
    assert rc == 2 and "no such file" in err


def test_bad_snapshot_exits_2(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, out, err = run(capsys, "--snapshot", str(bad))
    assert rc == 2 and out == "" and str(bad) in err and len(err.strip().splitlines()) == 1


def test_config_file_in_cwd_is_used(capsys, tmp_path):
    (tmp_path / "ncdoc.toml").write_text('[ignore]\nNC4004 = "cable on order"\n')
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down")
    assert "NC4004" not in out and rc == 0
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--no-config")
    assert "NC4004" in out and rc == 1


def test_colour_follows_no_color(capsys, monkeypatch):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--color", "always")
    assert "\033[" in out
    monkeypatch.setenv("NO_COLOR", "1")
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--color", "auto")
    assert "\033[" not in out


def test_markdown_format(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--format", "markdown")
    assert out.startswith("# ncdoc check") and "[port-down](docs/rules/NC4004-port-down.md)" in out


def test_check_path_stays_light(tmp_path):
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example("dgx-h100-port-down").to_json())
    code = ("import sys; from ncdoc.cli.main import main; rc = main(['check', '--snapshot', %r, '--no-config']); "
            "heavy = [m for m in ('ray', 'optuna', 'yaml', 'tabulate', 'pynvml', 'dataclasses_json') "
            "if m in sys.modules]; print('HEAVY', heavy); sys.exit(0 if not heavy and rc == 1 else 3)" % str(snap))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]


def test_prelaunch_script(tmp_path):
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example("dgx-h100-port-down").to_json())
    script = ROOT / "bin" / "ncdoc-prelaunch"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "NCDOC_SNAPSHOT": str(snap),
           "HOME": str(tmp_path)}
    p = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert p.returncode == 1 and "NC4004 port-down" in p.stdout + p.stderr
    healthy = tmp_path / "ok.json"
    healthy.write_text(load_example("dgx-h100").to_json())
    env["NCDOC_SNAPSHOT"] = str(healthy)
    p = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("command", [["check", "--example", "dgx-h100"], ["doctor", "--example", "dgx-h100"],
                                     ["lint", "--env", "NCCL_IB_HCA=mlx5_0"]])
def test_a_version_that_is_no_version_is_a_usage_error(capsys, command):
    rc = main([*command, "--nccl-version", "latest"])
    err = capsys.readouterr().err
    assert rc == 2 and "--nccl-version wants a version" in err and "internal error" not in err
