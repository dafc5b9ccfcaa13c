"""The fabric layer against public paired measurements (ncdoc/tuner/sim/anchors.py): every figure of
every anchor's row within the anchor's stated tolerance, and docs/simulator.md showing the same table."""

import pytest

from ncdoc.tuner.sim.anchors import ANCHORS, check, markdown_table
from paths import ROOT


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.key)
def test_the_simulator_reproduces_the_published_row(anchor):
    assert check(anchor) == []


def test_every_anchor_names_a_public_source_and_a_term():
    for a in ANCHORS:
        assert a.source and a.term and a.setup and a.points, a.key
        assert all(len(p.public) == len(a.cases) for p in a.points), a.key
    assert len({a.key for a in ANCHORS}) == len(ANCHORS)


def test_docs_carry_the_current_table():
    doc = (ROOT / "docs" / "simulator.md").read_text()
    assert markdown_table() in doc, "docs/simulator.md is stale: run python -m ncdoc.tuner.sim.anchors"
