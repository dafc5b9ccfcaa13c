"""The statistics behind a verdict: Wilcoxon's signed-rank test, the paired t bound, shrinkage."""

import math

import pytest

from ncdoc.tuner.stats import paired_t, shrunk, t_quantile, wilcoxon_greater


def test_wilcoxon_exact_tail_probabilities():
    assert wilcoxon_greater([0.1, 0.2, 0.05, 0.3, 0.15, 0.12]) == pytest.approx(1 / 64)     # all positive
    assert wilcoxon_greater([0.1, -0.2, 0.05, 0.3, 0.15, 0.12]) == pytest.approx(10 / 64)   # W=17 of 21
    assert wilcoxon_greater([0.1, 0.1, 0.1, 0.1]) == pytest.approx(1 / 16)                  # ties
    assert wilcoxon_greater([0.01, 0.02, 0.03], shift=0.015) > 0.3                          # against a floor
    assert wilcoxon_greater([]) == 1.0


def test_one_wild_round_carries_a_t_test_but_not_wilcoxon():
    diffs = [-0.01, 0.0, -0.005, 0.01, -0.002, 0.6]
    mean, sd, lcb = paired_t(diffs, 0.95)
    assert mean > 0.09
    assert wilcoxon_greater(diffs) > 0.1


def test_t_quantiles_and_shrinkage():
    assert t_quantile(0.975, 5) == pytest.approx(2.5706, abs=1e-3)
    # one lucky single run among many flat trials is pulled back towards them
    flat = [0.0, 0.01, -0.01, 0.005, -0.004, 0.002, 0.06]
    est = shrunk(flat, [1] * 7, 0.03)
    assert est[-1] < 0.03 and math.isclose(sum(est) / 7, sum(flat) / 7, abs_tol=1e-9)
    # a real gain, measured three times, keeps most of it
    est = shrunk(flat[:-1] + [0.3], [1] * 6 + [3], 0.03)
    assert est[-1] > 0.28
