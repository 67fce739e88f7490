"""``eddies``: per-tuple routing among commuting filters (Avnur and Hellerstein, SIGMOD 2000).

Each batch of the driving table enters an *eddy* that owns the plan's semantic filters over
that table. Every tuple still alive picks its next filter by lottery: each filter's tickets are
its observed drop rate per unit of cost, ``(1 - selectivity) / tokens per row``, learned from
every tuple it has seen so far (with the same decay per batch as the estimator, so it adapts).
Tuples that picked the same filter in one round are sent to the LLM together (one call per
filter per round, as an LLM eddy must batch), so a batch needs at most as many rounds as there
are filters. Survivors then go through the rest of the plan in the written order.

Only plans whose semantic filters read one table can be routed; others raise ``PlanError``.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from duckdb_sem.errors import PlanError
from duckdb_sem.optimizer.cost import operator_signature
from duckdb_sem.plan.nodes import Join, Node, Scan, SemFilter, SemJoin
from duckdb_sem.runtime.execute_plan import Evaluator
from duckdb_sem.runtime.seu_loop import QueryRun

__all__ = ["EddyRun"]


class EddyRun(QueryRun):
    def __init__(
        self, con: Any, written: Node, engine: Evaluator, query: Any, **common: Any
    ) -> None:
        scans = [n for n in written.walk() if isinstance(n, Scan)]
        if len(scans) != 1 or any(isinstance(n, Join | SemJoin) for n in written.walk()):
            raise PlanError("the eddies baseline routes semantic filters over one table; "
                            "this query joins tables (use adaptive or static)")  # fmt: skip
        scan = scans[0]
        self.routed = [n for n in written.walk()
                       if isinstance(n, SemFilter) and n.reads <= scan.produces]  # fmt: skip
        rest = _without(written, {id(n) for n in self.routed})
        super().__init__(con, [rest], engine, query, fixed=0, **common)
        for op in self.routed:
            self.observer.signatures[op.label()] = operator_signature(op.call)
        self.calls = [op.call for op in self.routed]
        self.rng = random.Random(self.options.seed)
        # per filter: [rows in, rows out, prompt tokens], decayed per batch
        self.seen = [[0.0, 0.0, 0.0] for _ in self.routed]

    def _tickets(self, f: int) -> float:
        rows_in, rows_out, prompt = self.seen[f]
        selectivity = (rows_out + 1) / (rows_in + 2)
        per_row = prompt / rows_in if rows_in else 1.0
        return max(1e-6, 1 - selectivity) / max(per_row, 1e-6)

    def _run_region(self, plan: int, batch: pa.Table) -> pa.Table:
        return super()._run_region(plan, self._route(batch))

    def _route(self, batch: pa.Table) -> pa.Table:
        for s in self.seen:
            s[:] = [v * self.store.decay for v in s]
        n = batch.num_rows
        alive = [True] * n
        todo = [set(range(len(self.routed))) for _ in range(n)]
        while True:
            groups: dict[int, list[int]] = {}
            for i in range(n):
                if alive[i] and todo[i]:
                    options = sorted(todo[i])
                    weights = [self._tickets(f) for f in options]
                    pick = self.rng.choices(options, weights)[0]
                    groups.setdefault(pick, []).append(i)
            if not groups:
                break
            for f, rows in sorted(groups.items()):
                op = self.routed[f]
                idx = pa.array(rows, type=pa.int64())
                args = [batch.column(a).take(idx) for a in op.call.args]
                before = self.query.stats().prompt_tokens if self.query is not None else 0
                mask = self.observer.run_operator(
                    op.call.kind, op.call.template, args, output_type=op.call.output_type,
                    query=self.query, label=op.label(), options=op.call.options,
                    labels=op.call.labels,
                ).to_pylist()  # fmt: skip
                after = self.query.stats().prompt_tokens if self.query is not None else 0
                passed = sum(1 for m in mask if m)
                s = self.seen[f]
                s[0] += len(rows)
                s[1] += passed
                s[2] += (after - before) or len(rows)
                for row, keep in zip(rows, mask, strict=True):
                    todo[row].discard(f)
                    if not keep:
                        alive[row] = False
        return batch.filter(pa.array(alive, type=pa.bool_())) if n else batch


def _without(node: Node, drop: set[int]) -> Node:
    """``node`` with the unary operators whose id is in ``drop`` spliced out."""
    while id(node) in drop:
        node = node.children[0]
    if not node.children:
        return node
    kids = tuple(_without(c, drop) for c in node.children)
    if all(k is c for k, c in zip(kids, node.children, strict=True)):
        return node
    return node.with_children(*kids)
