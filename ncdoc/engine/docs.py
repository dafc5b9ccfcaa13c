"""Rule documentation, generated from the rules: docs/rules/<CODE>-<name>.md and docs/rules/index.md.

Each page has the fixed sections What it does / Why it matters / Example / How to fix /
References. The example is the rule's own `example`, run through the rules, so the page shows
what ncdoc really prints for it (and the docs test fails when they drift).

    python -m ncdoc.engine.docs            # write docs/rules/
    python -m ncdoc.engine.docs --check    # exit 1 when docs/rules/ is out of date
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ncdoc.engine.rules import FAMILIES, STAGE_TITLES

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "rules"


# example keys holding run evidence, and the file name the docs show them under
EVIDENCE_FILES = (("log", "job.log"), ("tests", "results.txt"), ("ras", "ncclras.txt"), ("diag", "diag.log"),
                  ("host", "host.txt"))


def example_command(rule) -> str:
    """The command line that reproduces a rule's example."""
    ex = rule.example
    if ex.get("cluster"):
        return "ncdoc cluster check snaps/" + (f" --golden {ex['cluster']['golden']}" if ex["cluster"].get("golden")
                                               else "")
    if any(ex.get(k) for k, _ in EVIDENCE_FILES):
        return "ncdoc triage " + " ".join(n for k, n in EVIDENCE_FILES if ex.get(k))
    parts = ["ncdoc check", f"--example {ex['example']}"] if ex.get("example") else ["ncdoc lint"]
    if ex.get("nccl_version"):
        parts.append(f"--nccl-version {ex['nccl_version']}")
    if ex.get("conf"):
        parts.append("--env-file nccl.conf")
    for k, v in (ex.get("env") or {}).items():
        if v is not None:
            parts.append(f"--env {shlex.quote(f'{k}={v}')}")
    if ex.get("policy"):
        parts.append("--rules site-policy.yaml")
    return " ".join(parts)


def example_output(rule) -> list[str]:
    """What the rules say for the example: this rule's findings (or a note that it stays quiet)."""
    from ncdoc.engine import cases as rule_cases
    report = rule_cases.run(rule.example)
    mine = [f for f in report.findings if f.name == rule.name]
    if not mine:
        skipped = [s for s in report.skipped if s.name == rule.name]
        if skipped:
            return [f"(skipped: {skipped[0].reason})"]
        return ["(no finding)"]
    return [f"{f.severity.upper()} {f.code} {f.name}: {f.message}" for f in mine]


def page(rule) -> str:
    ex = rule.example
    lines = [f"# {rule.code} {rule.name}", "",
             f"*Severity:* {rule.severity} · *Stage:* {STAGE_TITLES.get(rule.stage, rule.stage)} · "
             f"*Family:* {FAMILIES.get(rule.code[2], 'other')} · *Pack:* `rules/{rule.pack.replace('-', '_')}.yaml`"
             + (f" · *Aliases:* {', '.join(rule.aliases)}" if rule.aliases else "")
             + (" · *Scope:* multi-node jobs" if rule.scope == "multi-node" else ""), "",
             "## What it does", "", rule.summary, ""]
    if rule.scope == "multi-node":
        lines += ["The problem matters only to a job spanning several nodes: on a job known to run on one "
                  "node (SLURM_NNODES=1, NNODES=1, WORLD_SIZE within this node's GPUs, `--nodes 1`) the "
                  "finding is reported as info, saying why, and does not fail `ncdoc check`.", ""]
    lines += ["## Why it matters", "", rule.why, "", "## Example", ""]
    if ex.get("note"):
        lines += [ex["note"], ""]
    setup = []
    if ex.get("cluster"):
        setup += _cluster_setup(ex["cluster"])
    if ex.get("example"):
        setup.append(f"# node: the bundled example machine '{ex['example']}'")
    unset = [k for k, v in (ex.get("env") or {}).items() if v is None]
    if unset:
        setup.append(f"# with {', '.join(unset)} unset on that machine")
    if ex.get("conf"):
        setup.append("$ cat nccl.conf")
        setup += ex["conf"].rstrip("\n").splitlines()
    if ex.get("policy"):
        import json
        setup.append("# site-policy.yaml:")
        setup += ["#   " + json.dumps(ex["policy"], sort_keys=False)]
    for key, name in EVIDENCE_FILES:
        if ex.get(key):
            text = ex[key].rstrip("\n").splitlines()
            setup.append(f"$ cat {name}")
            setup += text[:12] + (["..."] if len(text) > 12 else [])
    lines += ["```shell", *setup, f"$ {example_command(rule)}", *example_output(rule), "```", ""]
    lines += ["## How to fix", "", rule.fix, "", "## References", ""]
    lines += [f"- <{r}>" for r in rule.references]
    return "\n".join(lines) + "\n"


