"""ncdoc.startup.json_dump writes json.dumps(value, indent=2, default=str)'s text to the byte: the triage
--json report of every fixture log and hand-made values with every kind json treats apart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ncdoc.startup.json_dump import dumps_indented
from paths import FIXTURES


class _Obj:
    def __str__(self) -> str:
        return "obj \u00e9\u2028"


class _Int(int):
    def __repr__(self) -> str:          # json writes int.__repr__, not a subclass's
        return "nope"


CASES = [
    {}, [], (), "", 0, -1, 10 ** 30, 1.5, -0.0, 1e-300, math.inf, -math.inf, True, False, None,
    "caf\u00e9 \"q\" \\ \n\t\x00\x1f \ud83d\ude00 \udcff",
    {"a": [], "b": {}, "c": [1, [2, [3, {}]]], "d": {"e": {"f": None}}},
    {3: "int key", 2.5: "float key", True: "bool key", False: "false key", None: "none key", "s": (1, 2)},
    [_Obj(), {"x": _Obj()}, _Int(7), Path("/tmp/x")],
    {"nested": [{"k": [True, False, None, 0.1]}] * 3},
]


@pytest.mark.parametrize("value", CASES, ids=range(len(CASES)))
def test_same_text_as_json(value):
    assert dumps_indented(value) == json.dumps(value, indent=2, default=str)


def test_nan():
    assert dumps_indented([math.nan, {"n": math.nan}]) == json.dumps([math.nan, {"n": math.nan}], indent=2)


def test_other_indent():
    v = {"a": [1, {"b": 2}]}
    assert dumps_indented(v, indent=4) == json.dumps(v, indent=4)


def test_bad_key_is_a_type_error_as_in_json():
    with pytest.raises(TypeError):
        json.dumps({(1, 2): 1}, indent=2)
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): 1})


def test_triage_reports_of_the_fixture_logs():
    from ncdoc.triage.run import triage
    logs = sorted((FIXTURES / "logs").glob("*.log"))[:12]
    assert logs
    for log in logs:
        d = triage([str(log)]).to_dict()
        assert dumps_indented(d) == json.dumps(d, indent=2, default=str), log.name
