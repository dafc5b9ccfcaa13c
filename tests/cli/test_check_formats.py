"""`ncdoc check`'s CI formats: GitHub workflow annotations, SARIF 2.1.0 (validated against the official
schema), JUnit XML (one test case per rule run), concise `where: CODE message` lines."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest

from ncdoc.cli.main import main

# The SARIF 2.1.0 JSON schema is third-party: never committed. CI fetches it (.ci/run) and names it
# in NCDOC_SARIF_SCHEMA; elsewhere the test skips unless that variable names a copy.
SARIF_SCHEMA_ENV = "NCDOC_SARIF_SCHEMA"


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    for k in list(os.environ):
        if k.startswith("NCDOC_") and k != SARIF_SCHEMA_ENV:
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def run(capsys, *argv):
    rc = main(["check", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture()
def env_file(tmp_path):
    """An env file with a problem on its second line: findings that point at a file line."""
    path = tmp_path / "job.env"
    path.write_text("export NCCL_DEBUG=INFO\nexport NCCL_IB_DISABLE=1\n")
    return path


def test_github_annotations(capsys, env_file):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--env-file", str(env_file), "--format", "github")
    lines = out.splitlines()
    assert rc == 1 and lines and all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    port = next(line for line in lines if "NC4004" in line)
    # a node fact: no file, the node in the title; the message is one line, newlines encoded
    assert port.startswith("::error title=NC4004 port-down (dgx-h100-01)::mlx5_4 port 1 is DOWN")
    assert "%0Afix: " in port and "%0Adocs: ncdoc rule NC4004" in port
    ib = next(line for line in lines if "NC1007" in line)
    assert ib.startswith(f"::error file={env_file},line=2,title=NC1007 ib-disabled-by-env::")


def test_github_escapes_what_would_end_a_property():
    from ncdoc.findings import Evidence, Finding, Report
    from ncdoc.output.github import render
    f = Finding(code="NC1001", name="unknown-nccl-var", severity="info", family="env", message="100% odd\nvalue",
                evidence=(Evidence("X=1", "/tmp/a,b:c.env", 3),))
    (line,) = render(Report((f,))).splitlines()
    # a newline the message holds is shown as an escape: it cannot split the annotation
    assert line == "::notice file=/tmp/a%2Cb%3Ac.env,line=3,title=NC1001 unknown-nccl-var::100%25 odd\\nvalue"


def test_concise_lines_are_where_code_message(capsys, env_file):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--env-file", str(env_file), "--format", "concise")
    lines = out.splitlines()
    assert rc == 1
    assert any(line.startswith(f"{env_file}:2: NC1007 [error] ib-disabled-by-env: NCCL_IB_DISABLE=1") for line in lines)
    assert any(line.startswith("dgx-h100-01: NC4004 [error] port-down: mlx5_4 port 1 is DOWN") for line in lines)
    rc, out, err = run(capsys, "--example", "dgx-h100", "--format", "concise")
    assert rc == 0 and out == ""


def test_junit_has_one_case_per_rule_run_and_skips_as_skipped(capsys):
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--format", "junit",
                       "--ignore", "NC4007:cable on order")
    root = ET.fromstring(out)
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == int(suite.get("tests")) and "NC4004 port-down" in names
    failed = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert [c.get("name") for c in failed] == ["NC4004 port-down"] and suite.get("failures") == "1"
    assert failed[0].find("failure").get("type") == "error"
    assert "mlx5_4 port 1 is DOWN" in failed[0].find("failure").text
    assert {c.get("name"): c.find("skipped").get("message") for c in skipped}["NC4007 link-errors"] == \
        "ignored: cable on order"
    assert int(suite.get("skipped")) == len(skipped)
    # a warning below --fail-on is not a failure; its text stays with the case
    warn = next(c for c in cases if c.get("name") == "NC1103 ib-hca-includes-down-port")
    assert warn.find("failure") is None and "DOWN" in warn.find("system-out").text
    # the rules that never run on a node (log-only rules) are not listed
    assert "NC4501 socket-fallback" not in names
    rc, out, err = run(capsys, "--example", "dgx-h100-port-down", "--format", "junit", "--fail-on", "warning")
    assert ET.fromstring(out).find("testsuite").get("failures") == "3"          # NC4004, NC1103, NC4007


def test_junit_is_well_formed_whatever_the_message_holds():
    from ncdoc.findings import Finding, Report
    from ncdoc.output.junit import render
    f = Finding(code="NC1002", name="invalid-value", severity="error", family="env",
                message='NCCL_X="<a&b>" \x01 \'q\'')
    root = ET.fromstring(render(Report((f,)), node="n<1>"))
    case = root.find("testsuite/testcase")
    assert case.find("failure").get("message") == "NCCL_X=\"<a&b>\" \\x01 'q'"      # shown as an escape


def _sarif(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--format", "sarif")
    return rc, json.loads(out)


def test_sarif_results_rules_and_locations(capsys, env_file):
    rc, doc = _sarif(capsys, "--example", "dgx-h100-port-down", "--env-file", str(env_file))
    assert rc == 1 and doc["version"] == "2.1.0"
    (run_,) = doc["runs"]
    rules = run_["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert ids == sorted(ids) and "NC4004" in ids and run_["tool"]["driver"]["name"] == "ncdoc"
    by_rule = {r["ruleId"]: r for r in run_["results"]}
    port = by_rule["NC4004"]
    assert port["level"] == "error" and rules[port["ruleIndex"]]["id"] == "NC4004"
    assert port["locations"] == [{"logicalLocations": [{"name": "dgx-h100-01", "kind": "node"}]}]
    ib = by_rule["NC1007"]["locations"][0]["physicalLocation"]
    assert ib["artifactLocation"]["uri"] == f"file://{env_file}" and ib["region"] == {"startLine": 2}
    assert by_rule["NC1103"]["level"] == "warning"
    assert run_["invocations"][0]["exitCode"] == 1


def test_sarif_validates_against_the_official_schema(capsys, env_file):
    path = os.environ.get(SARIF_SCHEMA_ENV)
    if not path:
        pytest.skip(f"needs the SARIF 2.1.0 JSON schema: set {SARIF_SCHEMA_ENV} to a copy (.ci/run fetches one)")
    assert os.path.isfile(path), f"{SARIF_SCHEMA_ENV}={path} is not a file"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(open(path, encoding="utf-8").read())
    validator = jsonschema.Draft4Validator(schema)
    validator.check_schema(schema)
    for argv in (["--example", "dgx-h100-port-down", "--env-file", str(env_file)],
                 ["--example", "dgx-h100"], ["--example", "dgx-h100-port-down", "--ignore", "NC4007:known"],
                 ["--example", "workstation-2gpu", "--expect-gpus", "4", "--nodes", "2"]):
        rc, doc = _sarif(capsys, *argv)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    # and the schema would notice a broken log: the check is not vacuous
    rc, doc = _sarif(capsys, "--example", "dgx-h100-port-down")
    doc["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(doc))


@pytest.mark.parametrize("fmt", ["github", "sarif", "junit", "concise"])
def test_every_ci_format_is_offered_by_check_and_keeps_the_exit_status(capsys, fmt):
    assert run(capsys, "--example", "dgx-h100-port-down", "--format", fmt)[0] == 1
    assert run(capsys, "--example", "dgx-h100", "--format", fmt)[0] == 0
    assert run(capsys, "--example", "dgx-h100-port-down", "--format", fmt, "--quiet") == (1, "", "")
