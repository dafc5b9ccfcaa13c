"""NCCL's own parsing, reproduced: strtoll, list flags and prefix matching, level names,
NCCL_ALGO/NCCL_PROTO grammar per version, GID choice, interface choice, conditions."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paths import SHARED
from ncdoc.nccl.parse import (algo_names, check_version_spec, level_names, parse_algo_proto, parse_level,
                              parse_list, strtoll, version_cmp, version_matches, version_tuple)

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)
_LIBC.strtoll.restype = ctypes.c_longlong
_LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]


def c_strtoll(text: str) -> tuple[int, int]:
    """(value, characters consumed) from the C library itself."""
    raw = text.encode()
    buf = ctypes.create_string_buffer(raw)
    end = ctypes.c_char_p()
    value = _LIBC.strtoll(buf, ctypes.byref(end), 0)
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(buf)
    return value, consumed


@pytest.mark.parametrize("text, value, kind", [
    ("1", 1, "ok"), ("010", 8, "ok"), ("0x40", 64, "ok"), ("1e3", 1, "trailing"), ("4M", 4, "trailing"),
    ("true", 0, "nodigits"), ("", None, "empty"), (" 7", 7, "ok"), ("-1", -1, "ok"), ("08", 0, "trailing"),
    ("0x", 0, "trailing"), ("99999999999999999999", None, "overflow"), ("+5", 5, "ok"),
])
def test_strtoll_cases(text, value, kind):
    p = strtoll(text)
    assert (p.value, p.kind) == (value, kind)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789xXabcdefABCDEFgz +-\t.", max_size=12))
def test_strtoll_matches_libc(text):
    p = strtoll(text)
    if p.kind in ("empty", "overflow"):
        return
    value, consumed = c_strtoll(text)
    assert p.value == value
    assert len(text) - len(p.rest) == consumed         # where NCCL's parse stops, as C stops


def test_octal_flag_only_when_the_value_changes():
    assert strtoll("010").octal and not strtoll("07").octal and not strtoll("0").octal


@pytest.mark.parametrize("value, name, port, matches", [
    ("mlx5_1", "mlx5_10", 1, True),          # prefix match
    ("=mlx5_1", "mlx5_10", 1, False),        # exact
    ("^mlx5_1", "mlx5_10", 1, False),        # exclude by prefix
    ("^=mlx5_1", "mlx5_10", 1, True),        # exclude exactly one
    ("mlx5_0:1", "mlx5_0", 2, False),        # wrong port
    ("mlx5_0:1", "mlx5_0", 1, True),
    ("", "anything", 1, True),               # empty list matches all
    ("=^mlx5_1", "mlx5_1", 1, False),        # flags in the wrong order: literal "^mlx5_1"
    ("mlx5_0,^mlx5_1", "mlx5_1", 1, False),  # '^' inside the list is literal
    ("MLX5_0", "mlx5_0", 1, False),          # case-sensitive
])
def test_list_matching(value, name, port, matches):
    assert parse_list(value).matches(name, port) is matches


def test_list_fields_and_limits():
    lst = parse_list("=mlx5_0:1:0:1,mlx5_1::2", version="2.30.7")
    assert [(e.prefix, e.port, e.rail, e.plane) for e in lst.entries] == [("mlx5_0", 1, 0, 1), ("mlx5_1", -1, 2, -1)]
    old = parse_list("mlx5_0:1:0", version="2.21.5")
    assert old.entries[0].port == 1 and old.entries[0].rail == -1
    many = parse_list(",".join(f"mlx5_{i}" for i in range(20)), max_entries=16)
    assert len(many.entries) == 16 and len(many.dropped) == 4
    assert parse_list("a,,b,").entries[1].prefix == "b"


def test_levels():
    assert parse_level("PXB") == ("PXB", "name")
    assert parse_level("pxb") == (None, "ignored")
    assert parse_level("3") == ("PHB", "legacy integer")
    assert parse_level("9") == ("SYS", "legacy integer")
    assert parse_level("P2C", version="2.26.2") == (None, "ignored")
    assert parse_level("P2C", version="2.27.3")[0] == "P2C"
    assert "PXN" not in level_names("2.11.4") and "C2C" in level_names(None)


def test_algo_proto_grammar_by_version():
    assert parse_algo_proto("ring,TREE", "algo", version="2.21.5").enabled["AllReduce"] == {"Ring", "Tree"}
    old = parse_algo_proto("Ring,Bogus", "algo", version="2.21.5")
    assert old.ignored == ["Bogus"] and not old.errors
    new = parse_algo_proto("Ring,Bogus", "algo", version="2.24.3")
    assert new.errors and not new.ignored
    per_func = parse_algo_proto("Tree;AllReduce:^Tree", "algo", version="2.24.3")
    assert per_func.enabled["Broadcast"] == {"Tree"} and "Tree" not in per_func.enabled["AllReduce"]
    assert parse_algo_proto("AllReduce:Ring;Tree", "algo", version="2.24.3").errors
    assert parse_algo_proto("^LL,LL128,Simple", "proto").empty_funcs
    assert "PAT" not in algo_names("2.22.3") and "CollNet" in algo_names("2.12.12")


def test_versions():
    assert version_tuple("2.21.5+cuda12.4") == (2, 21, 5)
    assert version_cmp("2.12.12", "2.12") == 0 and version_cmp("2.13", "2.12.12") == 1
    assert version_matches("2.22.3", ">=2.21,<2.24") and not version_matches("2.24.3", ">=2.21,<2.24")
    assert check_version_spec(">=2.x") is not None and check_version_spec("==2.19.3") is None


def test_value_problems_suggest_the_meant_value():
    from ncdoc.nccl.values import value_problems
    from ncdoc.nccl.variables import lookup
    (p,) = value_problems("NCCL_BUFFSIZE", "8MiB", lookup("NCCL_BUFFSIZE"))
    assert p.suggestion == str(8 << 20)
    (p,) = value_problems("NCCL_IB_DISABLE", "yes", lookup("NCCL_IB_DISABLE"))
    assert p.suggestion == "1" and "reads it as 0" in p.message
    (p,) = value_problems("NCCL_P2P_LEVEL", "nvl", lookup("NCCL_P2P_LEVEL"))
    assert p.suggestion == "NVL"
    assert value_problems("NCCL_DEBUG", "Info", lookup("NCCL_DEBUG")) == []


def test_nccl_vars_table():
    from ncdoc.nccl import variables as nccl_vars
    info = nccl_vars.lookup("NCCL_IB_GDR_LEVEL")
    assert info["status"] == "removed" and info["replacement"] == "NCCL_NET_GDR_LEVEL"
    assert nccl_vars.lookup("nccl_debug") is None
    assert nccl_vars.suggest("NCCL_IB_HCAS")[0] == "NCCL_IB_HCA"
    assert nccl_vars.read_by(nccl_vars.lookup("NCCL_CONF_FILE"), "2.21.5") is False
    assert len(nccl_vars.names()) > 300


def test_nccl_vars_data_is_generated_from_the_catalog():
    from pathlib import Path
    tsv = SHARED / "reference" / "nccl_env_catalog.tsv"
    if not tsv.is_file():
        pytest.skip("the gathered catalog (../shared) is not present")
    from ncdoc.nccl import variables as nccl_vars, variables_build as nccl_vars_build
    text = nccl_vars_build.render(nccl_vars_build.build(tsv))
    assert Path(nccl_vars.DATA).read_text() == text, "run python -m ncdoc.nccl.variables_build"
    assert "meaning" not in text


# ---------------------------------------------------------------- what NCCL picks on a node

def _netif(name, addrs, kind="physical", up="up"):
    from ncdoc.snapshot import NetIf
    return NetIf(name=name, addresses=tuple(addrs), operstate=up, kind=kind)


def test_default_interface_search_order():
    from ncdoc.nccl.devices import find_interfaces
    ifs = [_netif("docker0", ["172.17.0.1/16"], "docker"), _netif("lo", ["127.0.0.1/8"], "loopback", "unknown"),
           _netif("veth1", ["10.9.0.2/24"], "veth"), _netif("ib0", ["192.168.0.5/24"], "ipoib")]
    found, how = find_interfaces(ifs, None)
    assert found[0].name == "ib0" and "ib" in how
    found, _ = find_interfaces(ifs[:3], None)
    assert [n.name for n in found] == ["veth1"]                 # docker and lo excluded
    found, _ = find_interfaces(ifs[:2], None)
    assert found[0].name == "docker0"                          # then docker, then lo
    found, _ = find_interfaces(ifs, "e")                       # one character: ignored
    assert found[0].name == "ib0"
    found, _ = find_interfaces(ifs, "=lo")
    assert found[0].name == "lo"


def test_down_interfaces_are_skipped_since_2_28_3():
    from ncdoc.nccl.devices import find_interfaces
    ifs = [_netif("eth0", ["10.0.0.2/24"], up="down"), _netif("eth1", ["10.0.1.2/24"])]
    assert find_interfaces(ifs, "eth", version="2.28.3")[0][0].name == "eth1"
    assert find_interfaces(ifs, "eth", version="2.21.5")[0][0].name == "eth0"


def test_gid_auto_selection_picks_first_ipv4_rocev2():
    from ncdoc.nccl.devices import choose_gid
    from ncdoc.snapshot import Gid, Port
    gids = (Gid(0, "fe80:0000:0000:0000:ba3f:d2ff:fe94:29c2", "IB/RoCE v1"),
            Gid(1, "fe80:0000:0000:0000:ba3f:d2ff:fe94:29c2", "RoCE v2"),
            Gid(2, "0000:0000:0000:0000:0000:ffff:0a14:000f", "IB/RoCE v1"),
            Gid(3, "0000:0000:0000:0000:0000:ffff:0a14:000f", "RoCE v2"))
    port = Port(num=1, state="ACTIVE", link_layer="Ethernet", gids=gids)
    assert choose_gid(port, {}, "2.21.5")[0] == 3
    assert choose_gid(port, {}, "2.20.5")[0] == 0
    assert choose_gid(port, {"NCCL_IB_GID_INDEX": "2"}, "2.21.5")[0] == 2
    assert choose_gid(port, {"NCCL_IB_ROCE_VERSION_NUM": "1"}, "2.21.5")[0] == 2
    assert choose_gid(port, {"NCCL_IB_ADDR_RANGE": "10.99.0.0/16"}, "2.21.5")[0] != 3


def test_conditions_are_three_valued_and_closed():
    from ncdoc.engine import conditions
    from ncdoc.engine.rules import Context, Rule
    from ncdoc.findings import Skip
    from ncdoc.snapshot import EnvValue, NcclEnv, Status
    env = NcclEnv(Status.ok("t"), (EnvValue("NCCL_IB_DISABLE", "1", "env"),))
    ctx = Context(env=env)
    rule = Rule(code="NC1999", name="x", severity="error", summary="s", message="m {env:NCCL_IB_DISABLE}",
                when={"all": [{"env": "NCCL_IB_DISABLE", "int_ne": 0}, {"fact": "active_port_count", "gt": 0}]})
    with pytest.raises(Skip):                                  # unknown fact: skipped, not passed
        conditions.evaluate(rule, ctx)
    rule2 = Rule(code="NC1999", name="x", severity="error", summary="s", message="m {env:NCCL_IB_DISABLE}",
                 when={"any": [{"env": "NCCL_IB_DISABLE", "int_ne": 0}, {"fact": "active_port_count", "gt": 0}]})
    (hit,) = conditions.evaluate(rule2, ctx)                   # any: one true part decides
    assert hit.message == "m 1" and hit.subject == "NCCL_IB_DISABLE"
    with pytest.raises(Exception, match="unknown operator"):
        conditions.validate({"env": "NCCL_X", "eval": "1"})
