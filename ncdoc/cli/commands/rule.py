"""`ncdoc rule CODE|NAME`: one rule's docs (What it does / Why it matters / Example / How to fix / References)."""

from __future__ import annotations

import json
import sys

NAME = "rule"
HELP = "show one rule's documentation: ncdoc rule NC1101 (or a name such as ib-hca-unknown-device)"
DESCRIPTION = """\
Print the documentation of one rule, by code, name or former name: what it does, why it
matters, an example (run through the rules, so it shows what ncdoc prints), how to fix it,
and references.

examples:
  ncdoc rule NC1002
  ncdoc rule socket-ifname-loopback
"""


def add_arguments(parser) -> None:
    parser.add_argument("rule", metavar="CODE|NAME")
    parser.add_argument("--json", action="store_true", help="print the rule as one JSON object")


def run(args) -> int:
    from ncdoc.engine import ruleset
    rule = ruleset.load().get(args.rule)
    if args.json:
        out = {"schema_version": 1, "code": rule.code, "name": rule.name, "severity": rule.severity,
               "family": rule.family, "stage": rule.stage, "summary": rule.summary, "why": rule.why,
               "fix": rule.fix, "references": list(rule.references), "example": dict(rule.example),
               "aliases": list(rule.aliases), "scope": rule.scope, "docs": rule.docs}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    from ncdoc.engine.docs import page
    sys.stdout.write(page(rule))
    return 0
