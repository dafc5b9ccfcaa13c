"""Rule packs (rules/*.yaml): read, validated and compiled into rules/compiled.json and
rules/compiled_docs.json.

The packs are the source; `python -m ncdoc.engine.ruleset --compile` writes the compiled files,
which is what the fast paths (`ncdoc check`) read through ncdoc.engine.ruleset, with json and no
YAML import: compiled.json holds what the engine reads, compiled_docs.json each rule's summary,
why, references and example (read only when docs are shown). A test fails when either is out of
date. Nothing here is on the check path.

Pack format (unknown keys are rejected with file, line and key):
    pack: env
    description: ...            # optional
    rules:
      - code: NC1001            # NC + family digit + 3 digits, permanent
        name: unknown-nccl-var  # kebab-case, names the problem
        severity: warning       # error | warning | info
        stage: settings         # one of engine.STAGES
        summary: ...            # one line
        why: ...                # why it matters
        fix: ...                # how to fix
        references: [https://...]
        needs: [hcas]           # optional, from engine.NEEDS: without one the rule is skipped, with the reason
        only_if_set: [NCCL_X]   # optional, check rules: unless one of these is set (non-empty), no finding
        check: fn | [fn, ...]   # registered check functions ...
        check: {fn: {needs: [hcas], only_if_set: [NCCL_X]}, ev_fn: {needs: [log]}}
                                # ... several, each with its own needs (then no rule-level needs) ...
        when: {...}             # ... or a declarative condition (ncdoc.engine.conditions)
        fallback: true          # optional: runs after the other rules, over their findings
        scope: multi-node       # optional (default any): the problem matters only to a job spanning several
                                # nodes; on a job known to run on one node its findings are info, with why
        message: ...            # template for `when` rules
        env_patch: {NAME: value|null}   # optional, `when` rules: the fix as env
        example: {env: {...}, conf: text, example: fixture, patch: {dotted.path: value}, log: text, tests: text,
                  launch: text, nccl_version: "2.21.5", policy: {a policy pack}, note: text,
                  cluster: {many nodes, see ncdoc.engine.cases}, expect: [names]}
        aliases: [old-name]     # optional
"""

from __future__ import annotations

from ncdoc.engine.rules import CHECKS, COMPILED_FIELDS, COMPILED_SCHEMA, NEEDS, SCOPES, STAGES, Rule
from ncdoc.errors import InputError
from ncdoc.findings import SEVERITIES

TYPE_CHECKING = False      # typing is not imported at run time (start-up cost); type checkers see this
if TYPE_CHECKING:
    from typing import Any

RULE_KEYS_REQUIRED = ("code", "name", "severity", "stage", "summary", "why", "fix", "references", "example")
RULE_KEYS_OPTIONAL = ("needs", "only_if_set", "check", "when", "message", "aliases", "env_patch", "fallback",
                      "scope")
CHECK_KEYS = ("needs", "only_if_set")
EXAMPLE_KEYS = ("env", "conf", "example", "patch", "log", "tests", "launch", "ras", "diag", "host", "nccl_version",
                "policy", "note", "expect", "cluster")
PACK_KEYS = ("pack", "description", "rules")

# Patterns as strings: compiled (and cached by re) only when a pack is parsed, not on the check path.
_CODE = r"NC[1-6]\d{3}"
_NAME = r"[a-z][a-z0-9]*(-[a-z0-9]+)*"
_VAR = r"NCCL_[A-Z0-9_]+"


# ---------------------------------------------------------------- pack validation

