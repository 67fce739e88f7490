"""Exact one-sided binomial confidence bounds (Clopper-Pearson) and the recall rank rule.

The approximate plans learn their thresholds against these bounds instead of the sample's point
estimates, so a stated guarantee holds at a stated confidence (``estimator.cascade_thresholds``,
``estimator.recall``). Pure Python (no SciPy): the binomial tail summed in log space, the bounds
found by bisection; ``n`` up to a few thousand is fast.

Example (no success in 10 draws: the rate is under 0.206 at 90% confidence, the "rule of
three" for small samples):
    >>> round(upper_bound(0, 10, 0.1), 3)
    0.206
    >>> round(lower_bound(10, 10, 0.1), 3)
    0.794
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

__all__ = ["binom_cdf", "lower_bound", "recall_rank", "upper_bound"]


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    lp, lq = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    terms = [base - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
             for i in range(k + 1)]  # fmt: skip
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def _solve(tail: float, f: Callable[[float], float], *, rising: bool) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        value = f(mid)
        if (value > tail) == rising:
            hi = mid
        else:
            lo = mid
    return lo if rising else hi


@lru_cache(maxsize=65536)
def lower_bound(successes: int, n: int, delta: float) -> float:
    """The rate ``p`` such that ``p <= true rate`` with probability at least ``1 - delta``
    (Clopper-Pearson: the p at which ``successes`` or more has probability ``delta``)."""
    _check(successes, n, delta)
    if successes == 0:
        return 0.0
    # P(X >= s | p) = 1 - cdf(s - 1) rises with p; the bound is where it reaches delta
    return _solve(delta, lambda p: 1.0 - binom_cdf(successes - 1, n, p), rising=True)


@lru_cache(maxsize=65536)
def upper_bound(successes: int, n: int, delta: float) -> float:
    """The rate ``p`` such that ``true rate <= p`` with probability at least ``1 - delta``."""
    _check(successes, n, delta)
    if successes == n:
        return 1.0
    # P(X <= s | p) falls with p; the bound is where it falls to delta
    return _solve(delta, lambda p: binom_cdf(successes, n, p), rising=False)


@lru_cache(maxsize=4096)
def recall_rank(n: int, target: float, delta: float) -> int | None:
    """The fewest of ``n`` sampled positives, counted from the top score down, a threshold must
    keep so that its true recall is at least ``target`` with probability ``1 - delta``; None
    when even keeping all ``n`` is not enough (too few positives for that confidence).

    Why it holds: the true recall at the k-th highest positive score is the k-th smallest of
    ``n`` uniform draws (each positive's recall tail), so it falls below ``target`` exactly when
    ``k`` or more of the draws do: probability ``P(Binomial(n, target) >= k)``. Distribution-free,
    for any score; ties only keep more.

    Example: 100 positives, recall 0.9 at 90% confidence: the threshold keeps 95, not 90.
        >>> recall_rank(100, 0.9, 0.1)
        95
    """
    if n <= 0:
        return None
    for k in range(max(1, math.floor(target * n)), n + 1):
        if binom_cdf(k - 1, n, target) >= 1.0 - delta:
            return k
    return None


def _check(successes: int, n: int, delta: float) -> None:
    if not 0 <= successes <= n or n <= 0:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"the error rate delta must be in (0, 1), got {delta}")
