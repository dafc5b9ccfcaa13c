"""The model of a study's measurements (ncdoc.tuner.model): estimates that pool what related
configurations measured, so near-equal points are not ranked by the luck of their own runs."""

import itertools
import math
import random

import pytest

from ncdoc.tuner.model import Model
from ncdoc.tuner.space import UNSET
from ncdoc.tuner.space_file import load_space

pytest.importorskip("numpy")

SPACE = """\
schema_version: 1
name: model
fabric: ib
variables:
  NCCL_IB_QPS_PER_CONNECTION: {values: [unset, 2, 4, 8], default: 1}
  NCCL_BUFFSIZE: {values: [unset, 8388608, 16777216], default: 4194304}
  NCCL_IB_TC: {values: [unset, 106, 160]}
  NCCL_NET_GDR_LEVEL: {values: [unset, PXB, SYS]}
"""
NOISE = 0.013
QPS = {UNSET: 0.0, "2": 0.07, "4": 0.12, "8": 0.118}
BUF = {UNSET: 0.0, "8388608": 0.006, "16777216": 0.009}


def _truth(p):
    return QPS[p["NCCL_IB_QPS_PER_CONNECTION"]] + BUF[p["NCCL_BUFFSIZE"]]     # TC and GDR level change nothing


@pytest.fixture
def space(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text(SPACE)
    return load_space(str(path))


def _points(space):
    names = [v.name for v in space.variables]
    return [dict(zip(names, combo)) for combo in itertools.product(*(v.values for v in space.variables))]


def test_estimates_pool_related_configurations(space):
    """Around a good point, a study measures many variants that differ in a variable that does
    nothing: the model's estimates of them are closer to the truth than their own means."""
    rng = random.Random(3)
    pts = [p for p in _points(space) if p["NCCL_IB_QPS_PER_CONNECTION"] in ("4", "8")]
    own_err = model_err = 0.0
    for _ in range(12):
        sample = rng.sample(pts, 24)
        runs = [rng.choice((1, 2)) for _ in sample]
        means = [_truth(p) + rng.gauss(0.0, NOISE / math.sqrt(n)) for p, n in zip(sample, runs)]
        model = Model(space, sample, means, runs, NOISE,
                      scales={"NCCL_IB_QPS_PER_CONNECTION": 0.08, "NCCL_BUFFSIZE": 0.008,
                              "NCCL_IB_TC": NOISE / 4, "NCCL_NET_GDR_LEVEL": NOISE / 4})
        est, sd = model.predict(sample)
        own_err += sum((m - _truth(p)) ** 2 for m, p in zip(means, sample))
        model_err += sum((e - _truth(p)) ** 2 for e, p in zip(est, sample))
        assert all(s > 0 for s in sd)
    assert model_err < 0.5 * own_err


def test_an_unmeasured_combination_is_predicted_from_its_parts(space):
    rng = random.Random(5)
    base = {v.name: UNSET for v in space.variables}
    sample = [dict(base), {**base, "NCCL_IB_QPS_PER_CONNECTION": "4"}, {**base, "NCCL_BUFFSIZE": "16777216"},
              {**base, "NCCL_IB_TC": "106"}, {**base, "NCCL_IB_QPS_PER_CONNECTION": "2"},
              {**base, "NCCL_BUFFSIZE": "8388608"}]
    runs = [4] * len(sample)
    means = [_truth(p) + rng.gauss(0.0, NOISE / 2) for p in sample]
    model = Model(space, sample, means, runs, NOISE)             # no scales: every variable alike
    both = {**base, "NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_BUFFSIZE": "16777216"}
    (est,), (sd,) = model.predict([both])
    assert est == pytest.approx(_truth(both), abs=3 * sd + 0.01)
    diff, dsd = model.difference(both, {**base, "NCCL_IB_QPS_PER_CONNECTION": "4"})
    assert dsd > 0 and diff == pytest.approx(0.009, abs=3 * dsd + 0.005)
    again = model.condition(sample, means, [16] * len(sample))   # the same covariance, more runs
    assert again.length == model.length and again.predict([both])[1][0] < sd


def test_a_single_measurement_is_its_own_estimate_pulled_towards_nothing_else(space):
    p = {v.name: UNSET for v in space.variables}
    model = Model(space, [p], [0.05], [2], NOISE)
    (est,), _ = model.predict([p])
    assert est == pytest.approx(0.05, abs=1e-6)
