"""Screening's per-variable estimates (ncdoc.tuner.effects): the values of an ordered variable read as
one curve, unordered ones shrunk towards the default, and the records they are read from."""

import math
import random

import pytest

from ncdoc.tuner.effects import alone, effect_scales, screen_effects, smoothed
from ncdoc.tuner.space import UNSET
from ncdoc.tuner.space_file import load_space
from ncdoc.tuner.study import TrialRecord

NOISE = 0.013
# A buffer-size-like trend: 2, 4 (the default), 8 and 16 MiB, one octave apart, about 1 % per octave.
LEVELS = [2.0, 1.0, 3.0, 4.0]                 # log2 of the values, the default's first
TRUTH = [0.0, -0.011, 0.005, 0.008]           # effects against the default


def _draw(rng, runs):
    return [t + rng.gauss(0.0, NOISE / math.sqrt(n)) for t, n in zip(TRUTH, runs)]


def test_an_ordered_variable_is_read_as_one_curve_closer_to_the_truth_than_each_value_alone():
    rng = random.Random(7)
    runs = [2, 2, 1, 2]
    raw_err = smooth_err = 0.0
    right = 0
    for _ in range(300):
        means = _draw(rng, runs)
        est = smoothed(LEVELS, means, runs, NOISE, prior=means[0])
        raw_err += sum((m - means[0] - t) ** 2 for m, t in zip(means[1:], TRUTH[1:]))
        smooth_err += sum((e - est[0] - t) ** 2 for e, t in zip(est[1:], TRUTH[1:]))
        right += max(range(4), key=lambda i: est[i]) in (2, 3)      # 8 or 16 MiB: the top of the trend
    assert smooth_err < 0.7 * raw_err
    assert right > 0.75 * 300


def test_unordered_values_are_shrunk_towards_the_default_not_smoothed_into_each_other():
    est = smoothed([None, None, None], [0.0, 0.02, -0.02], [2, 2, 2], NOISE, prior=0.0)
    assert abs(est[1]) <= 0.02 and abs(est[2]) <= 0.02
    assert est[1] > 0 > est[2]                 # order kept, each on its own
    big = smoothed([None, None], [0.0, 0.15], [2, 2], NOISE, prior=0.0)
    assert big[1] == pytest.approx(0.15, abs=0.01)   # an effect far beyond the noise stands as measured


def test_smoothed_edge_cases():
    assert smoothed([], [], [], NOISE, 0.0) == []
    assert smoothed([1.0], [0.01], [1], NOISE, 0.01) == [pytest.approx(0.01)]


SPACE = """\
schema_version: 1
name: eff
fabric: ib
variables:
  NCCL_BUFFSIZE: {values: [unset, 2097152, 8388608, 16777216], default: 4194304}
  NCCL_IB_TC: {values: [unset, 106, 160]}
  NCCL_IB_QPS_PER_CONNECTION: {values: [unset, 4], default: 1}
  NCCL_IB_SPLIT_DATA_ON_QPS:
    values: [unset, 1]
    when: {NCCL_IB_QPS_PER_CONNECTION: {not_in: [unset]}}
"""


def _rec(n, stage, scores, state="complete", **changes):
    params = {"NCCL_BUFFSIZE": UNSET, "NCCL_IB_TC": UNSET, "NCCL_IB_QPS_PER_CONNECTION": UNSET,
              "NCCL_IB_SPLIT_DATA_ON_QPS": UNSET, **changes}
    return TrialRecord(number=n, params=params, state=state, value=None, buckets={}, sizes={},
                       scores=tuple(scores), stage=stage)


def test_screen_effects_read_the_defaults_and_each_value_alone(tmp_path):
    path = tmp_path / "eff.yaml"
    path.write_text(SPACE)
    space = load_space(str(path))
    recs = [_rec(0, "start", [0.001, -0.001]),
            _rec(1, "start", [0.13, 0.12], NCCL_IB_QPS_PER_CONNECTION="4", NCCL_IB_SPLIT_DATA_ON_QPS="1"),
            _rec(2, "screen", [-0.012], state="stopped", NCCL_BUFFSIZE="2097152"),
            _rec(3, "screen", [0.006, 0.004], NCCL_BUFFSIZE="8388608"),
            _rec(4, "screen", [0.009, 0.007], NCCL_BUFFSIZE="16777216"),
            _rec(5, "screen", [0.002], NCCL_IB_TC="106"),
            _rec(6, "screen", [0.11, 0.12], NCCL_IB_QPS_PER_CONNECTION="4"),
            _rec(7, "refine", [0.5], NCCL_IB_TC="160")]                 # not screening: not read
    ref, data = alone(recs)
    assert ref == [0.001, -0.001]
    assert set(data) == {"NCCL_BUFFSIZE", "NCCL_IB_TC", "NCCL_IB_QPS_PER_CONNECTION"}   # two changes: not alone
    eff = screen_effects(recs, space, NOISE)
    assert "NCCL_IB_SPLIT_DATA_ON_QPS" not in eff                        # conditional: never screened alone
    buf = eff["NCCL_BUFFSIZE"]
    assert buf[UNSET] == 0.0 and buf["16777216"] > buf["8388608"] > 0 > buf["2097152"]
    assert set(eff["NCCL_IB_TC"]) == {UNSET, "106"}
    assert eff["NCCL_IB_QPS_PER_CONNECTION"]["4"] == pytest.approx(0.115, abs=0.01)
    scales = effect_scales(eff, NOISE)
    assert scales["NCCL_IB_QPS_PER_CONNECTION"] > 10 * scales["NCCL_IB_TC"]
    assert scales["NCCL_IB_TC"] >= NOISE / 4                             # never zero: a floor of a quarter
    assert screen_effects([r for r in recs if r.number], space, NOISE) == {}   # no defaults, no reference
