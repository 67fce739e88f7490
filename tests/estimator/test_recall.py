"""Stratified pair sampling and the recall-target threshold (pure, deterministic)."""

from __future__ import annotations

import numpy as np
import pytest

from duckdb_sem.estimator.recall import learn_threshold, sample_pairs, strata_bounds


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
    assert top >= 10  # ~1/8 of the sample from 1% of the pairs


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
