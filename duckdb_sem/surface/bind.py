"""Bind ``{column}`` templates to columns by rewriting the SQL with sqlglot.

Every semantic call with named fields becomes the explicit positional form that the UDFs
registered by :func:`duckdb_sem.install` understand, and a typed ``sem_map`` becomes a call of
the function registered for that type. All binding errors (unknown or ambiguous column, empty
or malformed template, unsupported type, bad named argument) are raised here, before any LLM
call. Named arguments (``model := 'fast'``, see :mod:`duckdb_sem.llm.call_options`) stay
after the columns, for the macros to pass on. SQL without a semantic call is returned untouched.

Example:
    ``SELECT sem_map('Gist of {text}', 'VARCHAR[]') FROM reviews r WHERE sem_filter('{r.text} is positive')``
    becomes
    ``SELECT __sem_map_varchar_list('Gist of {0}', [r.text::VARCHAR]) FROM reviews AS r
    WHERE sem_filter('{0} is positive', r.text)``
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import duckdb
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError, TemplateError
from duckdb_sem.llm.call_options import split_options
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.template import Template, parse_template
from duckdb_sem.plan.calls import label_argument
from duckdb_sem.plan.fields import Name, resolve

__all__ = [
    "SEM_FUNCTIONS",
    "BoundQuery",
    "bind_sql",
    "has_semantic_call",
    "parse_statement",
    "typed_map_function",
]

SEM_FUNCTIONS = ("sem_filter", "sem_map", "sem_join", "sem_agg", "sem_classify")
_QUICK = re.compile(r"\bsem_(filter|map|join|agg|classify)\s*\(", re.IGNORECASE)

# Given "SELECT * FROM <source> LIMIT 0" (with the query's CTEs), return the column names.
Describe = Callable[[str], Sequence[str]]


@dataclass(frozen=True, slots=True)
class BoundQuery:
    sql: str
    typed_maps: tuple[TypeSpec, ...]  # sem_map output types whose functions must be registered
    semantic: bool


def has_semantic_call(sql: str) -> bool:
    return _QUICK.search(sql) is not None


def typed_map_function(spec: TypeSpec) -> str:
    """Name of the scalar function that returns ``spec`` (registered on demand): a slug of
    its SQL, where ``[]`` is ``_list`` (``DATE`` and ``DATE[]`` in one session are two). A
    type with ENUM labels also gets a digest of its SQL: the slug alone would give
    ``ENUM('a b', 'c')`` and ``ENUM('a', 'b c')`` one name (and labels outside ASCII none)."""
    slug = re.sub(r"[^a-z0-9]+", "_", spec.sql.lower().replace("[]", " list")).strip("_")
    if "ENUM(" in spec.sql:
        slug += "_" + hashlib.sha256(spec.sql.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"__sem_map_{slug}"


_PARSING = contextvars.ContextVar("_PARSING", default=False)


def _not_our_command_fallback(record: logging.LogRecord) -> bool:
    """Drop sqlglot's "Falling back to parsing as a 'Command'" warning while we parse: a
    statement it does not model (``EXPLAIN SELECT ...``) goes to DuckDB whole, so the line is
    noise on a user's stderr. Anyone else's sqlglot parse still gets it."""
    return not (_PARSING.get() and "Falling back to parsing as a 'Command'" in record.msg)


logging.getLogger("sqlglot").addFilter(_not_our_command_fallback)


def parse_statement(sql: str) -> exp.Expr:
    """The sqlglot AST of the one statement in ``sql`` (``BindError`` saying what is wrong):
    the front end parses a semantic statement once, and both roads read this tree."""
    token = _PARSING.set(True)
    try:
        statements = sqlglot.parse(sql, dialect="duckdb")
    except sqlglot.errors.SqlglotError as err:  # a parse or tokenizer error
        duckdb.extract_statements(sql)  # DuckDB's own parser error says best what is wrong
        raise BindError(f"cannot parse SQL with a semantic call: {err}") from None
    finally:
        _PARSING.reset(token)
    if len(statements) != 1 or statements[0] is None:
        raise BindError("semantic SQL must be a single statement; run statements one at a time")
    return statements[0]


def bind_sql(sql: str, describe: Describe, *, tree: exp.Expr | None = None) -> BoundQuery:
    """Rewrite ``sql`` so every semantic call is positional; see the module docstring.
    ``tree``: the statement's AST from :func:`parse_statement` (not parsed again; rewritten
    in place)."""
    if tree is None:
        if not has_semantic_call(sql):
            return BoundQuery(sql, (), semantic=False)
        tree = parse_statement(sql)
    calls = [node for node in tree.find_all(exp.Anonymous) if node.name.lower() in SEM_FUNCTIONS]
    # Innermost first, so a subquery used as a source is already bound when it is described.
    calls.sort(key=lambda node: -node.depth)
    typed: dict[str, TypeSpec] = {}
    changed = False
    for call in calls:
        spec, rewritten = _bind_call(call, tree, describe)
        changed = changed or rewritten
        if spec is not None:
            typed[spec.sql] = spec
    # SQL already in the explicit form runs as the user wrote it
    out = tree.sql(dialect="duckdb", normalize_functions=False) if changed else sql
    return BoundQuery(out, tuple(typed.values()), semantic=bool(calls))


def _bind_call(
    call: exp.Anonymous, root: exp.Expr, describe: Describe
) -> tuple[TypeSpec | None, bool]:
    """Rewrite ``call`` in place: (the typed map it needs, if any; whether it changed)."""
    name = call.name.lower()
    args, named, _ = split_options(call)
    if not args or not isinstance(args[0], exp.Literal) or not args[0].is_string:
        raise TemplateError(
            f"{name} needs a prompt template as a string literal first argument, "
            f"e.g. {name}('{{text}} is positive')"
        )
    template = parse_template(args[0].this)
    rest = args[1:]
    type_arg: str | None = None
    was_positional = template.is_positional
    # sem_classify(template, ['a', 'b', ...], [columns]): the labels come second
    labels = [_classify_labels(rest.pop(0) if rest else None)] if name == "sem_classify" else []
    if template.is_positional:
        needed = len(template.distinct_fields())
        if name == "sem_map" and len(rest) == needed + 1 and _is_string(rest[-1]):
            type_arg = rest.pop().this
        if template.fields and max(int(f) for f in template.fields) >= len(rest):
            raise TemplateError(
                f"{name}({args[0].this!r}) uses position {{{max(int(f) for f in template.fields)}}} "
                f"but has {len(rest)} column argument(s); pass one column per position"
            )
        if not template.fields:
            raise TemplateError(
                f"{name}({args[0].this!r}) names no column; put one in braces, e.g. '{{text}}'"
            )
        columns = rest
    else:
        if name == "sem_map" and len(rest) == 1 and _is_string(rest[0]):
            type_arg = rest.pop().this
        if rest:
            raise BindError(
                f"{name}: a template with named fields takes no extra arguments "
                f"(got {len(rest)}); write the columns in the template, e.g. '{{text}}'"
            )
        scope = _sources_of(call, root, describe)
        aliases = _select_aliases(call)
        columns = [
            _resolve(field, scope, template, aliases) for field in template.distinct_fields()
        ]
        template = template.positional()
    spec = parse_type(type_arg) if type_arg is not None else None
    new_args: list[exp.Expression] = [exp.Literal.string(template.source), *labels, *columns]
    if spec is not None and not spec.is_text:
        listed = exp.Array(expressions=[exp.cast(c.copy(), "VARCHAR") for c in columns])
        call.replace(
            exp.Anonymous(this=typed_map_function(spec), expressions=[new_args[0], listed, *named])
        )
        return spec, True
    call.set("expressions", [*new_args, *named])
    return None, not was_positional


def _is_string(node: exp.Expression) -> bool:
    return isinstance(node, exp.Literal) and node.is_string


def _classify_labels(node: exp.Expression | None) -> exp.Expression:
    """A ``sem_classify``'s labels argument, checked by the planner's rule when it is a list
    literal (a computed list is checked when the query runs)."""
    label_argument(node)
    assert node is not None
    return node


@dataclass(frozen=True, slots=True)
class _Source:
    alias: str
    columns: tuple[str, ...]


def _sources_of(call: exp.Expr, root: exp.Expr, describe: Describe) -> list[_Source]:
    select = call.find_ancestor(exp.Select)
    if select is None:
        raise BindError("semantic calls with {column} fields must appear inside a SELECT")
    nodes: list[exp.Expression] = []
    from_ = select.args.get("from_")
    if from_ is not None:
        nodes.append(from_.this)
    nodes.extend(join.this for join in select.args.get("joins") or [])
    if not nodes:
        raise BindError("a semantic call with {column} fields needs a FROM clause to bind to")
    with_ = root.args.get("with_")
    prefix = with_.sql(dialect="duckdb", normalize_functions=False) + " " if with_ else ""
    sources = []
    for node in nodes:
        alias = node.alias_or_name
        source_sql = node.sql(dialect="duckdb", normalize_functions=False)
        try:
            columns = tuple(describe(f"{prefix}SELECT * FROM {source_sql} LIMIT 0"))
        except (BindError, duckdb.TransactionException):  # an aborted transaction: as is
            raise
        except Exception as err:  # noqa: BLE001 - DuckDB's own message names what is missing
            raise BindError(f"cannot read the columns of {source_sql}: {err}") from None
        sources.append(_Source(alias, columns))
    return sources


def _select_aliases(call: exp.Expr) -> tuple[str, ...]:
    """Output names of the call's SELECT that another semantic call may read (not its own)."""
    select = call.find_ancestor(exp.Select)
    if select is None:
        return ()
    own = call.find_ancestor(exp.Alias)
    return tuple(e.alias for e in select.expressions if isinstance(e, exp.Alias) and e is not own)


def _resolve(
    field: str, sources: list[_Source], template: Template, aliases: Sequence[str] = ()
) -> exp.Expression:
    """The column ``field`` means, by the one resolver (``plan.fields``); a select-list alias
    (e.g. a ``sem_map`` result filtered in WHERE) when no source has such a column."""
    names = [
        Name(
            column,
            exp.column(column, table=s.alias or None, quoted=True),
            (s.alias,) if s.alias else (),
        )
        for s in sources
        for column in s.columns
    ]
    late = [Name(alias, exp.column(alias, quoted=True)) for alias in aliases]
    target: exp.Expression = resolve(field, names, where=f"template {template.source!r}", late=late)
    return target.copy()
