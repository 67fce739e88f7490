"""Top-k by pairwise comparisons: a knockout tournament, replayed for each next place.

``sem_topk(..., method := 'pairwise')`` asks a judge "does A rank above B?" about pairs of
candidates. A knockout bracket finds the best in ``n - 1`` comparisons, asked a round at a time
(every round's pairs are independent, so one batch: ``⌈log2 n⌉`` batches in all); each next
place replays only the winner's path to the root, at most ``⌈log2 n⌉`` comparisons. So the
number of calls is bounded before anything is asked (:func:`tournament_bound`), whatever the
answers, unlike a quick-select whose pivots may be unlucky; and the best candidate must win
every comparison on its path, so one noisy answer costs a place, not the ranking.

Example:
    >>> better = lambda pairs: [a > b for a, b in pairs]  # a higher index ranks above
    >>> tournament_topk(5, 2, better)
    [4, 3]
    >>> tournament_bound(5, 2)
    7
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["Compare", "tournament_bound", "tournament_topk"]

#: answers for a batch of pairs ``(a, b)``: True when ``a`` ranks above ``b``, False when ``b``
#: does, None when the judge gave no answer (then ``a``, the earlier candidate, goes on)
Compare = Callable[[Sequence[tuple[int, int]]], list[bool | None]]


def tournament_bound(n: int, k: int) -> int:
    """The most comparisons :func:`tournament_topk` asks for the top ``k`` of ``n``."""
    if n < 2 or k < 1:
        return 0
    return n - 1 + (min(k, n) - 1) * math.ceil(math.log2(n))


def tournament_topk(n: int, k: int, compare: Compare) -> list[int]:
    """The indices of the ``k`` best of candidates ``0..n-1``, best first."""
    if n <= 0 or k <= 0:
        return []
    size = 1 << max(0, math.ceil(math.log2(n)))
    empty: list[int | None] = [None] * size
    tree = empty + [i if i < n else None for i in range(size)]
    lo = size // 2
    while lo >= 1:  # one batch per round, bottom up
        nodes = range(lo, 2 * lo)
        pending = [p for p in nodes if tree[2 * p] is not None and tree[2 * p + 1] is not None]
        answers = _ask(compare, [(_at(tree, 2 * p), _at(tree, 2 * p + 1)) for p in pending])
        decided = dict(zip(pending, answers, strict=True))
        for p in nodes:
            left, right = tree[2 * p], tree[2 * p + 1]
            tree[p] = left if right is None else right if left is None else decided[p]
        lo //= 2
    out = [_at(tree, 1)]
    while len(out) < min(k, n):
        p = size + out[-1]
        tree[p] = None
        p //= 2
        while p >= 1:  # replay the winner's path only
            left, right = tree[2 * p], tree[2 * p + 1]
            if left is not None and right is not None:
                tree[p] = _ask(compare, [(left, right)])[0]
            else:
                tree[p] = left if right is None else right
            p //= 2
        out.append(_at(tree, 1))
    return out


def _at(tree: list[int | None], p: int) -> int:
    value = tree[p]
    assert value is not None
    return value


def _ask(compare: Compare, pairs: list[tuple[int, int]]) -> list[int]:
    if not pairs:
        return []
    answers = compare(pairs)
    if len(answers) != len(pairs):
        raise ValueError(f"the judge answered {len(answers)} of {len(pairs)} pairs")
    return [b if answer is False else a for (a, b), answer in zip(pairs, answers, strict=True)]
