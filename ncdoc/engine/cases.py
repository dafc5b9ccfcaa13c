"""Rule examples and test cases as data: inputs -> Context -> Report -> which rules fired.

Inputs (a rule's `example`, or one entry of tests/rule_cases/<pack>.yaml):
    env: {NAME: value | null}     the job's variables (null: unset a fixture's value)
    conf: text                    an nccl.conf under them (NCCL's precedence)
    example: fixture              a fixture machine (ncdoc.examples.machines.load_example)
    patch: {path: value}          changes to that machine's snapshot, by dotted path into its JSON form
                                  ("host.kernel", "gpus.gpus.3.nvlinks.0.active", "pci.devices.*.acs_ctrl")
    nccl_version: "2.21.5"        the NCCL version to judge against
    log / tests / launch: text    evidence parsed by ncdoc.evidence (NCCL log, nccl-tests, launch script)
    ras / diag / host: text       an ncclras report, NCCL DIAG lines, host command output (ulimit -a, nvidia-smi)
    policy: {policy pack}         a site policy pack (ncdoc.engine.policy format), for the policy rules
    cluster: {...}                many nodes, for the cross-node rules (rules/cluster.yaml):
        example: dgx-h100         every node starts as this fixture machine, named node01..nodeNN
        nodes: 8                  how many
        patch: {node03: {dotted.path: value}}   per-node changes, as `patch` above
        env: {node05: {NAME: value | null}}     per-node job variables, as `env` above
        unreachable: {node08: reason}           nodes that did not answer the gather
        clock: {node04: 9.5}                    a node's clock offset in seconds (measured +-0.5 s)
        golden: node01                          judge against this node instead of the majority

A case adds {rule: name, case: pass | fail, id: text, severity: level}. It runs its rule alone
(a fallback rule with every rule, since it reads their findings): "fail" means the rule reports
something, at `severity` when the case gives one; "pass" that it reports nothing at all.

An example adds {expect: [names]}: every rule named fires, no rule left out reports at warning
or error, and the example's own rule fires only when named (and is then not skipped).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any, Mapping

from ncdoc.engine.rules import Context, Rule, run_rules
from ncdoc.findings import Report

# input key -> (evidence kind in Context, "module:function") for evidence the examples may carry
EVIDENCE_PARSERS = {
    "log": ("nccl_log", "ncdoc.evidence.nccl_log:parse_nccl_log"),
    "tests": ("nccl_tests", "ncdoc.evidence.nccl_tests:parse_nccl_tests"),
    "launch": ("launch", "ncdoc.evidence.launch_env:parse_launch_env"),
    "ras": ("ras", "ncdoc.evidence.ras_report:parse_ras_text"),
    "diag": ("diag", "ncdoc.evidence.nccl_diag:parse_nccl_diag"),
    "host": ("host_output", "ncdoc.evidence.host_output:parse_host_output"),
}
_LINE_PARSED = ("log", "tests", "ras", "diag", "host")


@lru_cache(maxsize=32)
def fixture(name: str):
    from ncdoc.examples.machines import load_example
    return load_example(name)


def _parse_evidence(key: str, text: str) -> tuple[str, Any]:
    kind, target = EVIDENCE_PARSERS[key]
    mod_name, fn_name = target.split(":")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"example input {key!r} needs {target}, which is not available: {exc}") from None
    if key in _LINE_PARSED:            # line parsers: NCCL logs, nccl-tests output, reports stream by line
        return kind, fn(text.splitlines(), "example")
    return kind, fn(text, "example")


def patched(snap, patch: Mapping[str, Any]):
    """`snap` with each dotted path of its JSON form set to the given value ("*" = every list item)."""
    from ncdoc.snapshot import Snapshot
    data = snap.to_dict()

    def put(node, keys, value, path):
        k = keys[0]
        items = (range(len(node)) if k == "*" else [int(k)]) if isinstance(node, list) else [k]
        for i in items:
            if len(keys) == 1:
                node[i] = value
            else:
                put(node[i], keys[1:], value, path)
    for path, value in patch.items():
        put(data, path.split("."), value, path)
    return Snapshot.from_dict(data, path="<patch>")


def cluster_facts(spec: Mapping[str, Any]):
    """An ncdoc.cluster.facts.ClusterFacts of fixture nodes (the `cluster` input above)."""
    from ncdoc.cluster.facts import ClusterFacts, Unreachable
    from ncdoc.envfiles.layers import overlay
    from ncdoc.startup.record import replace
    base = fixture(spec["example"])
    count = int(spec.get("nodes", 4))
    width = max(2, len(str(count)))
    patches, envs = spec.get("patch") or {}, spec.get("env") or {}
    nodes = {}
    for i in range(1, count + 1):
        name = f"node{i:0{width}d}"
        snap = base.replace(host=replace(base.host, hostname=name))
        if patches.get(name):
            snap = patched(snap, patches[name])
        if envs.get(name):
            env_in = {k: (None if v is None else str(v)) for k, v in envs[name].items()}
            snap = snap.replace(env=overlay(snap.env, env_in, source="env", conf=[]))
        nodes[name] = snap
    gone = spec.get("unreachable") or {}
    facts = ClusterFacts({n: s for n, s in nodes.items() if n not in gone},
                         unreachable=[Unreachable(n, str(r), "timeout") for n, r in gone.items()],
                         clock_offsets={n: (float(v) - 0.5, float(v) + 0.5) for n, v in (spec.get("clock") or {}).items()},
                         source="example")
    if spec.get("golden"):
        facts = facts.with_golden(nodes[spec["golden"]], spec["golden"])
    return facts


def context(inputs: Mapping[str, Any], *, options: Mapping[str, Any] | None = None) -> Context:
    from ncdoc.envfiles.layers import overlay, parse_conf
    if inputs.get("cluster"):
        return Context(snapshot=None, cluster=cluster_facts(inputs["cluster"]), options=dict(options or {}))
    snap = fixture(inputs["example"]) if inputs.get("example") else None
    if snap is not None and inputs.get("patch"):
        snap = patched(snap, inputs["patch"])
    env_in = {k: (None if v is None else str(v)) for k, v in (inputs.get("env") or {}).items()}
    conf = parse_conf(inputs["conf"], "file:nccl.conf") if inputs.get("conf") else []
    env = overlay(snap.env if snap else None, env_in, source="env", conf=conf)
    evidence: dict[str, list[Any]] = {}
    for key in EVIDENCE_PARSERS:
        if inputs.get(key):
            kind, parsed = _parse_evidence(key, inputs[key])
            evidence.setdefault(kind, []).append(parsed)
    if snap is not None:
        snap = snap.replace(env=env)
    version = inputs.get("nccl_version")
    opts = dict(options or {})
    if inputs.get("policy"):
        from ncdoc.engine.policy import parse_policy
        opts.setdefault("policies", [parse_policy(inputs["policy"], "<example policy>")])
    return Context(snapshot=snap, env=env, evidence=evidence, nccl_version=str(version) if version else None,
                   options=opts)


def run(inputs: Mapping[str, Any], rules=None, *, options: Mapping[str, Any] | None = None) -> Report:
    """Run `rules` (default: the whole registry) over the inputs."""
    from ncdoc.engine import ruleset
    rs = ruleset.load()
    rules = list(rules) if rules is not None else list(rs)
    missing = rs.ensure_checks(rules)
    if missing:
        raise RuntimeError(f"check functions not registered: {', '.join(sorted(missing))}")
    return run_rules(context(inputs, options=options), rules)


def fired(report: Report) -> set[str]:
    return {f.name for f in report.findings}


def example_problems(rule: Rule, inputs: Mapping[str, Any] | None = None) -> list[str]:
    """Why a rule's example (or other inputs with `expect`) does not behave as it says."""
    inputs = inputs if inputs is not None else rule.example
    report = run(inputs)
    got = fired(report)
    expect = set(inputs.get("expect") or [])
    problems = [f"expected {n} to fire" for n in sorted(expect - got)]
    loud = sorted({f.name for f in report.findings if f.severity in ("warning", "error")} - expect - {rule.name})
    problems += [f"{n} fires at warning or error but the example does not expect it" for n in loud]
    if rule.name not in expect and rule.name in got:
        msgs = [f.message for f in report.findings if f.name == rule.name]
        problems.append(f"{rule.name} fired but the example expects it not to: {msgs[0]}")
    skipped = [s for s in report.skipped if s.name == rule.name]
    if rule.name in expect and skipped:
        problems.append(f"{rule.name} was skipped: {skipped[0].reason}")
    return problems


