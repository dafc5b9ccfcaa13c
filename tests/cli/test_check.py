"""`ncdoc check`: the pre-launch gate: problems only, one line each, exit 0 / 1 / 2, --json, the job's
claims, bad input, the deadline."""

from __future__ import annotations

import json
import subprocess
import sys

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
    # a command that works after `pip install` (the generated pages are not in the wheel)
    assert f["docs"] == "ncdoc rule NC4004"
    assert main(["rule", "NC4004"]) == 0 and "port-down" in capsys.readouterr().out
    assert (ROOT / "docs" / "rules" / "NC4004-port-down.md").is_file()


def test_json_carries_what_a_fleet_compares(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--json", "--nccl-version", "2.21.5")
    data = json.loads(out)
    assert data["hostname"] == "dgx-h100-01" and data["version"] and data["nccl_version"] == "2.21.5"
    assert data["time"].endswith("+00:00") and data["decision"] == {"exit_code": 1, "ready": False, "fail_on": "error"}
    assert data["snapshot"]["origin"] == "example:dgx-h100-port-down"
    rc, out, err = run(capsys, "--example", "dgx-h100", "--json")
    assert rc == 0 and json.loads(out)["decision"]["ready"] is True


def test_text_report_points_at_the_rule_command(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--format", "text")
    assert "docs: ncdoc rule NC4004" in out and "docs/rules/" not in out


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
    assert out.startswith("# ncdoc check") and "**ERROR NC4004 port-down**" in out
    assert "docs: `ncdoc rule NC4004`" in out and "docs/rules/" not in out


def test_force_color_beside_no_color(capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down")          # captured: not a terminal
    assert "\033[" in out
    monkeypatch.setenv("NO_COLOR", "1")                                      # NO_COLOR wins
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down")
    assert "\033[" not in out
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--color", "always")
    assert "\033[" in out


def test_check_path_stays_light(tmp_path):
    from ncdoc.examples.machines import load_example
    snap = tmp_path / "node.json"
    snap.write_text(load_example("dgx-h100-port-down").to_json())
    code = ("import sys; from ncdoc.cli.main import main; rc = main(['check', '--snapshot', %r, '--no-config']); "
            "heavy = [m for m in ('ray', 'optuna', 'yaml', 'tabulate', 'pynvml', 'dataclasses_json') "
            "if m in sys.modules]; print('HEAVY', heavy); sys.exit(0 if not heavy and rc == 1 else 3)" % str(snap))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-500:] + p.stderr[-1500:]


@pytest.mark.parametrize("command", [["check", "--example", "dgx-h100"], ["doctor", "--example", "dgx-h100"],
                                     ["lint", "--env", "NCCL_IB_HCA=mlx5_0"]])
def test_a_version_that_is_no_version_is_a_usage_error(capsys, command):
    rc = main([*command, "--nccl-version", "latest"])
    err = capsys.readouterr().err
    assert rc == 2 and "--nccl-version wants a version" in err and "internal error" not in err


# ---------------------------------------------------------------- what the job was given

def test_expect_gpus_and_nodes_are_claims_about_the_job(capsys):
    rc, out, err = run(capsys, "--example", "workstation-2gpu", "--expect-gpus", "4", "--nodes", "2")
    assert rc == 1
    assert "NC5101 fewer-gpus-than-allocated" in out and "--expect-gpus 4" in out and "NVML sees 2 GPU(s)" in out
    assert "NC4101 multi-node-job-without-rdma" in out and "--nodes 2" in out
    rc, out, err = run(capsys, "--example", "workstation-2gpu", "--expect-gpus", "2", "--nodes", "1")
    assert rc == 0 and "NC5101" not in out and "NC4101" not in out


@pytest.mark.parametrize("nnodes, rc_wanted, severity", [("1", 0, "INFO"), ("2", 1, "ERROR"), (None, 1, "ERROR")],
                         ids=["one-node", "two-nodes", "unset"])
def test_a_one_node_job_is_not_stopped_by_the_network(capsys, monkeypatch, nnodes, rc_wanted, severity):
    # the launcher's variables are the job about to start, on an example or a snapshot file as on the live node
    if nnodes is not None:
        monkeypatch.setenv("SLURM_NNODES", nnodes)
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down")
    assert rc == rc_wanted
    port = next(line for line in out.splitlines() if " NC4004 port-down:" in line)
    assert port.startswith(severity)
    if nnodes == "1":                    # still visible, with why it does not stop this job
        assert "[error on a multi-node job; info here: the job runs on one node (SLURM_NNODES=1)" in port
        assert "3 judged as info: the job runs on one node" in err
    else:
        assert "info here" not in out


def test_json_shows_the_downgrade_with_the_original_severity(capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")              # 8 ranks, 8 GPUs on this node: one node
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--json")
    data = json.loads(out)
    assert rc == 0 and data["decision"]["ready"] is True and data["summary"]["error"] == 0
    f = next(x for x in data["findings"] if x["code"] == "NC4004")
    assert f["severity"] == "info"
    assert f["downgraded"] == {"from": "error", "reason": "the job runs on one node (WORLD_SIZE=8 ranks, 8 GPU(s) "
                                                          "on this node): NCCL does not need the network between nodes"}


def test_the_environment_replaces_the_job_a_snapshot_was_captured_with(capsys, monkeypatch, tmp_path):
    from ncdoc.examples.stored import load_example
    from ncdoc.snapshot import JobClaim
    from ncdoc.startup.record import replace
    snap = load_example("dgx-h100-port-down")
    snap = snap.replace(job=replace(snap.job, nodes=(JobClaim("SLURM_NNODES", 1, "1"),)))
    (tmp_path / "node.json").write_text(snap.to_json())
    assert run(capsys, "--snapshot", str(tmp_path / "node.json"))[0] == 0          # captured in a one-node job
    monkeypatch.setenv("SLURM_NNODES", "4")
    assert run(capsys, "--snapshot", str(tmp_path / "node.json"))[0] == 1          # the job starting now spans 4


def test_the_config_file_can_say_how_many_gpus_every_node_has(capsys, tmp_path):
    (tmp_path / "ncdoc.toml").write_text("expect-gpus = 8\n")
    rc, out, err = run(capsys, "--example", "workstation-2gpu")
    assert rc == 1 and "NC5101" in out and "config:" in out and "8 GPU(s)" in out
    rc, out, err = run(capsys, "--example", "dgx-h100")
    assert rc == 0


@pytest.mark.parametrize("argv, needle", [
    (["--expect-gpus", "abc"], "--expect-gpus wants a whole number, got 'abc'"),
    (["--expect-gpus", "-1"], "--expect-gpus wants a whole number"),
    (["--nodes", "0"], "--nodes wants a whole number of 1 or more"),
    (["--timeout", "soon"], "--timeout wants a number of seconds above 0"),
    (["--timeout", "0"], "--timeout wants a number of seconds above 0"),
])
def test_bad_numbers_are_one_line_and_exit_2(capsys, argv, needle):
    rc, out, err = run(capsys, "--example", "dgx-h100", *argv)
    assert rc == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("config, needle", [
    ("bogus-key = 1\n", "bogus-key"),
    ("expect-gpus = 'eight'\n", "expect-gpus must be a whole number"),
    ("fail-on = = 3\n", "not valid TOML"),
])
def test_bad_config_is_exit_2_never_a_traceback(capsys, tmp_path, config, needle):
    (tmp_path / "ncdoc.toml").write_text(config)
    rc, out, err = run(capsys, "--example", "dgx-h100")
    assert rc == 2 and needle in err and "Traceback" not in err and "internal error" not in err


def test_unreadable_config_is_exit_2(capsys, tmp_path):
    (tmp_path / "site.toml").mkdir()
    rc, out, err = run(capsys, "--example", "dgx-h100", "--config", str(tmp_path / "site.toml"))
    assert rc == 2 and "site.toml" in err and "Traceback" not in err


def test_a_snapshot_from_a_newer_ncdoc_is_exit_2(capsys, tmp_path):
    from ncdoc.examples.stored import load_example
    data = load_example("dgx-h100").to_dict()
    data["schema_version"] = 99
    (tmp_path / "new.json").write_text(json.dumps(data))
    rc, out, err = run(capsys, "--snapshot", str(tmp_path / "new.json"))
    assert rc == 2 and "newer ncdoc" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- stdin, timings

def _ncdoc(*argv, stdin=None, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "ncdoc", *argv], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def test_dash_reads_the_snapshot_and_the_env_file_from_stdin(tmp_path):
    from ncdoc.examples.stored import load_example
    p = _ncdoc("check", "--snapshot", "-", "--no-config", stdin=load_example("dgx-h100-port-down").to_json())
    assert p.returncode == 1 and "NC4004 port-down" in p.stdout
    p = _ncdoc("check", "--example", "dgx-h100", "--env-file", "-", "--no-config", stdin="export NCCL_IB_DISABLE=1\n")
    assert p.returncode == 1 and "NC1007 ib-disabled-by-env" in p.stdout
    p = _ncdoc("check", "--snapshot", "-", "--no-config", stdin="{not json")
    assert p.returncode == 2 and "<stdin>" in p.stderr and "not valid JSON" in p.stderr
    p = _ncdoc("check", "--snapshot", "-", "--env-file", "-", "--no-config", stdin="")
    assert p.returncode == 2 and "only one of --snapshot and --env-file" in p.stderr


def test_timings_name_each_probe(tmp_path):
    p = _ncdoc("check", "--no-config", "--timings", cwd=tmp_path)
    assert p.returncode in (0, 1), p.stderr
    line = next(x for x in p.stderr.splitlines() if "probe times" in x)
    for probe in ("host", "PCI", "RDMA", "network", "versions"):
        assert f"{probe} " in line
    assert "check total" in line
    p = _ncdoc("check", "--no-config", "--json", cwd=tmp_path)
    probes = json.loads(p.stdout)["probes"]
    assert {"host", "PCI", "network"} <= set(probes["timings_ms"]) and probes["timed_out"] == []
    p = _ncdoc("check", "--example", "dgx-h100", "--no-config", "--timings")
    assert "no probe ran (the node was read from example:dgx-h100)" in p.stderr


def test_a_read_that_blocks_stops_at_the_deadline(tmp_path):
    # A FIFO as ~/.nccl.conf: opening it blocks until a writer comes, like a file on a dead NFS home.
    import os
    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / ".nccl.conf")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCDOC_", "NCCL_"))}
    env["HOME"] = str(home)
    p = _ncdoc("check", "--no-config", "--timeout", "1", env=env, cwd=tmp_path)
    assert p.returncode == 2 and "did not finish within its deadline of 1 s" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
