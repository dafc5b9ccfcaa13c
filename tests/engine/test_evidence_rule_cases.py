"""Evidence rules as data: every rules/evidence.yaml example and every case in
tests/rule_cases/evidence.yaml runs through the engine exactly as `ncdoc triage` would.

A case is {rule, case: pass|fail, id?, severity?, log?, tests?, env?, nccl_version?, example?}
read by ncdoc.engine.cases.context, as every pack's cases are: "fail" means the rule must report at warning or error (at `severity` when given), "pass"
that it reports nothing at all.
"""

from __future__ import annotations

import pytest
import yaml

from ncdoc.engine.rules import run_rules
from ncdoc.engine.cases import context
from ncdoc.engine.ruleset import load_sources
from paths import ROOT

CASES = yaml.safe_load((ROOT / "tests" / "rule_cases" / "evidence.yaml").read_text())
RULES = {r.name: r for r in load_sources()}
EVIDENCE_RULES = [r for r in RULES.values() if r.pack == "evidence"]
SHARED = ("no-rdma-devices", "net-plugin-missing", "socket-ifname-loopback", "socket-ifname-virtual",
          "fabric-manager", "nic-count-limited", "mixed-link-layers")


def fired(spec: dict, rules) -> dict[str, set[str]]:
    from ncdoc.engine.ruleset import RuleSet
    RuleSet(list(rules)).ensure_checks(rules)
    report = run_rules(context(spec), rules)     # the shared case semantics of ncdoc.engine.cases
    out: dict[str, set[str]] = {}
    for f in report.findings:
        out.setdefault(f.name, set()).add(f.severity)
    return out


@pytest.mark.parametrize("rule", EVIDENCE_RULES, ids=lambda r: r.name)
def test_documented_example_fires(rule):
    got = fired(rule.example, [RULES[n] for n in RULES if RULES[n].pack == "evidence" or n in SHARED])
    for name in rule.example["expect"]:
        assert got.get(name, set()) & {"error", "warning"}, f"{name} did not fire on the example: {got}"
    loud = {n for n, sev in got.items() if sev & {"error", "warning"}}
    assert loud <= set(rule.example["expect"]), f"example also fires {loud - set(rule.example['expect'])}"


def _case_id(case: dict) -> str:
    return f"{case['rule']}-{case['case']}-{case.get('id', '')}".rstrip("-")


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_rule_case(case):
    rule = RULES[case["rule"]]
    got = fired(case, [rule])
    if case["case"] == "fail":
        assert got.get(rule.name, set()) & {"error", "warning"}, f"{rule.name} did not fire: {got}"
        if case.get("severity"):
            assert case["severity"] in got[rule.name]
    else:
        assert rule.name not in got, f"{rule.name} fired on a passing case: {got}"


def test_every_evidence_rule_has_a_pass_and_a_fail_case():
    kinds = {(c["rule"], c["case"]) for c in CASES}
    for r in EVIDENCE_RULES + [RULES[n] for n in SHARED]:
        assert (r.name, "fail") in kinds, f"no failing case for {r.name}"
        assert (r.name, "pass") in kinds, f"no passing case for {r.name}"


def test_evidence_codes_stay_in_their_range():
    for r in EVIDENCE_RULES:
        assert r.code[3] in "56789", f"{r.code} {r.name}: evidence codes are NCx5xx-NCx9xx"
