"""Any statement with a semantic SELECT, shaped for the planner.

The plan builder (:mod:`.build`) plans one SELECT. A statement is brought to that shape by
small rewrites of its sqlglot AST, applied in order by :func:`shape_statement`:

1. :func:`split_write`: ``CREATE TABLE ... AS``, ``INSERT INTO ... SELECT``, ``UPDATE ... SET``
   and ``DELETE ... WHERE`` become the SELECT of the rows they write and a :class:`Write` that
   writes each batch of them (in the statement's transaction);
2. :func:`expand_views`: a view whose definition holds a semantic call is read as its SELECT;
3. :func:`name_subqueries`: a subquery in FROM without an alias gets one (valid DuckDB);
4. :func:`inline_ctes`: a CTE read once becomes a derived table (so an outer LIMIT reaches
   it); a semantic CTE read more than once becomes a :class:`Unit`, computed once;
5. :func:`unwrap`: ``SELECT * FROM (q) [AS a] [LIMIT n [OFFSET m]]``, as BI tools wrap a
   query, is ``q`` with the LIMIT merged into it.

When the builder still cannot plan the result, :func:`extract_units` takes the semantic
subqueries it reads (derived tables, ``IN``/scalar/``EXISTS`` subqueries, branches of a
``UNION``) out as units, each planned on its own and computed before the rest, which DuckDB
runs over their rows. A LIMIT over a ``UNION ALL`` is pushed into its branches.

Example: ``WITH c AS (SELECT id FROM r WHERE sem_filter('{text} ok')) SELECT * FROM c LIMIT 5``
is shaped into ``SELECT id FROM r WHERE sem_filter('{text} ok') LIMIT 5``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.plan.calls import is_semantic

__all__ = [
    "ROWS",
    "Shaped",
    "Unit",
    "Write",
    "expand_views",
    "extract_units",
    "has_semantic",
    "inline_ctes",
    "merge_limit",
    "name_subqueries",
    "shape_statement",
    "split_write",
    "unwrap",
]

#: the name a :class:`Write` statement reads each batch of rows by
ROWS = "__sem_rows"
#: the column of an UPDATE's or DELETE's rows that names the row to change
ROWID = "__sem_rowid"

_units = itertools.count(1)

Views = Callable[[exp.Table], exp.Query | None]


def has_semantic(node: exp.Expr) -> bool:
    return any(is_semantic(x) for x in node.walk())


@dataclass(frozen=True)
class Unit:
    """A semantic query computed before the statement that reads it by ``name``."""

    name: str
    query: exp.Query


@dataclass(frozen=True)
class Write:
    """What a write statement does with each batch of its SELECT's rows (read as :data:`ROWS`).

    ``first`` writes the first batch, ``rest`` every later one (a ``CREATE TABLE ... AS``
    creates the table from its first batch and inserts the others). ``target``: the table a
    ``CREATE ... IF NOT EXISTS`` would create (nothing is done when it exists);
    ``rowid_of``: the table whose ``rowid`` the SELECT reads (UPDATE, DELETE)."""

    kind: str  # create, insert, update, delete
    first: str
    rest: str
    target: str | None = None
    rowid_of: str | None = None


@dataclass(frozen=True)
class Shaped:
    """A statement in the planner's shape: ``select`` (planned, or run by DuckDB when no
    semantic call is left in it), the ``units`` computed before it, and its ``write``."""

    select: exp.Query
    units: tuple[Unit, ...] = ()
    write: Write | None = None
    notes: tuple[str, ...] = field(default=())


def shape_statement(tree: exp.Expr, *, views: Views | None = None) -> Shaped:
    """The shaped statement (rules 1-5 of the module docstring); ``PlanError`` for a
    statement kind that is not planned."""
    select, write = split_write(tree)
    notes: list[str] = []
    if views is not None:
        select = expand_views(select, views, notes)
    select = name_subqueries(select)
    select, units = inline_ctes(select, notes)
    select = unwrap(select, notes)
    return Shaped(select, units, write, tuple(notes))


# -- 1. writes -------------------------------------------------------------------------------
def split_write(tree: exp.Expr) -> tuple[exp.Query, Write | None]:
    """The SELECT whose rows the statement returns or writes, and the :class:`Write`."""
    if isinstance(tree, exp.Query):
        return tree, None
    rows = exp.select("*").from_(ROWS)
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
        query = tree.expression
        if not isinstance(query, exp.Query):
            raise PlanError("CREATE TABLE without AS SELECT has no semantic query to plan")
        first = tree.copy()
        first.set("expression", rows)
        target = tree.this.sql(dialect="duckdb") if tree.args.get("exists") else None
        insert = exp.insert(rows, _table_of(tree.this))
        return query, Write("create", _sql(first), _sql(insert), target=target)
    if isinstance(tree, exp.Insert):
        query = tree.expression
        if not isinstance(query, exp.Query):
            raise PlanError("INSERT ... VALUES has no semantic query to plan")
        if tree.args.get("returning"):
            raise PlanError("INSERT ... RETURNING is run by DuckDB (UDF path)")
        each = tree.copy()
        each.set("expression", rows)
        return query, Write("insert", _sql(each), _sql(each))
    if isinstance(tree, exp.Update):
        return _update(tree)
    if isinstance(tree, exp.Delete):
        return _delete(tree)
    raise PlanError(f"{tree.key.upper()} statements are not planned")


def _update(tree: exp.Update) -> tuple[exp.Query, Write]:
    items: list[exp.Expr] = []
    sets: list[str] = []
    for i, assignment in enumerate(tree.expressions, 1):
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
            raise PlanError("UPDATE ... SET must assign columns to be planned")
        name = f"__sem_set_{i}"
        items.append(assignment.expression.copy().as_(name))
        sets.append(f"{assignment.this.sql(dialect='duckdb')} = {ROWS}.{name}")
    select, target = _rows_to_change(tree, "UPDATE", "FROM", items)
    write = (f"UPDATE {target} SET {', '.join(sets)} FROM {ROWS} "
             f"WHERE {target}.rowid = {ROWS}.{ROWID}")  # fmt: skip
    return select, Write("update", write, write, rowid_of=target)


def _delete(tree: exp.Delete) -> tuple[exp.Query, Write]:
    select, target = _rows_to_change(tree, "DELETE", "USING", [])
    write = f"DELETE FROM {target} WHERE rowid IN (SELECT {ROWID} FROM {ROWS})"
    return select, Write("delete", write, write, rowid_of=target)


def _rows_to_change(
    tree: exp.Update | exp.Delete, verb: str, joined: str, items: list[exp.Expr]
) -> tuple[exp.Query, str]:
    """The SELECT of the rows an UPDATE or DELETE changes (their ``rowid`` as :data:`ROWID`,
    then ``items``) under its WHERE, and the SQL of its table."""
    key = "from_" if verb == "UPDATE" else "using"
    if tree.args.get(key) or tree.args.get("returning") or tree.args.get("with_"):
        raise PlanError(f"{verb} with {joined}, WITH or RETURNING is run by DuckDB (UDF path)")
    table = tree.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise PlanError(f"{verb} of something other than a table is not planned")
    rowid = exp.column("rowid", table=table.alias_or_name).as_(ROWID)
    select = exp.select(rowid, *items).from_(table.copy())
    where = tree.args.get("where")
    if where is not None:
        select = select.where(where.this.copy())
    return select, _sql(_table_of(table))


def _table_of(table: exp.Expr) -> exp.Table:
    """The table a CREATE/INSERT/UPDATE names, without alias or column list."""
    if isinstance(table, exp.Schema):
        table = table.this
    assert isinstance(table, exp.Table)
    return exp.table_(table.name, db=table.db or None, catalog=table.catalog or None)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb", normalize_functions=False)


# -- 2. views --------------------------------------------------------------------------------
def expand_views(select: exp.Query, views: Views, notes: list[str]) -> exp.Query:
    """Each table reference that ``views`` knows as a semantic view, read as its SELECT."""
    ctes = {c.alias_or_name.lower() for c in select.find_all(exp.CTE)}
    out = select.copy()
    for table in list(out.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier) or table.name.lower() in ctes:
            continue
        body = views(table)
        if body is None:
            continue
        notes.append(f"view {table.name} read as its definition")
        alias = table.alias or table.name
        sub = exp.Subquery(this=body.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        table.replace(sub)
    return out


# -- 3. subqueries without an alias ----------------------------------------------------------
def name_subqueries(select: exp.Query) -> exp.Query:
    """Every subquery in a FROM or JOIN gets an alias (``__sem_sub_N``) if it has none."""
    out = select.copy()
    n = 0
    for sub in list(out.find_all(exp.Subquery)):
        if isinstance(sub.parent, exp.From | exp.Join) and not sub.alias:
            n += 1
            sub.set("alias", exp.TableAlias(this=exp.to_identifier(f"__sem_sub_{n}")))
    return out


# -- 4. CTEs ---------------------------------------------------------------------------------
def inline_ctes(select: exp.Query, notes: list[str]) -> tuple[exp.Query, tuple[Unit, ...]]:
    """CTEs read once inlined as derived tables; semantic ones read more than once (or
    written ``MATERIALIZED``) turned into units, computed once."""
    with_ = select.args.get("with_")
    if not isinstance(with_, exp.With):
        return select, ()
    if with_.args.get("recursive"):
        raise PlanError("WITH RECURSIVE is run by DuckDB (UDF path)")
    out = select.copy()
    ctes = list(out.args["with_"].expressions)
    out.set("with_", None)
    units: list[Unit] = []
    for i, cte in enumerate(ctes):
        name = cte.alias_or_name
        later = [c.this for c in ctes[i + 1 :]]
        refs = [t for root in (out, *later) for t in _references(root, name)]
        body = cte.this
        columns = (
            cte.args["alias"].columns if isinstance(cte.args.get("alias"), exp.TableAlias) else []
        )
        if not refs:
            continue
        if has_semantic(body) and (len(refs) > 1 or cte.args.get("materialized") or columns):
            unit = Unit(f"__sem_unit_{next(_units)}", body.copy())
            units.append(unit)
            notes.append(f"CTE {name} computed once (read {len(refs)} times)")
            for ref in refs:
                alias = exp.TableAlias(this=exp.to_identifier(ref.alias or name),
                                       columns=[c.copy() for c in columns])  # fmt: skip
                ref.replace(exp.Table(this=exp.to_identifier(unit.name), alias=alias))
            continue
        if has_semantic(body):
            notes.append(f"CTE {name} inlined as a subquery")
        for ref in refs:
            alias = exp.TableAlias(this=exp.to_identifier(ref.alias or name),
                                   columns=[c.copy() for c in columns])  # fmt: skip
            ref.replace(exp.Subquery(this=body.copy(), alias=alias))
    return out, tuple(units)


def _references(root: exp.Expr, name: str) -> list[exp.Table]:
    return [
        t
        for t in root.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier) and not t.db and t.name.lower() == name.lower()
    ]


# -- 5. pass-through wrappers ----------------------------------------------------------------
_WRAPPER_FREE = ("joins", "where", "group", "having", "order", "distinct", "qualify", "windows",
                 "with_", "laterals", "pivots", "sample")  # fmt: skip


def unwrap(select: exp.Query, notes: list[str]) -> exp.Query:
    """``SELECT * FROM (q) [AS a] [LIMIT n [OFFSET m]]`` as ``q`` with the LIMIT merged."""
    while (
        isinstance(select, exp.Select)
        and len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and isinstance(select.args.get("from_"), exp.From)
        and isinstance(select.args["from_"].this, exp.Subquery)
        and not any(select.args.get(k) for k in _WRAPPER_FREE)
        and not _aliases_columns(select.args["from_"].this)
    ):
        inner = select.args["from_"].this.this
        merged = merge_limit(inner, _int(select.args.get("limit")), _int(select.args.get("offset")))
        if merged is None:
            break
        notes.append("a SELECT * wrapper read through")
        select = merged
    return select


def _aliases_columns(sub: exp.Subquery) -> bool:
    alias = sub.args.get("alias")
    return isinstance(alias, exp.TableAlias) and bool(alias.columns)


def merge_limit(query: exp.Query, limit: int | None, offset: int | None) -> exp.Query | None:
    """``query`` limited to ``limit`` rows after ``offset`` (None: no such clause), or None
    when that cannot be written into it. Example: ``q LIMIT 10`` merged with ``LIMIT 3 OFFSET
    2`` is ``q LIMIT 3 OFFSET 2``; with ``LIMIT 20 OFFSET 9`` it is ``q LIMIT 1 OFFSET 9``."""
    if limit is None and not offset:
        return query
    try:
        old, old_offset = _int(query.args.get("limit")), _int(query.args.get("offset"))
    except PlanError:
        return None
    if old_offset:
        return None
    out = query.copy()
    start = offset or 0
    if old is not None:
        left = max(0, old - start)
        limit = left if limit is None else min(limit, left)
    if limit is not None:
        out.set("limit", exp.Limit(expression=exp.Literal.number(limit)))
    if start:
        out.set("offset", exp.Offset(expression=exp.Literal.number(start)))
    return out


def _int(node: exp.Expr | None) -> int | None:
    if node is None:
        return None
    value = node.args.get("expression") if isinstance(node, exp.Limit | exp.Offset) else node
    if isinstance(node, exp.Offset) and value is None:
        value = node.this
    if not isinstance(value, exp.Literal) or value.is_string:
        raise PlanError("LIMIT and OFFSET must be integer literals to be planned")
    return int(value.this)


# -- units -----------------------------------------------------------------------------------
_BLOCKING = ("group", "having", "distinct", "order", "limit")


def extract_units(select: exp.Query) -> tuple[exp.Query, tuple[Unit, ...]]:
    """The semantic subqueries of ``select`` taken out as units (see the module docstring);
    ``PlanError`` when one cannot be (a correlated subquery), or when computing one whole
    could cost more than the UDF path would under the statement's LIMIT."""
    out = select.copy()
    units: list[Unit] = []
    if isinstance(out, exp.SetOperation):
        return _set_operation(out)
    limited = out.args.get("limit") is not None
    for sub in list(out.find_all(exp.Subquery)):
        if not has_semantic(sub.this) or _inside_unit_candidate(sub, out):
            continue
        if _correlated(sub.this):
            raise PlanError("a correlated subquery with a semantic call is run as written")
        in_from = isinstance(sub.parent, exp.From | exp.Join)
        if in_from and limited and not _blocking(sub.this):
            raise PlanError(
                "a LIMIT over a subquery the planner cannot read through; write the LIMIT "
                "inside it, or as SELECT * FROM (...) LIMIT n"
            )
        unit = Unit(f"__sem_unit_{next(_units)}", sub.this.copy())
        units.append(unit)
        rows = exp.select("*").from_(unit.name)
        if in_from:
            sub.replace(exp.Table(this=exp.to_identifier(unit.name), alias=sub.args.get("alias")))
        else:  # IN (...), EXISTS (...), a scalar subquery: the unit's rows, as a subquery
            sub.set("this", rows)
    for node in list(out.find_all(exp.In, exp.Exists)):
        query = node.args.get("query") if isinstance(node, exp.In) else node.this
        if not isinstance(query, exp.Query) or isinstance(query, exp.Subquery):
            continue
        if not has_semantic(query):
            continue
        if _correlated(query):
            raise PlanError("a correlated subquery with a semantic call is run as written")
        unit = Unit(f"__sem_unit_{next(_units)}", query.copy())
        units.append(unit)
        query.replace(exp.select("*").from_(unit.name))
    if not units:
        raise PlanError("no semantic subquery to compute on its own")
    return out, tuple(units)


