"""Shared test helpers: a tiny deterministic evaluator, plan rewriting by single swaps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import PlanError
from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.optimizer.enumerate import place_filters, split_plan
from duckdb_sem.optimizer.rules import commutes, join_side
from duckdb_sem.plan.nodes import Join, Node, SemJoin


class RuleEvaluator:
    """``run_operator`` straight on a RuleBackend (no scheduler): fast and deterministic."""

    def __init__(self, backend: RuleBackend | None = None) -> None:
        self.backend = backend or RuleBackend(yes_if=["good"])
        self.calls = 0

    def run_operator(
        self,
        kind: OperatorKind,
        template: str,
        args: Sequence[pa.Array],
        *,
        output_type: str | None = None,
        query: Any = None,
        label: str = "",
        options: Any = None,
        labels: tuple[str, ...] = (),
    ) -> pa.Array:
        parsed = parse_template(template)
        columns = [a.to_pylist() for a in args]
        out: list[Any] = []
        for i in range(len(args[0])):
            values = [col[i] for col in columns]
            if kind is OperatorKind.AGG:
                values = ["; ".join(str(v) for v in (x or [])) for x in values]
            if any(v is None for v in values):
                out.append(None)
                continue
            request = build_request(kind, parsed.render([str(v) for v in values]),
                                    output_type=output_type)  # fmt: skip
            out.append(self.backend.complete([request])[0].value)
            self.calls += 1
        decide = kind in (OperatorKind.FILTER, OperatorKind.JOIN)
        arrow = pa.bool_() if decide else parse_type(output_type or "VARCHAR").arrow
        return pa.array(out, type=arrow)


def neighbours(plan: Node) -> list[Node]:
    """Plans one commutation away: swap a parent with its child where the rules allow."""
    out: list[Node] = []
    for i, child in enumerate(plan.children):
        if commutes(plan, child):
            swapped = _swap(plan, i, child)
            if swapped is not None:
                out.append(swapped)
        for sub in neighbours(child):
            kids = list(plan.children)
            kids[i] = sub
            out.append(plan.with_children(*kids))
    return out


def _swap(parent: Node, index: int, child: Node) -> Node | None:
    try:
        if isinstance(child, Join | SemJoin):  # push the unary parent below the join
            side = join_side(parent, child)
            assert side is not None
            kids = list(child.children)
            kids[side] = parent.with_children(kids[side])
            return child.with_children(*kids)
        if isinstance(parent, Join | SemJoin):  # pull the unary child above the join
            kids = list(parent.children)
            kids[index] = child.children[0]
            return child.with_children(parent.with_children(*kids))
        return child.with_children(parent.with_children(child.children[0]))
    except PlanError:
        return None


def brute_force(plan: Node) -> set[Node]:
    """Every plan reachable from ``plan`` by single swaps (relational filters re-placed)."""
    split = split_plan(plan)
    start = split.skeleton
    for op in split.ops:
        start = op.with_children(start)
    seen = {start}
    todo = [start]
    while todo:
        for nxt in neighbours(todo.pop()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return {split.rebuild(place_filters(p, split.filters)) for p in seen}
