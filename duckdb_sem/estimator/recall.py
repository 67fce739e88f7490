"""A similarity threshold that keeps a recall target, learned from a few labelled pairs.

Blocking a semantic join keeps only the pairs whose embeddings are at least as similar as a
threshold ``t``. Which ``t`` keeps, say, 95% of the pairs the LLM would accept? Matches are rare
(one review in 100 plots matches one plot: 1%), so a uniform sample of 100 pairs would hold one
match. :func:`sample_pairs` therefore samples by *stratified importance*: pairs ranked by
similarity are cut into strata of geometrically growing size (the top ``N/2^(S-1)`` pairs, the
next as many, then ``N/2^(S-2)``, ... the bottom half), and each stratum gets the same number
of samples, so the similar pairs, where matches are, are sampled densely and every stratum
still is. Each sampled pair carries the weight ``stratum size / samples in it`` (Horvitz-
Thompson), and :func:`learn_threshold` picks the highest ``t`` whose weighted share of the
sampled matches at or above ``t`` reaches the target: an unbiased estimate of the recall of the
pairs ``>= t`` among all pairs. It is an *estimate*: with 100 labels the true recall can fall
short; the benchmark reports the true recall beside it.

Example (two matches of weight 1 at 0.9 and 0.5, one of weight 2 at 0.7):
    >>> learn_threshold([0.9, 0.7, 0.5, 0.2], [True, True, True, False], [1, 2, 1, 4], 0.75)
    Threshold(threshold=0.7, sample_recall=0.75, positives=3)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PairSample", "Threshold", "learn_threshold", "sample_pairs"]


@dataclass(frozen=True, slots=True)
class PairSample:
    """Indices into the flattened similarity matrix, with their inverse-probability weights."""

    indices: tuple[int, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Threshold:
    threshold: float | None  # None: no match in the sample, nothing to learn from
    sample_recall: float  # estimated recall of the pairs >= threshold
    positives: int  # labelled matches in the sample


def strata_bounds(n: int, strata: int) -> list[int]:
    """Rank boundaries ``0 = b0 < b1 < ... = n`` of strata of growing size (top first).

    Example:
        >>> strata_bounds(64, 4)
        [0, 8, 16, 32, 64]
    """
    bounds = [0] + [max(1, n >> (strata - j)) for j in range(1, strata)] + [n]
    return sorted(set(bounds))


def sample_pairs(
    similarities: np.ndarray, size: int, *, strata: int = 8, seed: int = 7
) -> PairSample:
    """About ``size`` pairs (indices into ``similarities.ravel()``), stratified by rank.

    Pairs with a NaN similarity (a NULL text) are never sampled. Deterministic for a seed; with
    no more pairs than ``size`` every pair is taken with weight 1.
    """
    flat = np.asarray(similarities, dtype=np.float64).ravel()
    valid = np.flatnonzero(~np.isnan(flat))
    if len(valid) <= size:
        return PairSample(tuple(int(i) for i in valid), (1.0,) * len(valid))
    order = valid[np.argsort(-flat[valid], kind="stable")]
    bounds = strata_bounds(len(order), strata)
    per = max(1, size // (len(bounds) - 1))
    rng = np.random.default_rng(seed)
    indices: list[int] = []
    weights: list[float] = []
    for lo, hi in itertools.pairwise(bounds):
        members = order[lo:hi]
        take = min(per, len(members))
        chosen = rng.choice(len(members), size=take, replace=False)
        indices.extend(int(members[c]) for c in sorted(chosen))
        weights.extend([len(members) / take] * take)
    return PairSample(tuple(indices), tuple(weights))


def learn_threshold(
    similarities: Sequence[float],
    labels: Sequence[bool | None],
    weights: Sequence[float],
    target: float,
) -> Threshold:
    """The highest similarity ``t`` whose estimated recall (sampled matches ``>= t``, weighted)
    reaches ``target``; a NULL label counts as no match."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"recall target must be in (0, 1], got {target}")
    matches = sorted(
        ((float(s), float(w)) for s, lab, w in zip(similarities, labels, weights, strict=True)
         if lab),
        reverse=True,
    )  # fmt: skip
    if not matches:
        return Threshold(None, 0.0, 0)
    total = sum(w for _, w in matches)
    kept = 0.0
    for i, (sim, weight) in enumerate(matches):
        kept += weight
        tied = i + 1 < len(matches) and matches[i + 1][0] == sim
        if not tied and kept / total >= target - 1e-12:
            return Threshold(sim, kept / total, len(matches))
    return Threshold(matches[-1][0], 1.0, len(matches))