def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def parse_pack(text: str, path: str) -> list[Rule]:
    """Rules of one pack file, validated (not yet checked against the check registry)."""
    import re
    from ncdoc.engine import conditions
    from ncdoc.readers.yaml_lines import check_keys, key_line, load_yaml
    doc = load_yaml(text, path)
    check_keys(doc, PACK_KEYS, "a rule pack", path, 1)
    pack = doc.get("pack")
    if not isinstance(pack, str) or not re.fullmatch(_NAME, pack):
        raise InputError("'pack' must be a kebab-case name", path=path, line=key_line(doc, "pack") or 1)
    items = doc.get("rules")
    if not isinstance(items, list):
        raise InputError("'rules' must be a list", path=path, line=key_line(doc, "rules") or 1)
    rules = []
    for item in items:
        line = key_line(item)
        check_keys(item, RULE_KEYS_REQUIRED + RULE_KEYS_OPTIONAL, "a rule", path, line)
        for k in RULE_KEYS_REQUIRED:
            if k not in item:
                raise InputError(f"rule is missing required key {k!r}", path=path, line=line)

        def bad(key: str, msg: str) -> InputError:
            return InputError(f"{key}: {msg}", path=path, line=key_line(item, key))

        code, name = item["code"], item["name"]
        if not isinstance(code, str) or not re.fullmatch(_CODE, code):
            raise bad("code", f"{code!r} is not NC + family digit 1-6 + 3 digits")
        if not isinstance(name, str) or not re.fullmatch(_NAME, name):
            raise bad("name", f"{name!r} is not kebab-case")
        if item["severity"] not in SEVERITIES:
            raise bad("severity", f"{item['severity']!r} is not one of {', '.join(SEVERITIES)}")
        if item["stage"] not in STAGES:
            raise bad("stage", f"{item['stage']!r} is not one of {', '.join(STAGES)}")
        for k in ("summary", "why", "fix"):
            if not isinstance(item[k], str) or not item[k].strip():
                raise bad(k, "must be non-empty text")
        if "\n" in item["summary"].strip():
            raise bad("summary", "must be one line")
        refs = item["references"]
        if not _str_list(refs) or not all(r.startswith(("https://", "http://")) for r in refs):
            raise bad("references", "must be a list of URLs")
        needs = _needs(item, bad)
        only_if_set = _vars(item, bad)
        checks = item.get("check")
        per_check: dict[str, dict[str, tuple[str, ...]]] = {}
        if isinstance(checks, str):
            checks = [checks]
        elif isinstance(checks, dict):
            if "needs" in item or "only_if_set" in item:
                raise bad("needs" if "needs" in item else "only_if_set",
                          "a rule with a needs/only_if_set per check has none of its own")
            for fn, spec in checks.items():
                where = key_line(checks, fn) or key_line(item, "check")
                if not isinstance(spec, dict):
                    raise InputError(f"check {fn}: give its needs as a mapping, e.g. {{needs: [log]}}",
                                     path=path, line=where)
                check_keys(spec, CHECK_KEYS, f"check {fn!r}", path, where)

                def spec_bad(key: str, msg: str, fn=fn, spec=spec, where=where) -> InputError:
                    return InputError(f"check {fn}: {key}: {msg}", path=path, line=key_line(spec, key) or where)
                gate = {k: v for k, v in (("needs", _needs(spec, spec_bad)), ("only_if_set", _vars(spec, spec_bad)))
                        if v}
                if gate:
                    per_check[str(fn)] = gate
            checks = [str(n) for n in checks]
        when = item.get("when")
        if (checks is None) == (when is None):
            raise InputError("a rule needs exactly one of 'check' or 'when'", path=path, line=line)
        if checks is not None and (not _str_list(checks) or not checks):
            raise bad("check", "must be a check-function name, a list of them, or a mapping of them to their needs")
        fallback = item.get("fallback", False)
        if not isinstance(fallback, bool) or (fallback and checks is None):
            raise bad("fallback", "must be true or false, on a rule with a check function")
        if fallback and not needs:
            raise bad("fallback", "a fallback reads what the checks needing its facts found: give it 'needs'")
        scope = item.get("scope", "any")
        if scope not in SCOPES:
            raise bad("scope", f"{scope!r} is not one of {', '.join(SCOPES)}")
        if only_if_set and checks is None:
            raise bad("only_if_set", "is for check rules (a 'when' condition tests variables itself)")
        message = item.get("message", "")
        if when is not None:
            conditions.validate(when, path=path, line=key_line(item, "when"))
            if not isinstance(message, str) or not message.strip():
                raise bad("message", "a 'when' rule needs a message template")
            conditions.validate_template(message, path=path, line=key_line(item, "message"))
        elif "message" in item:
            raise bad("message", "only 'when' rules take a message (check functions write their own)")
        patch = item.get("env_patch", {})
        if not isinstance(patch, dict) or any(not isinstance(k, str) or not (v is None or isinstance(v, str))
                                              for k, v in patch.items()):
            raise bad("env_patch", "must map NCCL_* names to a string or null")
        aliases = item.get("aliases", [])
        if not _str_list(aliases) or any(not re.fullmatch(_NAME, a) for a in aliases):
            raise bad("aliases", "must be a list of kebab-case names")
        example = item["example"]
        check_keys(example, EXAMPLE_KEYS, "an example", path, key_line(item, "example"))
        if not _str_list(example.get("expect")):
            raise InputError("example needs 'expect': a list of rule names ([] for a clean example)",
                             path=path, line=key_line(example) or key_line(item, "example"))
        env = example.get("env", {})
        if not isinstance(env, dict) or any(not (v is None or isinstance(v, (str, int))) for v in env.values()):
            raise InputError("example env must map names to values (null: unset)", path=path,
                             line=key_line(example, "env"))
        rules.append(Rule(
            code=code, name=name, severity=item["severity"], summary=item["summary"].strip(),
            why=item["why"].strip(), fix=item["fix"].strip(), stage=item["stage"],
            references=tuple(refs), checks=tuple(checks or ()), when=_plain(when),
            message=message.strip() if isinstance(message, str) else "", needs=needs, only_if_set=only_if_set,
            per_check=per_check, fallback=fallback,
            example=_plain(example), aliases=tuple(aliases), pack=pack, env_patch=dict(patch), scope=scope,
            env_gate=conditions.env_gate(rule_when) if (rule_when := _plain(when)) is not None else (),
        ))
    return rules


