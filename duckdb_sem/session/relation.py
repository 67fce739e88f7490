"""``SemRelation``: DuckDB relations with semantic methods that chain into one query.

``con.table('reviews').sem_filter('{text} is positive').sem_map('{text} in five words',
name='gist')`` builds *one* SELECT (sources, ``sem_filter``/``sem_join`` conjuncts, ``sem_map``
items) that goes through ``Session.sql`` when it is fetched: it is bound and planned as a
whole, so the optimizer may reorder the chain's operators. ``sem_agg`` closes a chain (GROUP BY);
``sem_topk``/``sem_extract`` read the chain through the table functions. Every other attribute
is DuckDB's: ``.filter('stars > 3')`` stays in the chain while it is open, the rest
(``.aggregate()``, ``.order()``, ``.limit()``, ``.arrow()``, ``.df()``) runs on the DuckDB
relation, and relations that come back are ``SemRelation`` s again, ready for more ``sem_*``.

Templates name the relation's columns: ``{text}``, ``{reviews.text}`` (a source's alias, by
default its table name; ``.set_alias()`` renames), ``{gist}`` (a ``sem_map`` output), and in
``sem_join`` also ``{left.col}``/``{right.col}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError, UnknownColumnError
from duckdb_sem.llm.call_options import CallOptions, examples_option
from duckdb_sem.llm.prompts import check_labels
from duckdb_sem.session.caller_scope import HandsOver, call_in_caller_scope
from duckdb_sem.session.chain import Chain, ChainSource, quote_name
from duckdb_sem.session.protocol import Session
from duckdb_sem.session.result import PlannedStream, duckdb_errors

__all__ = ["Examples", "SemRelation", "with_limit"]

#: a method's ``examples=``: ``(input, output)`` pairs, or ``{'input': ..., 'output': ...}``
Examples = Sequence[tuple[str, str | bool] | dict[str, str | bool]]

_TRANSLATED = {"fetchall", "fetchone", "fetchmany", "arrow", "df", "fetchdf", "pl", "fetchnumpy",
               "fetch_arrow_table", "to_arrow_table", "to_arrow_reader", "show", "execute",
               "write_csv", "write_parquet", "to_df", "create", "insert"}  # fmt: skip


class SemRelation(HandsOver):
    """A relation of a ``Session``; see the module docstring."""

    def __init__(
        self,
        relation: duckdb.DuckDBPyRelation | None,
        owner: Session,
        *,
        chain: Chain | None = None,
        sql: str | None = None,
        planned: str | None = None,
        keep: tuple[object, ...] | object = (),
    ) -> None:
        self._rel = relation
        self._owner = owner
        self._chain = chain
        self._sql = sql  # a closed query (sem_agg, table functions) not yet run
        # a query the optimizer plans, not yet run: each fetch runs it on the SEU loop
        self._planned = planned
        self._keep = keep  # registrations this relation reads; dropped with it
        self._result: SemRelation | None = None  # what the chain or closed SQL became
        self._cursor: _Cursor | PlannedStream | None = None  # fetchone/fetchmany in progress

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def of_table(cls, owner: Session, name: str) -> SemRelation:
        """``con.table(name)``: DuckDB's relation of a table, view, file or caller-scope
        variable (looked up from the caller's scope, as by ``duckdb.connect()``), with the
        ``sem_*`` methods; a table relation still takes ``insert``/``update``."""
        rel = call_in_caller_scope(owner.duckdb.table, name, scan=name)
        if owner.sources.caller_objects(f"SELECT * FROM {name}"):  # not the catalog's
            return cls.of_relation(owner, rel, alias=name)
        try:
            table = exp.to_table(name, dialect="duckdb")
        except sqlglot.errors.SqlglotError:  # a file path DuckDB reads, not a table name
            return cls.of_relation(owner, rel, alias=name)
        source = ChainSource(table.sql(dialect="duckdb"), table.name, tuple(rel.columns))
        return cls(rel, owner, chain=Chain((source,)))

    @classmethod
    def of_relation(
        cls, owner: Session, rel: duckdb.DuckDBPyRelation, *, alias: str
    ) -> SemRelation:
        """DuckDB's relation ``rel`` (``con.from_df``, ``con.from_arrow``, a variable), whose
        ``sem_*`` chains read it by a registered name and name its columns ``{alias.col}``."""
        name = owner.sources.unique_name("rel")
        keep = owner.sources.hold({name: rel})
        source = ChainSource(quote_name(name), alias, tuple(rel.columns))
        return cls(rel, owner, chain=Chain((source,)), keep=keep)

    def _with(self, *, chain: Chain | None = None, keep: object = None) -> SemRelation:
        """A new relation with ``chain`` (not yet run) or, keeping this one's, more ``keep``."""
        if chain is None:
            rel = SemRelation(self._rel, self._owner, chain=self._chain, sql=self._sql)
        else:
            rel = SemRelation(None, self._owner, chain=chain)
        rel._keep = (self._keep, keep)
        return rel

    def _open_chain(self) -> Chain:
        """This relation as an open chain: itself, or a new one reading it as a source."""
        if self._chain is not None:
            return self._chain
        target = self._target()
        if target._rel is None and target._planned is not None:
            # a query not yet run stays a query: the chain reads it as a subquery (lazy)
            return Chain((ChainSource(f"({target._planned})", "rel", tuple(target.columns)),))
        name = self._owner.sources.unique_name("rel")
        self._keep = (self._keep, self._owner.sources.hold({name: self.relation}))
        columns = tuple(self.relation.columns)
        return Chain((ChainSource(quote_name(name), "rel", columns),))

    # -- semantic operators --------------------------------------------------------------------
    def _options(self, function: str, *, examples: Examples | None = None, **given: Any) -> str:
        """A method's ``model=``/``temperature=``/``max_tokens=``/``examples=``/``batch_size=``
        as SQL named arguments, checked now (an unknown model, a bad value) like the SQL form
        at bind time. ``examples=`` takes ``(input, output)`` pairs or SQL's
        ``{'input': ..., 'output': ...}`` dicts."""
        if examples is not None:
            given["examples"] = examples_option(function, [_example(e) for e in examples])
        options = CallOptions(**given)
        options.check_for(function)
        self._owner.models.check(options.model)
        return options.sql_args()

    def sem_filter(
        self, template: str, *, model: str | None = None, temperature: float | None = None,
        max_tokens: int | None = None, examples: Examples | None = None,
        batch_size: int | None = None,
    ) -> SemRelation:  # fmt: skip
        """Rows for which ``template`` holds; ``model=`` picks a named model (the keyword
        arguments are the SQL form's ``model :=``, ``temperature :=``, ``max_tokens :=``,
        ``examples :=``, ``batch_size :=``)."""
        extra = self._options("sem_filter", model=model, temperature=temperature,
                              max_tokens=max_tokens, examples=examples,
                              batch_size=batch_size)  # fmt: skip
        chain = self._open_chain()
        where = (*chain.where, chain.call("sem_filter", template, extra=extra))
        return self._with(chain=dataclasses.replace(chain, where=where))

    def sem_map(
        self, template: str, *, name: str = "sem_map", type: str | None = None,
        model: str | None = None, temperature: float | None = None, max_tokens: int | None = None,
        choices: Sequence[str] | None = None, examples: Examples | None = None,
        batch_size: int | None = None,
    ) -> SemRelation:  # fmt: skip
        """A column ``name`` of ``template``'s answer per row (``type``: the SQL type);
        ``choices=`` is the SQL form's ``choices :=`` (a closed answer set; ``[]``: none),
        ``examples=`` and ``batch_size=`` its ``examples :=`` and ``batch_size :=``."""
        options = self._options("sem_map", model=model, temperature=temperature,
                                max_tokens=max_tokens,
                                choices=None if choices is None else tuple(choices),
                                examples=examples, batch_size=batch_size)  # fmt: skip
        chain = self._open_chain()
        if any(o[0].lower() == name.lower() for o in chain.outputs()):
            raise BindError(f"sem_map: the relation already has a column {name!r}; pass name=")
        extra = "" if type is None else ", " + exp.Literal.string(type).sql(dialect="duckdb")
        call = chain.call("sem_map", template, extra=extra + options)
        return self._with(chain=dataclasses.replace(chain, maps=(*chain.maps, (name, call))))

    def sem_classify(
        self, template: str, labels: Sequence[str], *, name: str = "sem_classify"
    ) -> SemRelation:
        """A column ``name`` holding, per row, the best of ``labels`` for ``template``
        (at least two distinct non-empty labels), as SQL's ``sem_classify``."""
        chain = self._open_chain()
        if any(o[0].lower() == name.lower() for o in chain.outputs()):
            raise BindError(f"sem_classify: the relation already has a column {name!r}; pass name=")
        checked = check_labels(list(labels) if not isinstance(labels, str) else labels)
        listed = exp.Array(expressions=[exp.Literal.string(label) for label in checked])
        call = chain.call("sem_classify", template, lead=listed.sql(dialect="duckdb"))
        return self._with(chain=dataclasses.replace(chain, maps=(*chain.maps, (name, call))))

    def sem_join(
        self, other: SemRelation | str, template: str, *, model: str | None = None,
        examples: Examples | None = None, batch_size: int | None = None,
    ) -> SemRelation:  # fmt: skip
        """Pairs of this relation's and ``other``'s rows for which ``template`` holds
        (``examples=``, ``batch_size=``: as for :meth:`sem_filter`)."""
        extra = self._options("sem_join", model=model, examples=examples, batch_size=batch_size)
        right = SemRelation.of_table(self._owner, other) if isinstance(other, str) else other
        left_chain, right_chain = self._open_chain(), right._open_chain()
        clash = {s.alias.lower() for s in left_chain.sources} & {
            s.alias.lower() for s in right_chain.sources
        }
        if clash:
            raise BindError(
                f"sem_join: both sides are named {sorted(clash)}; rename one with .set_alias('x')"
            )
        chain = Chain(left_chain.sources + right_chain.sources,
                       left_chain.where + right_chain.where, left_chain.maps + right_chain.maps)  # fmt: skip
        sides = {0: tuple(s.alias for s in left_chain.sources),
                 1: tuple(s.alias for s in right_chain.sources)}  # fmt: skip
        where = (*chain.where, chain.call("sem_join", template, sides, extra=extra))
        return self._with(
            chain=dataclasses.replace(chain, where=where), keep=(self._keep, right._keep)
        )

    def sem_agg(
        self, template: str, *, name: str = "sem_agg", by: tuple[str, ...] | list[str] = (),
        model: str | None = None, temperature: float | None = None, max_tokens: int | None = None,
    ) -> SemRelation:  # fmt: skip
        """One ``sem_agg`` answer per group of ``by`` (one row without)."""
        extra = self._options("sem_agg", model=model, temperature=temperature,
                              max_tokens=max_tokens)  # fmt: skip
        chain = self._open_chain()
        if chain.maps:  # the aggregate reads the map outputs: aggregate the chain as a subquery
            inner = ChainSource(f"({chain.sql()})", "sem_in", tuple(o[0] for o in chain.outputs()))
            chain = Chain((inner,))
        outputs = {o[0].lower(): o for o in chain.outputs()}
        keys = []
        for key in by:
            if key.lower() not in outputs:
                raise UnknownColumnError(
                    f"sem_agg: unknown group column {key!r}; have {', '.join(outputs)}"
                )
            keys.append(outputs[key.lower()])
        items = [f"{o[1]} AS {quote_name(o[0])}" for o in keys] + [
            f"{chain.call('sem_agg', template, extra=extra)} AS {quote_name(name)}"
        ]
        query = f"SELECT {', '.join(items)} {chain.from_where()}"
        if keys:
            query += " GROUP BY " + ", ".join(o[1] for o in keys)
        return SemRelation(None, self._owner, sql=query, keep=self._keep)

    def sem_topk(
        self, template: str, k: int, *, model: str | None = None, method: str | None = None
    ) -> SemRelation:
        """The ``k`` rows that best satisfy ``template``, ranked by the model (``sem_rank``);
        ``method=`` is SQL's ``method :=`` (``'pointwise'``, ``'pairwise'``, ``'listwise'``)."""
        return self._table_function(
            "sem_topk", str(int(k)) if isinstance(k, int) else repr(k), template,
            self._options("sem_topk", model=model, method=method),
        )  # fmt: skip

    def sem_extract(
        self, template: str, struct: str, *, model: str | None = None,
        temperature: float | None = None, max_tokens: int | None = None,
    ) -> SemRelation:  # fmt: skip
        """The relation plus one column per field of ``struct`` (``'STRUCT(name TYPE, ...)'``)."""
        extra = self._options("sem_extract", model=model, temperature=temperature,
                              max_tokens=max_tokens)  # fmt: skip
        return self._table_function(
            "sem_extract", exp.Literal.string(template).sql(), struct, extra
        )

    def _table_function(self, fn: str, middle: str, last: str, extra: str = "") -> SemRelation:
        source = exp.Literal.string(self.sql_query()).sql(dialect="duckdb")
        last_sql = exp.Literal.string(last).sql(dialect="duckdb")
        query = f"SELECT * FROM {fn}({source}, {middle}, {last_sql}{extra})"
        return SemRelation(None, self._owner, sql=query, keep=self._keep)

    # -- DuckDB relation surface ----------------------------------------------------------------
    def sql_query(self) -> str:
        """The SQL this relation runs (semantic calls in explicit positional form)."""
        if self._chain is not None:
            return self._chain.sql()
        if self._sql is not None:
            return self._sql
        if self._planned is not None:
            return self._planned
        name = self._owner.sources.unique_name("rel")
        self._keep = (self._keep, self._owner.sources.hold({name: self.relation}))
        return f"SELECT * FROM {quote_name(name)}"

    def _target(self) -> SemRelation:
        """What runs: this relation, or the one its chain or closed SQL became (not yet run)."""
        if self._rel is not None or self._planned is not None:
            return self
        if self._result is None:
            self._result = self._owner.sql(self.sql_query())
            self._result._keep = (self._keep, self._result._keep)
        return self._result

    @property
    def relation(self) -> duckdb.DuckDBPyRelation:
        """The DuckDB relation (the chain's query runs through ``Session.sql`` first; a
        planned query runs here, once, and its rows are kept)."""
        target = self._target()
        if target is not self:
            return target.relation
        if self._rel is None:
            assert self._planned is not None
            self._rel = self._owner.stream_planned(self._planned).relation()
        return self._rel

    def limit(self, n: int, offset: int = 0) -> SemRelation:
        """The first ``n`` rows (after ``offset``): a planned query stops its LLM work there."""
        if self._rel is not None:
            return self._rewrap(self._rel.limit(n, offset))
        return self._over(with_limit(self.sql_query(), int(n), int(offset)))

    def to_arrow_reader(self, batch_size: int = 1_000_000) -> pa.RecordBatchReader:
        """The rows as an Arrow stream; a planned query runs SEU by SEU as it is read."""
        target = self._target()
        if target._rel is None and target._planned is not None:
            return target._owner.stream_planned(target._planned).reader
        reader: pa.RecordBatchReader = self._owner.translating(target.relation.to_arrow_reader)(
            batch_size
        )
        return duckdb_errors(reader)

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row of this relation's result, DB-API style (DuckDB 2's own relations have
        no ``fetchone``): the first call starts the query as a stream, later calls go on
        reading it, and ``fetchall`` returns what is left. A planned query runs only the
        SEUs the rows asked for need; the UDF path behaves the same."""
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        """The next ``size`` rows (see :meth:`fetchone`)."""
        target = self._target()
        if target._cursor is None:
            if target._rel is None and target._planned is not None:
                target._cursor = target._owner.stream_planned(target._planned)
            else:
                target._cursor = _Cursor(target.to_arrow_reader(2048))
        return self._owner.translating(target._cursor.fetchmany)(size)  # type: ignore[no-any-return]

    def fetchall(self) -> list[tuple[Any, ...]]:
        """Every row (after those ``fetchone``/``fetchmany`` returned, if they started)."""
        target = self._target()
        if target._cursor is not None:
            rows: list[tuple[Any, ...]] = self._owner.translating(target._cursor.fetchmany)(None)
            target._cursor = None
            return rows
        if target._rel is None and target._planned is not None:
            stream = target._owner.stream_planned(target._planned)
            return self._owner.translating(stream.fetchall)()  # type: ignore[no-any-return]
        out: list[tuple[Any, ...]] = self._owner.translating(target.relation.fetchall)()
        return out

    @property
    def columns(self) -> list[str]:
        target = self._target()
        if target._rel is not None:
            return list(target._rel.columns)
        return list(target._arrow_schema().names)

    @property
    def types(self) -> list[Any]:
        target = self._target()
        if target._rel is not None:
            return list(target._rel.types)
        return list(target.limit(0).relation.types)

    @property
    def description(self) -> list[tuple[Any, ...]]:
        target = self._target()
        if target._rel is not None:
            return list(target._rel.description)
        return list(target.limit(0).relation.description)

    def _arrow_schema(self) -> pa.Schema:
        """The result's schema; a planned query is run with LIMIT 0 (no LLM call)."""
        stream = self._owner.stream_planned(with_limit(self.sql_query(), 0, 0))
        schema: pa.Schema = stream.schema
        stream.close()
        return schema

    def project(self, *expressions: Any, groups: str = "") -> SemRelation:
        """DuckDB's ``project``; expressions with a semantic call (``"id, sem_map('{text}
        gist') AS g"``) make a query over this relation, planned as a whole."""
        if not _semantic(*expressions, groups):
            return self._rewrap(self.relation.project(*expressions, groups=groups))
        sql = f"SELECT {', '.join(expressions)} FROM ({self.sql_query()}) AS rel"
        return self._over(sql + (f" GROUP BY {groups}" if groups else ""))

    select = project

    def aggregate(self, aggr_expr: Any, group_expr: str = "") -> SemRelation:
        """DuckDB's ``aggregate``; with a semantic call (``"g, sem_agg('Summarize {text}')"``
        grouped by ``"g"``) a query over this relation, planned as a whole."""
        if not _semantic(aggr_expr, group_expr):
            return self._rewrap(self.relation.aggregate(aggr_expr, group_expr))
        sql = f"SELECT {aggr_expr} FROM ({self.sql_query()}) AS rel"
        return self._over(sql + (f" GROUP BY {group_expr}" if group_expr else ""))

    def order(self, order_expr: str) -> SemRelation:
        """DuckDB's ``order``; a key with a semantic call orders a query over this relation."""
        if not _semantic(order_expr):
            return self._rewrap(self.relation.order(order_expr))
        return self._over(f"SELECT * FROM ({self.sql_query()}) AS rel ORDER BY {order_expr}")

    def sort(self, *args: Any) -> SemRelation:
        """DuckDB's ``sort``: one or more keys (a key with a semantic call as in :meth:`order`)."""
        if len(args) == 1 or _semantic(*args):
            return self.order(", ".join(str(a) for a in args) if len(args) > 1 else args[0])
        return self._rewrap(self.relation.sort(*args))

    def _over(self, sql: str) -> SemRelation:
        """The relation of ``sql`` (over this one), holding what this one holds."""
        result: SemRelation = self._owner.sql(sql)
        result._keep = (self._keep, result._keep)
        return result

    def filter(self, condition: str) -> SemRelation:
        """A predicate, relational or semantic (``"sem_filter('{text} ...')"``): inside an open
        chain it is planned with the chain; a query not yet run, or a condition with a
        semantic call, opens a chain over this relation."""
        if not isinstance(condition, str):
            return self._rewrap(self.relation.filter(condition))
        target = self._target()
        lazy = target._rel is None and target._planned is not None
        if self._chain is None and not lazy and "sem_" not in condition.lower():
            return self._rewrap(self.relation.filter(condition))
        chain = self._open_chain()
        where = (*chain.where, f"({condition})")
        return self._with(chain=dataclasses.replace(chain, where=where))

    def set_alias(self, alias: str) -> SemRelation:
        chain = self._open_chain()
        if len(chain.sources) != 1 or chain.where or chain.maps:
            return self._rewrap(self.relation.set_alias(alias))
        renamed = Chain((dataclasses.replace(chain.sources[0], alias=alias),))
        if self._rel is None:
            return self._with(chain=renamed)
        rel = SemRelation(self._rel.set_alias(alias), self._owner, chain=renamed)
        rel._keep = self._keep
        return rel

    @property
    def alias(self) -> str:
        """The relation's name (``{alias.col}`` in templates of a chain of one source)."""
        chain = self._chain
        if chain is not None and len(chain.sources) == 1 and not (chain.where or chain.maps):
            return chain.sources[0].alias
        return str(self.relation.alias)

    # -- handed to DuckDB and Python as DuckDB's relations are ---------------------------------
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> Any:
        """The rows through the Arrow PyCapsule interface (``pa.table(rel)``, polars, ...)."""
        return self.to_arrow_reader().__arrow_c_stream__(requested_schema)

    def __len__(self) -> int:
        return len(self.relation)

    def __contains__(self, name: str) -> bool:
        return name in self.relation

    def __getitem__(self, name: str) -> SemRelation:
        return self._rewrap(self.relation[name])

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, duckdb.DuckDBPyRelation):
            return self._rewrap(value)
        return value

    def _rewrap(self, relation: duckdb.DuckDBPyRelation) -> SemRelation:
        return SemRelation(relation, self._owner, keep=self._keep)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self.relation, name)
        if name in _TRANSLATED:
            return self._owner.translating(attr)
        if callable(attr):
            return lambda *args, **kwargs: self._wrap(
                attr(*map(_duckdb_side, args), **{k: _duckdb_side(v) for k, v in kwargs.items()})
            )
        return attr

    def __repr__(self) -> str:
        target = self._target()
        if target._rel is None:  # show a preview, as DuckDB does, without running it all
            return repr(target.limit(10).relation)
        return repr(target.relation)


