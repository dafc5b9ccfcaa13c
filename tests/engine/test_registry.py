"""The rule registry: one set of codes and names, packs validated strictly, compiled.json and
docs/rules generated from the packs and up to date, data found by editable and wheel installs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ncdoc.engine import docs as ruledocs, packs, ruleset
from ncdoc.errors import InputError
from ncdoc.engine.rules import COMPILED_FIELDS
from paths import ROOT

CONTRACT = (
    "unknown-nccl-var", "invalid-value", "removed-var", "deprecated-var", "debug-var-in-production",
    "env-shadowed", "ib-disabled-by-env", "socket-threads-product", "p2p-disabled",
    "ib-hca-unknown-device", "ib-hca-includes-down-port", "nic-count-limited", "socket-ifname-no-match",
    "socket-ifname-loopback", "socket-ifname-virtual", "roce-gid-link-local", "roce-gid-v1",
    "roce-gid-index-unset", "no-rdma-devices", "net-plugin-missing", "gpu-without-local-nic", "acs-enabled",
    "peermem-not-loaded", "nccl-peermem-detection-bug", "virtual-topology", "port-down",
    "link-below-rated-speed", "mixed-link-layers", "link-errors", "roce-mtu-mismatch", "fabric-manager",
)
SHARED = {"no-rdma-devices": "ev_no_rdma_devices", "net-plugin-missing": "ev_net_plugin_missing",
          "socket-ifname-loopback": "ev_socket_ifname_loopback", "socket-ifname-virtual": "ev_socket_ifname_virtual",
          "fabric-manager": "ev_fabric_manager", "nic-count-limited": "ev_nic_count_limited"}
OWN_PACKS = ("env", "env-node", "network", "topology", "versions", "policy")


@pytest.fixture(scope="module")
def rules():
    return list(ruleset.load(from_sources=True))


def test_compiled_json_is_up_to_date():
    folder = Path(ruleset.compiled_path()).parent
    for name, text in packs.compile_texts().items():
        assert (folder / name).is_file() and (folder / name).read_text(encoding="utf-8") == text, \
            f"rules/{name} is out of date: run python -m ncdoc.engine.ruleset --compile"


def test_compiled_rules_module_is_up_to_date():
    # ncdoc/engine/compiled_rules.py is compiled.json's rows as Python constants, what the check path reads
    text = (Path(ruleset.compiled_path()).parent / "compiled.json").read_text(encoding="utf-8")
    assert Path(ruleset.module_path()).read_text(encoding="utf-8") == packs.compiled_module_text(text), \
        "ncdoc/engine/compiled_rules.py is out of date: run python -m ncdoc.engine.ruleset --compile"


def test_the_bundled_rules_come_from_the_module_as_compiled_json_has_them(tmp_path):
    import shutil
    for name in ("compiled.json", "compiled_docs.json"):
        shutil.copy(Path(ruleset.compiled_path()).parent / name, tmp_path / name)
    from_json = ruleset.load(str(tmp_path))
    bundled = ruleset._bundled()
    assert bundled is not None and ruleset.load().rules == bundled.rules
    def values(rule):
        return [(name, getattr(rule, name), type(getattr(rule, name))) for name in COMPILED_FIELDS]
    assert [values(r) for r in bundled] == [values(r) for r in from_json]
    assert all(a == b for a, b in zip(bundled, from_json))        # docs too (read from compiled_docs.json)
    assert bundled.check_modules == from_json.check_modules


def test_compiled_and_sources_agree(rules):
    compiled = ruleset.load()
    assert [r.code for r in compiled] == [r.code for r in rules]
    assert all(a == b for a, b in zip(compiled, rules))       # docs included: read from compiled_docs.json


def test_the_check_path_leaves_the_rules_docs_unread(tmp_path):
    # compiled.json holds what the engine reads; a rule's summary, why, references and example come
    # from compiled_docs.json the first time one is asked for (ncdoc rule, reports)
    import shutil
    for name in ("compiled.json", "compiled_docs.json"):
        shutil.copy(Path(ruleset.compiled_path()).parent / name, tmp_path / name)
    rs = ruleset.load(str(tmp_path))
    rule = rs.get("port-down")
    assert "_docs" in rule.__dict__ and "why" not in rule.__dict__
    (tmp_path / "compiled_docs.json").unlink()
    assert rule.fix and rule.scope == "multi-node"          # what findings need is there without the docs
    with pytest.raises(InputError, match="compiled_docs.json"):
        rule.why
    shutil.copy(Path(ruleset.compiled_path()).parent / "compiled_docs.json", tmp_path / "compiled_docs.json")
    assert rule.why and rule.references and rule.example == ruleset.load(from_sources=True).get("port-down").example
    assert "_docs" not in rule.__dict__


@pytest.mark.parametrize("damage", ["short row", "fields reordered", "not a row"])
def test_a_damaged_compiled_json_is_one_line_error(tmp_path, damage):
    # compiled.json holds each rule as a row of COMPILED_FIELDS' values; a file edited by hand or written by
    # another ncdoc is refused with the command that rewrites it, never read into rules with shifted fields
    import json
    import shutil
    folder = Path(ruleset.compiled_path()).parent
    shutil.copy(folder / "compiled_docs.json", tmp_path / "compiled_docs.json")
    data = json.loads((folder / "compiled.json").read_text(encoding="utf-8"))
    if damage == "short row":
        data["rules"][3] = data["rules"][3][:-1]
    elif damage == "fields reordered":
        data["fields"] = data["fields"][1:] + data["fields"][:1]
    else:
        data["rules"][0] = {"code": "NC1001"}
    (tmp_path / "compiled.json").write_text(json.dumps(data), encoding="utf-8")
    ruleset._LOADED.clear()
    try:
        with pytest.raises(InputError, match="--compile") as got:
            ruleset.load(str(tmp_path))
    finally:
        ruleset._LOADED.clear()
    assert "\n" not in str(got.value)


def test_docs_are_up_to_date(rules):
    pages = ruledocs.render_all(rules)
    docs = ROOT / "docs" / "rules"
    stale = [n for n, text in pages.items() if not (docs / n).is_file() or (docs / n).read_text() != text]
    extra = {p.name for p in docs.glob("*.md")} - set(pages)
    assert not stale and not extra, f"run python -m ncdoc.engine.docs (stale {stale[:5]}, extra {sorted(extra)})"


def test_contract_names_and_count(rules):
    names = {r.name for r in rules}
    assert len(rules) >= 40
    assert set(CONTRACT) <= names, sorted(set(CONTRACT) - names)


def test_codes_families_and_ranges(rules):
    for r in rules:
        assert re.fullmatch(r"NC[1-6]\d{3}", r.code)
        if r.pack in OWN_PACKS:
            assert r.code[3] in "01234", f"{r.code} is outside this pack's code range (second digit 0-4)"


def test_shared_rules_list_both_checks(rules):
    by_name = {r.name: r for r in rules}
    for name, ev_fn in SHARED.items():
        rule = by_name[name]
        assert ev_fn in rule.checks and len(rule.checks) >= 2, rule.checks
        assert not rule.needs, f"{name}: a rule with several checks must not have rule-level needs"
        # each side says what it reads: the log side a run's output, the node side(s) node facts
        # (NC1106 also judges an env alone: socket_ifname_loopback_by_name)
        assert set(rule.check_gate(ev_fn)[0]) & {"log", "evidence"}, rule.per_check
        for node_fn in (c for c in rule.checks if c != ev_fn):
            assert not set(rule.check_gate(node_fn)[0]) & {"log", "tests", "evidence"}, rule.per_check


def test_evidence_codes_stay_in_their_range(rules):
    for r in rules:
        if r.pack == "evidence":
            assert r.code[3] in "56789", f"{r.code} {r.name}: evidence codes are NCx5xx-NCx9xx"


def test_every_check_function_is_registered(rules):
    from ncdoc.checks import import_all
    from ncdoc.engine.rules import CHECKS
    import_all()
    missing = {c for r in rules for c in r.checks} - set(CHECKS)
    assert not missing


def test_lookup_by_code_name_and_alias():
    rs = ruleset.load()
    assert rs.get("NC1002").name == "invalid-value"
    assert rs.get("invalid-value").code == "NC1002"
    assert rs.get("nc1002").code == "NC1002"
    with pytest.raises(Exception, match="did you mean"):
        rs.get("invalid-valu")
    assert {r.code[:3] for r in rs.matching("NC1")} == {"NC1"}


def test_rules_dir_found_like_resources():
    from ncdoc.resources import data_dir
    assert Path(ruleset._rules_dir_fast()) == data_dir("rules")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"rules" = "ncdoc/_bundled/rules"' in pyproject       # the wheel carries rules/


def test_wheel_layout_is_preferred(tmp_path, monkeypatch):
    pkg = tmp_path / "ncdoc"
    (pkg / "_bundled" / "rules").mkdir(parents=True)
    monkeypatch.setattr(ruleset, "_PKG", str(pkg))
    assert ruleset._rules_dir_fast() == str(pkg / "_bundled" / "rules")


# ---------------------------------------------------------------- strict pack validation

GOOD = """\
pack: demo
rules:
  - code: NC1999
    name: demo-rule
    severity: warning
    stage: settings
    summary: one line
    why: because
    fix: do this
    references: [https://example.org]
    when: {env: NCCL_DEBUG, equals: INFO}
    message: "NCCL_DEBUG={env:NCCL_DEBUG}"
    example: {env: {NCCL_DEBUG: INFO}, expect: [demo-rule]}
"""


def test_good_pack_parses():
    (rule,) = packs.parse_pack(GOOD, "demo.yaml")
    assert rule.code == "NC1999" and rule.when == {"env": "NCCL_DEBUG", "equals": "INFO"}


@pytest.mark.parametrize("change, line, words", [
    (("    fix: do this\n", "    fix: do this\n    fixx: typo\n"), 10, "unknown key 'fixx'"),
    (("equals: INFO}", "equal: INFO}"), 11, "unknown operator 'equal'"),
    (("{env: NCCL_DEBUG, equals: INFO}", "{fact: nccl_versoin, equals: x}"), 11, "unknown fact 'nccl_versoin'"),
    (("code: NC1999", "code: NC999"), 3, "code"),
    (("name: demo-rule", "name: Demo_Rule"), 4, "kebab-case"),
    (("severity: warning", "severity: fatal"), 5, "severity"),
    (("stage: settings", "stage: networking"), 6, "stage"),
    (("    example: {env: {NCCL_DEBUG: INFO}, expect: [demo-rule]}\n", "    example: {env: {NCCL_DEBUG: INFO}}\n"),
     13, "expect"),
    (("expect: [demo-rule]}", "expect: [demo-rule], inputs: 1}"), 13, "unknown key 'inputs'"),
    (("    message: \"NCCL_DEBUG={env:NCCL_DEBUG}\"\n", ""), 3, "message"),
    (("{env: NCCL_DEBUG, equals: INFO}", "{env: NCCL_DEBUG, matches: '('}"), 11, "regex"),
    (("references: [https://example.org]", "references: [example.org]"), 10, "references"),
])
def test_bad_pack_names_file_line_and_key(change, line, words):
    text = GOOD.replace(*change)
    with pytest.raises(InputError) as err:
        packs.parse_pack(text, "demo.yaml")
    msg = str(err.value)
    assert msg.startswith(f"demo.yaml:{line}:"), msg
    assert words in msg


CHECK_RULE = """\
pack: demo
rules:
  - code: NC1999
    name: demo-rule
    severity: warning
    stage: settings
    summary: one line
    why: because
    fix: do this
    references: [https://example.org]
    check: {node_fn: {needs: [hcas], only_if_set: [NCCL_IB_HCA]}, log_fn: {needs: [log]}}
    example: {env: {NCCL_DEBUG: INFO}, expect: [demo-rule]}
"""


def test_checks_declare_their_needs_per_check():
    (rule,) = packs.parse_pack(CHECK_RULE, "demo.yaml")
    assert rule.checks == ("node_fn", "log_fn") and not rule.needs
    assert rule.check_gate("node_fn") == (("hcas",), ("NCCL_IB_HCA",))
    assert rule.check_gate("log_fn") == (("log",), ())


@pytest.mark.parametrize("change, line, words", [
    (("needs: [log]}", "needs: [logs]}"), 11, "check log_fn: needs: must be a list from"),
    (("only_if_set: [NCCL_IB_HCA]", "only_if_set: [ib_hca]"), 11, "only_if_set: must be a list of NCCL_* variable"),
    (("{needs: [log]}}", "{need: [log]}}"), 11, "unknown key 'need'"),
    (("    check:", "    needs: [hcas]\n    check:"), 11, "a rule with a needs/only_if_set per check has none"),
    (("    example:", "    fallback: maybe\n    example:"), 12, "fallback: must be true or false"),
    (("    example:", "    fallback: true\n    example:"), 12, "give it 'needs'"),
    (("    check: {node_fn: {needs: [hcas], only_if_set: [NCCL_IB_HCA]}, log_fn: {needs: [log]}}\n",
      "    when: {env: NCCL_DEBUG, set: true}\n    message: m\n    only_if_set: [NCCL_DEBUG]\n"), 13,
     "only_if_set: is for check rules"),
])
def test_bad_check_declarations_name_file_line_and_key(change, line, words):
    text = CHECK_RULE.replace(*change)
    assert text != CHECK_RULE
    with pytest.raises(InputError) as err:
        packs.parse_pack(text, "demo.yaml")
    msg = str(err.value)
    assert msg.startswith(f"demo.yaml:{line}:"), msg
    assert words in msg, msg


def test_duplicate_codes_are_rejected():
    a = packs.parse_pack(GOOD, "a.yaml")
    with pytest.raises(InputError, match="NC1999"):
        packs.check_registry(a + a)


def test_invalid_yaml_names_the_line():
    with pytest.raises(InputError, match=r"bad\.yaml:3: not valid YAML"):
        packs.parse_pack("pack: x\nrules: [\n  - {\n", "bad.yaml")


def test_rules_json_lists_everything(capsys):
    from ncdoc.cli.main import main
    assert main(["rules", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    names = {r["name"] for r in data["rules"]}
    assert len(data["rules"]) >= 40 and set(CONTRACT) <= names


def test_rule_command_prints_the_sections(capsys):
    from ncdoc.cli.main import main
    assert main(["rule", "socket-ifname-loopback"]) == 0
    out = capsys.readouterr().out
    for head in ("## What it does", "## Why it matters", "## Example", "## How to fix", "## References"):
        assert head in out
    assert "NC1106" in out


def test_rule_command_unknown_code_exits_2(capsys):
    from ncdoc.cli.main import main
    assert main(["rule", "NC9999"]) == 2
    assert "unknown rule" in capsys.readouterr().err
