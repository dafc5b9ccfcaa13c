"""What the engine does before and after a check: declared needs (skipped, with the reason),
only_if_set (nothing to judge: no finding, not skipped), Context.require, fallback rules that
read the other rules' findings, and which rules a node check runs."""

from __future__ import annotations

import pytest

from ncdoc.engine.rules import Context, Rule, node_rules, run_rules
from ncdoc.findings import Evidence, Hit, Skip
from ncdoc.snapshot import EnvValue, NcclEnv, Status


def _env(**values) -> NcclEnv:
    return NcclEnv(Status.ok("test"), tuple(EnvValue(k, v, "env") for k, v in values.items()))


def _rule(code="NC1998", name="demo-rule", **kw) -> Rule:
    kw.setdefault("checks", ("demo",))
    return Rule(code=code, name=name, severity="warning", summary="s", **kw)


CALLS: list[str] = []


def _demo(ctx):
    CALLS.append("demo")
    yield Hit("seen", (Evidence("x", "a.log", 1),), subject="demo")


def _run(rules, ctx=None, **checks):
    CALLS.clear()
    return run_rules(ctx or Context(env=_env()), rules, checks={"demo": _demo, **checks})


def test_a_missing_need_skips_the_rule_with_the_reason_and_never_calls_the_check():
    report = _run([_rule(needs=("hcas",))])
    assert CALLS == [] and not report.findings
    assert [(s.code, s.reason) for s in report.skipped] == [("NC1998", "no node snapshot (run on the node, "
                                                                       "or pass --snapshot)")]


@pytest.mark.parametrize("env, runs", [({}, False), ({"NCCL_IB_HCA": ""}, False), ({"NCCL_IB_HCA": "mlx5_0"}, True),
                                       ({"NCCL_NET": "IB"}, True)])
def test_only_if_set_runs_the_check_when_one_variable_is_set(env, runs):
    # unset, or empty (NCCL reads an empty variable as unset): nothing to judge, so no finding and no skip,
    # even though the node facts the check needs are unknown
    report = _run([_rule(needs=("hcas",), only_if_set=("NCCL_IB_HCA", "NCCL_NET"))], Context(env=_env(**env)))
    assert not report.findings
    assert bool(report.skipped) is runs           # set: the need is checked next, and fails here


def test_a_rule_with_two_checks_is_skipped_only_when_both_lack_their_facts():
    rule = _rule(checks=("demo", "other"), per_check={"demo": {"needs": ("hcas",)}, "other": {"needs": ("log",)}})
    report = _run([rule], other=_demo)
    assert CALLS == [] and report.skipped[0].reason.endswith("; no NCCL log given")
    report = _run([rule], Context(env=_env(), evidence={"nccl_log": ["a log"]}), other=_demo)
    assert CALLS == ["demo"] and not report.skipped and len(report.findings) == 1


def test_a_check_silenced_by_only_if_set_counts_as_run():
    rule = _rule(checks=("demo", "other"), per_check={"demo": {"only_if_set": ("NCCL_IB_HCA",)},
                                                      "other": {"needs": ("log",)}})
    report = _run([rule], other=_demo)
    assert not report.skipped and not report.findings and CALLS == []


def test_require_raises_the_engines_skip():
    ctx = Context(env=_env())
    with pytest.raises(Skip, match="NCCL version unknown"):
        ctx.require("env", "nccl_version")
    ctx.require("env")                      # present: nothing raised

    def late(c):
        c.require("log")
        yield Hit("never")
    report = _run([_rule(checks=("late",))], late=late)
    assert [s.reason for s in report.skipped] == ["no NCCL log given"]


def _fallback_rule():
    return _rule(code="NC5999", name="fallback-demo", checks=("fb",), needs=("log",), fallback=True)


def _fallback(ctx):
    CALLS.append("fb:" + ",".join(sorted(f.name for f in ctx.findings)))
    return [Hit("nothing explains it")] if not ctx.findings else []


def test_a_fallback_runs_last_and_reads_what_the_checks_needing_its_facts_found():
    log_rule = _rule(code="NC4998", name="log-demo", needs=("log",))
    node_rule = _rule(code="NC4997", name="node-demo")             # needs no log: its findings are not shown
    ctx = Context(env=_env(), evidence={"nccl_log": ["a log"]})
    report = _run([_fallback_rule(), node_rule, log_rule], ctx, fb=_fallback)
    assert CALLS == ["demo", "demo", "fb:log-demo"]
    assert {f.name for f in report.findings} == {"log-demo", "node-demo"}
    report = _run([_fallback_rule(), node_rule], ctx, fb=_fallback)
    assert CALLS[-1] == "fb:" and "fallback-demo" in {f.name for f in report.findings}