CASE_KEYS = frozenset({"rule", "case", "id", "severity", "env", "conf", "example", "patch", "log", "tests",
                       "launch", "ras", "diag", "host", "nccl_version", "policy", "cluster"})


def case_problems(rule: Rule, case: Mapping[str, Any]) -> list[str]:
    """Why one pass/fail case of `rule` does not hold (empty when it does)."""
    unknown = set(case) - CASE_KEYS
    if unknown:
        return [f"unknown case keys {sorted(unknown)}"]
    if case.get("case") not in ("pass", "fail"):
        return [f"case must be pass or fail, not {case.get('case')!r}"]
    from ncdoc.engine import ruleset
    report = run(case, list(ruleset.load()) if rule.fallback else [rule])
    mine = [f for f in report.findings if f.name == rule.name]
    if case["case"] == "pass":
        return [f"{rule.name} fired on a passing case: {mine[0].message}"] if mine else []
    if not mine:
        skipped = [s.reason for s in report.skipped if s.name == rule.name]
        return [f"{rule.name} did not fire" + (f" (skipped: {skipped[0]})" if skipped else "")]
    severities = sorted({f.severity for f in mine})
    if case.get("severity") and case["severity"] not in severities:
        return [f"{rule.name} fired at {', '.join(severities)}, not {case['severity']}"]
    return []


__all__ = ["EVIDENCE_PARSERS", "CASE_KEYS", "fixture", "cluster_facts", "context", "run", "fired", "example_problems",
           "case_problems"]
