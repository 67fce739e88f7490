"""Semantic calls in SQL: recognising ``sem_*`` calls and binding one into a ``SemCall``.

A call's first argument is its prompt template; named fields (``{text}``, ``{r.text}``) or
positional ones with plain column arguments (``'{0} and {1}', a, b``) are resolved against the
query's :class:`~duckdb_sem.plan.scope.Scope` into attributes; ``sem_map`` and ``sem_agg`` may
end with a string naming their output type; named arguments (``model := 'fast'``, ...) are
read by :func:`~duckdb_sem.llm.call_options.split_options` into ``SemCall.options``.

Example: ``sem_map('{r.text} in five words', 'VARCHAR')`` over a source ``r`` binds to
``SemCall('{0} in five words', ('r.text',), OperatorKind.MAP, 'VARCHAR')``.
"""

from __future__ import annotations

from typing import TypeGuard

from sqlglot import exp

from duckdb_sem.errors import BindError, PlanError
from duckdb_sem.llm.call_options import split_options
from duckdb_sem.llm.pairs import per_row_plan
from duckdb_sem.llm.prompts import check_labels
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.plan import nodes as n
from duckdb_sem.plan.scope import Scope

__all__ = ["MAPS", "SEMANTIC", "is_semantic", "label_argument", "literal_labels", "sem_call"]

SEMANTIC = {"sem_filter": OperatorKind.FILTER, "sem_join": OperatorKind.JOIN,
            "sem_map": OperatorKind.MAP, "sem_agg": OperatorKind.AGG,
            "sem_classify": OperatorKind.MAP}  # fmt: skip
#: the calls that produce a select-list value row by row (a ``SemMap``)
MAPS = ("sem_map", "sem_classify")


def is_semantic(node: object) -> TypeGuard[exp.Anonymous]:
    return isinstance(node, exp.Anonymous) and node.name.lower() in SEMANTIC


def sem_call(call: exp.Anonymous, scope: Scope, kind: OperatorKind | None = None) -> n.SemCall:
    """The bound call; ``kind`` overrides the operator its name implies."""
    name = call.name.lower()
    args, _, options = split_options(call)
    where = f"{name}(...)"
    if not args or not isinstance(args[0], exp.Literal) or not args[0].is_string:
        raise BindError(f"{name} needs a prompt template as its first argument")
    template = parse_template(args[0].this)
    rest = args[1:]
    output_type: str | None = None
    named = not template.is_positional
    labels: tuple[str, ...] = ()
    if name == "sem_classify":
        labels, output_type = literal_labels(rest[0] if rest else None, where), "VARCHAR"
        rest = rest[1:]
    if name in ("sem_map", "sem_agg") and rest and _is_string(rest[-1]):
        output_type = rest.pop().this
    if template.is_positional:
        fields = [_column_name(a, where) for a in rest]
    else:
        if rest:
            raise BindError(f"{where}: a template with named fields takes no extra arguments")
        fields = list(template.distinct_fields())
        template = template.positional()
    if options.per_row is not None:  # the opt-in rewrite: checked before anything runs
        per_row_plan(template.source, options.per_row, options.per_row_match)
    attrs = []
    for f in fields:
        attr = scope.resolve(f, where=f"template {args[0].this!r}", template=named)
        assert attr is not None
        attrs.append(attr)
    return n.SemCall(template.source, tuple(attrs), kind or SEMANTIC[name], output_type, options,
                     labels)  # fmt: skip


def label_argument(node: exp.Expression | None) -> tuple[str, ...] | None:
    """The labels of ``sem_classify(template, ['a', 'b', ...], ...)`` written as a list of
    string literals, checked (:func:`~duckdb_sem.llm.prompts.check_labels`); None for a list
    computed by an expression (checked when the query runs). Every road binds labels here."""
    example = "e.g. sem_classify('{text} kind', ['game', 'science'])"
    if node is None or isinstance(node, exp.Column | exp.Literal):
        raise BindError(f"sem_classify: the second argument must be the list of labels, {example}")
    if not isinstance(node, exp.Array):
        return None
    if not all(_is_string(e) for e in node.expressions):
        raise BindError(f"sem_classify: every label must be a string literal, {example}")
    return check_labels([e.this for e in node.expressions], where="sem_classify")


def literal_labels(node: exp.Expression | None, where: str) -> tuple[str, ...]:
    """:func:`label_argument` for the planner: a computed list takes the UDF path."""
    labels = label_argument(node)
    if labels is None:
        raise PlanError(f"{where}: labels computed by an expression are read when the query runs")
    return labels


def _is_string(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _column_name(node: exp.Expression, where: str) -> str:
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise PlanError(f"{where}: only plain columns are planned as arguments")
    return ".".join(p.name for p in node.parts)
