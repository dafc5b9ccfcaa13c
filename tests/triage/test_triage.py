"""`ncdoc triage`: exit codes, stdout/stderr, the JSON contract, merging of evidence, the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncdoc.cli.main import main
from ncdoc.errors import InputError
from ncdoc.triage.run import build_env, triage
from paths import TESTS as TESTS_DIR

FIX = TESTS_DIR / "fixtures" / "triage"
LOG_SOCKET = str(FIX / "socket-fallback.log")
LOG_HEALTHY = str(FIX / "healthy-ib.log")
TESTS = str(FIX / "all_reduce_2x8.txt")
IBSTAT = str(FIX / "ibstat.txt")
LAUNCH = str(FIX / "launch.sh")


def run(capsys, *argv):
    rc = main(["triage", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--json")
    return rc, json.loads(out), err


# ---------------------------------------------------------------- JSON contract

def test_socket_fallback_log_json_contract(capsys):
    rc, doc, err = run_json(capsys, LOG_SOCKET)
    assert rc == 1 and err == ""
    assert doc["schema_version"] == 1
    assert doc["inputs"] == [{"path": LOG_SOCKET, "kind": "nccl_log", "read_as": ["nccl_log"], "notes": [],
                              "detected": "14 NCCL lines of an NCCL log"}]
    for f in doc["findings"]:
        assert {"code", "name", "severity", "message", "evidence", "fix", "stage"} <= set(f)
    names = {f["name"]: f["severity"] for f in doc["findings"]}
    assert names["socket-fallback"] == "error" and names["no-rdma-devices"] == "error"
    # the cause (the device NCCL could not open) comes before its consequence
    assert doc["verdict"]["name"] == "no-rdma-devices"
    wheres = [e["where"] for e in doc["verdict"]["evidence"]]
    assert f"{LOG_SOCKET}:9" in wheres           # "NET/IB : Unable to open device mlx5_0"
    facts = doc["facts"]
    assert facts["nccl_version"] == "2.18.5" and facts["transport"] == "Socket"
    assert facts["net_devices"] == ["eth0"] and facts["env"] == {"NCCL_IB_DISABLE": "0"}
    assert facts["nodes"] == 2 and facts["gpus_per_node"] == 8


def test_healthy_log_exits_zero_with_its_facts(capsys):
    rc, doc, err = run_json(capsys, LOG_HEALTHY)
    assert rc == 0, [f for f in doc["findings"] if f["severity"] == "error"]
    assert not [f for f in doc["findings"] if f["severity"] in ("error", "warning")]
    facts = doc["facts"]
    assert (facts["transport"], facts["gdr"], facts["nccl_version"]) == ("IB", "enabled", "2.21.5")
    assert facts["net_devices"] == [f"mlx5_{i}:1" for i in range(8)]
    assert doc["verdict"] is None


def test_tests_against_cli_line_rate(capsys):
    rc, doc, _ = run_json(capsys, TESTS, "--nic-gbps", "400", "--nics", "8")
    assert rc == 1
    exp = doc["facts"]["expected"]
    assert exp["expected_busbw_gbps"] == pytest.approx(368.0)
    assert exp["achieved_pct"] == pytest.approx(48.3, abs=0.2)
    assert doc["facts"]["peak_busbw_gbps"] == pytest.approx(177.83)
    assert doc["facts"]["wrong"] == 0
    assert doc["verdict"]["name"] == "busbw-below-line-rate"
    tree = [f for f in doc["findings"] if f["name"] == "two-node-tree-overstates"]
    assert tree and tree[0]["severity"] == "info" and tree[0]["env_patch"] == {"NCCL_ALGO": "Ring"}


def test_node_evidence_sets_the_expectation_without_flags(capsys):
    rc, doc, _ = run_json(capsys, LOG_HEALTHY, IBSTAT, TESTS)
    facts = doc["facts"]
    assert [i["kind"] for i in doc["inputs"]] == ["nccl_log", "ibv_devinfo", "nccl_tests"]
    assert len(facts["ports"]) == 8
    assert facts["ports"][0] == {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                                 "rate_gbps": 400.0, "link_layer": "InfiniBand"}
    assert facts["expected"]["nics"] == 8 and facts["expected"]["achieved_pct"] == pytest.approx(48.3, abs=0.2)
    assert rc == 1 and doc["verdict"]["name"] == "busbw-below-line-rate"


def test_healthy_busbw_is_no_error(capsys):
    rc, doc, _ = run_json(capsys, TESTS, "--nic-gbps", "200", "--nics", "2")
    assert rc == 0
    assert not [f for f in doc["findings"] if f["name"] == "busbw-below-line-rate"]
    # 178 GB/s over 2 x 200G on two nodes: only Tree can do that, so the number overstates
    tree = [f for f in doc["findings"] if f["name"] == "two-node-tree-overstates"]
    assert tree[0]["severity"] == "warning"


# ---------------------------------------------------------------- the environment

def test_env_precedence_cli_over_launch_file_over_log(capsys):
    rc, doc, _ = run_json(capsys, LAUNCH, LOG_HEALTHY, "--env", "NCCL_IB_HCA=mlx5_1")
    env = doc["facts"]["env"]
    assert env["NCCL_IB_HCA"] == "mlx5_1"            # --env beats the launch file and the log
    assert env["NCCL_SOCKET_IFNAME"] == "ib0"         # from launch.sh
    assert doc["inputs"][0]["kind"] == "env"


def test_build_env_keeps_sources_and_shadowed_values():
    from ncdoc.evidence.launch_env import parse_launch_env
    launch = parse_launch_env(Path(LAUNCH).read_text(), LAUNCH)
    env = build_env(None, [], [launch], ["NCCL_IB_HCA=mlx5_3"])
    hca = next(v for v in env.values if v.name == "NCCL_IB_HCA")
    assert (hca.value, hca.source) == ("mlx5_3", "cli:--env")
    shadowed = [v for v in env.shadowed if v.name == "NCCL_IB_HCA"]
    assert shadowed and shadowed[0].source == LAUNCH and shadowed[0].line == 7


# ---------------------------------------------------------------- text output

def test_text_puts_the_verdict_first_with_file_and_line(capsys):
    rc, out, err = run(capsys, LOG_SOCKET, "--color", "never")
    assert rc == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("Verdict: ERROR NC4001 no-rdma-devices")
    assert any(f"{LOG_SOCKET}:9:" in ln for ln in lines[:6])
    assert any(ln.startswith("  fix:") for ln in lines[:8])
    assert "RDMA path or TCP fallback" in out and "Facts" in out


def test_markdown_and_fail_on(capsys):
    rc, out, _ = run(capsys, LOG_HEALTHY, "--format", "markdown")
    assert rc == 0 and out.startswith("# ncdoc triage") and "## Verdict" in out
    rc, _, _ = run(capsys, LOG_SOCKET, "--fail-on", "none")
    assert rc == 0
    rc, _, _ = run(capsys, LOG_SOCKET, "--json", "--fail-on", "warning")
    assert rc == 1


# ---------------------------------------------------------------- inputs that cannot be used

def _binary(p: Path) -> str:
    p.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    return str(p)


def _text(p: Path, text: str) -> str:
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("make", [
    lambda p: str(p / "missing.log"),
    lambda p: _text(p / "empty.log", ""),
    lambda p: _text(p / "blank.log", "  \n\n\t\n"),
    lambda p: _binary(p / "a.out"),
    lambda p: str(p),
], ids=["missing", "empty", "blank", "binary", "directory"])
def test_unusable_input_is_one_line_and_exit_2(capsys, tmp_path, make):
    path = make(tmp_path)
    rc, out, err = run(capsys, LOG_HEALTHY, path, "--json")
    assert rc == 2 and out == ""
    assert err.startswith("ncdoc: error: ") and path in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_unknown_kind_alone_exits_2_and_among_others_is_skipped(capsys, tmp_path):
    path = _text(tmp_path / "notes.txt", "dear diary, the cluster is slow today\n")
    rc, out, err = run(capsys, path, "--json")
    assert rc == 2 and out == "" and err.startswith("ncdoc: error: ") and path in err
    rc, out, err = run(capsys, LOG_HEALTHY, path, "--json")
    assert rc in (0, 1)
    skipped = [i for i in json.loads(out)["inputs"] if i["path"] == path]
    assert skipped and skipped[0]["kind"] == "unknown" and skipped[0]["notes"]


@pytest.mark.parametrize("argv", [
    [], ["--nics", "8", TESTS], ["--nic-gbps", "-5", TESTS], ["--nodes", "0", TESTS],
    ["--env", "oops", TESTS], ["--example", "no-such-machine"],
])
def test_usage_errors_exit_2(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and err.startswith("ncdoc: error:")


def test_stdin_is_read_with_a_dash(capsys, monkeypatch):
    import io
    import sys
    data = Path(LOG_SOCKET).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rc, out, _ = run(capsys, "-", "--json")
    assert rc == 1 and json.loads(out)["facts"]["transport"] == "Socket"


def test_large_logs_are_streamed(tmp_path, monkeypatch):
    import ncdoc.importers.inputs as t
    monkeypatch.setattr(t, "STREAM_BYTES", 100)
    result = triage([LOG_SOCKET, TESTS])
    assert [i.read_as for i in result.inputs] == [("nccl_log",), ("nccl_tests",)]
    assert result.facts["transport"] == "Socket" and result.facts["peak_busbw_gbps"] == pytest.approx(177.83)


def test_the_api_raises_input_error_not_exit():
    with pytest.raises(InputError):
        triage(["/nonexistent/ncdoc/evidence.log"])


def test_nccl_tests_json_output_is_read_with_its_env(capsys):
    path = TESTS_DIR / "fixtures" / "logs" / "nccl_tests_alltoall.json"
    if not path.is_file():
        pytest.skip("the nccl-tests JSON fixture of the parser tests is not here")
    rc, doc, _ = run_json(capsys, str(path))
    assert doc["inputs"][0]["kind"] == "nccl_tests" and doc["inputs"][0]["read_as"] == ["nccl_tests_json"]
    assert doc["facts"]["peak_busbw_gbps"] > 0
    assert doc["facts"]["env"].get("NCCL_ALGO") == "Ring"     # the run's own environment, from the JSON


def test_example_machine_gives_the_rails(capsys):
    rc, doc, _ = run_json(capsys, "--example", "dgx-h100", TESTS)
    exp = doc["facts"]["expected"]
    assert exp["nics"] == 8 and exp["nic_gbps"] == 400.0      # the IB rails, not the Ethernet ports
    assert doc["inputs"][0] == {"path": "example:dgx-h100", "kind": "snapshot_json", "read_as": ["snapshot"],
                                "notes": [], "detected": "given with --example"}
    assert rc == 1


def test_gdr_on_some_nodes_only(capsys, tmp_path):
    on = tmp_path / "node01.log"
    off = tmp_path / "node02.log"
    on.write_text("node01:4012:4050 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'\n"
                  "node01:4012:4050 [0] NCCL INFO Using network IB\n")
    off.write_text("node02:5120:5150 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
                   "node02:5120:5150 [0] NCCL INFO Using network IB\n")
    rc, doc, _ = run_json(capsys, str(on), str(off))
    assert doc["facts"]["gdr"] == "partial"
    partial = [f for f in doc["findings"] if f["name"] == "gdr-partial"]
    assert partial and str(off) in partial[0]["message"]
    assert any(e["where"] == f"{off}:1" for e in partial[0]["evidence"])


def test_old_topo_matrix_soc_is_reported_as_sys(capsys, tmp_path):
    topo = tmp_path / "topo.txt"
    topo.write_text("\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
                    "GPU0\t X \tSOC\tPHB\t0-11\n"
                    "GPU1\tSOC\t X \tSOC\t12-23\n"
                    "mlx5_0\tPHB\tSOC\t X \t\n")
    rc, doc, _ = run_json(capsys, str(topo))
    assert doc["inputs"][0]["kind"] == "topo_matrix"
    assert doc["facts"]["matrix"]["GPU0"]["GPU1"] == "SYS"
    assert doc["facts"]["matrix"]["GPU0"]["mlx5_0"] == "PHB"


def test_single_node_is_held_against_nvlink(capsys, tmp_path):
    one = tmp_path / "one_node.txt"
    one.write_text(Path(TESTS).read_text().replace(" node02 ", " node01 "))
    rc, doc, _ = run_json(capsys, str(one))
    exp = doc["facts"]["expected"]
    assert doc["facts"]["nodes"] == 1 and exp["gpu_generation"] == "H100"
    assert exp["expected_busbw_gbps"] == 476.0 and exp["achieved_pct"] == pytest.approx(37.4, abs=0.2)
    below = [f for f in doc["findings"] if f["name"] == "busbw-below-line-rate"]
    assert below and below[0]["severity"] == "error" and "NVLink" in below[0]["message"]
    assert not [f for f in doc["findings"] if f["name"] == "two-node-tree-overstates"]


def test_broken_snapshot_json_names_the_file(capsys, tmp_path):
    bad = tmp_path / "node.json"
    bad.write_text('{"schema_version": 1, "host": {"nonsense_field": 1}, "origin": "live"}')
    rc, out, err = run(capsys, str(bad))
    assert rc == 2 and out == "" and str(bad) in err and "Traceback" not in err
