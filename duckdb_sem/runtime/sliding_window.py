"""Top-k by listwise ranking: RankGPT's sliding window, one call per window of ``w`` rows.

``sem_topk(..., method := 'listwise')`` shows the judge ``w`` numbered candidates at once and
reads back their order. A pass slides the window from the end of the list to its start, ``s``
rows at a time (``s < w``): each window's best ``w - s`` stay in the next window, so a
candidate that wins its windows rises to the front, and after one pass the first ``w - s``
places are the best ``w - s`` (for a consistent judge). The top ``k`` take ``⌈k / (w - s)⌉``
passes, each starting ``w - s`` places further on (RankGPT's ``w = 20, s = 10`` settle ten
places a pass). Windows depend on the one before, so they are asked one at a time; the count
is known before anything is asked (:func:`window_bound`).

Example:
    >>> rank = lambda ids: (sorted(ids, reverse=True), True)  # a higher index ranks above
    >>> sliding_topk(list(range(6)), 2, rank, window=4, step=2)
    ([5, 4], 0)
    >>> window_bound(6, 2, window=4, step=2)
    2
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["RankWindow", "sliding_topk", "window_bound"]

#: a window's candidates reordered best first, and whether the judge's answer was whole (False:
#: a fallback order, counted)
RankWindow = Callable[[Sequence[int]], tuple[Sequence[int], bool]]


def _check(window: int, step: int) -> None:
    if window < 2 or not 1 <= step < window:
        raise ValueError(f"window {window} and step {step}: need window >= 2, 1 <= step < window")


def _starts(n: int, k: int, window: int, step: int) -> range:
    """Where each pass begins: every ``window - step`` places (what a pass settles) below
    ``k``, while two rows remain."""
    return range(0, max(0, min(k, n - 1)), window - step)


def _windows(length: int, window: int, step: int) -> int:
    return 1 if length <= window else 1 + math.ceil((length - window) / step)


def window_bound(n: int, k: int, *, window: int, step: int) -> int:
    """The calls :func:`sliding_topk` makes for the top ``k`` of ``n`` (exactly that many)."""
    _check(window, step)
    return sum(_windows(n - start, window, step) for start in _starts(n, k, window, step))


def sliding_topk(
    order: list[int], k: int, rank: RankWindow, *, window: int, step: int
) -> tuple[list[int], int]:
    """The ``k`` best of ``order`` (its initial order, e.g. the input's), best first, and how
    many windows fell back to an order the judge did not wholly give."""
    _check(window, step)
    ranked = list(order)
    n, fallbacks = len(ranked), 0
    for start in _starts(n, k, window, step):
        i = max(start, n - window)
        while True:
            ids = ranked[i : i + window]
            got, whole = rank(ids)
            if sorted(got) != sorted(ids):
                raise ValueError(f"the judge returned {list(got)} for window {ids}")
            ranked[i : i + window] = got
            fallbacks += not whole
            if i == start:
                break
            i = max(start, i - step)
    return ranked[: max(0, k)], fallbacks