def _cluster_setup(spec) -> list[str]:
    """How a cross-node example's cluster differs from identical copies of one machine."""
    n = int(spec.get("nodes", 4))
    lines = [f"# snaps/: {n} nodes (node01...), each the bundled example machine '{spec['example']}', except:"]
    for node, changes in (spec.get("patch") or {}).items():
        lines.append(f"#   {node}: " + ", ".join(f"{k} = {v}" for k, v in changes.items()))
    for node, env in (spec.get("env") or {}).items():
        lines.append(f"#   {node}: " + ", ".join(f"{k}={v}" if v is not None else f"{k} unset" for k, v in env.items()))
    for node, reason in (spec.get("unreachable") or {}).items():
        lines.append(f"#   {node}: did not answer ({reason})")
    if spec.get("clock"):
        lines.append("#   clock offsets (s): " + ", ".join(f"{k} {v:+g}" for k, v in spec["clock"].items()))
    return lines


def index(rules) -> str:
    lines = ["# ncdoc rules", "",
             "Generated by `python -m ncdoc.engine.docs` from the rule packs in `rules/`; do not edit by hand.",
             "`ncdoc rule CODE` prints the same page in a terminal.", ""]
    by_family: dict[str, list] = {}
    for r in rules:
        by_family.setdefault(r.family, []).append(r)
    for fam in sorted(by_family, key=lambda f: next((k for k, v in FAMILIES.items() if v == f), "9")):
        lines += [f"## {fam}", "", "| code | name | severity | summary |", "|---|---|---|---|"]
        for r in by_family[fam]:
            lines.append(f"| {r.code} | [{r.name}]({r.code}-{r.name}.md) | {r.severity} | "
                         f"{r.summary.replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


def render_all(rules) -> dict[str, str]:
    """{file name: text} for every page and the index."""
    out = {f"{r.code}-{r.name}.md": page(r) for r in rules}
    out["index.md"] = index(rules)
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m ncdoc.engine.docs", description="Generate docs/rules/ from the rules.")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/rules/ is out of date")
    ap.add_argument("-o", "--output", default=str(DOCS_DIR))
    args = ap.parse_args(argv)
    from ncdoc.engine import ruleset
    rules = list(ruleset.load(from_sources=True))
    pages = render_all(rules)
    out = Path(args.output)
    existing = {p.name for p in out.glob("*.md")} if out.is_dir() else set()
    if args.check:
        stale = sorted(n for n, text in pages.items()
                       if not (out / n).is_file() or (out / n).read_text(encoding="utf-8") != text)
        extra = sorted(existing - set(pages))
        if stale or extra:
            print(f"docs/rules is out of date ({len(stale)} changed, {len(extra)} stale): "
                  "run python -m ncdoc.engine.docs", file=sys.stderr)
            return 1
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for name in existing - set(pages):
        (out / name).unlink()
    for name, text in pages.items():
        (out / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(pages)} files to {out}", file=sys.stderr)
    return 0


__all__ = ["DOCS_DIR", "page", "index", "render_all", "example_output", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