def _needs(item: Any, bad) -> tuple[str, ...]:
    needs = item.get("needs", []) if isinstance(item, dict) else None
    if not _str_list(needs) or any(n not in NEEDS for n in needs):
        raise bad("needs", f"must be a list from {', '.join(NEEDS)}")
    return tuple(needs)


def _vars(item: Any, bad) -> tuple[str, ...]:
    import re
    names = item.get("only_if_set", []) if isinstance(item, dict) else None
    if not _str_list(names) or any(not re.fullmatch(_VAR, n) for n in names):
        raise bad("only_if_set", "must be a list of NCCL_* variable names")
    return tuple(names)


def _plain(obj: Any) -> Any:
    """LineDicts back to plain dicts/lists (for JSON and for equality)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def check_registry(rules: list[Rule], *, where: str = "rules") -> None:
    """Codes and names (and aliases) unique across all packs."""
    seen_codes: dict[str, Rule] = {}
    seen_names: dict[str, Rule] = {}
    for r in rules:
        if r.code in seen_codes:
            raise InputError(f"code {r.code} used by both {seen_codes[r.code].name} ({seen_codes[r.code].pack}) "
                             f"and {r.name} ({r.pack})", path=where)
        seen_codes[r.code] = r
        for n in (r.name, *r.aliases):
            if n in seen_names:
                raise InputError(f"name {n!r} used by both {seen_names[n].code} and {r.code}", path=where)
            seen_names[n] = r


def pack_files(directory=None) -> list:
    """Every rules/*.yaml pack (not rules/policies/)."""
    from pathlib import Path
    from ncdoc.resources import data_dir
    d = Path(directory) if directory else data_dir("rules")
    return sorted(p for p in d.glob("*.yaml") if p.is_file())


def load_sources(directory=None) -> list[Rule]:
    rules: list[Rule] = []
    for p in pack_files(directory):
        rules.extend(parse_pack(p.read_text(encoding="utf-8"), str(p)))
    rules.sort(key=lambda r: r.code)
    check_registry(rules)
    return rules


def _rule_to_row(r: Rule) -> list[Any]:
    """The rule as compiled.json holds it: everything the engine reads, no docs (DOC_FIELDS), as the values
    of COMPILED_FIELDS in order (a row of values, not an object: the check path parses every rule's row on
    each run, and the names repeated in every object were about half of what it parsed)."""
    v = {"code": r.code, "name": r.name, "severity": r.severity, "stage": r.stage, "fix": r.fix,
         "checks": list(r.checks), "when": r.when, "message": r.message, "needs": list(r.needs),
         "only_if_set": list(r.only_if_set),
         "per_check": {c: {k: list(v) for k, v in g.items()} for c, g in r.per_check.items()},
         "fallback": r.fallback, "aliases": list(r.aliases), "pack": r.pack, "env_patch": dict(r.env_patch),
         "env_gate": list(r.env_gate), "scope": r.scope}
    return [v[name] for name in COMPILED_FIELDS]


def _docs_to_json(r: Rule) -> dict[str, Any]:
    return {"summary": r.summary, "why": r.why, "references": list(r.references), "example": r.example}


def compile_texts(directory=None) -> dict[str, str]:
    """{file name: text} of rules/compiled.json and rules/compiled_docs.json for the current sources
    (check functions resolved to their modules)."""
    from ncdoc.checks import import_all
    rules = load_sources(directory)
    import_all()
    modules: dict[str, str] = {}
    for r in rules:
        for name in r.checks:
            fn = CHECKS.get(name)
            if fn is None:
                raise InputError(f"rule {r.code} ({r.name}) names check function {name!r}, which no module in "
                                 f"ncdoc.checks registers", path=f"rules/{r.pack}.yaml")
            modules[name] = fn.__module__
    body = {"schema_version": COMPILED_SCHEMA,
            "packs": sorted({r.pack for r in rules}),
            "checks": dict(sorted(modules.items())),
            "fields": list(COMPILED_FIELDS),
            "rules": [_rule_to_row(r) for r in rules]}
    docs = {"schema_version": COMPILED_SCHEMA, "docs": {r.code: _docs_to_json(r) for r in rules}}
    import json
    # compiled.json: one rule a line, without blanks (it is read on every check; a diff still shows rule by rule)
    rows = ",\n".join(json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in body.pop("rules"))
    head = json.dumps(body, indent=1, ensure_ascii=False)
    return {"compiled.json": head[:-2] + ',\n "rules": [\n' + rows + "\n ]\n}\n",
            "compiled_docs.json": json.dumps(docs, indent=1, sort_keys=False, ensure_ascii=False) + "\n"}


MODULE_COMMAND = "python -m ncdoc.engine.ruleset --compile"
_TUPLE_FIELDS = ("checks", "needs", "only_if_set", "aliases", "env_gate")   # lists in JSON, tuples in a Rule


def compiled_module_text(compiled_json: str) -> str:
    """ncdoc/engine/compiled_rules.py for the text of rules/compiled.json: its rules as Python literals
    with the values a Rule holds (tuples where compiled.json has lists), so the check path gets the rule
    table from the module's bytecode (read by marshal, cheaper than JSON) and fills each Rule with one
    dict update. Derived from compiled.json alone, so the two cannot disagree."""
    import json
    data = json.loads(compiled_json)
    fields = data["fields"]
    lines = []
    for row in data["rules"]:
        v = dict(zip(fields, row))
        for name in _TUPLE_FIELDS:
            v[name] = tuple(v[name])
        v["per_check"] = {c: {k: tuple(x) for k, x in g.items()} for c, g in v["per_check"].items()}
        lines.append(f"    {tuple(v[name] for name in fields)!r},")
    return (f'''"""The compiled rule table as Python constants. GENERATED from rules/compiled.json by
`{MODULE_COMMAND}`: do not edit (a test fails when it is out of date).

ncdoc.engine.ruleset reads the bundled rules from here: one row per rule, the values of FIELDS in order,
as a Rule holds them.
"""

SCHEMA = {data["schema_version"]!r}
FIELDS = {tuple(fields)!r}
CHECKS = {{
''' + "".join(f"    {k!r}: {m!r},\n" for k, m in data["checks"].items()) + '''}
RULES = (
''' + "\n".join(lines) + "\n)\n")


__all__ = ["parse_pack", "check_registry", "pack_files", "load_sources", "compile_texts", "compiled_module_text"]
