"""Tuner tables: read as NCCL's example plugin reads them, applied as it applies them, and built so that
loading one keeps NCCL's own choice everywhere but the measured ranges."""

import random

import pytest

from ncdoc.tuner.sim import preset, simulate
from ncdoc.tuner.sim.nccl_model import choose, model_tables
from ncdoc.tuner.table import COLLECTIVES, MAX_BYTES, Rule, parse_conf, plugin_pick, render
from ncdoc.tuner.table_build import Override, build, usable

ALL = list(COLLECTIVES)


# ---------------------------------------------------------------- the example plugin's reading and matching

def test_the_plugin_reads_names_exactly_and_falls_back_silently():
    rules = parse_conf("# comment\n\nall_reduce,0,1,Ring,LL,4,-1,-1\nallreduce, 0 ,8,tree,ll128,2,1,8,-1,-1\n")
    assert [(r.collective, r.algo, r.proto) for r in rules] == [("all_reduce", "Ring", "Simple"),
                                                                ("all_reduce", "Tree", "LL128")]
    assert rules[1].min_bytes == 0 and rules[1].max_bytes == 8 and (rules[1].n_nodes, rules[1].n_ranks) == (1, 8)
    long = "allreduce,0,99," + "ring" + " " * 300 + ",simple,1,-1,-1"
    assert parse_conf(long) == []                  # cut at 255 characters: too few fields, skipped


def test_no_match_and_channels_minus_one_mean_one_channel_and_disabled_rules_are_skipped():
    rules = (Rule("all_reduce", 0, 1 << 20, "NVLS", "Simple", 16, -1, -1),
             Rule("all_reduce", 0, 65536, "Tree", "LL", -1, -1, -1))
    ok = lambda a, q: a != "NVLS"                      # noqa: E731  (NVLS disabled: its cost is IGNORE)
    assert plugin_pick(rules, "all_reduce", 1024, 2, 16, ok) == ("Tree", "LL", 1)
    assert plugin_pick(rules, "all_reduce", 1 << 19, 2, 16, ok) is None
    assert plugin_pick(rules, "all_gather", 1024, 2, 16, ok) is None
    # in the simulator: a collective without rules runs on one channel, as under the real plugin
    c = preset("h100-ib-2node")
    plain = simulate(c, {}, "all_gather", [1 << 26])[0]
    tabled = simulate(c, {}, "all_gather", [1 << 26], table=rules)[0]
    assert tabled.nchannels == 1 and tabled.busbw < 0.3 * plain.busbw


# ---------------------------------------------------------------- tables that keep NCCL's choice

@pytest.mark.parametrize("name", ["h100-ib-2node", "h100-1node", "h100-ib-8node", "a100-ib-4node",
                                  "h100-socket-2node", "l40s-pcie-2node"])
def test_a_table_of_nccls_own_choice_changes_nothing_nccl_runs(name):
    c = preset(name)
    rules = build(c, {}, ALL)
    back = parse_conf(render(rules))
    assert [(r.collective, r.min_bytes, r.max_bytes, r.algo, r.proto, r.channels) for r in back] == \
        [(r.collective, r.min_bytes, r.max_bytes, r.algo, r.proto, r.channels) for r in rules]
    for coll in ALL:                                   # every size covered, in order, once
        mine = [r for r in rules if r.collective == coll]
        assert mine[0].min_bytes == 0 and mine[-1].max_bytes == MAX_BYTES
        assert all(b.min_bytes == a.max_bytes + 1 for a, b in zip(mine, mine[1:]))
        assert all(r.channels >= 1 and (r.n_nodes, r.n_ranks) == (c.nodes, c.nranks) for r in mine)
    plain, loaded = model_tables(c, {}), model_tables(c, {}, plugin=True)
    rng = random.Random(1)
    for coll in ALL:
        for _ in range(200):
            s = int(2 ** rng.uniform(0, 36))
            a, b = choose(plain, coll, s), choose(loaded, coll, s, tuple(rules))
            assert (a.algo, a.proto, a.nchannels, a.nthreads) == (b.algo, b.proto, b.nchannels, b.nthreads), (coll, s)


def test_an_override_changes_only_its_range_with_nccls_channel_count():
    c = preset("h100-ib-2node")
    ov = Override("all_reduce", 1 << 20, 4 << 20, "Ring", "LL128", "measured")
    rules = build(c, {}, ALL, [ov])
    plain, loaded = model_tables(c, {}), model_tables(c, {}, plugin=True)
    inside = choose(loaded, "all_reduce", 2 << 20, tuple(rules))
    assert (inside.algo, inside.proto) == ("Ring", "LL128")
    from ncdoc.tuner.sim.nccl_model import nccl_channels
    from ncdoc.tuner.sim.revisions import ALGOS, PROTOS
    assert inside.nchannels == nccl_channels(plain, ALGOS.index("Ring"), PROTOS.index("LL128"), 2 << 20)
    for s in (1 << 19, (1 << 20) - 1, (4 << 20) + 1, 1 << 28):
        a, b = choose(plain, "all_reduce", s), choose(loaded, "all_reduce", s, tuple(rules))
        assert (a.algo, a.proto, a.nchannels) == (b.algo, b.proto, b.nchannels), s


def test_rules_never_name_what_nccl_disabled():
    # Over sockets NCCL keeps LL128 off: no rule may name it (the plugin would skip it: one channel).
    c = preset("h100-socket-2node")
    assert ("Ring", "LL128") not in usable(c, {}, "all_reduce", 1 << 20)
    assert all(r.proto != "LL128" for r in build(c, {}, ALL))
    single = preset("h100-1node")
    for r in build(single, {}, ALL):
        assert (r.algo, r.proto) in usable(single, {}, r.collective, max(1, r.min_bytes))
