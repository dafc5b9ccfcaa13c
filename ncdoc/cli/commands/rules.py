"""`ncdoc rules`: list every rule (code, name, severity, stage, summary)."""

from __future__ import annotations

import json
import sys

NAME = "rules"
HELP = "list the rules: code, name, severity, stage, summary"
DESCRIPTION = """\
List every rule ncdoc knows, from all rule packs. `ncdoc rule CODE|NAME` prints one rule's docs.

examples:
  ncdoc rules
  ncdoc rules --select NC1 --json
"""


def add_arguments(parser) -> None:
    parser.add_argument("--select", action="append", default=[], metavar="CODES",
                        help="only these rules: codes, prefixes (NC1), names; comma-separated")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    from ncdoc.engine import ruleset
    rs = ruleset.load()
    rules = list(rs)
    tokens = [t for item in args.select for t in item.split(",") if t.strip()]
    if tokens:
        from ncdoc.engine.selection import _match
        keep = {r.code for t in tokens for r in _match(rs, t, "--select", None)}
        rules = [r for r in rules if r.code in keep]
    if args.json:
        out = {"schema_version": 1, "rules": [
            {"code": r.code, "name": r.name, "severity": r.severity, "family": r.family, "stage": r.stage,
             "summary": r.summary, "pack": r.pack, "docs": r.docs, "aliases": list(r.aliases), "scope": r.scope,
             "kind": "declarative" if r.when is not None and not r.checks else "check"} for r in rules]}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    from tabulate import tabulate
    rows = [[r.code, r.name, r.severity, r.stage, r.summary] for r in rules]
    sys.stdout.write(tabulate(rows, headers=["code", "name", "severity", "stage", "summary"],
                              tablefmt="simple", maxcolwidths=[None, None, None, None, 70]) + "\n")
    print(f"{len(rules)} rules; `ncdoc rule CODE` shows one", file=sys.stderr)
    return 0
