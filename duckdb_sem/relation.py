"""``SemRelation``: DuckDB relations with semantic methods that chain into one query.

``con.table('reviews').sem_filter('{text} is positive').sem_map('{text} in five words',
name='gist')`` builds *one* SELECT (sources, ``sem_filter``/``sem_join`` conjuncts, ``sem_map``
items) that goes through ``SemConnection.sql`` when it is fetched: it is bound and planned as a
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
from typing import TYPE_CHECKING, Any

import duckdb
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError, UnknownColumnError
from duckdb_sem.relation_chain import Chain, ChainSource, quote_name

if TYPE_CHECKING:
    from duckdb_sem.connection import SemConnection

__all__ = ["SemRelation"]

_TRANSLATED = {"fetchall", "fetchone", "fetchmany", "arrow", "df", "fetchdf", "pl", "fetchnumpy",
               "fetch_arrow_table", "to_arrow_table", "to_arrow_reader", "show", "execute",
               "write_csv", "write_parquet", "to_df", "create", "insert"}  # fmt: skip


class SemRelation:
    """A relation of a ``SemConnection``; see the module docstring."""

    def __init__(
        self,
        relation: duckdb.DuckDBPyRelation | None,
        owner: SemConnection,
        *,
        chain: Chain | None = None,
        sql: str | None = None,
        keep: tuple[object, ...] | object = (),
    ) -> None:
        self._rel = relation
        self._owner = owner
        self._chain = chain
        self._sql = sql  # a closed query (sem_agg, table functions) not yet run
        self._keep = keep  # registrations this relation reads; dropped with it

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def of_table(cls, owner: SemConnection, name: str) -> SemRelation:
        """``con.table(name)``: a table, view, or DataFrame/Arrow object in the caller's scope."""
        sources = owner._sources
        keep = sources.hold(sources.caller_objects(f"SELECT * FROM {name}"))
        try:
            table = exp.to_table(name, dialect="duckdb")
            ref = table.sql(dialect="duckdb")
            columns = owner.duckdb.execute(f"SELECT * FROM {ref} LIMIT 0").description or []
        except (duckdb.Error, sqlglot.errors.SqlglotError) as err:  # bad name, missing table
            raise BindError(f"unknown table {name!r}: {err}") from None
        source = ChainSource(ref, table.name, tuple(d[0] for d in columns))
        return cls(None, owner, chain=Chain((source,)), keep=keep)

    @classmethod
    def of_object(cls, owner: SemConnection, obj: object, alias: str = "df") -> SemRelation:
        """A relation over a DataFrame or Arrow object (``con.from_df``, ``con.from_arrow``)."""
        name = owner._sources.unique_name("obj")
        keep = owner._sources.hold({name: obj})
        return cls.of_table(owner, name)._with(keep=keep).set_alias(alias)

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
        name = self._owner._sources.unique_name("rel")
        self._keep = (self._keep, self._owner._sources.hold({name: self.relation}))
        columns = tuple(self.relation.columns)
        return Chain((ChainSource(quote_name(name), "rel", columns),))

    # -- semantic operators --------------------------------------------------------------------
    def sem_filter(self, template: str) -> SemRelation:
        chain = self._open_chain()
        where = (*chain.where, chain.call("sem_filter", template))
        return self._with(chain=dataclasses.replace(chain, where=where))

    def sem_map(
        self, template: str, *, name: str = "sem_map", type: str | None = None
    ) -> SemRelation:
        chain = self._open_chain()
        if any(o[0].lower() == name.lower() for o in chain.outputs()):
            raise BindError(f"sem_map: the relation already has a column {name!r}; pass name=")
        extra = "" if type is None else ", " + exp.Literal.string(type).sql(dialect="duckdb")
        call = chain.call("sem_map", template, extra=extra)
        return self._with(chain=dataclasses.replace(chain, maps=(*chain.maps, (name, call))))

    def sem_join(self, other: SemRelation | str, template: str) -> SemRelation:
        """Pairs of this relation's and ``other``'s rows for which ``template`` holds."""
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
        where = (*chain.where, chain.call("sem_join", template, sides))
        return self._with(
            chain=dataclasses.replace(chain, where=where), keep=(self._keep, right._keep)
        )

    def sem_agg(
        self, template: str, *, name: str = "sem_agg", by: tuple[str, ...] | list[str] = ()
    ) -> SemRelation:
        """One ``sem_agg`` answer per group of ``by`` (one row without)."""
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
            f"{chain.call('sem_agg', template)} AS {quote_name(name)}"
        ]
        query = f"SELECT {', '.join(items)} {chain.from_where()}"
        if keys:
            query += " GROUP BY " + ", ".join(o[1] for o in keys)
        return SemRelation(None, self._owner, sql=query, keep=self._keep)

    def sem_topk(self, template: str, k: int) -> SemRelation:
        """The ``k`` rows that best satisfy ``template``, ranked by the model (``sem_rank``)."""
        return self._table_function(
            "sem_topk", str(int(k)) if isinstance(k, int) else repr(k), template
        )

    def sem_extract(self, template: str, struct: str) -> SemRelation:
        """The relation plus one column per field of ``struct`` (``'STRUCT(name TYPE, ...)'``)."""
        return self._table_function("sem_extract", exp.Literal.string(template).sql(), struct)

    def _table_function(self, fn: str, middle: str, last: str) -> SemRelation:
        source = exp.Literal.string(self.sql_query()).sql(dialect="duckdb")
        last_sql = exp.Literal.string(last).sql(dialect="duckdb")
        query = f"SELECT * FROM {fn}({source}, {middle}, {last_sql})"
        return SemRelation(None, self._owner, sql=query, keep=self._keep)

    # -- DuckDB relation surface ----------------------------------------------------------------
    def sql_query(self) -> str:
        """The SQL this relation runs (semantic calls in explicit positional form)."""
        if self._chain is not None:
            return self._chain.sql()
        if self._sql is not None:
            return self._sql
        name = self._owner._sources.unique_name("rel")
        self._keep = (self._keep, self._owner._sources.hold({name: self.relation}))
        return f"SELECT * FROM {quote_name(name)}"

    @property
    def relation(self) -> duckdb.DuckDBPyRelation:
        """The DuckDB relation (the chain's query runs through ``SemConnection.sql`` first)."""
        if self._rel is None:
            result = self._owner.sql(self.sql_query())
            self._rel, self._keep = result._rel, (self._keep, result._keep)
        assert self._rel is not None
        return self._rel

    def filter(self, condition: str) -> SemRelation:
        """A relational predicate; inside an open chain it is planned with the chain."""
        if self._chain is None or not isinstance(condition, str):
            return self._rewrap(self.relation.filter(condition))
        where = (*self._chain.where, f"({condition})")
        return self._with(chain=dataclasses.replace(self._chain, where=where))

    def set_alias(self, alias: str) -> SemRelation:
        chain = self._open_chain()
        if len(chain.sources) != 1 or chain.where or chain.maps:
            return self._rewrap(self.relation.set_alias(alias))
        return self._with(chain=Chain((dataclasses.replace(chain.sources[0], alias=alias),)))

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, duckdb.DuckDBPyRelation):
            return self._rewrap(value)
        return value

    def _rewrap(self, relation: duckdb.DuckDBPyRelation) -> SemRelation:
        return SemRelation(relation, self._owner, keep=self._keep)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self.relation, name)
        if name in _TRANSLATED:
            return self._owner._translating(attr)
        if callable(attr):
            return lambda *args, **kwargs: self._wrap(attr(*args, **kwargs))
        return attr

    def __repr__(self) -> str:
        return repr(self.relation)
