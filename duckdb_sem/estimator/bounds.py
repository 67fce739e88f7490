"""Exact one-sided binomial confidence bounds (Clopper-Pearson) and the recall rank rule.

The approximate plans learn their thresholds against these bounds instead of the sample's point
estimates, so a stated guarantee holds at a stated confidence (``estimator.cascade_thresholds``,
``estimator.recall``). The bounds are quantiles of the beta distribution and the tail the
binomial's, from SciPy (imported on first use: ``connect()`` never pays for it).

Example (no success in 10 draws: the rate is under 0.206 at 90% confidence, the "rule of
three" for small samples):
    >>> round(upper_bound(0, 10, 0.1), 3)
    0.206
    >>> round(lower_bound(10, 10, 0.1), 3)
    0.794
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["binom_cdf", "lower_bound", "recall_rank", "upper_bound"]


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    from scipy.stats import binom

    return float(binom.cdf(k, n, p))


@lru_cache(maxsize=65536)
def lower_bound(successes: int, n: int, delta: float) -> float:
    """The rate ``p`` such that ``p <= true rate`` with probability at least ``1 - delta``
    (Clopper-Pearson: the ``delta`` quantile of Beta(successes, n - successes + 1))."""
    _check(successes, n, delta)
    if successes == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(delta, successes, n - successes + 1))


@lru_cache(maxsize=65536)
def upper_bound(successes: int, n: int, delta: float) -> float:
    """The rate ``p`` such that ``true rate <= p`` with probability at least ``1 - delta``
    (the ``1 - delta`` quantile of Beta(successes + 1, n - successes))."""
    _check(successes, n, delta)
    if successes == n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(1.0 - delta, successes + 1, n - successes))


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
