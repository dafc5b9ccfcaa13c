"""The contract every report format keeps (text, lines, json, markdown, the CI formats github, sarif,
junit and concise, and triage's report in text, markdown and json): an empty report says so, every
severity and every skipped rule shows, the JSON carries schema_version, and the output keeps its
shape whatever a message holds (markup, escape sequences, newlines): a quoted log line or env value
cannot drive the terminal or break the report."""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET

import pytest

from ncdoc.findings import Evidence, Finding, Report, Skipped
from ncdoc.output import FORMATS, render
from ncdoc.output import triage_report
from paths import FIXTURES

FINDINGS = (
    Finding("NC4004", "port-down", "error", "node", "mlx5_4 port 1 is DOWN",
            (Evidence("state: PORT_DOWN (1)", "hcas/mlx5_4/port 1"),), "Reseat the cable.",
            "docs/rules/NC4004-port-down.md", subject="mlx5_4:1"),
    Finding("NC1004", "deprecated-var", "warning", "env", "NCCL_MIN_NCHANNELS is deprecated",
            (Evidence("NCCL_MIN_NCHANNELS=8", "job.env", 3),), "Use NCCL_MIN_CTAS.",
            "docs/rules/NC1004-deprecated-var.md", {"NCCL_MIN_NCHANNELS": None}, "NCCL_MIN_NCHANNELS"),
    Finding("NC9999", "made-up-info", "info", "other", "worth knowing", subject="x"),
)
SKIPPED = (Skipped("NC4101", "gdr-off", "needs the snapshot"), Skipped("NC4102", "acs-on", "needs the snapshot"),
           Skipped("NC1404", "policy-required", "ignored: pinned on purpose"))

# What a message may hold when it quotes what a user or a log wrote.
HOSTILE = ("value '\x1b[2J\x1b]0;pwned\x07' then\nERROR   NC0000 fake-line: injected\r over | a | table "
           "<script>alert(1)</script> **bold** _it_ `tick [link](http://x) ~~strike~~ &amp; \x9b31m \u2028")
BAD = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")    # what must never reach a reader raw


def _triage_result(report: Report):
    from ncdoc.triage.run import triage
    base = triage([str(FIXTURES / "triage" / "healthy-ib.log")])
    verdict = next((f for f in report.findings if f.severity == "error"), None)
    return dataclasses.replace(base, report=report, verdict=verdict)


def _render(kind: str, report: Report, **kw) -> str:
    """kind: a report format, or "triage:<format>"."""
    if kind.startswith("triage:"):
        return triage_report.render(_triage_result(report), kind.split(":")[1], color="never", show_skipped=True)
    return render(report, kind, title="ncdoc test", color="never", **kw)


KINDS = list(FORMATS) + [f"triage:{f}" for f in triage_report.FORMATS]


# One line per finding and nothing else (annotations, `where: CODE message`): like lines.
PER_FINDING = ("lines", "github", "concise")


def test_every_format_is_covered():
    assert set(FORMATS) == {"text", "lines", "json", "markdown", "github", "sarif", "junit", "concise"}
    assert set(triage_report.FORMATS) == {"text", "markdown", "json"}


@pytest.mark.parametrize("kind", KINDS)
def test_empty_report(kind):
    out = _render(kind, Report())
    if kind in PER_FINDING:
        assert out == ""                       # `ncdoc check` prints nothing for a clean node
    elif kind == "sarif":
        doc = json.loads(out)
        assert doc["version"] == "2.1.0" and doc["runs"][0]["results"] == []
    elif kind == "junit":
        suite = ET.fromstring(out).find("testsuite")
        assert suite.get("failures") == "0" and suite.get("tests") == "0"
    elif kind.endswith("json"):
        doc = json.loads(out)
        assert doc["schema_version"] == 1 and doc["findings"] == []
    elif kind.endswith("markdown"):
        assert "## Findings" in out and "0 errors, 0 warnings, 0 info" in out
    else:
        assert "No problems found." in out and "0 errors, 0 warnings, 0 info" in out
        if kind.startswith("triage"):
            assert out.startswith("Verdict: no problem found")


