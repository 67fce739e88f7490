"""Register the ``sem_*`` functions in a DuckDB connection.

Each semantic function is a vectorized (Arrow) Python UDF taking the template and the row's
values as a ``VARCHAR[]``; an SQL macro whose column parameters ``a0`` ... ``a7`` default to
NULL gives users the explicit form ``sem_filter('... {0} ... {1}', col_a, col_b)`` (it passes
how many were given, read from ``typeof`` at bind time, so a column that is NULL still counts). ``sem_agg`` is a macro over DuckDB's ``list()``
aggregate feeding a scalar UDF, since DuckDB's Python client has no aggregate UDFs. Every
macro also takes the named arguments ``model :=``, ``temperature :=``, ``max_tokens :=``,
``choices :=``, ``per_row :=``, ``per_row_match :=``, ``examples :=`` and ``batch_size :=``
(:mod:`duckdb_sem.llm.call_options`), passed to the UDF as more arguments (NULL when not given;
the choices and examples lists as JSON text), so
``sem_map('{0} in 3 words', title, model := 'fast')`` works in a plain
connection too. (One macro rather than an overload per arity: DuckDB lets a defaulted
parameter be given by position, so overloads with the named arguments would be ambiguous.)

==========================================  =======================================
function                                    returns
==========================================  =======================================
``sem_filter(template, cols...)``           BOOLEAN
``sem_join(template, cols...)``             BOOLEAN
``sem_map(template, cols...)``              VARCHAR
``sem_map_<type>(template, cols...)``       that type (integer, double, boolean, list)
``sem_classify(template, labels, cols...)``  VARCHAR: the best of ``labels`` (a list of
                                            strings, at least two distinct), scored
``sem_agg(template, cols...)``              VARCHAR (aggregate)
``sem_embed(text)``                         FLOAT[n]: the embedding model's unit vector
``ai_similarity(a, b)``                     DOUBLE: the cosine of two ``sem_embed``
==========================================  =======================================

The peers' calls with their own arguments (``AI_FILTER(PROMPT(...))``, ``AI.IF``, Flock's
objects) are macros too, from :mod:`.peer_macros`; the macro SQL every function shares is in
:mod:`.udf_sql`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import duckdb.func
import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.errors import ConfigError, SemError
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.prompts import check_labels
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.finish import QuietFinisher, finish_query
from duckdb_sem.runtime.money import pricing
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.surface.aliases import ALIASES
from duckdb_sem.surface.bind import typed_map_function
from duckdb_sem.surface.peer_macros import OVERLOADED, PeerUdfs, catalog_macros, peer_macros
from duckdb_sem.surface.peer_prompts import PROMPT_TYPE, flock_udf, parts_udf
from duckdb_sem.surface.peers import rewrite_peers
from duckdb_sem.surface.udf_sql import (
    MAX_COLUMNS,
    OPTION_ARGS,
    OPTION_PARAMS,
    OPTION_TYPES,
    explicit_macro,
    typed_udf,
)
from duckdb_sem.surface.udf_values import call_options, combined, row_columns

__all__ = ["MAX_COLUMNS", "PEER_MACROS", "PLAIN_TYPED_MAPS", "SemSession"]

#: typed sem_map functions available without SQL rewriting (in a plain connection)
PLAIN_TYPED_MAPS = {
    "integer": "INTEGER",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "list": "VARCHAR[]",
}
#: peer functions whose arguments fit a plain macro, so ``install(con)`` has them too (each
#: body is what :func:`rewrite_peers` makes of the call)
PEER_MACROS = (("ai_sentiment", "t"), ("ai_summarize_agg", "t"), ("ai_embed", "m, t"))


_session_ids = itertools.count(1)
log = logging.getLogger(__name__)


class SemSession:
    """The duckdb-sem state attached to one DuckDB connection: engine, current query, errors."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        engine: SemEngine,
        *,
        budget: Any = None,
        owned: bool = False,
    ) -> None:
        self.con = con
        #: a ``SemConnection`` keeps this session (``connect()``, a cursor): its UDFs, which
        #: DuckDB keeps, reach it weakly, so a connection dropped without ``close()`` is
        #: collected; ``install(con)`` leaves the session to its UDFs, which then hold it
        self.owned = owned
        self.engine = engine
        #: limits of each query's backend work (``runtime.budget.Budget``) when a new query
        #: names none: how ``install(con, max_llm_calls=...)`` bounds the UDF path
        self.budget = budget
        self.query = QueryContext(budget=budget, pricing=pricing(engine.models))
        #: a session whose queries are another session's current one (a cursor that reads a
        #: table function's input while the statement runs: same stats, budget, cancellation)
        self.follows: SemSession | None = None
        self.last_error: SemError | None = None
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._suffix = ""
        self._temp = ""
        self._shared = False
        #: every macro created, name -> DDL (a shared session replays them on each cursor)
        self.macros: dict[str, str] = {}
        self._define_lock = threading.RLock()
        #: marks a UDF-road query done for ``duckdb-sem top`` (nothing else says it ended)
        self.finisher = QuietFinisher(lambda qid: finish_query(engine.models.clients(), qid))

    def new_query(self, **kwargs: object) -> QueryContext:
        if self.follows is not None:
            self.query = self.follows.query
            self.last_error = None
            return self.query
        self.finisher.finish_now()
        if kwargs.get("budget") is None:
            kwargs["budget"] = self.budget
        kwargs.setdefault("pricing", pricing(self.engine.models))  # what max_cost counts
        self.query = QueryContext(**kwargs)  # type: ignore[arg-type]
        self.last_error = None
        return self.query

    def install(self, *, shared: bool = False, peer_calls: bool = False) -> None:
        """Register the UDFs and the ``sem_*`` macros in ``self.con``.

        DuckDB keeps Python UDFs database-wide, so each session's UDFs get their own names
        (``__semudf_filter_s7``) and the ``sem_*`` macros that users call are TEMP macros of this
        connection pointing at them: several connections to one database file (read-only ones
        too) each route to their own session. ``shared=True`` installs plain UDF names for one
        session serving many cursors (the wire server): the macros are TEMP too, recorded in
        :attr:`macros`, and :meth:`install_macros` creates them in each cursor, so no cursor can
        redefine another's. Macro bodies name the UDFs as ``system.main.<udf>``, where DuckDB
        keeps Python UDFs, so a look-alike macro in a user catalog cannot shadow them.
        ``peer_calls``: the peers' calls with their own arguments too (install(con)).
        """
        self._shared = shared
        self._suffix = "" if shared else f"_s{next(_session_ids)}"
        self._temp = "TEMP "
        for op, kind, return_type in (
            ("filter", OperatorKind.FILTER, "BOOLEAN"),
            ("join", OperatorKind.JOIN, "BOOLEAN"),
            ("map", OperatorKind.MAP, "VARCHAR"),
            ("agg", OperatorKind.AGG, "VARCHAR"),
        ):
            aggregate = kind is OperatorKind.AGG
            udf = self._udf(f"__semudf_{op}", kind, return_type, None, list_of_lists=aggregate)
            wrap = "list([{}])" if aggregate else "[{}]"
            self._macro(f"sem_{op}", udf, wrap)
            for alias in (a for a, n in ALIASES.items() if n == f"sem_{op}"):
                if not (peer_calls and alias in OVERLOADED):  # else a peer macro's overload
                    self._macro(alias, udf, wrap)  # ai_filter, llm_complete: the same function
        classify = self._classify_udf()
        if classify is not None:
            self._macro("sem_classify", classify, "[{}]", labels=True)
        for short, sql_type in PLAIN_TYPED_MAPS.items():
            spec = parse_type(sql_type)
            self.ensure_typed_map(spec)
            udf = f"system.main.{typed_udf(spec)}{self._suffix}"
            self._macro(f"sem_map_{short}", udf, "[{}]")
        self._embedding_functions()
        for name, params in PEER_MACROS:
            self._define(name, f"CREATE OR REPLACE {self._temp}MACRO {name}({params}) "
                               f"AS {rewrite_peers(f'{name}({params})')}")  # fmt: skip
        if peer_calls:
            self._peer_functions()

    def _peer_functions(self) -> None:
        """The peers' calls with their own arguments (:mod:`.peer_macros`), and BigQuery's
        ``ai.if`` ... in an attached in-memory catalog ``ai``: install(con) only, since
        connect() rewrites them before DuckDB reads the statement (and these ~50 macros cost
        DuckDB a few hundred ms to bind)."""
        self._register("__semudf_peer_parts", lambda: parts_udf,
                       ["VARCHAR", "VARCHAR", "VARCHAR[]"], PROMPT_TYPE)  # fmt: skip
        self._register("__semudf_flock_prompt", lambda: flock_udf, ["VARCHAR", "VARCHAR"],
                       PROMPT_TYPE)  # fmt: skip
        typed = {t: f"system.main.{typed_udf(parse_type(t))}{self._suffix}" for t in
                 ("DOUBLE", "BOOLEAN")}  # fmt: skip
        base = {op: f"system.main.__semudf_{op}{self._suffix}" for op in
                ("filter", "map", "agg", "classify", "peer_parts", "flock_prompt")}  # fmt: skip
        udfs = PeerUdfs(
            filter=base["filter"], map=base["map"], agg=base["agg"], classify=base["classify"],
            map_double=typed["DOUBLE"], map_boolean=typed["BOOLEAN"], parts=base["peer_parts"], flock=base["flock_prompt"],
            embed=self.engine.embeddings is not None, models=tuple(self.engine.models.names()),
        )  # fmt: skip
        for name, body in peer_macros(udfs):
            self._define(name, f"CREATE OR REPLACE {self._temp}MACRO {name}{body}")
        try:
            # con.sql: DDL that leaves no DB-API result (a fresh connection holds none)
            self.con.sql("ATTACH IF NOT EXISTS ':memory:' AS ai")
            found = self.con.sql(
                "SELECT coalesce(path, '') FROM duckdb_databases() WHERE database_name = 'ai'"
            ).fetchall()
            path = str(found[0][0]) if found else ""
            if path not in ("", ":memory:"):  # the user's own database named ai: not ours
                log.info("BigQuery's AI.IF ... are not installed: a database named ai is "
                         "attached (%s); ai_if(...) works", path)  # fmt: skip
                return
            for name, body in catalog_macros("ai"):
                self.con.sql(f"CREATE OR REPLACE MACRO {name}{body}")
        except duckdb.Error as err:  # a read-only database, a catalog of the user's named ai
            log.info("BigQuery's AI.IF ... are not installed (%s); ai_if(...) works", err)

    def uninstall(self) -> None:
        """Drop this session's UDFs from the database (other connections may stay open).

        A shared session serves many cursors and outlives each of them: it stays installed.
        """
        if self._shared:
            return
        for name in sorted(self._registered):
            with contextlib.suppress(duckdb.Error):
                self.con.remove_function(name + self._suffix)
        self._registered.clear()

    def release(self) -> None:
        """Give back this session's share of each model's scheduler (the last share closes
        it); a shared session outlives the cursors that close and keeps it."""
        if not self._shared:
            self.finisher.close()
            self.engine.close()
            if self.engine.embeddings is not None:
                self.engine.embeddings.close()

    def ensure_typed_map(self, spec: TypeSpec) -> None:
        """Register the function that returns ``spec`` (idempotent): a UDF behind a macro."""
        name = typed_map_function(spec)
        with self._define_lock:
            udf = self._udf(typed_udf(spec), OperatorKind.MAP, spec.column_sql, spec.sql)
            if udf is not None:
                self._define(
                    name,
                    f"CREATE OR REPLACE {self._temp}MACRO {name}(t, v, {OPTION_PARAMS}) "
                    f"AS {udf}(t, v, NULL, {OPTION_ARGS})",
                )
            else:
                self._ensure_defined(name)

    def install_macros(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create every recorded macro in ``con`` (a cursor served by a shared session)."""
        with self._define_lock:
            for sql in self.macros.values():
                con.sql(sql)

    def _define(self, name: str, sql: str) -> None:
        self.macros[name] = sql
        self._macro_connection().sql(sql)  # no DB-API result: a pending one stays the user's

    def _macro_connection(self) -> duckdb.DuckDBPyConnection:
        """Where a new macro is created (a shared session: the calling thread's cursor)."""
        return self.con

    def _ensure_defined(self, name: str) -> None:
        """Hook: a shared session creates macro ``name`` in the calling cursor if it lacks it."""

    def _macro(self, name: str, target: str | None, wrap: str, *, labels: bool = False) -> None:
        if target is None:
            return
        params, body = explicit_macro(target, wrap, labels=labels)
        self._define(name, f"CREATE OR REPLACE {self._temp}MACRO {name}({params}) AS {body}")

    def _udf(
        self,
        name: str,
        kind: OperatorKind,
        return_type: str,
        output_type: str | None,
        *,
        list_of_lists: bool = False,
    ) -> str | None:
        """Register UDF ``name`` for this session; its full name, or None if already there."""
        label = name.replace("__semudf_", "sem_")
        arg_type = "VARCHAR[][]" if list_of_lists else "VARCHAR[]"
        return self._register(name, lambda: self._make_udf(kind, output_type, label),
                              ["VARCHAR", arg_type, "INTEGER", *OPTION_TYPES],
                              return_type)  # fmt: skip

    def _register(
        self,
        name: str,
        make: Callable[[], Callable[..., pa.Array]],
        arg_types: Sequence[str],
        return_type: str,
    ) -> str | None:
        """Register the vectorized UDF ``make()`` builds as ``name`` of this session (once);
        its full name (``system.main.<name><suffix>``), or None if it was there already."""
        with self._lock:
            if name in self._registered:
                return None
            self._registered.add(name)
        full = name + self._suffix
        params: list[Any] = list(arg_types)  # DuckDB's stubs want its own union per element
        self.con.create_function(
            full,
            make(),
            params,
            return_type,
            type=duckdb.func.ARROW,
            null_handling=duckdb.func.SPECIAL,
            exception_handling=duckdb.PythonExceptionHandling.DEFAULT,
            side_effects=True,
        )
        return f"system.main.{full}"

    def _remembered(self, answer: Callable[[], pa.Array]) -> pa.Array:
        """``answer()``, keeping the ``SemError`` it raises as :attr:`last_error` (DuckDB
        re-raises its own exception type, and the connection maps it back)."""
        try:
            with self.finisher.running(self.query.query_id):
                return answer()
        except SemError as err:
            self.last_error = err
            raise

    def _embedding_functions(self) -> None:
        """``sem_embed(text)``: the embedding model's unit vector, ``FLOAT[n]`` when ``n`` is
        known without loading the model (so ``array_cosine_similarity`` and vss take it), else
        ``FLOAT[]``; NULL for NULL. ``ai_similarity(a, b)`` is the cosine of two of them."""
        embeddings = self.engine.embeddings
        if embeddings is None:
            return
        dims = embeddings.declared_dimensions()
        vector = f"FLOAT[{dims}]" if dims else "FLOAT[]"
        udf = self._register("__semudf_embed", lambda: self._embed_udf(dims), ["VARCHAR"], vector)
        if udf is None:
            return
        cosine = "array_cosine_similarity" if dims else "list_cosine_similarity"
        self._define("sem_embed", f"CREATE OR REPLACE {self._temp}MACRO sem_embed(t) AS {udf}(t)")
        self._define("ai_similarity", f"CREATE OR REPLACE {self._temp}MACRO ai_similarity(a, b) "
                                      f"AS {cosine}(sem_embed(a), sem_embed(b))")  # fmt: skip

    def _live(self) -> Callable[[], SemSession]:
        """How a UDF reaches this session: strongly, or weakly when it is :attr:`owned` (DuckDB
        holds UDFs beyond Python's collector, so a strong reference there would keep the
        session, and its connection, alive for good)."""
        if not self.owned:
            return lambda: self
        ref = weakref.ref(self)

        def live() -> SemSession:
            session = ref()
            if session is None:
                raise SemError(
                    "this duckdb-sem connection is gone (closed, or dropped without close()); "
                    "run the query on an open connection"
                )
            return session

        return live

    def _embed_udf(self, dims: int | None) -> Callable[..., pa.Array]:
        live = self._live()

        def udf(texts: pa.Array) -> pa.Array:
            session = live()
            return session._remembered(lambda: session._embed(combined(texts), dims))

        return udf

    def _embed(self, texts: pa.Array, dims: int | None) -> pa.Array:
        embeddings = self.engine.embeddings
        assert embeddings is not None  # registered only with an embedding model
        values = texts.cast(pa.string()).to_pylist()
        vectors = embeddings.embed(values, query=self.query)
        width = vectors.shape[1] if vectors.ndim == 2 else 0
        if dims is not None and width != dims:
            raise ConfigError(
                f"sem_embed: the embedding model {embeddings.spec!r} gives {width} numbers, not "
                f"the {dims} declared; set DUCKDB_SEM_EMBED_BACKEND to the model it was built for"
            )
        flat = pa.array(vectors.reshape(-1), type=pa.float32())
        mask = pa.array([v is None for v in values], type=pa.bool_())
        if dims is not None:
            return pa.FixedSizeListArray.from_arrays(flat, dims, mask=mask)
        offsets = pa.array([i * width for i in range(len(values) + 1)], type=pa.int32())
        return pa.ListArray.from_arrays(offsets, flat, mask=mask)

    def _classify_udf(self) -> str | None:
        """Register ``sem_classify``'s UDF (template, labels, values) -> VARCHAR; its full name,
        or None if already there."""
        live = self._live()

        def udf(
            templates: pa.Array,
            labels: pa.Array,
            values: pa.Array,
            given: pa.Array,
            model: pa.Array,
            temperature: pa.Array,
            max_tokens: pa.Array,
            choices: pa.Array,
            per_row: pa.Array,
            per_row_match: pa.Array,
            examples: pa.Array,
            batch_size: pa.Array,
        ) -> pa.Array:
            options = (given, model, temperature, max_tokens, choices, per_row, per_row_match,
                       examples, batch_size)  # fmt: skip
            session = live()
            return session._remembered(
                lambda: session._classify(templates, labels, values, options)
            )

        return self._register("__semudf_classify", lambda: udf,
                              ["VARCHAR", "VARCHAR[]", "VARCHAR[]", "INTEGER", *OPTION_TYPES],
                              "VARCHAR")  # fmt: skip

    def _classify(
        self,
        templates: pa.Array,
        labels: pa.Array,
        values: pa.Array,
        options: tuple[pa.Array, ...],
    ) -> pa.Array:
        """One run per distinct (template, labels, options) in the batch (almost always one)."""
        texts = combined(templates).to_pylist()
        label_lists = combined(labels).to_pylist()
        option_rows = list(zip(*(combined(a).to_pylist() for a in options), strict=True))
        values = combined(values)
        groups: dict[tuple[object, ...], list[int]] = {}
        for i, (template, row_labels) in enumerate(zip(texts, label_lists, strict=True)):
            if template is None:
                continue
            checked = check_labels(row_labels)
            groups.setdefault((template, checked, *option_rows[i]), []).append(i)
        out: list[object] = [None] * len(texts)
        for key, idx in groups.items():
            text, chosen = str(key[0]), key[1]
            assert isinstance(chosen, tuple)
            part = values if len(idx) == len(texts) else values.take(pa.array(idx))
            given = call_options("sem_classify", (text, *key[2:]))
            answers = self._run_one(OperatorKind.MAP, "VARCHAR", "sem_classify", text, part,
                                    given, labels=chosen)  # fmt: skip
            for i, value in zip(idx, answers.to_pylist(), strict=True):
                out[i] = value
        return pa.array(out, type=pa.string())

    def _make_udf(
        self, kind: OperatorKind, output_type: str | None, name: str
    ) -> Callable[..., pa.Array]:
        live = self._live()

        def udf(
            templates: pa.Array,
            values: pa.Array,
            given: pa.Array,
            model: pa.Array,
            temperature: pa.Array,
            max_tokens: pa.Array,
            choices: pa.Array,
            per_row: pa.Array,
            per_row_match: pa.Array,
            examples: pa.Array,
            batch_size: pa.Array,
        ) -> pa.Array:
            options = (given, model, temperature, max_tokens, choices, per_row, per_row_match,
                       examples, batch_size)  # fmt: skip
            session = live()
            return session._remembered(
                lambda: session._evaluate(kind, output_type, name, templates, values, options)
            )

        return udf

    def _evaluate(
        self,
        kind: OperatorKind,
        output_type: str | None,
        name: str,
        templates: pa.Array,
        values: pa.Array,
        options: tuple[pa.Array, ...] = (),
    ) -> pa.Array:
        if isinstance(templates, pa.ChunkedArray):
            templates = templates.combine_chunks()
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        # (template, columns given, model, temperature, max_tokens, choices): constants in a query
        arrays = [combined(a) for a in (templates, *options)]
        uniques = [pc.unique(a) for a in arrays]
        if all(len(u) == 1 for u in uniques) and uniques[0][0].is_valid:
            key = tuple(u[0].as_py() for u in uniques)
            return self._run_one(kind, output_type, name, key[0], values, call_options(name, key))
        texts = arrays[0].to_pylist()
        keys = list(zip(*(a.to_pylist() for a in arrays), strict=True))
        distinct = list(dict.fromkeys(keys))
        if len(distinct) == 1 and distinct[0][0] is not None:
            key = distinct[0]
            return self._run_one(kind, output_type, name, key[0], values, call_options(name, key))
        # Several templates or options in one batch (rare): run each group, then scatter back.
        out: list[object] = [None] * len(texts)
        for key in distinct:
            if key[0] is None:
                continue
            idx = [i for i, k in enumerate(keys) if k == key]
            part = self._run_one(kind, output_type, name, key[0], values.take(pa.array(idx)),
                                 call_options(name, key))  # fmt: skip
            for i, value in zip(idx, part.to_pylist(), strict=True):
                out[i] = value
        arrow_type = (
            pa.bool_()
            if kind in (OperatorKind.FILTER, OperatorKind.JOIN)
            else parse_type(output_type or "VARCHAR").arrow
        )
        return pa.array(out, type=arrow_type)

    def _run_one(
        self,
        kind: OperatorKind,
        output_type: str | None,
        name: str,
        template: str,
        values: pa.Array,
        given: tuple[int | None, CallOptions],
        *,
        labels: tuple[str, ...] = (),
    ) -> pa.Array:
        count, options = given
        columns: list[pa.Array]
        if kind is not OperatorKind.AGG:
            columns = row_columns(values, count)
        elif values.null_count == len(values):
            # no input rows at all (list() of nothing is NULL): NULL, as any aggregate's
            return pa.nulls(len(values), type=parse_type(output_type or "VARCHAR").arrow)
        else:
            rows = values.to_pylist()
            # Each group is a list of records, each record the list of its column values.
            width = max((len(rec) for g in rows if g for rec in g if rec is not None), default=0)
            width = width if count is None else count  # the macro's padding is not a column
            columns = [
                pa.array(
                    [None if g is None else [rec[i] for rec in g if rec is not None] for g in rows],
                    type=pa.list_(pa.string()),
                )
                for i in range(width)
            ]
        return self.engine.run_operator(
            kind,
            template,
            columns,
            output_type=output_type,
            query=self.query,
            label=name,
            options=options,
            labels=labels,
        )
