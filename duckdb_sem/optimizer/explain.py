"""``EXPLAIN SEMANTIC``: the size of the plan space, the chosen plan, the runners-up.

Format (one operator per line, children indented under their parent)::

    6 equivalent plans
    chosen plan, cost 3,150 token-equivalents:
    Project "r.id" AS id                            rows≈33
    └─ SemFilter sem_filter('{0} good', r.text)     rows≈33  calls≈67  tokens≈5,000
       └─ Scan reviews AS r WHERE "r.id" > 3        rows≈67
    runner-up plans:
      2. cost 4,400: Project(SemFilter(Join(...)))

With ``analyze`` every operator line also shows what it did: ``actual rows=… calls=… ms=…``,
and for one that sent prompt tokens to a backend, ``prefix-cached=N/M (X%)``: how many of them
the backend took from its KV or prefix cache.
"""

from __future__ import annotations

from duckdb_sem.llm.pairs import describe, per_row_plan
from duckdb_sem.optimizer.actuals import Actual
from duckdb_sem.optimizer.choose import Choice, plan_key
from duckdb_sem.optimizer.cost import CostModel, Estimate, Path
from duckdb_sem.plan.nodes import Node, SemFilter, SemJoin

__all__ = ["explain_choice", "format_plan", "render_tree"]


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def render_tree(
    plan: Node,
    estimates: dict[Path, Estimate],
    actuals: dict[Path, Actual] | None = None,
) -> list[str]:
    rows: list[tuple[str, str]] = []

    def walk(node: Node, path: Path, prefix: str, tail: str) -> None:
        est = estimates[path]
        stats = f"rows≈{_num(est.rows)}"
        if est.calls:
            tokens = est.prompt_tokens + est.completion_tokens
            stats += f"  calls≈{_num(est.calls)}  tokens≈{_num(tokens)}"
        if actuals is not None and path in actuals:
            act = actuals[path]
            stats += f"  | actual rows={act.rows_out:,}"
            if node.semantic:
                stats += f" calls={act.calls:,} ms={act.seconds * 1000:,.1f}"
            if act.sent_tokens:
                share = act.cached_tokens / act.sent_tokens
                stats += f" prefix-cached={act.cached_tokens:,}/{act.sent_tokens:,} ({share:.0%})"
        rows.append((prefix + node.label(), stats))
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            walk(
                child,
                (*path, i),
                tail + ("└─ " if last else "├─ "),
                tail + ("   " if last else "│  "),
            )

    walk(plan, (), "", "")
    width = min(max(len(text) for text, _ in rows) + 2, 100)
    # a label past the width (a long template) still keeps two spaces before its figures
    return [f"{text.ljust(width - 2)}  {stats}" for text, stats in rows]


def format_plan(plan: Node) -> str:
    """The plan as an indented tree of operator labels (no estimates), for tests and logs."""
    lines: list[str] = []

    def walk(node: Node, depth: int) -> None:
        lines.append("  " * depth + node.label())
        for child in node.children:
            walk(child, depth + 1)

    walk(plan, 0)
    return "\n".join(lines)


def _region(plan: Node) -> Node:
    """The part below the sink (the sink is the same in every plan)."""
    while not (plan.row_wise or plan.semantic or not plan.children or len(plan.children) > 1):
        plan = plan.children[0]
    return plan


def _per_row_lines(plan: Node, estimates: dict[Path, Estimate]) -> list[str]:
    """The EXPLAIN line of each join the call rewrote per row (``per_row :=``)."""
    out: list[str] = []

    def walk(node: Node, path: Path) -> None:
        options = node.call.options if isinstance(node, SemJoin) else None
        if options is not None and options.per_row is not None:
            assert isinstance(node, SemJoin)
            plan_ = per_row_plan(node.call.template, options.per_row, options.per_row_match)
            left, right = estimates[(*path, 0)].rows, estimates[(*path, 1)].rows
            out.append(describe(plan_.question, plan_.match, left, right))
        for i, child in enumerate(node.children):
            walk(child, (*path, i))

    walk(plan, ())
    return out


def explain_choice(
    choice: Choice,
    model: CostModel,
    *,
    runner_ups: int = 3,
    actuals: dict[Path, Actual] | None = None,
) -> str:
    best = choice.best
    lines = [f"{choice.total} equivalent plans"]
    if choice.pruning:
        lines.append(f"({len(choice.ranked)} enumerated; pruning: {choice.pruning})")
    lines.append(f"chosen plan, cost {_num(best.cost)} token-equivalents:")
    estimates = model.estimate(best.plan)
    lines += render_tree(best.plan, estimates, actuals)
    lines += [n.blocking.describe() for n in best.plan.walk()
              if isinstance(n, SemJoin) and n.blocking is not None]  # fmt: skip
    lines += [n.cascade.describe() for n in best.plan.walk()
              if isinstance(n, SemFilter | SemJoin) and n.cascade is not None]  # fmt: skip
    lines += _per_row_lines(best.plan, estimates)
    others = choice.ranked[1 : 1 + runner_ups]
    if others:
        lines.append("runner-up plans:")
        for i, ranked in enumerate(others, start=2):
            lines.append(f"  {i}. cost {_num(ranked.cost)}: {plan_key(_region(ranked.plan))}")
    return "\n".join(lines)
