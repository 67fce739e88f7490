"""Build the logical plan of a semantic SELECT from its sqlglot AST, as written.

Supported: one SELECT over tables and simple derived tables joined by inner or cross joins
(``JOIN ... ON``, commas); WHERE/ON conjuncts that are relational predicates or
``sem_filter``/``sem_join`` calls; ``sem_map`` anywhere in the select list; ``sem_agg`` as a
whole select item; GROUP BY, HAVING, DISTINCT, ORDER BY, LIMIT/OFFSET. A derived table is
``(SELECT columns [, sem_map(...) AS name] FROM one_table [WHERE ...]) AS alias``. Anything else
raises :class:`PlanError` (the query then runs on the UDF path, unoptimized).

Placement, as written: single-table relational predicates go into their scan, multi-table ones
into the condition of the join that brings their last table; a cross join whose sides a
semantic predicate relates becomes a ``SemJoin``; the other semantic predicates sit above the
joins, then the ``sem_map`` s, then the predicates that read a ``sem_map`` output. A derived
table is planned the same way on its own, below the joins: its scan, its ``sem_filter`` s, its
``sem_map`` s. So a person can write an order: a filter below a join, a map before a filter.
Helpers: :mod:`.calls` binds ``sem_*`` calls, :mod:`.derived` decides which subqueries are
planned and what they show, :mod:`.sink` builds the set-wise operators above the region.

Example:
    ``SELECT sem_map('{text} topic') AS t FROM r, m WHERE r.mid = m.id AND sem_filter('{r.text} good')``
    builds ``Project(SemMap(SemFilter(Join(Scan r, Scan m))))``, while
    ``SELECT r.id FROM (SELECT id, mid FROM r WHERE sem_filter('{text} good')) AS r, m WHERE ...``
    builds ``Project(Join(SemFilter(Scan r), Scan m))``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError, PlanError
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan import nodes as n
from duckdb_sem.plan.calls import MAPS, SEMANTIC, is_semantic, sem_call
from duckdb_sem.plan.derived import derived_names, derived_select, nested_subquery_error
from duckdb_sem.plan.scope import Scope, Source
from duckdb_sem.plan.sink import build_sink

__all__ = ["SEMANTIC", "build_plan", "is_semantic"]

ColumnsOf = Callable[[str], Sequence[str]]
_E = TypeVar("_E", bound=exp.Expr)


def build_plan(sql: str | exp.Expr, columns_of: ColumnsOf) -> n.Node:
    """The plan of ``sql`` (text, or the statement's sqlglot AST, which is only read) as
    written; ``columns_of(table_sql)`` lists a table's columns."""
    if isinstance(sql, exp.Expr):
        tree = sql
    else:
        try:
            tree = sqlglot.parse_one(sql, dialect="duckdb")
        except sqlglot.errors.ParseError as err:
            raise BindError(f"cannot parse SQL: {err}") from None
    if not isinstance(tree, exp.Select) or tree.args.get("with_"):
        raise PlanError("only a single SELECT (without WITH) is planned")
    for key in ("windows", "qualify", "pivots", "laterals", "prewhere", "sample"):
        if tree.args.get(key):
            raise PlanError(f"{key.upper()} is planned by DuckDB alone (UDF path)")
    # semantic calls inside ORDER BY, GROUP BY and HAVING become map attributes: work on a copy
    return _Builder(tree.copy(), columns_of).build()


class _Names:
    """The ``sem_map`` output attributes of a query and of its derived tables (unique)."""

    def __init__(self) -> None:
        self.used: set[str] = set()  # lower-case
        self.count = 0


class _Builder:
    """Plans one SELECT; ``alias`` set means a derived table: its attributes are ``alias.col``."""

    def __init__(
        self,
        tree: exp.Select,
        columns_of: ColumnsOf,
        *,
        names: _Names | None = None,
        alias: str | None = None,
    ) -> None:
        self.tree = tree
        self.names = names or _Names()
        self.derived: dict[str, _Builder] = {}  # alias -> the builder of a derived table
        self.scope = Scope(self._sources(tree, columns_of, alias))
        self.maps: list[tuple[str, exp.Anonymous]] = []  # (attribute, call)

    # -- sources ----------------------------------------------------------------------------
    def _sources(self, tree: exp.Select, columns_of: ColumnsOf, alias: str | None) -> list[Source]:
        from_ = tree.args.get("from_")
        if from_ is None:
            raise PlanError("a semantic query needs a FROM clause")
        refs = [from_.this]
        self.conditions: list[exp.Expression] = []
        for join in tree.args.get("joins") or []:
            if (
                join.side
                or join.kind not in ("", "INNER", "CROSS")
                or join.args.get("using")
                or join.args.get("method")
            ):
                raise PlanError("only inner and cross joins are planned (outer joins: UDF path)")
            refs.append(join.this)
            if join.args.get("on") is not None:
                self.conditions.append(join.args["on"])
        sources = []
        for ref in refs:
            if isinstance(ref, exp.Subquery):
                if alias is not None:
                    raise nested_subquery_error(alias)
                try:
                    sources.append(self._derived(ref, columns_of))
                    continue
                except PlanError:
                    if not ref.alias or _has_semantic(ref):
                        raise
                # a relational subquery of another shape: a source DuckDB computes, as a view
                table, name = _relational_source(ref), ref.alias
            else:
                table, name = _table_source(ref)
            columns = tuple(columns_of(table))
            if alias is None:
                sources.append(Source(table, name, columns))
            else:  # the table of a derived table: its attributes carry the outer alias
                sources.append(Source(table, alias, columns, qualifier=name))
        aliases = [s.alias.lower() for s in sources]
        if len(set(aliases)) != len(aliases):
            raise BindError("two sources share a name; give each an alias")
        return sources

    def _derived(self, sub: exp.Subquery, columns_of: ColumnsOf) -> Source:
        """The source of a derived table; its plan is built later, by ``_region``."""
        inner, alias = derived_select(sub)
        builder = _Builder(inner, columns_of, names=self.names, alias=alias)
        items = builder._select_items()
        map_attrs = {attr for attr, _ in builder.maps}
        names = derived_names(items, map_attrs, builder.scope, alias)
        (table,) = builder.scope.sources
        self.derived[alias] = builder
        return Source(table.table, alias, table.columns, names=names)

    def _nested_maps(self) -> set[str]:
        """The ``sem_map`` outputs made inside derived tables."""
        return {attr for b in self.derived.values() for attr, _ in b.maps}

    # -- the plan ----------------------------------------------------------------------------
    def build(self) -> n.Node:
        items = self._select_items()
        self._lift_clauses()
        return build_sink(self._region(), items, self.tree, self.scope)

    def _lift_clauses(self) -> None:
        """Semantic calls in ORDER BY, GROUP BY and HAVING become map attributes (in place:
        the builder works on a copy of the statement's tree)."""
        for key in ("order", "group", "having"):
            clause = self.tree.args.get(key)
            if clause is not None:
                self._lift(clause)

    def _lift(self, expr: _E) -> _E | exp.Column:
        """``expr`` with each semantic call inside it (``sem_map``, ``sem_classify``, and a
        ``sem_filter``/``sem_join`` used as a value) replaced by a column of a new map
        attribute: ``sem_classify(l) = sem_classify(r)`` reads two maps' outputs."""
        calls = [c for c in expr.walk() if is_semantic(c) and c.name.lower() in LIFTED]
        for call in calls:
            if _conditional(call, expr):
                raise PlanError(
                    f"{call.name} in a CASE/IF/COALESCE branch is asked only for the rows that "
                    "reach it, so it runs as written (a plan would ask every row)"
                )
            attr = self._new_attr(None)
            self.maps.append((attr, call.copy()))
            column = exp.column(attr)
            if call is expr:
                return column
            call.replace(column)
        return expr

    def _new_attr(self, name: str | None) -> str:
        """A new map attribute, named ``name`` when that is free, else ``__sem_map_N``."""
        self.names.count += 1
        attr = name or f"__sem_map_{self.names.count}"
        taken = {c.lower() for s in self.scope.sources for c, _ in s.visible}
        if attr.lower() in self.names.used or attr.lower() in taken or "." in attr:
            attr = f"__sem_map_{self.names.count}"
        self.names.used.add(attr.lower())
        self.scope.maps[attr.lower()] = attr
        return attr

    def _region(self, pushed: Sequence[n.Predicate] = ()) -> n.Node:
        """The row-wise part, as written; ``pushed``: outer predicates for a derived scan."""
        conjuncts: list[exp.Expr] = [c for cond in self.conditions for c in _conjuncts(cond)]
        if self.tree.args.get("where") is not None:
            conjuncts += _conjuncts(self.tree.args["where"].this)
        scan_filters: dict[str, list[n.Predicate]] = {s.alias: [] for s in self.scope.sources}
        join_preds: list[n.Predicate] = []
        late: list[n.Predicate] = []
        sem_preds: list[n.SemCall] = []
        map_attrs = set(self.scope.maps.values())
        nested = self._nested_maps()
        for c in conjuncts:
            if is_semantic(c):
                if c.name.lower() not in ("sem_filter", "sem_join"):
                    raise PlanError(f"{c.name} cannot be a WHERE predicate")
                sem_preds.append(sem_call(c, self.scope))
                continue
            if _has_semantic(c):  # inside an expression: its calls become map outputs
                if any(is_semantic(x) and x.name.lower() == "sem_agg" for x in c.walk()):
                    raise PlanError("sem_agg cannot be part of a WHERE or ON predicate")
                c = self._lift(c.copy())
                map_attrs = set(self.scope.maps.values())
            tree, reads = self.scope.rewrite(c, where="WHERE")
            pred = n.Predicate(tree, reads)
            owners = {s.alias for s in self.scope.sources if reads & s.attrs}
            if reads & (map_attrs | nested):  # reads a sem_map output: above the map
                late.append(pred)
            elif len(owners) <= 1:
                scan_filters[owners.pop() if owners else self.scope.sources[0].alias].append(pred)
            else:
                join_preds.append(pred)
        scan_filters[self.scope.sources[0].alias] += pushed
        node = self._skeleton(scan_filters, join_preds, sem_preds)
        early = [p for p in sem_preds if not p.reads & map_attrs]
        for call in early:
            node = n.SemFilter(node, call)
        pending = [(attr, sem_call(call, self.scope)) for attr, call in self.maps]
        while pending:  # in dependency order: a map reading another map's output goes above it
            ready = [(a, c) for a, c in pending if c.reads <= node.attrs]
            if not ready:
                raise PlanError("sem_map outputs read each other in a cycle")
            attr, call = ready[0]
            pending.remove((attr, call))
            node = n.SemMap(node, call, attr)
        for call in sem_preds:
            if call.reads & map_attrs:
                node = n.SemFilter(node, call)
        for pred in late:
            node = n.Filter(node, pred)
        return node

    def _skeleton(
        self,
        scan_filters: dict[str, list[n.Predicate]],
        join_preds: list[n.Predicate],
        sem_preds: list[n.SemCall],
    ) -> n.Node:
        def scan(s: Source) -> n.Node:
            if s.alias in self.derived:
                return self.derived[s.alias]._region(scan_filters[s.alias])
            return n.Scan(s.table, s.alias, s.columns, tuple(scan_filters[s.alias]))

        nested = self._nested_maps()  # a join reading them would block the map from moving

        first, *others = self.scope.sources
        node = scan(first)
        for source in others:
            right = scan(source)
            mine = [p for p in join_preds if p.reads <= node.attrs | right.attrs]
            join_preds[:] = [p for p in join_preds if p not in mine]
            if mine:
                cond = n.Predicate(exp.and_(*(exp.paren(p.expr) for p in mine)), _union(mine))
                node = n.Join(node, right, cond)
                continue
            semi = next(
                (
                    c
                    for c in sem_preds
                    if not c.reads & nested and _relates(c.reads, node.attrs, right.attrs)
                ),
                None,
            )
            if semi is None:
                node = n.Join(node, right)
            else:
                sem_preds.remove(semi)
                call = n.SemCall(semi.template, semi.args, OperatorKind.JOIN, options=semi.options)
                node = n.SemJoin(node, right, call)
        if join_preds:
            raise PlanError("a join predicate reads tables it cannot see")
        return node

    def _select_items(self) -> list[tuple[exp.Expression, str]]:
        out: list[tuple[exp.Expression, str]] = []
        for item in self.tree.expressions:
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                table = item.table if isinstance(item, exp.Column) else ""
                for s in self.scope.sources:
                    if not table or s.name.lower() == table.lower():
                        out += [(exp.column(c, table=s.name), c) for c, _ in s.visible]
                continue
            name = item.alias_or_name if isinstance(item, exp.Alias | exp.Column) else item.sql()
            expr = item.this if isinstance(item, exp.Alias) else item
            out.append((expr.copy(), name))
            self.scope.select_aliases.add(name.lower())
        for i, (expr, name) in enumerate(out):
            if is_semantic(expr) and expr.name.lower() in LIFTED:  # the whole item: its name
                attr = self._new_attr(name)
                self.maps.append((attr, expr.copy()))
                out[i] = (exp.column(attr), name)
            elif not (is_semantic(expr) and expr.name.lower() == "sem_agg"):
                out[i] = (self._lift(expr), name)
        return out


#: the semantic calls that become a map attribute when they are part of an expression
LIFTED = (*MAPS, "sem_filter", "sem_join")

#: file suffixes DuckDB scans by name (``FROM 'reviews.csv'``), aliased by the file's stem
_FILE = re.compile(r"\.(csv|tsv|txt|parquet|json|jsonl|ndjson)(\.gz|\.zst)?$", re.IGNORECASE)


def _conditional(call: exp.Expr, root: exp.Expr) -> bool:
    """Whether DuckDB evaluates ``call`` (inside ``root``) only for some rows: in a CASE or IF
    branch, a CASE condition after the first, or a COALESCE argument after the first."""
    child, parent = call, call.parent
    while parent is not None and child is not root:
        if isinstance(parent, exp.Case):
            ifs = parent.args.get("ifs") or []
            if not ifs or child is not ifs[0]:
                return True
        elif isinstance(parent, exp.If | exp.Coalesce) and child is not parent.this:
            return True
        child, parent = parent, parent.parent
    return False


def _has_semantic(node: exp.Expr) -> bool:
    return any(is_semantic(x) for x in node.walk())


def _relational_source(sub: exp.Subquery) -> str:
    """The SQL of a subquery without semantic calls, as a table the scan reads (its column
    aliases, ``(...) AS s(a, b)``, kept)."""
    alias = sub.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return f"(SELECT * FROM {sub.sql(dialect='duckdb', normalize_functions=False)})"
    return f"({sub.this.sql(dialect='duckdb', normalize_functions=False)})"


def _table_source(ref: exp.Expression) -> tuple[str, str]:
    """(SQL, default alias) of a table, view, file or table function in FROM, named as DuckDB
    names it: ``'reviews.csv'`` is ``reviews``, ``read_csv('x.csv')`` is ``read_csv``. With
    column aliases (``range(40) AS a(x)``) the reference is read as a subquery that keeps them."""
    alias = ref.args.get("alias")
    if isinstance(ref, exp.Table) and isinstance(alias, exp.TableAlias) and alias.columns:
        return f"(SELECT * FROM {ref.sql(dialect='duckdb', normalize_functions=False)})", ref.alias
    if isinstance(ref, exp.Table) and isinstance(ref.this, exp.Identifier):
        name = exp.table_(ref.name, db=ref.db or None, catalog=ref.catalog or None)
        default = ref.name
        if not ref.db and _FILE.search(ref.name):
            default = _FILE.sub("", ref.name.replace("\\", "/").rsplit("/", 1)[-1])
        return name.sql(dialect="duckdb"), ref.alias or default
    if isinstance(ref, exp.Table) and isinstance(ref.this, exp.Func):
        function = ref.this
        sql = function.sql(dialect="duckdb", normalize_functions=False)
        default = function.name if isinstance(function, exp.Anonymous) else function.sql_name()
        return sql, ref.alias or default.lower()
    raise PlanError(
        "only tables, views, files, table functions and subqueries are planned as sources"
    )


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return [node]


def _relates(reads: frozenset[str], left: frozenset[str], right: frozenset[str]) -> bool:
    return bool(reads & left) and bool(reads & right) and reads <= left | right


def _union(preds: Sequence[n.Predicate]) -> frozenset[str]:
    return frozenset().union(*(p.reads for p in preds))
