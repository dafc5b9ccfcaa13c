"""The string parsers that replace regexes on the `ncdoc check` path agree with those regexes.

The check path imports no `re` (start-up budget); each function here spells a pattern out by
hand, and is compared with the pattern itself on generated strings built from the characters
that matter (digits, including non-ASCII decimal digits, separators, whitespace, letters).
"""

import json
import re

from hypothesis import given, settings, strategies as st

from ncdoc import topology

from ncdoc.engine import conditions

from ncdoc.startup import json_load

from ncdoc.nccl import parse as nccl_parse
from ncdoc.checks import links, node

_CHARS = "0123456789abcdefABCDEFxXvV.:,+-=<>!_ \t\n\u00a0\u0663\u00b2%[]{}GPUNICgpuTs/mlnx"
texts = st.text(alphabet=_CHARS, max_size=24)
SETTINGS = settings(max_examples=400, deadline=None)


@SETTINGS
@given(texts)
def test_version_tuple(s):
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", s)
    expected = tuple(int(x) for x in m.group(1).split(".")) if m else None
    assert nccl_parse.version_tuple(s) == (expected if s else None)


@SETTINGS
@given(texts)
def test_version_clause(s):
    m = re.match(r"^\s*(<=|>=|==|!=|<|>|=)?\s*(v?\d+(?:\.\d+)*)\s*$", s)
    assert nccl_parse._clause(s) == ((m.group(1), m.group(2)) if m else None)


@SETTINGS
@given(texts)
def test_atoi(s):
    m = re.match(r"[ \t\n\v\f\r]*([+-]?\d+)", s)
    assert nccl_parse._atoi(s) == (int(m.group(1)) if m else 0)


@SETTINGS
@given(texts)
def test_normalize_bus_id(s):
    m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?", s.strip())
    if not s:
        expected = None
    elif not m:
        expected = s.strip().lower()
    else:
        dom, bus, dev, fn = m.groups()
        expected = f"{int(dom or '0', 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn or 0}"
    assert topology.normalize_bus_id(s) == expected


def test_normalize_bus_id_examples():
    assert topology.normalize_bus_id("00000000:18:00.0") == "0000:18:00.0"
    assert topology.normalize_bus_id("18:00.0") == "0000:18:00.0"
    assert topology.normalize_bus_id("0000:18:00") == "0000:18:00.0"
    assert topology.normalize_bus_id(" 0000:1A:00.8 ") == "0000:1a:00.8"


@SETTINGS
@given(texts)
def test_natural_key_and_path_rank(s):
    expected = [(0, int(t), "") if t[0] in "0123456789" else (1, 0, t) for t in re.split(r"([0-9]+)", s) if t]
    assert topology.natural_key(s) == expected
    u = s.strip().upper()
    nv = re.fullmatch(r"NV\d+", u) is not None
    assert (topology.path_rank(s) == 1) == (nv or u == "NV")


@SETTINGS
@given(texts)
def test_matrix_labels(s):
    assert topology._gpu_label(s) == (re.fullmatch(r"GPU(\d+)", s, re.I) is not None)
    expected = int(s) if re.fullmatch(r"\s*[0-9]+\s*", s) else None
    assert topology._int_or_none(s) == expected


@SETTINGS
@given(texts)
def test_link_fields(s):
    m = re.match(r"(\d+)", s)
    assert links._width(s) == (int(m.group(1)) if m else None)
    m = re.match(r"\s*([\d.]+)\s*GT/s", s)
    try:
        expected = float(m.group(1)) if m else None
    except ValueError as exc:
        expected = type(exc)
    try:
        got = links._gts(s)
    except ValueError as exc:
        got = type(exc)
    assert got == expected
    assert links._gts(" 16.0 GT/s PCIe") == 16.0


@SETTINGS
@given(texts)
def test_ofed_release(s):
    m = re.match(r"(\d{2})(\d{2})mlnx", s)
    assert node._ofed_release(s) == ((int(m.group(1)), int(m.group(2))) if m else None)
    assert node._ofed_release("2307mlnx47-1.2310036") == (23, 7)


