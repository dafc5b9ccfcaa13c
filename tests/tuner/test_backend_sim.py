"""The sim backend end to end (in process, so it is about the study, not Ray): a RoCE preset yields a
real gain from queue pairs; a clean InfiniBand preset yields little or nothing; the tuner table parses
with NCCL's example plugin rules."""

import pytest

from ncdoc.tuner.backends import TrialFailed
from ncdoc.tuner.backends.sim import SimBackend, sim_cluster
from ncdoc.tuner.outputs import PLUGIN_ALGOS, PLUGIN_COLLECTIVES, PLUGIN_PROTOS, tuner_rules
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.run import TuneOptions, run_tune
from ncdoc.tuner.study import TrialRecord

pytest.importorskip("optuna")
sim = pytest.importorskip("ncdoc.tuner.sim")

# ---------------------------------------------------------------- NCCL's example tuner plugin, as a test oracle
# plugins/tuner/example/plugin.c as described in nccl_facts.md 3.1.
COLLS = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOS = ("ll", "ll128", "simple")


def parse_example_plugin_conf(text):
    """Rules as the example plugin reads them; `fallbacks` counts names it would silently replace."""
    rules, fallbacks = [], []
    for raw in text.split("\n"):
        assert len(raw) <= 255, "the plugin reads at most 255 characters per line"
        if not raw or raw.startswith("#"):
            continue
        fields = [f.strip() for f in raw.split(",")]
        assert len(fields) in (8, 9, 10), raw
        coll, lo, hi, algo, proto, ch, nnodes, nranks = fields[:8]
        pipe = int(fields[8]) if len(fields) > 8 else -1
        reg = int(fields[9]) if len(fields) > 9 else -1
        if coll not in COLLS:
            fallbacks.append(raw)
            coll = "allreduce"
        if algo not in ALGOS:
            fallbacks.append(raw)
            algo = "ring"
        if proto not in PROTOS:
            fallbacks.append(raw)
            proto = "simple"
        rules.append(dict(coll=coll, lo=int(lo), hi=int(hi), algo=algo, proto=proto, channels=int(ch),
                          nnodes=int(nnodes), nranks=int(nranks), pipe=pipe, reg=reg))
    return rules, fallbacks


def plugin_choice(rules, coll, nbytes, nnodes, nranks, pipe=1, reg=0):
    """(algo, proto, channels NCCL gets): first match wins; no match or channels -1 gives ONE channel."""
    for r in rules:
        if (r["coll"] == coll and r["lo"] <= nbytes <= r["hi"] and r["nnodes"] in (-1, nnodes)
                and r["nranks"] in (-1, nranks) and r["pipe"] in (-1, pipe) and r["reg"] in (-1, reg)):
            return r["algo"], r["proto"], (r["channels"] if r["channels"] != -1 else 1)
    return None, None, 1


def test_oracle_reproduces_the_one_channel_quirk():
    rules, _ = parse_example_plugin_conf("allreduce,0,65536,tree,ll,-1,-1,-1\n")
    assert plugin_choice(rules, "allreduce", 1024, 2, 16) == ("tree", "ll", 1)
    assert plugin_choice(rules, "allreduce", 1 << 20, 2, 16) == (None, None, 1)
    _, fb = parse_example_plugin_conf("all_reduce,0,1,Ring,LL,4,-1,-1\n")
    assert len(fb) == 3


# ---------------------------------------------------------------- studies

@pytest.fixture(scope="module")
def roce(tmp_path_factory):
    out = tmp_path_factory.mktemp("roce")
    return run_tune(TuneOptions(backend="sim", preset="h100-roce-8node", trials=30, executor="inprocess",
                                out=str(out), seed=1)), out


def test_roce_study_finds_the_queue_pair_gain(roce):
    res, out = roce
    assert res.final is not None, res.verdicts
    qps = res.env.get("NCCL_IB_QPS_PER_CONNECTION")
    assert qps is not None and int(qps) >= 2
    assert res.final.pct(res.final.lcb) > 10.0                     # a real, confirmed gain
    assert len(res.env) <= 4                                       # minimal, not the whole best trial
    kept = {e.name for e in res.effects if e.kept}
    assert set(res.env) <= kept | set(res.baseline_env)
    text = (out / "nccl.env").read_text()
    assert f"export NCCL_IB_QPS_PER_CONNECTION={qps}\n" in text


def test_clean_ib_study_recommends_little_or_nothing(tmp_path):
    res = run_tune(TuneOptions(backend="sim", preset="h100-ib-2node", trials=30, executor="inprocess",
                               out=str(tmp_path), seed=1))
    assert "NCCL_IB_QPS_PER_CONNECTION" not in res.env
    if res.final is not None:
        assert len(res.env) <= 2 and res.final.pct(res.final.gain) < 5.0
    assert (tmp_path / "nccl.env").is_file() and (tmp_path / "EXPLAIN.md").is_file()


