"""Every fixture machine yields exactly its expected findings (tests/golden/<example>.json: the
sorted (code, name, severity, subject) of `ncdoc check --example NAME`), and the healthy
machines none at warning or above.

Regenerate after a reviewed change: NCDOC_UPDATE_GOLDEN=1 pytest tests/checks/test_golden_findings.py
"""

from __future__ import annotations

import json
import os

import pytest

from ncdoc.engine.rules import Context, node_rules
from ncdoc.examples.machines import list_examples
from ncdoc.engine.cases import fixture
from ncdoc.engine.selection import resolve
from paths import TESTS

GOLDEN = TESTS / "golden"
EXAMPLES = [name for name, _ in list_examples()]
HEALTHY = ("dgx-h100", "h100-roce", "l40s-pcie", "workstation-2gpu")


def findings(name: str) -> list[list[str]]:
    sel = resolve(no_config=True, environ={})
    sel.rules = node_rules(sel.rules)               # what `ncdoc check` runs
    snap = fixture(name)
    report = sel.run(Context(snapshot=snap, env=snap.env))
    return sorted([f.code, f.name, f.severity, f.subject] for f in report.findings)


@pytest.mark.parametrize("name", EXAMPLES)
def test_fixture_matches_golden(name):
    got = findings(name)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("NCDOC_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert path.is_file(), f"no golden file for {name}: run with NCDOC_UPDATE_GOLDEN=1 and review it"
    assert got == json.loads(path.read_text())


@pytest.mark.parametrize("name", [n for n in HEALTHY if n in EXAMPLES])
def test_healthy_machines_have_nothing_at_warning_or_above(name):
    loud = [f for f in findings(name) if f[2] in ("warning", "error")]
    assert loud == []


def test_every_golden_file_has_a_fixture():
    assert {p.stem for p in GOLDEN.glob("*.json")} <= set(EXAMPLES)
