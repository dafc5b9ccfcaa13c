"""`ncdoc lint`: the current env plus NCCL's config files by default, --env / --env-file otherwise."""

from __future__ import annotations

import json

import pytest

from ncdoc.cli.main import main


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    import os
    for k in list(os.environ):
        if k.startswith(("NCCL_", "NCDOC_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)              # no ncdoc.toml found above it by accident
    (tmp_path / "home").mkdir()
    return tmp_path


def run(capsys, *argv):
    rc = main(["lint", "--no-config", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_clean_env_exits_0(capsys):
    rc, out, err = run(capsys, "--env", "NCCL_IB_HCA==mlx5_0,mlx5_1")
    assert rc == 0 and "No problems found" in out


def test_findings_exit_1_with_fix(capsys):
    rc, out, err = run(capsys, "--env", "NCCL_P2P_LEVEL=pxb", "--format", "lines")
    assert rc == 1
    assert "NC1002 invalid-value" in out and "NCCL_P2P_LEVEL=PXB" in out
    assert out.count("\n") == 2                  # invalid-value + debug-var (info)


def test_reads_process_env_and_home_conf(capsys, monkeypatch, clean_env):
    monkeypatch.setenv("NCCL_SOCKET_IF_NAME", "eth0")
    (clean_env / "home" / ".nccl.conf").write_text("NCCL_IB_TIMEOUT=22\nNCCL_IB_TIMEOUT=14\n")
    rc, out, err = run(capsys, "--json")
    data = json.loads(out)
    names = {(f["name"], f["subject"]) for f in data["findings"]}
    assert ("unknown-nccl-var", "NCCL_SOCKET_IF_NAME") in names
    assert ("env-shadowed", "NCCL_IB_TIMEOUT") in names
    assert rc == 1


def test_env_file_shell_and_conf(capsys, tmp_path):
    sh = tmp_path / "job.env"
    sh.write_text("# job settings\nexport NCCL_IB_DISABLE=true\nNCCL_DEBUG=\"INFO\"\nNCCL_DEBUG=WARN\n")
    rc, out, err = run(capsys, "--env-file", str(sh), "--json")
    data = json.loads(out)
    by = {f["name"]: f for f in data["findings"]}
    assert "invalid-value" in by and by["invalid-value"]["evidence"][0]["line"] == 2
    shadow = by["env-shadowed"]["message"]
    assert "line 4 ('WARN') takes effect" in shadow             # a shell: the last assignment wins
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\nNCCL_DEBUG=INFO\n")
    rc, out, err = run(capsys, "--env-file", str(conf), "--json")
    shadow = [f for f in json.loads(out)["findings"] if f["name"] == "env-shadowed"][0]["message"]
    assert "line 1 ('WARN') takes effect" in shadow             # nccl.conf: the first line wins


def test_malformed_env_file_is_one_line_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.env"
    bad.write_text("NCCL_DEBUG=INFO\nthis is not an assignment\n")
    rc, out, err = run(capsys, "--env-file", str(bad))
    assert rc == 2 and out == ""
    assert err.strip() == f"ncdoc: error: {bad}:2: not a KEY=VALUE line: 'this is not an assignment'"
    rc, out, err = run(capsys, "--env-file", str(tmp_path / "missing.env"))
    assert rc == 2 and "no such file" in err


def test_unknown_select_and_ignore_without_reason_exit_2(capsys):
    rc, out, err = run(capsys, "--select", "NC9999")
    assert rc == 2 and "NC9999" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run(capsys, "--ignore", "NC1004")
    assert rc == 2 and "reason" in err


def test_ignore_with_reason_is_reported_as_skipped(capsys):
    rc, out, err = run(capsys, "--env", "NCCL_MIN_NCHANNELS=8", "--nccl-version", "2.21.5",
                       "--ignore", "NC1004:pinned on purpose", "--json")
    data = json.loads(out)
    assert "deprecated-var" not in {f["name"] for f in data["findings"]}
    assert {"code": "NC1004", "name": "deprecated-var", "reason": "ignored: pinned on purpose"} in data["skipped"]


def test_fail_on_and_quiet(capsys):
    rc, out, err = run(capsys, "--env", "NCCL_ALGO=Ring", "--fail-on", "error", "--quiet")
    assert rc == 0 and out == "" and err == ""
    rc, out, err = run(capsys, "--env", "NCCL_ALGO=Ring", "--fail-on", "warning", "--quiet")
    assert rc == 1


def test_against_a_node(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100", "--env", "NCCL_IB_HCA=mlx5_1", "--format", "lines")
    assert "NC1102 ib-hca-prefix-match" in out


def test_policy_pack_from_cli(capsys, tmp_path):
    p = tmp_path / "site.yaml"
    p.write_text("policy: site\nvariables:\n  - {var: NCCL_IB_DISABLE, level: forbidden, reason: no TCP}\n")
    rc, out, err = run(capsys, "--env", "NCCL_IB_DISABLE=1", "--rules", str(p), "--format", "lines")
    assert rc == 1 and "NC1403 policy-forbidden-set" in out and "no TCP" in out
    p.write_text("policy: site\nvariables:\n  - {var: NCCL_IB_DISABLE, levle: forbidden, reason: x}\n")
    rc, out, err = run(capsys, "--rules", str(p))
    assert rc == 2 and f"{p}:3: unknown key 'levle'" in err


def test_env_alone_ib_disabled_pytorch_names_and_defaults(capsys, tmp_path):
    job = tmp_path / "job.sh"
    job.write_text("export NCCL_IB_DISABLE=1\nexport NCCL_ASYNC_ERROR_HANDLING=1\nexport NCCL_SHM_DISABLE=0\n"
                   "export NCCL_AVOID_RECORD_STREAMS=1\nexport NCCL_IB_FOO=1\n")
    rc, out, err = run(capsys, "--env-file", str(job), "--json")
    data = json.loads(out)
    f = {(x["name"], x["subject"]): x for x in data["findings"]}
    ib = f[("ib-disabled-by-env", "NCCL_IB_DISABLE")]
    assert ib["severity"] == "warning" and "forces TCP sockets between nodes" in ib["message"]
    alias = f[("unknown-nccl-var", "NCCL_ASYNC_ERROR_HANDLING")]
    assert alias["severity"] == "info" and "TORCH_NCCL_ASYNC_ERROR_HANDLING" in alias["message"]
    assert alias["env_patch"] == {"NCCL_ASYNC_ERROR_HANDLING": None, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    torch_only = f[("unknown-nccl-var", "NCCL_AVOID_RECORD_STREAMS")]
    assert torch_only["severity"] == "warning" and "TORCH_NCCL_AVOID_RECORD_STREAMS" in torch_only["message"]
    assert "(see the suggestion)" not in f[("unknown-nccl-var", "NCCL_IB_FOO")]["fix"]
    assert not [k for k in f if k[0] == "debug-var-in-production"]      # NCCL_SHM_DISABLE=0 is the default
    assert rc == 1


def test_ib_disabled_on_a_node_with_ib_is_an_error(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100", "--env", "NCCL_IB_DISABLE=1", "--json")
    ib = [x for x in json.loads(out)["findings"] if x["name"] == "ib-disabled-by-env"]
    assert ib and ib[0]["severity"] == "error" and rc == 1
