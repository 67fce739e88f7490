"""Semantic table functions in FROM: ``sem_join``, ``sem_topk``, ``sem_extract``.

DuckDB's Python client cannot register table functions, so the rewriter finds them in FROM and
JOIN clauses (sqlglot parses them as table-valued ``Anonymous`` calls, also inside CTEs and
subqueries), validates their arguments before any LLM call, and replaces each by the name of a
registered Arrow stream that ``open_call`` provides (see ``duckdb_sem.session.sources``).

=====================================================  ==========================================
function                                               rows
=====================================================  ==========================================
``sem_join('left', 'right', '{l.col} ... {r.col}')``   the matching pairs, both sides' columns
``sem_topk('input', k, '{col} ...')``                  the k best rows, ``sem_rank``, ``sem_score``
``sem_extract('input', '{col} ...', 'STRUCT(...)')``   the input's columns, one per struct field
=====================================================  ==========================================

``sem_sim_join`` and ``sem_search`` (embedding similarity, no LLM) are parsed by
:mod:`.similarity_calls`.

An input is a table or view name (``'reviews'``) or a query (``'SELECT * FROM r WHERE ...'``).
Each also takes the named arguments of :mod:`duckdb_sem.llm.call_options` after its three
(``sem_topk('reviews', 3, '{text} ...', model := 'big')``).
The scalar ``sem_join(template)`` of JOIN ON / WHERE is untouched: only a call in FROM is a
table function.

Example:
    ``SELECT * FROM sem_topk('reviews', 3, '{text} is enthusiastic') JOIN m USING (id)``
    becomes ``SELECT * FROM __sem_tf_1 AS sem_topk JOIN m USING (id)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError, OutputTypeError
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions, split_options
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.template import Template, parse_template
from duckdb_sem.plan.fields import Name, resolve
from duckdb_sem.surface.similarity_calls import (
    SIMILARITY_FUNCTIONS,
    SimilarityCall,
    parse_similarity_call,
)

__all__ = [
    "TABLE_FUNCTIONS",
    "BoundFields",
    "TableCall",
    "bind_fields",
    "has_table_function",
    "parse_table_call",
    "rewrite_table_functions",
]

TABLE_FUNCTIONS = ("sem_join", "sem_topk", "sem_extract", *SIMILARITY_FUNCTIONS)
_QUICK = re.compile(r"\bsem_(join|topk|extract|sim_join|search)\s*\(", re.IGNORECASE)
_QUERY = re.compile(r"^\s*(\(|select\b|with\b|from\b|values\b|table\b)", re.IGNORECASE)
_SIDE_NAMES = (("l", "left"), ("r", "right"))  # how a sem_join template names its inputs


@dataclass(frozen=True, slots=True)
class TableCall:
    """One validated table-function call."""

    name: str  # sem_join, sem_topk or sem_extract
    inputs: tuple[str, ...]  # a query per input
    labels: tuple[str | None, ...]  # the table name of an input given by name, for {name.col}
    template: Template
    k: int | None = None
    struct: TypeSpec | None = None
    options: CallOptions = DEFAULT_OPTIONS


@dataclass(frozen=True, slots=True)
class BoundFields:
    """A template made positional: ``refs[i]`` is (input index, column) of field ``{i}``."""

    template: str
    refs: tuple[tuple[int, str], ...]


def has_table_function(sql: str) -> bool:
    return _QUICK.search(sql) is not None


def rewrite_table_functions(
    sql: str,
    open_call: Callable[[TableCall | SimilarityCall, str], str | exp.Query],
    *,
    tree: exp.Expr | None = None,
) -> str:
    """Replace every table function in ``sql`` by what ``open_call(call, alias)`` returns: the
    name of a registered stream, or a query (``sem_join``'s), which becomes a subquery.

    SQL without one is returned untouched. Errors (bad arguments) are raised for every call
    before ``open_call`` runs for any. ``tree``: the statement's AST, rewritten in place
    (parsed here when not given).
    """
    if not has_table_function(sql):
        return sql
    if tree is None:
        try:
            tree = sqlglot.parse_one(sql, dialect="duckdb")
        except sqlglot.errors.ParseError as err:
            raise BindError(f"cannot parse SQL with a semantic table function: {err}") from None
    found = [
        (table, call)
        for table in tree.find_all(exp.Table)
        if isinstance(call := table.this, exp.Anonymous)
        and call.name.lower() in TABLE_FUNCTIONS
        and (call.name.lower() != "sem_join" or len(split_options(call)[0]) != 1)
    ]
    if not found:
        return sql
    parsed: list[tuple[exp.Table, TableCall | SimilarityCall]] = [
        (table, parse_similarity_call(call, _input, _string)
         if call.name.lower() in SIMILARITY_FUNCTIONS else parse_table_call(call))
        for table, call in found
    ]  # fmt: skip
    for table, call in parsed:
        alias = table.alias or call.name
        opened = open_call(call, alias)
        named = exp.TableAlias(
            this=exp.to_identifier(alias, quoted=not table.alias),
            columns=table.args["alias"].columns if table.args.get("alias") else [],
        )
        if isinstance(opened, exp.Query):  # the call is a query: it is planned with the rest
            table.replace(exp.Subquery(this=opened, alias=named))
        else:
            table.replace(exp.Table(this=exp.to_identifier(opened), alias=named))
    return tree.sql(dialect="duckdb", normalize_functions=False)


def parse_table_call(node: exp.Anonymous) -> TableCall:
    """Validate the arguments of one table-function call (no LLM call, no DuckDB call)."""
    name = node.name.lower()
    args, _, options = split_options(node)
    usage = {
        "sem_join": "sem_join('left_table_or_query', 'right_table_or_query', '{l.col} ... {r.col}')",
        "sem_topk": "sem_topk('table_or_query', k, '{col} ...')",
        "sem_extract": "sem_extract('table_or_query', '{col} ...', 'STRUCT(name TYPE, ...)')",
    }[name]
    if len(args) != 3:
        raise BindError(f"{name} takes 3 arguments in FROM ({len(args)} given): {usage}")
    if name == "sem_join":
        left, right = (_input(a, name, usage) for a in args[:2])
        return TableCall(name, (left[0], right[0]), (left[1], right[1]), _template(args[2], usage),
                         options=options)  # fmt: skip
    source, label = _input(args[0], name, usage)
    if name == "sem_topk":
        return TableCall(name, (source,), (label,), _template(args[2], usage), k=_k(args[1]),
                         options=options)  # fmt: skip
    struct = parse_type(_string(args[2], name, "the output type", usage))
    if struct.kind != "struct":
        raise OutputTypeError(
            f"sem_extract needs a STRUCT type, got {struct.sql!r}; "
            "write e.g. 'STRUCT(name VARCHAR, year INTEGER)'"
        )
    return TableCall(name, (source,), (label,), _template(args[1], usage), struct=struct,
                     options=options)  # fmt: skip


def bind_fields(call: TableCall, columns: Sequence[Sequence[str]]) -> BoundFields:
    """Resolve ``{col}``, ``{name.col}``, ``{l.col}``/``{r.col}`` against the inputs' columns."""
    template = call.template
    if template.is_positional:
        raise BindError(
            f"{call.name}: name columns in the template ({template.source!r}), e.g. '{{text}}'"
        )
    labels = [(lab or "").lower() for lab in call.labels]
    names: list[Name[tuple[int, str]]] = []
    for i, label in enumerate(labels):
        own = (label,) if label and labels.count(label) == 1 else ()
        sides = _SIDE_NAMES[i] if call.name == "sem_join" else ()
        names += [Name(c, (i, c), (*sides, *own)) for c in columns[i]]
    where = f"{call.name} template {template.source!r}"
    refs = [resolve(field, names, where=where) for field in template.distinct_fields()]
    return BoundFields(template.positional().source, tuple(refs))


def _input(node: exp.Expression, name: str, usage: str) -> tuple[str, str | None]:
    text = _string(node, name, "an input", usage).strip()
    if not text:
        raise BindError(f"{name}: empty input; pass a table name or a query: {usage}")
    if _QUERY.match(text):
        return text, None
    try:
        table = sqlglot.parse_one(text, into=exp.Table, dialect="duckdb")
    except sqlglot.errors.ParseError:
        raise BindError(f"{name}: {text!r} is neither a table name nor a query") from None
    return f"SELECT * FROM {table.sql(dialect='duckdb')}", table.name


def _template(node: exp.Expression, usage: str) -> Template:
    return parse_template(_string(node, "the template", "a prompt template", usage))


def _string(node: exp.Expression, name: str, what: str, usage: str) -> str:
    if not isinstance(node, exp.Literal) or not node.is_string:
        raise BindError(f"{name}: {what} must be a string literal, got {node.sql()}: {usage}")
    return str(node.this)


def _k(node: exp.Expression) -> int:
    text = node.sql(dialect="duckdb")
    if isinstance(node, exp.Literal) and not node.is_string and text.isdigit() and int(text) > 0:
        return int(text)
    raise BindError(f"sem_topk: k must be a positive integer literal, got {text}")
