"""Rules as data: every rule's documented example, and every pass/fail case in
tests/rule_cases/<pack>.yaml, run through the engine by one runner (ncdoc.engine.cases):
"fail" means the rule reports (at the case's `severity` when it gives one), "pass" that it
reports nothing at all.
"""

from __future__ import annotations

import pytest
import yaml

from ncdoc.engine import cases as rule_cases, ruleset
from ncdoc.engine.rules import RUN_NEEDS
from paths import ROOT

CASE_FILES = sorted((ROOT / "tests" / "rule_cases").glob("*.yaml"))
RULES = ruleset.load(from_sources=True)
CASES = [dict(c, _file=f.name) for f in CASE_FILES for c in yaml.safe_load(f.read_text())]


def _id(c: dict) -> str:
    return f"{c['rule']}-{c['case']}" + (f"-{c['id']}" if c.get("id") else "")


def _reads_run(rule, check: str) -> bool:
    return any(n in RUN_NEEDS for n in rule.needs + rule.check_gate(check)[0])


@pytest.mark.parametrize("rule", list(RULES), ids=lambda r: f"{r.code}-{r.name}")
def test_documented_example_behaves(rule):
    assert rule_cases.example_problems(rule) == []


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_rule_case(case):
    rule = RULES.get(case["rule"])
    assert rule_cases.case_problems(rule, {k: v for k, v in case.items() if k != "_file"}) == []


@pytest.mark.parametrize("rule", list(RULES), ids=lambda r: r.name)
def test_every_rule_has_a_pass_and_a_fail_case(rule):
    kinds = {c["case"] for c in CASES if c["rule"] == rule.name}
    assert kinds == {"pass", "fail"}, f"{rule.name} has cases {sorted(kinds)}"


def _run_case(case) -> bool:
    """A case on what a job printed: a log, nccl-tests output, a RAS or DIAG report, host command output."""
    return any(case.get(k) for k in ("log", "tests", "ras", "diag", "host"))


@pytest.mark.parametrize("rule", [r for r in RULES if len({_reads_run(r, c) for c in r.checks}) == 2],
                         ids=lambda r: r.name)
def test_a_rule_judging_node_and_run_has_cases_for_both_sides(rule):
    # its node check and its log check are separate code: each side needs its own pass and fail
    for side, has_run in (("node", False), ("run", True)):
        kinds = {c["case"] for c in CASES if c["rule"] == rule.name and _run_case(c) == has_run}
        assert kinds == {"pass", "fail"}, f"{rule.name}: {side}-side cases {sorted(kinds)}"


def test_failing_cases_on_run_evidence_say_their_severity():
    # what a job printed is judged loud or quiet case by case (an Ethernet-only cluster's sockets warn,
    # a lost RDMA device is an error): a failing case with a log or nccl-tests output says which
    quiet = [_id(c) for c in CASES if c["case"] == "fail" and _run_case(c) and not c.get("severity")]
    assert quiet == []


def test_cases_name_real_rules():
    names = {r.name for r in RULES}
    assert {c["rule"] for c in CASES} <= names