class _Cursor:
    """Rows of an Arrow stream handed out a few at a time (``fetchone``/``fetchmany``)."""

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self._reader = reader
        self._rows: list[tuple[Any, ...]] = []

    def fetchmany(self, n: int | None) -> list[tuple[Any, ...]]:
        while n is None or len(self._rows) < n:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                break
            columns = [c.to_pylist() for c in batch.columns]
            if columns:
                self._rows.extend(zip(*columns, strict=True))
        if n is None:
            out, self._rows = self._rows, []
        else:
            out, self._rows = self._rows[:n], self._rows[n:]
        return out


def _duckdb_side(value: Any) -> Any:
    """An argument of a DuckDB relation method: a ``SemRelation`` (``join``, ``union``, ...)
    as its DuckDB relation."""
    return value.relation if isinstance(value, SemRelation) else value


def _semantic(*parts: Any) -> bool:
    """Whether any of the relation-method arguments ``parts`` holds a semantic call."""
    return any(isinstance(p, str) and "sem_" in p.lower() for p in parts)


def with_limit(sql: str, n: int, offset: int) -> str:
    """``sql`` with at most ``n`` rows after ``offset`` more: the LIMIT is merged into its own
    SELECT when that keeps the meaning (so the optimizer sees it), else the query is wrapped."""
    if n < 0 or offset < 0:
        raise BindError("limit and offset must not be negative")
    try:
        tree = sqlglot.parse_one(sql, dialect="duckdb")
    except sqlglot.errors.ParseError:
        tree = None
    if isinstance(tree, exp.Select) and tree.args.get("offset") is None:
        current = tree.args.get("limit")
        value = current.expression if isinstance(current, exp.Limit) else None
        if current is None or (isinstance(value, exp.Literal) and not value.is_string):
            old = int(value.this) if value is not None else None
            if old is not None and offset:
                n = max(0, min(n, old - offset))
            elif old is not None:
                n = min(n, old)
            merged = tree.limit(n, copy=True)
            if offset:
                merged = merged.offset(offset, copy=False)
            return merged.sql(dialect="duckdb", normalize_functions=False)
    tail = f" OFFSET {offset}" if offset else ""
    return f"SELECT * FROM ({sql}) AS __sem_limited LIMIT {n}{tail}"


def _example(given: object) -> object:
    """One ``examples=`` item as the dict SQL's struct decodes to (pairs are accepted too)."""
    if isinstance(given, tuple | list) and len(given) == 2:
        return {"input": given[0], "output": given[1]}
    return given
