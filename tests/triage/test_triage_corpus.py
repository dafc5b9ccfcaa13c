"""The real-evidence corpus, judged exactly as shared/tools/corpus-check judges it, run in-process.

Each case runs `ncdoc triage <artifact> [extra inputs] --json [--env ...] [args]` through
ncdoc.cli.main and applies the tool's own matching (its `matches` and `occurrences`), so a
pass here is a pass there. Skipped when ../shared is not beside the repository.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest

from ncdoc.cli.main import main
from paths import SHARED

CORPUS = SHARED / "corpus"
TOOL = SHARED / "tools" / "corpus-check"

if not (CORPUS / "EXPECT.json").is_file() or not TOOL.is_file():
    pytest.skip("shared corpus not present (../shared/corpus, ../shared/tools/corpus-check)",
                allow_module_level=True)

EXPECT = json.loads((CORPUS / "EXPECT.json").read_text())


def _tool():
    loader = importlib.machinery.SourceFileLoader("corpus_check", str(TOOL))
    spec = importlib.util.spec_from_loader("corpus_check", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


CHECK = _tool()


def _argv(case: str, exp: dict) -> list[str]:
    inputs = [str(CORPUS / case / "artifact.txt")]
    inputs += [str(CORPUS / c / "artifact.txt") for c in exp.get("extra_inputs", [])]
    argv = ["triage", *inputs, "--json"]
    for k, v in exp.get("env", {}).items():
        argv += ["--env", f"{k}={v}"]
    return argv + [str(a) for a in exp.get("args", [])]


def problems(case: str, exp: dict, capsys) -> list[str]:
    """corpus-check's check_case, with the command run in-process."""
    rc = main(_argv(case, exp))
    out, err = capsys.readouterr()
    if rc not in (0, 1):
        return [f"exit code {rc}: {err.strip()[-300:]}"]
    doc = json.loads(out)
    found = []
    findings = doc.get("findings", [])
    names = {f.get("name"): f.get("severity") for f in findings}
    want = exp.get("findings_any")
    if want and not any(names.get(n) in ("error", "warning") for n in want):
        found.append(f"expected one of {want} as error/warning; got {sorted(n for n in names if n)}")
    if exp.get("no_error"):
        errs = [f.get("name") for f in findings if f.get("severity") == "error"]
        if errs:
            found.append(f"healthy case flagged with errors: {errs}")
    facts = doc.get("facts", {})
    for key, value in exp.get("facts", {}).items():
        if not any(CHECK.matches(value, got) for got in CHECK.occurrences(facts, key)):
            found.append(f"fact {key}: expected {value!r}, saw {list(CHECK.occurrences(facts, key))[:3]!r}")
    return found


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_corpus_case(case, capsys):
    assert problems(case, EXPECT[case], capsys) == []


@pytest.mark.parametrize("case", sorted(c for c, e in EXPECT.items() if e.get("no_error")))
def test_healthy_cases_have_no_error_and_exit_zero(case, capsys):
    rc = main(_argv(case, EXPECT[case]))
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0, [f["name"] for f in doc["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("case", sorted(EXPECT))
def test_every_finding_quotes_its_evidence(case, capsys):
    """Evidence that points into an input file points at a real line of it."""
    main(_argv(case, EXPECT[case]))
    doc = json.loads(capsys.readouterr().out)
    for f in doc["findings"]:
        for e in f["evidence"]:
            if e["line"] and Path(e["source"]).is_file():
                lines = Path(e["source"]).read_text(errors="replace").splitlines()
                assert 1 <= e["line"] <= len(lines), (f["name"], e)
                assert lines[e["line"] - 1].strip()[:100] == e["text"][:100], (f["name"], e)