def test_tuner_conf_parses_with_the_example_plugin_rules(roce):
    res, out = roce
    rules, fallbacks = parse_example_plugin_conf((out / "nccl_tuner.conf").read_text())
    assert rules and not fallbacks
    assert all(r["channels"] > 0 for r in rules)                   # never -1: that would mean ONE channel
    assert all(r["nnodes"] == 8 and r["nranks"] == 64 for r in rules)
    spans = sorted((r["lo"], r["hi"]) for r in rules if r["coll"] == "allreduce")
    assert spans[0][0] == 0 and spans[-1][1] == 2**64 - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))  # contiguous, no overlap
    for b in res.profile.buckets:                                  # each bucket gets its best trial's choice
        for size in b.sizes:
            algo, proto, ch = plugin_choice(rules, "allreduce", size, 8, 64)
            assert algo in ALGOS and proto in PROTOS and ch >= 1


def test_tuner_rules_skip_what_the_plugin_cannot_express():
    prof = get_profile("moe-alltoall")
    a2a = [[s, 50.0, None, None, None] for b in prof.buckets if b.collective == "alltoall" for s in b.sizes]
    ar = [[s, 90.0, "Ring", "Simple", None] for b in prof.buckets if b.collective == "all_reduce" for s in b.sizes]
    rec = TrialRecord(1, {"NCCL_ALGO": "unset"}, "complete", 1.1, {b.key: 1.0 for b in prof.buckets},
                      {"alltoall": a2a, "all_reduce": ar})
    rules, notes = tuner_rules([rec], prof, nodes=2, nranks=16)
    assert rules == []
    assert any("no alltoall entry" in n for n in notes)
    assert any("channels=-1 would mean 1" in n for n in notes)
    pinned = TrialRecord(2, {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_MIN_NCHANNELS": "8",
                             "NCCL_MAX_NCHANNELS": "8"}, "complete", 1.2, {b.key: 2.0 for b in prof.buckets},
                         {"all_reduce": [[s, 95.0, None, None, None] for _, s, *_ in ar]})
    rules, _ = tuner_rules([rec, pinned], prof, nodes=2, nranks=16)
    assert [(r.collective, r.algorithm, r.protocol, r.channels) for r in rules] == [("allreduce", "ring", "simple", 8)]
    assert set(PLUGIN_COLLECTIVES.values()) == set(COLLS) and set(PLUGIN_ALGOS.values()) == set(ALGOS)
    assert set(PLUGIN_PROTOS.values()) == set(PROTOS)


# ---------------------------------------------------------------- the backend itself

def test_sim_backend_measures_and_fails_like_nccl():
    be = SimBackend(sim_cluster(preset="h100-ib-2node"))
    m = be.measure({}, [("all_reduce", (1 << 20, 1 << 30))], 0)
    rows = m.results("all_reduce")
    assert [r.size for r in rows] == [1 << 20, 1 << 30] and rows[1].busbw > rows[0].busbw > 0
    assert rows[1].algo and rows[1].proto and rows[1].nchannels
    with pytest.raises(TrialFailed, match="Unrecognized element token") as err:
        be.measure({"NCCL_ALGO": "Bogus"}, [("all_reduce", (1 << 20,))], 0)
    assert err.value.kind == "init"
    hw = be.hardware()
    assert (hw.fabric, hw.nodes, hw.gpus_per_node) == ("ib", 2, 8)
    assert be.expectation("all_reduce").expected_busbw == pytest.approx(0.92 * 8 * 50.0)


def test_sim_cluster_from_example_and_fabric_flags():
    from ncdoc.examples.machines import load_example

    snap = load_example("h100-roce")
    c = sim_cluster(snapshot=snap, nodes=4, ecmp_paths=4)
    assert c.nodes == 4 and c.fabric == "roce" and c.ecmp_paths == 4
    assert sim_cluster(preset="h100-ib-2node", nodes=8).nodes == 8


def test_no_recommendation_with_a_nonempty_baseline_still_writes_every_file(tmp_path):
    # A gain bar nothing can clear: the study must end with "no change", keeping the
    # baseline env as it is, and still write nccl.env, nccl_tuner.conf and EXPLAIN.md.
    from ncdoc.tuner.backends.sim import SimBackend
    from ncdoc.tuner.run import TuneOptions, run_tune
    from ncdoc.tuner.sim import preset

    base = {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eth0"}
    backend = SimBackend(preset("h100-ib-2node"), seed=1, base_env=base)
    opts = TuneOptions(trials=3, repeats=1, executor="inprocess", out=str(tmp_path), min_gain=0.5,
                       top_k=1, confirm_pairs=2, seed=1)
    result = run_tune(opts, backend=backend)
    assert result.final is None
    assert result.env == base
    explain = (tmp_path / "EXPLAIN.md").read_text()
    assert "No change recommended" in explain
    env_text = (tmp_path / "nccl.env").read_text()
    assert "export NCCL_IB_HCA==mlx5_0:1,mlx5_1:1" in env_text or "NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'" in env_text
    assert (tmp_path / "nccl_tuner.conf").exists()
