"""A similarity threshold that keeps a recall target, learned from a few labelled pairs.

Blocking a semantic join keeps only the pairs whose embeddings are at least as similar as a
threshold ``t``. Which ``t`` keeps, say, 95% of the pairs the LLM would accept? Matches are rare
(one review in 100 plots matches one plot: 1%), so a uniform sample of 100 pairs would hold one
match. :func:`sample_pairs` therefore samples by *stratified importance*: pairs ranked by
similarity are cut into strata of geometrically growing size (the top ``N/2^(S-1)`` pairs, the
next as many, then ``N/2^(S-2)``, ... the bottom half), and each stratum gets labels in
proportion to the square root of its size, so the similar pairs, where matches are, are sampled
densely and the large low strata still enough to bound what they may hide. Each sampled pair carries the weight ``stratum size / samples in it`` (Horvitz-
Thompson), and :func:`learn_threshold` picks the highest ``t`` whose weighted share of the
sampled matches at or above ``t`` reaches the target: an unbiased estimate of the recall of the
pairs ``>= t`` among all pairs. It is an *estimate*: with 100 labels the true recall can fall
far short (13 sampled matches, all in the top strata, estimated 1.00 where the truth was 0.29:
matches spread thinly over the large low strata are seldom sampled at all).

:func:`bounded_threshold` is what the planner uses instead: a *stratified* lower confidence
bound. Each stratum ``h`` of ``N_h`` pairs, ``n_h`` of them labelled with ``x_h`` matches, gets
Clopper-Pearson bounds ``[lo_h, hi_h]`` on its match rate (exact where every pair of it was
labelled), each side at ``delta / (2 m)`` for the ``m`` strata not labelled in full (Bonferroni).
Keeping the top ``j`` strata (threshold: the lowest similarity in stratum ``j``) has recall at
least ``sum_{h<=j} N_h lo_h / (sum_{h<=j} N_h lo_h + sum_{h>j} N_h hi_h)``, for every ``j`` at
once; the threshold is the highest whose bound reaches the target. Guarantee: with probability
at least ``1 - delta`` over the sample, the true recall of the learned threshold among all the
pairs' matches is at least the target (each stratum's draws taken as binomial; drawn without
replacement they are only tighter in practice, the exact case being a fully labelled stratum).
Unsampled matches cannot hide: a stratum where none was found still bounds how many it may
hold, so certifying recall 0.95 when matches are rare takes about ``ln(2m/delta) /
(0.05 * match rate)`` labels (1% matches, 90%: ~10,000); with fewer, no threshold below
"keep every stratum" reaches the bound and the join stays a nested loop.

Example (two matches of weight 1 at 0.9 and 0.5, one of weight 2 at 0.7):
    >>> learn_threshold([0.9, 0.7, 0.5, 0.2], [True, True, True, False], [1, 2, 1, 4], 0.75)
    Threshold(threshold=0.7, sample_recall=0.75, positives=3, recall_bound=None, kept_strata=None)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from duckdb_sem.estimator.bounds import lower_bound, upper_bound

__all__ = ["PairSample", "Threshold", "bounded_threshold", "learn_threshold", "sample_pairs"]


@dataclass(frozen=True, slots=True)
class PairSample:
    """Indices into the flattened similarity matrix, with their inverse-probability weights."""

    indices: tuple[int, ...]
    weights: tuple[float, ...]
    strata: tuple[int, ...] = ()  # the stratum of each sampled pair (0: the most similar)
    sizes: tuple[int, ...] = ()  # pairs per stratum
    floors: tuple[float, ...] = ()  # the lowest similarity of each stratum


@dataclass(frozen=True, slots=True)
class Threshold:
    threshold: float | None  # None: no match in the sample, nothing to learn from
    sample_recall: float  # estimated recall of the pairs >= threshold
    positives: int  # labelled matches in the sample
    recall_bound: float | None = None  # lower confidence bound of the true recall
    kept_strata: int | None = None  # strata the threshold keeps (bounded_threshold)


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
        floor = float(flat[valid].min()) if len(valid) else 0.0
        return PairSample(tuple(int(i) for i in valid), (1.0,) * len(valid),
                          (0,) * len(valid), (len(valid),), (floor,))  # fmt: skip
    order = valid[np.argsort(-flat[valid], kind="stable")]
    # a boundary never splits equal similarities (a threshold cannot either): it moves up to
    # the first pair of its tie, so the ties all fall in the lower stratum
    descending = -flat[order]
    bounds = sorted({int(np.searchsorted(descending, descending[b], side="left")) if b < len(order)
                     else b for b in strata_bounds(len(order), strata)} - {0} | {0})  # fmt: skip
    sizes = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    takes = _allocate(sizes, size)
    rng = np.random.default_rng(seed)
    indices: list[int] = []
    weights: list[float] = []
    which: list[int] = []
    for h, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        members = order[lo:hi]
        take = takes[h]
        chosen = rng.choice(len(members), size=take, replace=False)
        indices.extend(int(members[c]) for c in sorted(chosen))
        weights.extend([len(members) / take] * take)
        which.extend([h] * take)
    floors = tuple(float(flat[order[hi - 1]]) for hi in bounds[1:])
    return PairSample(tuple(indices), tuple(weights), tuple(which), tuple(sizes), floors)


def _allocate(sizes: list[int], size: int) -> list[int]:
    """Labels per stratum, proportional to the square root of its size (each at least one,
    none past its size): dense where the few similar pairs are, and still enough in the large
    low strata to bound the matches they may hide."""
    takes = [0] * len(sizes)
    left, open_ = size, set(range(len(sizes)))
    while left > 0 and open_:
        roots = {h: sizes[h] ** 0.5 for h in open_}
        total = sum(roots.values())
        full = {h for h in open_ if roots[h] / total * left >= sizes[h] - takes[h]}
        if full:  # fill the small strata completely, share the rest again
            for h in full:
                left -= sizes[h] - takes[h]
                takes[h] = sizes[h]
            open_ -= full
            continue
        for h in open_:
            takes[h] += int(roots[h] / total * left)
        left = size - sum(takes)
        for h in sorted(open_, key=lambda h: -roots[h])[:left]:
            takes[h] += 1
        break
    return [max(1, min(t, s)) for t, s in zip(takes, sizes, strict=True)]


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


def bounded_threshold(
    sample: PairSample, labels: Sequence[bool | None], target: float, delta: float
) -> Threshold:
    """The highest stratum floor whose stratified recall bound reaches ``target`` with
    probability ``1 - delta`` (see module); ``threshold`` None when the sample holds no match,
    ``kept_strata == len(sample.sizes)`` when only keeping every pair reaches it."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"recall target must be in (0, 1], got {target}")
    strata = len(sample.sizes)
    labelled = [0] * strata
    matches = [0] * strata
    for h, lab in zip(sample.strata, labels, strict=True):
        labelled[h] += 1
        matches[h] += bool(lab)
    if not any(matches):
        return Threshold(None, 0.0, 0)
    partial = sum(1 for h in range(strata) if labelled[h] < sample.sizes[h])
    each = delta / (2 * max(1, partial))
    lows: list[float] = []
    highs: list[float] = []
    for h in range(strata):
        n, x, size = labelled[h], matches[h], sample.sizes[h]
        if n >= size:  # every pair of it labelled: its matches are known
            lows.append(float(x))
            highs.append(float(x))
        elif n == 0:
            lows.append(0.0)
            highs.append(float(size))
        else:
            lows.append(size * lower_bound(x, n, each))
            highs.append(size * upper_bound(x, n, each))
    weights = sample.weights
    for j in range(1, strata + 1):
        kept, lost = sum(lows[:j]), sum(highs[j:])
        bound = kept / (kept + lost) if kept + lost > 0 else 0.0
        if bound >= target - 1e-12 or j == strata:
            total = sum(w for w, lab in zip(weights, labels, strict=True) if lab)
            inside = sum(w for w, h, lab in zip(weights, sample.strata, labels, strict=True)
                         if lab and h < j)  # fmt: skip
            return Threshold(sample.floors[j - 1], inside / total, sum(matches),
                             recall_bound=1.0 if j == strata else bound, kept_strata=j)  # fmt: skip
    raise AssertionError("unreachable: the last stratum keeps every pair")
