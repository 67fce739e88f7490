"""Stratified pair sampling and the recall-target threshold (pure, deterministic)."""

from __future__ import annotations

import numpy as np
import pytest

from duckdb_sem.estimator.recall import (
    bounded_threshold,
    learn_threshold,
    sample_pairs,
    strata_bounds,
)


def test_strata_grow_geometrically_from_the_top() -> None:
    assert strata_bounds(64, 4) == [0, 8, 16, 32, 64]
    assert strata_bounds(3, 8) == [0, 1, 3]  # tiny inputs: no empty strata


def test_sample_is_deterministic_dense_at_the_top_and_weights_cover_every_pair() -> None:
    sims = np.linspace(1.0, 0.0, 10_000).reshape(100, 100)
    a, b = sample_pairs(sims, 80, seed=3), sample_pairs(sims, 80, seed=3)
    assert a == b
    assert sample_pairs(sims, 80, seed=4) != a
    assert len(a.indices) == len(set(a.indices)) == 80
    # inverse-probability weights add up to the number of pairs (Horvitz-Thompson)
    assert sum(a.weights) == pytest.approx(10_000)
    top = sum(1 for i in a.indices if i < 100)  # the 1% most similar pairs
    assert top >= 3  # ~4x the uniform rate on the 1% most similar pairs
    bottom = sum(1 for i in a.indices if i >= 5_000)  # the least similar half
    assert 15 <= bottom < 40  # fewer than uniform, yet enough to bound what it may hide


def test_sample_skips_null_pairs_and_takes_all_when_few() -> None:
    sims = np.array([[0.5, np.nan], [0.2, 0.9]])
    sample = sample_pairs(sims, 10)
    assert sorted(sample.indices) == [0, 2, 3]
    assert sample.weights == (1.0, 1.0, 1.0)


def test_threshold_is_the_highest_that_reaches_the_target() -> None:
    sims = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1]
    labels = [True, False, True, True, True, False]
    got = learn_threshold(sims, labels, [1.0] * 6, 0.75)
    assert (got.threshold, got.sample_recall, got.positives) == (0.6, 0.75, 4)
    assert learn_threshold(sims, labels, [1.0] * 6, 1.0).threshold == 0.5
    assert learn_threshold(sims, labels, [1.0] * 6, 0.25).threshold == 0.9


def test_weights_move_the_threshold() -> None:
    sims, labels = [0.9, 0.4], [True, True]
    assert learn_threshold(sims, labels, [1, 1], 0.5).threshold == 0.9
    assert learn_threshold(sims, labels, [1, 3], 0.5).threshold == 0.4  # the low match counts 3x


def test_ties_are_kept_together_and_null_labels_are_no_match() -> None:
    got = learn_threshold([0.8, 0.8, 0.3], [True, True, None], [1, 1, 1], 0.5)
    assert got.threshold == 0.8 and got.sample_recall == 1.0 and got.positives == 2


def test_no_match_in_the_sample_learns_nothing() -> None:
    got = learn_threshold([0.9, 0.2], [False, None], [1, 1], 0.95)
    assert got.threshold is None and got.positives == 0


def test_target_must_be_a_share() -> None:
    with pytest.raises(ValueError, match="recall target"):
        learn_threshold([0.5], [True], [1], 1.5)


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    """20,000 pairs: matches dense among the most similar, and a thin tail (1%) everywhere."""
    rng = np.random.default_rng(0)
    sims = rng.random(20_000)
    rate = np.where(sims > 0.9, 0.6, np.where(sims > 0.7, 0.15, 0.01))
    return sims, rng.random(20_000) < rate


def test_bounded_threshold_meets_the_recall_at_the_stated_rate_and_the_estimate_does_not() -> None:
    sims, truth = _pairs()

    def true_recall(threshold: float | None) -> float:
        assert threshold is not None
        return float(truth[sims >= threshold].sum() / truth.sum())

    bounded = point = 0
    kept: list[float] = []
    for seed in range(200):
        sample = sample_pairs(sims, 1600, seed=seed)
        at = np.array(sample.indices)
        labels = truth[at].tolist()
        got = bounded_threshold(sample, labels, 0.8, 0.1)
        assert got.recall_bound is not None and got.recall_bound >= 0.8
        bounded += true_recall(got.threshold) >= 0.8
        kept.append(float((sims >= got.threshold).mean()))  # type: ignore[operator]
        estimate = learn_threshold(sims[at].tolist(), labels, sample.weights, 0.8)
        point += true_recall(estimate.threshold) >= 0.8
    assert bounded >= 0.9 * 200  # recall >= 0.8 at confidence 0.9, over 200 samples
    assert point < 0.75 * 200  # the point estimate misses far more often than 10%
    assert np.mean(kept) < 0.8  # and the bound still blocks: not every pair kept


def test_a_stratum_without_a_sampled_match_still_bounds_what_it_may_hide() -> None:
    sims, truth = _pairs()
    sample = sample_pairs(sims, 100, seed=1)
    labels = truth[np.array(sample.indices)].tolist()
    got = bounded_threshold(sample, labels, 0.8, 0.1)
    assert got.kept_strata == len(sample.sizes)  # 100 labels cannot rule out the tail: keep all
    assert got.threshold == min(sample.floors)


def test_fully_labelled_strata_are_exact() -> None:
    sims = np.array([0.9, 0.8, 0.3, 0.2])
    sample = sample_pairs(sims, 10)  # every pair: one exact stratum
    got = bounded_threshold(sample, [True, True, False, False], 1.0, 0.1)
    assert got.recall_bound == 1.0 and got.kept_strata == 1