def test_skipped_rules_keep_their_order_when_a_fallback_moves_to_the_end():
    rules = [_rule(code="NC1001", name="a", needs=("hcas",)), _fallback_rule(), _rule(code="NC1003", name="c", needs=("pci",))]
    assert [s.code for s in _run(rules, fb=_fallback).skipped] == ["NC1001", "NC5999", "NC1003"]


def test_node_rules_leave_out_the_rules_that_read_only_a_run():
    shared = _rule(code="NC4001", name="shared", checks=("node", "ev"), per_check={"ev": {"needs": ("log",)}})
    log_only = _rule(code="NC4501", name="log-only", needs=("log",))
    tests_only = _rule(code="NC6501", name="tests-only", checks=("a", "b"),
                       per_check={"a": {"needs": ("tests",)}, "b": {"needs": ("evidence",)}})
    declarative = Rule(code="NC1019", name="when-rule", severity="info", summary="s", when={"env": "NCCL_X", "set": True})
    assert [r.name for r in node_rules([shared, log_only, tests_only, declarative])] == ["shared", "when-rule"]


def test_ncdoc_check_runs_the_node_rules_of_the_registry():
    from ncdoc.engine import ruleset
    rules = list(ruleset.load())
    node = {r.name for r in node_rules(rules)}
    assert "socket-ifname-loopback" in node and "port-down" in node           # shared, node-only
    assert "socket-fallback" not in node and "unexplained-nccl-warning" not in node and "busbw-collapse" not in node
    assert {r.name for r in rules} - node == {r.name for r in rules if r.pack == "evidence"}


# ---------------------------------------------------------------- declarative rules: the env gate

@pytest.mark.parametrize("cond, gate", [
    ({"env": "NCCL_X", "set": True}, ("NCCL_X",)),
    ({"env": "NCCL_X", "set": False}, ()),                        # true when undefined: no gate
    ({"env": "NCCL_X", "int_eq": 0}, ("NCCL_X",)),
    ({"not": {"env": "NCCL_X", "equals": "1"}}, ()),
    ({"all": [{"fact": "gpu_count", "gt": 0}, {"env": "NCCL_X", "matches": "ib"}]}, ("NCCL_X",)),
    ({"any": [{"env": "NCCL_X", "int_eq": 0}, {"env": "NCCL_Y", "int_ge": 32}]}, ("NCCL_X", "NCCL_Y")),
    ({"any": [{"env": "NCCL_X", "int_eq": 0}, {"fact": "gpu_count", "gt": 0}]}, ()),
])
def test_env_gate_names_what_a_condition_cannot_hold_without(cond, gate):
    from ncdoc.engine.conditions import env_gate
    assert env_gate(cond) == gate


def test_a_gated_condition_is_false_whenever_its_variables_are_undefined():
    # the engine skips evaluating a declarative rule whose gate variables are all undefined: that must
    # be what evaluating it would say, on every example and case of the rule
    import yaml

    from ncdoc.engine import cases, conditions, ruleset
    from paths import ROOT
    rules = [r for r in ruleset.load(from_sources=True) if r.when is not None]
    assert rules and all(r.env_gate for r in rules)
    case_inputs = [c for f in (ROOT / "tests" / "rule_cases").glob("*.yaml") for c in yaml.safe_load(f.read_text())]
    for rule in rules:
        inputs = [rule.example] + [c for c in case_inputs if c["rule"] == rule.name]
        for given in inputs:
            env = {**(given.get("env") or {}), **{n: None for n in rule.env_gate}}
            ctx = cases.context({**given, "env": env, "conf": None})
            assert conditions.evaluate(rule, ctx) == [], (rule.name, given)


def test_a_node_setting_none_of_the_gate_variables_never_loads_the_condition_language(tmp_path):
    import subprocess
    import sys
    code = ("import sys; from ncdoc.cli.main import main; rc = main(['check', '--example', 'dgx-h100', "
            "'--no-config']); print('LOADED' if 'ncdoc.engine.conditions' in sys.modules else 'NOT', rc)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.stdout.splitlines()[-1].split() == ["NOT", "0"], p.stdout + p.stderr
    code = code.replace("'--no-config']", "'--no-config', '--env', 'NCCL_IB_TIMEOUT=0']")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.stdout.splitlines()[-1].split() == ["LOADED", "0"], p.stdout + p.stderr   # NC1017: a warning
    assert "NC1017 ib-timeout-infinite" in p.stdout