@SETTINGS
@given(st.text(alphabet="{}envfact:_.AZaz09 N\u00e9", max_size=30))
def test_message_placeholders(s):
    expected = [(m.start(), m.end(), m.group(1), m.group(2))
                for m in re.finditer(r"\{(env|fact):([A-Za-z0-9_.]+)\}", s)]
    assert conditions._placeholders(s) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@SETTINGS
@given(json_values, st.sampled_from(["", " ", "\n", "\t\r\n "]), st.sampled_from([None, 2]))
def test_json_loads_matches_json(value, pad, indent):
    text = pad + json.dumps(value, indent=indent) + pad
    assert json_load.loads(text) == json.loads(text)


def test_json_errors_are_json_errors():
    for bad in ("", " ", "{", '{"a": 1} x', "[1,]", "\ufeff{}", "nul", '{"a": 1, }'):
        try:
            json.loads(bad)
        except ValueError as exc:
            expected = (type(exc), str(exc))
        try:
            json_load.loads(bad)
        except ValueError as exc:
            assert (type(exc), str(exc)) == expected
        else:
            raise AssertionError(f"{bad!r} parsed")



def test_json_refuses_what_no_ncdoc_file_holds():
    """NaN, infinities (written or overflowing), integers past int()'s limit and nesting past the parser's
    recursion: one ValueError each, with a one-line message, never an OverflowError or RecursionError."""
    for bad, says in ((" NaN ", "NaN"), ("[Infinity]", "Infinity"), ('{"a": -Infinity}', "Infinity"),
                      ("[1e999]", "out of range"), ("-1e400", "out of range"), ("9" * 5000, "4300 digits"),
                      ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
                      ('{"a":' * 50_000 + "1" + "}" * 50_000, "nested too deeply")):
        try:
            json_load.loads(bad)
        except ValueError as exc:
            assert says in str(exc) and "\n" not in str(exc), (bad[:20], str(exc))
        else:
            raise AssertionError(f"{bad[:20]!r} parsed")
    assert json_load.loads("[1e308, -1e-999, 0.5]") == [1e308, -0.0, 0.5]


def test_load_data_bounds_depth_and_integers():
    nested = "[" * (json_load.MAX_DEPTH + 1) + "]" * (json_load.MAX_DEPTH + 1)
    for bad, says in ((nested, "levels deep"), ('{"a": [%d]}' % (1 << 64), "digits")):
        try:
            json_load.load_data(bad)
        except ValueError as exc:
            assert says in str(exc), str(exc)
        else:
            raise AssertionError(f"{bad[:20]!r} passed")
    ok = "[" * json_load.MAX_DEPTH + "]" * json_load.MAX_DEPTH
    assert json_load.load_data(ok) is not None and json_load.load_data('[%d]' % ((1 << 64) - 1)) == [(1 << 64) - 1]


def test_nccl_vars_entries_read_alone_match_the_table(monkeypatch):
    from ncdoc.nccl import variables as nccl_vars
    monkeypatch.setattr(nccl_vars, "_TABLE", [])
    monkeypatch.setattr(nccl_vars, "_ENTRIES", {})
    monkeypatch.setattr(nccl_vars, "_TEXT", [])
    with open(nccl_vars.DATA, encoding="utf-8") as fh:
        data = json.load(fh)
    table = {v["name"]: v for v in data["vars"]}
    for name in [*table, "NCCL_NOT_A_VAR", "NCCL_IB", "nccl_debug"]:
        assert nccl_vars.lookup(name) == table.get(name), name
    assert nccl_vars.catalog_version() == data["catalog_version"]
    assert not nccl_vars._TABLE, "the one-entry-a-line layout should not need the whole table"
    assert nccl_vars.lookup('NCCL_"X') is None and nccl_vars._TABLE   # an odd name: the whole table
