"""Every fixture under tests/fixtures/logs yields exactly its expected facts: `<file>.facts.json` beside
it holds what the parsers read from it, as the JSON `ncdoc triage --json` carries under "facts"
("nccl_log": LogFacts.to_facts() for NCCL logs and nccl-tests text, whose NCCL lines the log parser
reads; "nccl_tests": NcclTestsFacts.to_facts() for nccl-tests text and -J JSON).

These files are the reference for what each fixture yields; the other tests name the facts that
matter for one behaviour. Regenerate after a reviewed parser change, as for the machines' golden
findings: NCDOC_UPDATE_GOLDEN=1 pytest tests/evidence/test_golden_facts.py, then read the diff.
"""

from __future__ import annotations

import json
import os

import pytest

from ncdoc.evidence.nccl_log import parse_nccl_log_file
from ncdoc.evidence.nccl_tests import parse_nccl_tests_file
from paths import FIXTURES

LOGS = FIXTURES / "logs"
GOLDEN_SUFFIX = ".facts.json"
FIXTURE_FILES = sorted(p.name for p in LOGS.iterdir() if p.is_file() and not p.name.endswith(GOLDEN_SUFFIX))


def facts(name: str) -> dict:
    path = LOGS / name
    out = {}
    if path.suffix in (".log", ".txt"):
        out["nccl_log"] = parse_nccl_log_file(path).to_facts()
    if path.suffix in (".txt", ".json"):
        out["nccl_tests"] = parse_nccl_tests_file(path).to_facts()
    assert out, f"{name}: no parser for this kind of fixture (expected .log, .txt or .json)"
    return json.loads(json.dumps(out))          # as the file holds it: tuples as lists


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_fixture_yields_its_golden_facts(name):
    got = facts(name)
    path = LOGS / (name + GOLDEN_SUFFIX)
    if os.environ.get("NCDOC_UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert path.is_file(), f"no golden facts for {name}: run with NCDOC_UPDATE_GOLDEN=1 and review them"
    want = json.loads(path.read_text())
    assert got.keys() == want.keys()
    for parser in got:
        assert got[parser] == want[parser], f"{name}: {parser} facts differ from {path.name}"


def test_every_golden_file_has_a_fixture():
    golden = {p.name[:-len(GOLDEN_SUFFIX)] for p in LOGS.glob("*" + GOLDEN_SUFFIX)}
    assert golden <= set(FIXTURE_FILES), f"golden facts without a fixture: {sorted(golden - set(FIXTURE_FILES))}"


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_every_fixture_is_read_as_what_it_is(name):
    """A golden file of a fixture the parser reads nothing from would pin nothing."""
    got = facts(name)
    if name.endswith(".log"):
        assert got["nccl_log"]["recognised_lines"] > 0 and got["nccl_log"]["nccl_version"]
    else:
        assert got["nccl_tests"]["rows"] or got["nccl_tests"]["failures"]
