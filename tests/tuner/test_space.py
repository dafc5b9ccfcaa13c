"""Search spaces and workload profiles: shipped data valid, user files checked strictly, narrowing, sampling."""

import textwrap

import pytest

from ncdoc.errors import InputError, UsageError
from ncdoc.resources import data_dir
from ncdoc.tuner.profiles import get_profile, load_profiles
from ncdoc.tuner.space import FABRICS, UNSET, Hardware, apply_params
from ncdoc.tuner.space_file import load_space

H100_2N = dict(nodes=2, gpus_per_node=8, nics_per_node=8, nvswitch=True, nvls=True, sm=90, nccl_version="2.30.7")


def _write(tmp_path, text, name="space.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


@pytest.mark.parametrize("fabric", FABRICS)
def test_shipped_spaces_load_and_every_variable_offers_unset(fabric):
    space = load_space(fabric)
    assert space.fabric == fabric
    for var in space.variables:
        assert var.values[0] == UNSET
    narrowed = space.for_hardware(Hardware(fabric=fabric, **H100_2N), ["all_reduce"])
    assert narrowed.size > 1


def test_shipped_spaces_cover_what_experts_tune_and_nothing_global():
    ib, roce, sock = (load_space(f) for f in FABRICS)
    names = {v.name for s in (ib, roce, sock) for v in s.variables}
    for want in ("NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_P2P_PXN_LEVEL",
                 "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_TC",
                 "NCCL_CROSS_NIC", "NCCL_NET_GDR_LEVEL", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_NVLS_ENABLE",
                 "NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"):
        assert want in names, want
    # per-size choices go in the tuner table; thread and channel counts are debugging knobs
    for gone in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NTHREADS"):
        assert gone not in names, gone
    assert any(c.op == "product_le" and c.limit == 64 for c in sock.constraints)


def test_narrowing_follows_hardware_version_and_collectives():
    ib = load_space("ib")
    one = ib.for_hardware(Hardware(fabric="ib", nodes=1, gpus_per_node=8, nvswitch=True, nvls=True, sm=90), ["all_reduce"])
    names = {v.name for v in one.variables}
    assert "NCCL_IB_QPS_PER_CONNECTION" not in names               # single node: no network knobs
    assert "NCCL_NVLS_ENABLE" in names and "NCCL_NVLSTREE_MAX_CHUNKSIZE" not in names   # NVLSTree needs nodes
    old = ib.for_hardware(Hardware(fabric="ib", nodes=4, gpus_per_node=8, nics_per_node=8, sm=80,
                                   nccl_version="2.16.5"), ["all_gather"])
    assert "NCCL_IB_SPLIT_DATA_ON_QPS" not in {v.name for v in old.variables}     # needs NCCL 2.18
    assert any("NCCL_IB_SPLIT_DATA_ON_QPS not searched: needs NCCL >= 2.18" in n for n in old.notes)
    assert "NCCL_NVLS_ENABLE" not in {v.name for v in old.variables}             # no NVLS on A100
    a2a = ib.for_hardware(Hardware(fabric="ib", **H100_2N), ["alltoall"])
    assert {"NCCL_P2P_NET_CHUNKSIZE", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_P2P_PXN_LEVEL"} <= {
        v.name for v in a2a.variables}
    ar = ib.for_hardware(Hardware(fabric="ib", **H100_2N), ["all_reduce"])
    assert "NCCL_P2P_PXN_LEVEL" not in {v.name for v in ar.variables}           # only send/recv and all-to-all


def test_constraints_and_conditions():
    ib = load_space("ib").for_hardware(Hardware(fabric="ib", **H100_2N), ["all_reduce"])
    full = ib.complete({"NCCL_IB_QPS_PER_CONNECTION": UNSET, "NCCL_IB_SPLIT_DATA_ON_QPS": "1"})
    assert full["NCCL_IB_SPLIT_DATA_ON_QPS"] == UNSET                # inactive without several QPs
    sock = load_space("socket").for_hardware(Hardware(fabric="socket", **H100_2N), ["all_reduce"])
    assert sock.violations({"NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "8"})
    assert not sock.violations({"NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "8"})
    only = sock.only(["NCCL_SOCKET_NTHREADS"])
    assert [v.name for v in only.variables] == ["NCCL_SOCKET_NTHREADS"] and not only.constraints


def test_apply_params_sets_and_unsets():
    base = {"NCCL_ALGO": "Ring", "NCCL_SOCKET_IFNAME": "eth0"}
    env = apply_params(base, {"NCCL_ALGO": UNSET, "NCCL_IB_QPS_PER_CONNECTION": "4"})
    assert env == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_QPS_PER_CONNECTION": "4"}


def test_suggest_with_optuna_respects_conditions():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = load_space("ib").for_hardware(Hardware(fabric="ib", **H100_2N), ["all_reduce"])
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(40):
        t = study.ask()
        p = space.suggest(t)
        if p["NCCL_IB_QPS_PER_CONNECTION"] in (UNSET, "1"):
            assert "NCCL_IB_SPLIT_DATA_ON_QPS" not in p
        for name, value in p.items():
            assert value in space.variable(name).values
        study.tell(t, 1.0)


GOOD = """\
schema_version: 1
name: mine
fabric: roce
variables:
  NCCL_IB_QPS_PER_CONNECTION:
    values: [2, 4]
  NCCL_MIN_NCHANNELS: {values: [unset, 8], default: 0}
  NCCL_MAX_NCHANNELS: {values: [unset, 4], default: 64}
constraints:
  - {le: [NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS]}
"""


def test_user_space_gets_unset_added(tmp_path):
    space = load_space(_write(tmp_path, GOOD))
    assert space.variable("NCCL_IB_QPS_PER_CONNECTION").values == (UNSET, "2", "4")
    assert space.variable("NCCL_IB_QPS_PER_CONNECTION").screened == ("2", "4")      # every value, unless...
    narrowed = load_space(_write(tmp_path, GOOD.replace("    values: [2, 4]", "    values: [2, 4]\n    screen: 4")))
    assert narrowed.variable("NCCL_IB_QPS_PER_CONNECTION").screened == ("4",)       # ...the space names some


@pytest.mark.parametrize("text,line,match", [
    (GOOD.replace("    values: [2, 4]", "    valuez: [2, 4]"), 6, "unknown key 'valuez' in variable"),
    (GOOD.replace("  - {le: [", "  - {lt: ["), 10, "unknown constraint operator 'lt'"),
    (GOOD.replace("fabric: roce", "fabric: roce\nextra: 1"), 4, "unknown key 'extra' in search space"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, 4]\n    requires: [gpus]"), 7, "unknown name 'gpus'"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, 4]\n    when: {NCCL_MIN_NCHANNELS: {in: [8]}}"), 7,
     "not a variable listed before it"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, 4]\n    when: {NCCL_X: {gt: [8]}}"), 7, "not a variable"),
    (GOOD.replace("  NCCL_MIN_NCHANNELS: {values: [unset, 8], default: 0}",
                  "  NCCL_MIN_NCHANNELS: {values: [unset, 8], default: 0, when: {NCCL_IB_QPS_PER_CONNECTION: {gt: [2]}}}"),
     7, "unknown key 'gt' in condition"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, {value: 4, min_nccl: 2.18}]"), 6, "quoted version"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, 2]"), 6, "listed twice"),
    (GOOD.replace("    values: [2, 4]", "    values: [2, 4]\n    screen: 8"), 7, "screen must name values"),
    (GOOD.replace("NCCL_IB_QPS_PER_CONNECTION:", "IB_QPS:"), 5, "not an NCCL variable name"),
    (GOOD.replace("schema_version: 1", "schema_version: 2"), 1, "schema_version"),
    (GOOD + "  - {product_le: [NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS]}\n", 11, "numeric max"),
    ("variables: [\n", 2, "not valid YAML"),
])
def test_user_space_errors_name_file_line_and_key(tmp_path, text, line, match):
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=match) as err:
        load_space(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)