def _set_operation(op: exp.SetOperation) -> tuple[exp.Query, tuple[Unit, ...]]:
    """Each semantic branch of a UNION/INTERSECT/EXCEPT as a unit; an outer LIMIT (no ORDER
    BY) of a UNION ALL is pushed into every branch (none needs more rows than it)."""
    limit, offset = _int(op.args.get("limit")), _int(op.args.get("offset"))
    push = isinstance(op, exp.Union) and not op.args.get("distinct") and not op.args.get("order")
    need = None if limit is None else limit + (offset or 0)
    units: list[Unit] = []

    def branch(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.SetOperation)
            and type(node) is type(op)
            and node.args.get("distinct") == op.args.get("distinct")
        ):
            node.set("this", branch(node.this))
            node.set("expression", branch(node.expression))
            return node
        if not isinstance(node, exp.Query) or not has_semantic(node):
            return node
        query = node.this if isinstance(node, exp.Subquery) else node
        if push and need is not None:
            query = merge_limit(query, need, None) or query
        unit = Unit(f"__sem_unit_{next(_units)}", query.copy())
        units.append(unit)
        return exp.select("*").from_(unit.name)

    op.set("this", branch(op.this))
    op.set("expression", branch(op.expression))
    if not units:
        raise PlanError("no semantic branch to compute on its own")
    return op, tuple(units)


def _inside_unit_candidate(sub: exp.Subquery, root: exp.Expr) -> bool:
    """Whether ``sub`` sits inside another semantic subquery (which becomes the unit)."""
    node = sub.parent
    while node is not None and node is not root:
        if isinstance(node, exp.Subquery) and has_semantic(node.this):
            return True
        node = node.parent
    return False


def _blocking(query: exp.Query) -> bool:
    """Whether every row of ``query`` is needed before its first (aggregate, sort, ...)."""
    if isinstance(query, exp.SetOperation):
        return bool(query.args.get("distinct"))
    return any(query.args.get(k) for k in _BLOCKING) or any(
        isinstance(x, exp.AggFunc) or (is_semantic(x) and x.name.lower() == "sem_agg")
        for x in query.walk()
    )


def _correlated(query: exp.Expr) -> bool:
    """Whether ``query`` qualifies a column with a table it does not read itself."""
    names = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    names |= {s.alias.lower() for s in query.find_all(exp.Subquery) if s.alias}
    names |= {c.alias_or_name.lower() for c in query.find_all(exp.CTE)}
    return any(c.table and c.table.lower() not in names for c in query.find_all(exp.Column))
