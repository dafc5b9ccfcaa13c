"""Rules as data: every rule's documented example, and every pass/fail case in
tests/rule_cases/<pack>.yaml for the packs this suite owns, run through the engine.

A case runs its rule alone: "fail" means the rule fires (at `severity` when given), "pass"
that it does not fire at all. (tests/rule_cases/evidence.yaml has its own runner.)
"""

from __future__ import annotations

import pytest
import yaml

from ncdoc.engine import cases as rule_cases, ruleset
from paths import ROOT

CASE_FILES = ("env", "env_node", "network", "topology", "versions", "policy")
OWN_PACKS = ("env", "env-node", "network", "topology", "versions", "policy")
RULES = ruleset.load(from_sources=True)
CASES = [dict(c, _file=f) for f in CASE_FILES
         for c in yaml.safe_load((ROOT / "tests" / "rule_cases" / f"{f}.yaml").read_text())]
CASE_KEYS = {"rule", "case", "id", "severity", "_file", "env", "conf", "example", "patch", "log", "tests",
             "launch", "nccl_version", "policy"}


def _id(c: dict) -> str:
    return f"{c['rule']}-{c['case']}" + (f"-{c['id']}" if c.get("id") else "")


@pytest.mark.parametrize("rule", list(RULES), ids=lambda r: f"{r.code}-{r.name}")
def test_documented_example_behaves(rule):
    assert rule_cases.example_problems(rule) == []


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_rule_case(case):
    assert set(case) <= CASE_KEYS, f"unknown case keys {set(case) - CASE_KEYS}"
    rule = RULES.get(case["rule"])
    fired, report = rule_cases.case_outcome(rule, case)
    sevs = {f.severity for f in report.findings if f.name == rule.name}
    skipped = [s.reason for s in report.skipped if s.name == rule.name]
    if case["case"] == "fail":
        assert fired, f"{rule.name} did not fire (skipped: {skipped})"
        if case.get("severity"):
            assert case["severity"] in sevs, f"severities {sevs}"
    else:
        assert case["case"] == "pass"
        msgs = [f.message for f in report.findings if f.name == rule.name]
        assert not fired, f"{rule.name} fired: {msgs}"


@pytest.mark.parametrize("rule", [r for r in RULES if r.pack in OWN_PACKS], ids=lambda r: r.name)
def test_every_rule_has_a_pass_and_a_fail_case(rule):
    kinds = {c["case"] for c in CASES if c["rule"] == rule.name}
    assert kinds == {"pass", "fail"}, f"{rule.name} has cases {sorted(kinds)}"


def test_cases_name_real_rules():
    names = {r.name for r in RULES}
    assert {c["rule"] for c in CASES} <= names
