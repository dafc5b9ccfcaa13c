"""Tables built on what NCCL reported it ran (its TUNING lines, through the real backends): at each
measured size NCCL's printed algorithm, protocol and channel count, over the range up to the
geometric midpoints with the neighbouring measured sizes; ncdoc's model elsewhere; a probe whose
measurement shows NCCL ran something else is no evidence for that choice."""

from types import SimpleNamespace

from ncdoc.tuner.backends import Measurement, SizeResult
from ncdoc.tuner.profiles import get_profile
from ncdoc.tuner.sim import preset
from ncdoc.tuner.table import COLLECTIVES
from ncdoc.tuner.table_build import OBSERVED, Override, Probe, build, observed_choices, overrides_from_probes

CLUSTER = preset("h100-ib-2node")


def _rule(rules, coll, nbytes):
    return next(r for r in rules if r.collective == coll and r.min_bytes <= nbytes <= r.max_bytes)


def test_measured_sizes_carry_what_nccl_printed_and_the_model_fills_the_rest():
    model = build(CLUSTER, {}, list(COLLECTIVES))
    seen = {"all_reduce": {1 << 20: ("Tree", "LL128", 7), 1 << 24: ("Ring", "Simple", 13)}}
    rules = build(CLUSTER, {}, list(COLLECTIVES), observed=seen)
    for size, (algo, proto, ch) in seen["all_reduce"].items():
        r = _rule(rules, "all_reduce", size)
        assert (r.algo, r.proto, r.channels, r.note) == (algo, proto, ch, OBSERVED)
    mid = _rule(rules, "all_reduce", 4 << 20)                    # the geometric midpoint of 1 and 16 MiB
    assert mid.note == OBSERVED and _rule(rules, "all_reduce", (4 << 20) + 1).channels == 13
    for nbytes in (1 << 10, 1 << 30):                            # outside the measured sizes: the model
        a, b = _rule(rules, "all_reduce", nbytes), _rule(model, "all_reduce", nbytes)
        assert (a.algo, a.proto, a.channels) == (b.algo, b.proto, b.channels) and a.note != OBSERVED
    assert [r for r in rules if r.collective == "all_gather"] == [r for r in model if r.collective == "all_gather"]


def test_a_measured_override_keeps_the_channel_count_nccl_printed_for_its_own_choice():
    seen = {"all_reduce": {1 << 20: ("Ring", "LL128", 9)}}
    same = build(CLUSTER, {}, ["all_reduce"], [Override("all_reduce", 1 << 20, 1 << 20, "Ring", "LL128", "m")],
                 observed=seen)
    other = build(CLUSTER, {}, ["all_reduce"], [Override("all_reduce", 1 << 20, 1 << 20, "Tree", "Simple", "m")],
                  observed=seen)
    assert _rule(same, "all_reduce", 1 << 20).channels == 9
    assert _rule(other, "all_reduce", 1 << 20).channels != 9 and _rule(other, "all_reduce", 1 << 20).algo == "Tree"


def test_observed_choices_come_from_the_backends_size_results():
    m = Measurement((("all_reduce", (SizeResult(1 << 20, 10.0, algo="Ring", proto="LL", nchannels=4),
                                     SizeResult(1 << 22, 20.0))),))
    assert observed_choices(m) == {"all_reduce": {1 << 20: ("Ring", "LL", 4)}}


def test_a_probe_nccl_did_not_run_is_no_evidence():
    profile = get_profile("latency").restrict(["all_reduce"])
    sizes = dict(profile.workload())["all_reduce"]

    def m(bw, algo):
        return Measurement((("all_reduce", tuple(SizeResult(s, bw, algo=algo, proto="LL") for s in sizes)),))

    probe = Probe("Tree/LL", "Tree", "LL", (), ("all_reduce",))
    ran = SimpleNamespace(ok=True, measurements=(("env", m(10.0, "Ring")), ("Tree/LL", m(20.0, "Tree"))))
    ignored = SimpleNamespace(ok=True, measurements=(("env", m(10.0, "Ring")), ("Tree/LL", m(20.0, "Ring"))))
    kw = dict(noise=0.01, min_gain=0.01)
    assert overrides_from_probes(ran, [probe], profile, CLUSTER, {}, **kw)
    assert overrides_from_probes(ignored, [probe], profile, CLUSTER, {}, **kw) == []
