"""Enumerate the equivalent plans of a query, memoized per join-delimited partition.

A plan splits into a *sink* (the set-wise operators on top: projection, aggregate, sort, limit,
``sem_agg``; they never move), a *skeleton* of scans and joins (never reordered), and the
movable row-wise semantic operators (``SemFilter``, ``SemMap``). Each join delimits partitions:
the chain of operators directly above each scan or join. A plan is a choice, for every movable
operator, of a partition and of an order inside it that the commutation rules allow:

- ``commutes(X, Y)`` false (X reads what Y produces) puts Y below X in the same chain or lower;
- ``commute_granularity(X, join)`` and the side's attributes decide whether X may sit below a
  join, on the side that produces what it reads.

Relational filters that could not go into a scan or a join condition (they read a ``sem_map``
output) are not enumerated: they are placed as low as they can go in every plan.

The recursion ``plans(node, ops)`` tries every split of ``ops`` into "above this node" and each
child, so each plan is produced exactly once; results are memoized by (skeleton node, op set).
Counting uses the same recursion with numbers, so the size of a space is known without
materializing it. Above ``max_plans`` the space is pruned (see ``enumerate_plans``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache

from duckdb_sem.errors import PlanError
from duckdb_sem.optimizer.rules import commutes
from duckdb_sem.optimizer.rules.commute_granularity import commute_granularity
from duckdb_sem.plan.nodes import Filter, Join, Node, Scan, SemFilter, SemJoin, SemMap

__all__ = ["PlanSpace", "count_plans", "enumerate_plans", "place_filters", "split_plan"]

Rank = Callable[[Node], float]
_ABOVE = -1


@dataclass(frozen=True)
class PlanSpace:
    """Enumerated plans (the written plan's equivalents), the exact size of the space, and the
    pruning applied when not every plan was materialized (``None`` when none was)."""

    plans: tuple[Node, ...]
    total: int
    pruning: str | None = None


@dataclass(frozen=True)
class Split:
    """A plan cut into its fixed sink, its skeleton and its movable operators."""

    sink: tuple[Node, ...]  # top-down set-wise operators above the row-wise region
    skeleton: Node
    ops: tuple[Node, ...]  # movable semantic operators, detached (their child is irrelevant)
    filters: tuple[Filter, ...]  # relational filters placed as low as they can go

    def rebuild(self, region: Node) -> Node:
        node = region
        for op in reversed(self.sink):
            node = op.with_children(node)
        return node


def split_plan(plan: Node) -> Split:
    sink: list[Node] = []
    node = plan
    while not _in_region(node):
        if len(node.children) != 1:
            raise PlanError(f"cannot plan below {node.label()}")
        sink.append(node)
        node = node.children[0]
    ops: list[Node] = []
    filters: list[Filter] = []

    def strip(n: Node) -> Node:
        if isinstance(n, SemFilter | SemMap):
            ops.append(n)
            return strip(n.child)
        if isinstance(n, Filter):
            filters.append(n)
            return strip(n.child)
        if isinstance(n, Join | SemJoin):
            return n.with_children(strip(n.left), strip(n.right))
        if isinstance(n, Scan):
            return n
        raise PlanError(f"{n.label()} below a join or row-wise operator is not supported")

    skeleton = strip(node)
    ops.reverse()  # bottom-up, as written
    filters.reverse()
    return Split(tuple(sink), skeleton, tuple(ops), tuple(filters))


def _in_region(node: Node) -> bool:
    return node.row_wise or isinstance(node, Scan | Join | SemJoin)


class _Space:
    """The recursion over one split; ``rank`` set means one rank-ordered order per chain."""

    def __init__(self, split: Split, *, rank: Rank | None, push_filters: bool) -> None:
        self.split = split
        self.ops = split.ops
        n = len(self.ops)
        # deps[i]: ops that must be below op i (it reads what they produce)
        self.deps = tuple(
            frozenset(j for j in range(n) if j != i and not commutes(self.ops[i], self.ops[j]))
            for i in range(n)
        )
        produced = frozenset().union(*(op.produces for op in self.ops))
        self.base_reads = tuple(op.reads - produced for op in self.ops)
        self.rank = rank
        self.push_filters = push_filters
        self.count = cache(self._count)
        self.plans = cache(self._plans_list)

    # -- splits of an op set at a join ------------------------------------------------------
    def assignments(self, node: Node, ops: frozenset[int]) -> Iterator[tuple[int, ...]]:
        order = sorted(ops)
        choices = []
        for i in order:
            options = [_ABOVE]
            if commute_granularity(self.ops[i], node):
                for c, child in enumerate(node.children):
                    if self._closure_base(i) <= child.attrs:
                        options.append(c)
            if self.push_filters and isinstance(self.ops[i], SemFilter) and len(options) > 1:
                options = options[1:]
            choices.append(options)
        for combo in itertools.product(*choices):
            where = dict(zip(order, combo, strict=True))
            if all(
                where[i] == _ABOVE or all(where.get(d) == where[i] for d in self.deps[i])
                for i in order
            ):
                yield tuple(where[i] for i in order)

    @cache  # noqa: B019 - one _Space per enumeration, freed with it
    def _closure_base(self, i: int) -> frozenset[str]:
        out = self.base_reads[i]
        for d in self.deps[i]:
            out |= self._closure_base(d)
        return out

    def _parts(
        self, node: Node, ops: frozenset[int], combo: tuple[int, ...]
    ) -> tuple[frozenset[int], list[frozenset[int]]]:
        order = sorted(ops)
        above = frozenset(i for i, w in zip(order, combo, strict=True) if w == _ABOVE)
        below = [
            frozenset(i for i, w in zip(order, combo, strict=True) if w == c)
            for c in range(len(node.children))
        ]
        return above, below

    # -- chains -----------------------------------------------------------------------------
    def orders(self, ops: frozenset[int]) -> Iterator[tuple[int, ...]]:
        """Bottom-up orders of ``ops`` in one chain where every op is above its dependencies."""
        if self.rank is not None:
            yield self._ranked(ops)
            return
        yield from self._orders(ops, frozenset())

    def _orders(self, left: frozenset[int], done: frozenset[int]) -> Iterator[tuple[int, ...]]:
        if not left:
            yield ()
            return
        for i in sorted(left):
            if (self.deps[i] & left) == frozenset():
                for rest in self._orders(left - {i}, done | {i}):
                    yield (i, *rest)

    def _ranked(self, ops: frozenset[int]) -> tuple[int, ...]:
        assert self.rank is not None
        out: list[int] = []
        left = set(ops)
        while left:
            ready = [i for i in left if not self.deps[i] & left]
            best = min(ready, key=lambda i: (self.rank(self.ops[i]), i))  # type: ignore[misc]
            out.append(best)
            left.remove(best)
        return tuple(out)

    @cache  # noqa: B019
    def order_count(self, ops: frozenset[int]) -> int:
        if self.rank is not None or not ops:
            return 1
        return sum(self.order_count(ops - {i}) for i in ops if not self.deps[i] & ops)

    # -- the recursion ----------------------------------------------------------------------
    def _count(self, node: Node, ops: frozenset[int]) -> int:
        if not node.children:
            return self.order_count(ops)
        total = 0
        for combo in self.assignments(node, ops):
            above, below = self._parts(node, ops, combo)
            n = self.order_count(above)
            for child, sub in zip(node.children, below, strict=True):
                n *= self.count(child, sub)
            total += n
        return total

    def _plans_list(self, node: Node, ops: frozenset[int]) -> tuple[Node, ...]:
        return tuple(self.iter_plans(node, ops, memo=True))

    def iter_plans(self, node: Node, ops: frozenset[int], *, memo: bool) -> Iterator[Node]:
        if not node.children:
            for order in self.orders(ops):
                yield self._chain(node, order)
            return
        for combo in self.assignments(node, ops):
            above, below = self._parts(node, ops, combo)
            subs = [
                self.plans(c, s) if memo else self._lazy(c, s)
                for c, s in zip(node.children, below, strict=True)
            ]
            for kids in itertools.product(*subs):
                joined = node.with_children(*kids)
                for order in self.orders(above):
                    yield self._chain(joined, order)

    def _lazy(self, node: Node, ops: frozenset[int]) -> _Lazy:
        return _Lazy(lambda: self.iter_plans(node, ops, memo=False))

    def _chain(self, node: Node, order: Sequence[int]) -> Node:
        for i in order:
            node = self.ops[i].with_children(node)
        return node


class _Lazy:
    """A re-iterable view of a generator factory (for ``itertools.product`` without memo)."""

    def __init__(self, make: Callable[[], Iterator[Node]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Node]:
        return self.make()


def place_filters(region: Node, filters: Sequence[Filter]) -> Node:
    """Put each relational filter directly above the lowest node that has what it reads."""
    for f in filters:
        region = _place(region, f)
    return region


def _place(node: Node, f: Filter) -> Node:
    for i, child in enumerate(node.children):
        if f.reads <= child.attrs:
            kids = list(node.children)
            kids[i] = _place(child, f)
            return node.with_children(*kids)
    if not f.reads <= node.attrs:
        raise PlanError(f"filter {f.predicate.sql} reads attributes no input has")
    return f.with_children(node)


def count_plans(plan: Node) -> int:
    """The exact number of equivalent plans of ``plan`` (without materializing them)."""
    split = split_plan(plan)
    space = _Space(split, rank=None, push_filters=False)
    return space.count(split.skeleton, frozenset(range(len(split.ops))))


def enumerate_plans(plan: Node, *, max_plans: int = 1000, rank: Rank | None = None) -> PlanSpace:
    """Every plan equivalent to ``plan``, or a pruned subset when there are over ``max_plans``.

    Pruning, in order, until the space fits: (1) one order per chain, the rank order (cheapest
    rejection first, see ``cost.rank``); (2) also every ``sem_filter`` as deep as it can go;
    (3) the first ``max_plans`` of what remains.
    """
    split = split_plan(plan)
    every = frozenset(range(len(split.ops)))
    full = _Space(split, rank=None, push_filters=False)
    total = full.count(split.skeleton, every)
    stages: list[tuple[_Space, str | None]] = [(full, None)]
    ranker = rank or (lambda node: 0.0)
    stages.append((_Space(split, rank=ranker, push_filters=False), "rank-ordered chains"))
    stages.append(
        (
            _Space(split, rank=ranker, push_filters=True),
            "rank-ordered chains, sem_filters pushed down",
        )
    )
    fits = ((sp, why) for sp, why in stages if sp.count(split.skeleton, every) <= max_plans)
    fitting = next(fits, None)
    if fitting is not None:
        space, pruning = fitting
        regions: Iterator[Node] = iter(space.plans(split.skeleton, every))
    else:
        space, why = stages[-1]
        pruning = f"{why}, first {max_plans}"
        regions = itertools.islice(space.iter_plans(split.skeleton, every, memo=False), max_plans)
    plans = tuple(split.rebuild(place_filters(r, split.filters)) for r in regions)
    return PlanSpace(plans, total, pruning)
