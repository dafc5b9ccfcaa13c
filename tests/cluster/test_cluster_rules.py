"""Cross-node rules as data: every pass/fail case of tests/rule_cases/cluster.yaml through the engine,
and the rules stay out of every single-node command."""

from __future__ import annotations

import pytest
import yaml

from ncdoc.engine import cases as rule_cases, ruleset
from paths import ROOT

RULES = ruleset.load(from_sources=True)
CASES = yaml.safe_load((ROOT / "tests" / "rule_cases" / "cluster.yaml").read_text())
CASE_KEYS = {"rule", "case", "id", "severity", "cluster"}
CLUSTER_RULES = [r for r in RULES if r.pack == "cluster"]


def _id(c: dict) -> str:
    return f"{c['rule']}-{c['case']}" + (f"-{c['id']}" if c.get("id") else "")


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_cluster_rule_case(case):
    assert set(case) <= CASE_KEYS, f"unknown case keys {set(case) - CASE_KEYS}"
    rule = RULES.get(case["rule"])
    assert rule_cases.case_problems(rule, case) == []
    if case["case"] == "fail":
        # the odd node is named in the message, which is what a user reads first
        spec = case["cluster"]
        odd = set(spec.get("patch") or {}) | set(spec.get("env") or {}) | set(spec.get("unreachable") or {})
        if odd and spec.get("nodes", 4) > 2:
            mine = [f for f in rule_cases.run(case, [rule]).findings if f.name == rule.name]
            assert any(n in f.message for f in mine for n in odd), [f.message for f in mine]


@pytest.mark.parametrize("rule", CLUSTER_RULES, ids=lambda r: r.name)
def test_every_cluster_rule_has_a_pass_and_a_fail_case(rule):
    assert {c["case"] for c in CASES if c["rule"] == rule.name} == {"pass", "fail"}


def test_cluster_rules_are_not_run_on_one_node():
    from ncdoc.engine.rules import Context
    from ncdoc.engine.selection import resolve
    sel = resolve(select=None, ignore=[], severity=[], fail_on=None, rules_files=[], config=None, no_config=True,
                  default_fail_on="error")
    report = sel.run(Context(snapshot=rule_cases.fixture("dgx-h100")))
    codes = {f.code for f in report.findings} | {s.code for s in report.skipped}
    assert not codes & {r.code for r in CLUSTER_RULES}


def test_one_bad_node_among_64_is_named_with_its_values():
    facts = rule_cases.cluster_facts({"example": "dgx-h100", "nodes": 64,
                                      "patch": {"node33": {"host.modules.nvidia_peermem": False,
                                                           "hcas.hcas.4.ports.0.rate_gbps": 200.0}}})
    from ncdoc.engine.rules import Context, run_rules
    report = run_rules(Context(cluster=facts), [r for r in CLUSTER_RULES])
    by_name = {f.name: f for f in report.findings}
    assert set(by_name) == {"peermem-drift", "link-rate-drift"}
    assert "nvidia_peermem on 63 of 64 nodes, but not loaded on node33" in by_name["peermem-drift"].message
    assert "mlx5_4:1 rate: 400 Gb/s on 63 of 64 nodes, but 200 Gb/s on node33" in by_name["link-rate-drift"].message