def test_cli_rejects_bad_space_with_exit_2(tmp_path, capsys):
    from ncdoc.cli.main import main

    path = _write(tmp_path, GOOD.replace("    values: [2, 4]", "    valuez: [2, 4]"))
    rc = main(["tune", "--preset", "h100-roce-2node", "--space", path, "--out", str(tmp_path / "o"),
               "--trials", "1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{path}:6: unknown key 'valuez'" in err and "Traceback" not in err


def test_profiles_data_and_restriction():
    profiles, default = load_profiles()
    assert default == "dp-allreduce"
    assert {"dp-allreduce", "moe-alltoall", "latency"} <= set(profiles)
    moe = profiles["moe-alltoall"]
    assert "alltoall" in moe.collectives and sum(b.weight for b in moe.buckets) > 0
    lat = profiles["latency"]
    assert max(s for b in lat.buckets for s in b.sizes) <= 4 << 20
    both = get_profile("dp-allreduce", ["all_reduce", "all_gather"])
    assert both.collectives == ("all_reduce", "all_gather")
    assert [b.sizes for b in both.buckets if b.collective == "all_gather"] == \
        [b.sizes for b in both.buckets if b.collective == "all_reduce"]
    with pytest.raises(UsageError, match="unknown collective"):
        get_profile(None, ["allreduce"])
    with pytest.raises(UsageError, match="unknown workload profile"):
        get_profile("nope")


def test_profile_score_is_weighted_geometric_mean_of_ratios():
    prof = get_profile("dp-allreduce")
    base = {b.key: 100.0 for b in prof.buckets}
    import math
    better = {b.key: 100.0 * (2.0 if b.name == "huge" else 1.0) for b in prof.buckets}
    w = {b.name: b.weight for b in prof.buckets}
    assert math.isclose(prof.log_score(better, base), w["huge"] / sum(w.values()) * math.log(2.0))
    assert prof.log_score(base, base) == 0.0


def test_profiles_file_is_validated_strictly(tmp_path, monkeypatch):
    bad = _write(tmp_path, """\
        schema_version: 1
        profiles:
          mine:
            buckets:
              - {name: a, collective: all_reduce, sizes: [1M], weigth: 2}
        """, "profiles.yaml")
    with pytest.raises(InputError, match="unknown key 'weigth'") as err:
        load_profiles(bad)
    assert str(err.value).startswith(f"{bad}:5:")


def test_tuner_data_ships_with_the_package():
    base = data_dir("tuners")
    assert (base / "profiles.yaml").is_file() and (base / "knowledge.yaml").is_file()
    assert sorted(p.stem for p in (base / "spaces").glob("*.yaml")) == sorted(FABRICS)
