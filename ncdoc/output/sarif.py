"""SARIF 2.1.0 (the OASIS Static Analysis Results Interchange Format): what GitHub code scanning and
other CI dashboards import.

One run: the tool (ncdoc, with every rule that ran as a reportingDescriptor: code, name, summary,
why, fix, references, default level), one result per finding (level error / warning / note), with
a physical location where the finding points at a file line and the node as a logical location
otherwise; skipped rules are notifications of the invocation. tests/output/test_sarif.py validates
the output against the official schema.
"""

from __future__ import annotations

import json

from ncdoc.output.location import where

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    from urllib.parse import quote
    return ("file://" + quote(path)) if path.startswith("/") else quote(path)


def _descriptor(rule) -> dict:
    d = {"id": rule.code, "name": rule.name,
         "shortDescription": {"text": rule.summary},
         "fullDescription": {"text": rule.why or rule.summary},
         "help": {"text": f"{rule.fix}\n\nDocs: {rule.docs}" if rule.fix else f"Docs: {rule.docs}"},
         "defaultConfiguration": {"level": _LEVEL.get(rule.severity, "warning")},
         "properties": {"tags": [rule.family, rule.stage]}}
    if rule.references:
        d["helpUri"] = rule.references[0]
    return d


def _rules_for(report, rules) -> list:
    if rules is not None:
        listed = list(rules)
    else:
        listed = []
    codes = {r.code for r in listed}
    missing = [c for c in dict.fromkeys([f.code for f in report.findings] + [s.code for s in report.skipped])
               if c not in codes]
    if missing:
        from ncdoc.engine import ruleset
        rs = ruleset.load()
        listed += [r for r in (rs.find(c) for c in missing) if r is not None]
    return sorted(listed, key=lambda r: r.code)


def sarif_dict(report, *, rules=None, node: str | None = None, exit_code: int | None = None) -> dict:
    from ncdoc import __version__
    descriptors = _rules_for(report, rules)
    index = {r.code: i for i, r in enumerate(descriptors)}
    results = []
    for f in report.findings:
        res: dict = {"ruleId": f.code, "level": _LEVEL.get(f.severity, "warning"), "message": {"text": f.message}}
        if f.code in index:
            res["ruleIndex"] = index[f.code]
        path, line = where(f)
        if path:
            loc: dict = {"physicalLocation": {"artifactLocation": {"uri": _uri(path)}}}
            if line:
                loc["physicalLocation"]["region"] = {"startLine": int(line)}
            res["locations"] = [loc]
        elif node:
            res["locations"] = [{"logicalLocations": [{"name": node, "kind": "node"}]}]
        props: dict = {"subject": f.subject, "severity": f.severity}
        if f.fix:
            props["fix"] = f.fix
        if f.evidence:
            props["evidence"] = [e.to_dict() for e in f.evidence]
        if f.env_patch:
            props["env_patch"] = dict(f.env_patch)
        res["properties"] = props
        results.append(res)
    invocation: dict = {"executionSuccessful": True}
    if exit_code is not None:
        invocation["exitCode"] = exit_code
    notes = [{"level": "note", "message": {"text": f"{s.code} {s.name} skipped: {s.reason}"},
              "descriptor": {"id": s.code, **({"index": index[s.code]} if s.code in index else {})}}
             for s in report.skipped]
    if notes:
        invocation["toolExecutionNotifications"] = notes
    run: dict = {"tool": {"driver": {"name": "ncdoc", "version": __version__, "semanticVersion": __version__,
                                     "rules": [_descriptor(r) for r in descriptors]}},
                 "invocations": [invocation], "results": results}
    if node:
        run["properties"] = {"node": node}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report, *, rules=None, node: str | None = None, exit_code: int | None = None) -> str:
    return json.dumps(sarif_dict(report, rules=rules, node=node, exit_code=exit_code), indent=2) + "\n"