@pytest.mark.parametrize("kind", KINDS)
def test_every_severity_and_skipped_rule_shows(kind):
    out = _render(kind, Report(FINDINGS, SKIPPED))
    if kind == "sarif":
        run = json.loads(out)["runs"][0]
        assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("NC4004", "error"), ("NC1004", "warning"),
                                                                      ("NC9999", "note")]
        notes = run["invocations"][0]["toolExecutionNotifications"]
        assert [n["descriptor"]["id"] for n in notes] == [s.code for s in SKIPPED]
        assert "needs the snapshot" in notes[0]["message"]["text"]
        return
    if kind == "junit":
        cases = {c.get("name"): c for c in ET.fromstring(out).find("testsuite").findall("testcase")}
        assert cases["NC4004 port-down"].find("failure") is not None          # at or above --fail-on (error)
        assert "NCCL_MIN_NCHANNELS is deprecated" in cases["NC1004 deprecated-var"].find("system-out").text
        assert cases["NC9999 made-up-info"].find("failure") is None
        assert {n: c.find("skipped").get("message") for n, c in cases.items() if c.find("skipped") is not None} == \
            {f"{s.code} {s.name}": s.reason for s in SKIPPED}
        return
    if kind.endswith("json"):
        doc = json.loads(out)
        assert doc["schema_version"] == 1
        assert [(f["code"], f["severity"]) for f in doc["findings"]] == [(f.code, f.severity) for f in FINDINGS]
        assert {s["code"] for s in doc["skipped"]} == {s.code for s in SKIPPED}
        if kind == "json":
            assert doc["summary"] == {"error": 1, "warning": 1, "info": 1} and doc["worst"] == "error"
        return
    for f in FINDINGS:
        assert f"{f.code}" in out and f.name in out and f.message in out
    if kind == "lines":                         # one line per finding, worst first, no skips
        assert [line.split()[:2] for line in out.splitlines()] == [["ERROR", "NC4004"], ["WARNING", "NC1004"],
                                                                 ["INFO", "NC9999"]]
        return
    if kind == "github":                        # one annotation per finding, at its level
        assert [line.split(" ", 1)[0] for line in out.splitlines()] == ["::error", "::warning", "::notice"]
        return
    if kind == "concise":
        assert [line.split(": ", 1)[1].split()[:2] for line in out.splitlines()] == [
            ["NC4004", "[error]"], ["NC1004", "[warning]"], ["NC9999", "[info]"]]
        return
    for s in SKIPPED:
        assert s.code in out and s.name in out
    assert "needs the snapshot" in out and "ignored: pinned on purpose" in out
    assert "1 error, 1 warning, 1 info; 3 rules skipped" in out


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_message_keeps_the_output_valid(kind):
    f = dataclasses.replace(FINDINGS[0], message=HOSTILE, fix=HOSTILE, subject=HOSTILE,
                            evidence=(Evidence(HOSTILE, "job.log", 7),))
    report = Report((f, FINDINGS[1]), (Skipped("NC4101", "gdr-off", HOSTILE),))
    out = _render(kind, report)
    if kind.endswith("json"):
        doc = json.loads(out)                   # always valid; the text comes back exactly
        assert doc["findings"][0]["message"] == HOSTILE and doc["findings"][0]["evidence"][0]["text"] == HOSTILE
        return
    if kind == "sarif":
        doc = json.loads(out)
        assert doc["runs"][0]["results"][0]["message"]["text"] == HOSTILE
        assert not BAD.search(out.replace("\n", ""))
        return
    if kind == "junit":
        ET.fromstring(out)                      # still well-formed XML
    assert not BAD.search(out.replace("\n", "")), "a control character reached the report"
    assert "\x1b" not in out and "\r" not in out
    if kind in PER_FINDING:
        assert len(out.splitlines()) == 2       # still one line per finding
        assert not any(line.startswith("ERROR   NC0000") for line in out.splitlines())
        return
    assert not any(line.lstrip().startswith("ERROR   NC0000") for line in out.splitlines())
    if kind.endswith("markdown"):
        # outside code spans (where markdown shows text as it is) no HTML tag and no link is left
        prose = re.sub(r"(`+) .*? \1", "", out)
        assert not re.search(r"(?<!\\)<script>", prose) and "\\<script>" in prose
        assert not re.search(r"(?<!\\)\[link\]\(", prose)
        items = [line for line in out.splitlines() if line.startswith("- **")]
        assert len(items) == 2, items           # each finding is still one list item
        # the hostile text's pipes are escaped: no table can be started or broken by it
        assert all("|" not in line.replace("\\|", "") for line in prose.splitlines() if "alert" in line)


def test_colour_is_ours_alone():
    f = dataclasses.replace(FINDINGS[0], message=HOSTILE)
    out = render(Report((f,)), "text", color="always")
    codes = re.findall("\x1b\\[[0-9;]*m", out)
    assert codes and not re.sub("\x1b\\[[0-9;]*m", "", out).count("\x1b")
    lines = render(Report((f,)), "lines", color="always")
    assert lines.count("\x1b[") == 2            # the severity's colour on and off, nothing from the message


@pytest.mark.parametrize("mode,env,tty,expect", [
    ("auto", {}, True, True), ("auto", {}, False, False),
    ("auto", {"NO_COLOR": "1"}, True, False), ("auto", {"NO_COLOR": ""}, True, True),
    ("auto", {"FORCE_COLOR": "1"}, False, True), ("auto", {"FORCE_COLOR": ""}, False, False),
    ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, False),       # NO_COLOR wins
    ("auto", {"TERM": "dumb"}, True, False), ("auto", {"TERM": "dumb", "FORCE_COLOR": "1"}, True, True),
    ("always", {"NO_COLOR": "1"}, False, True), ("never", {"FORCE_COLOR": "1"}, True, False),
])
def test_one_colour_resolver(monkeypatch, mode, env, tty, expect):
    from ncdoc.output.color import use_color
    for k in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    class Stream:
        def isatty(self):
            return tty
    assert use_color(mode, Stream()) is expect


@pytest.mark.parametrize("command", [["check", "--example", "dgx-h100-port-down", "--no-config"],
                                     ["doctor", "--example", "dgx-h100-port-down", "--no-config"],
                                     ["triage", str(FIXTURES / "triage" / "socket-fallback.log")]])
def test_every_command_colours_by_the_same_rule(capsys, monkeypatch, command):
    from ncdoc.cli.main import main
    for k in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(k, raising=False)
    main(command)
    assert "\x1b[" not in capsys.readouterr().out          # not a terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    main(command)
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("TERM", "dumb")                      # FORCE_COLOR beats TERM=dumb, NO_COLOR beats both
    monkeypatch.setenv("NO_COLOR", "1")
    main(command)
    assert "\x1b[" not in capsys.readouterr().out
