"""Register the ``sem_*`` functions in a DuckDB connection.

Each semantic function is a vectorized (Arrow) Python UDF taking the template and the row's
values as a ``VARCHAR[]``; SQL macros with one overload per arity give users the explicit form
``sem_filter('... {0} ... {1}', col_a, col_b)``. ``sem_agg`` is a macro over DuckDB's ``list()``
aggregate feeding a scalar UDF, since DuckDB's Python client has no aggregate UDFs.

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
==========================================  =======================================
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable

import duckdb
import duckdb.func
import pyarrow as pa

from duckdb_sem.errors import SemError
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.prompts import check_labels
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.surface.bind import typed_map_function

__all__ = ["MAX_COLUMNS", "PLAIN_TYPED_MAPS", "SemSession"]

#: explicit-form overloads are registered for up to this many column arguments
MAX_COLUMNS = 8
#: typed sem_map functions available without SQL rewriting (in a plain connection)
PLAIN_TYPED_MAPS = {
    "integer": "INTEGER",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "list": "VARCHAR[]",
}


_session_ids = itertools.count(1)


class SemSession:
    """The duckdb-sem state attached to one DuckDB connection: engine, current query, errors."""

    def __init__(self, con: duckdb.DuckDBPyConnection, engine: SemEngine) -> None:
        self.con = con
        self.engine = engine
        self.query = QueryContext()
        self.last_error: SemError | None = None
        self._registered: set[str] = set()
        self._lock = threading.Lock()
        self._suffix = ""
        self._temp = ""
        self._shared = False
        #: every macro created, name -> DDL (a shared session replays them on each cursor)
        self.macros: dict[str, str] = {}
        self._define_lock = threading.RLock()

    def new_query(self, **kwargs: object) -> QueryContext:
        self.query = QueryContext(**kwargs)  # type: ignore[arg-type]
        self.last_error = None
        return self.query

    def install(self, *, shared: bool = False) -> None:
        """Register the UDFs and the ``sem_*`` macros in ``self.con``.

        DuckDB keeps Python UDFs database-wide, so each session's UDFs get their own names
        (``__semudf_filter_s7``) and the ``sem_*`` macros that users call are TEMP macros of this
        connection pointing at them: several connections to one database file (read-only ones
        too) each route to their own session. ``shared=True`` installs plain UDF names for one
        session serving many cursors (the wire server): the macros are TEMP too, recorded in
        :attr:`macros`, and :meth:`install_macros` creates them in each cursor, so no cursor can
        redefine another's. Macro bodies name the UDFs as ``system.main.<udf>``, where DuckDB
        keeps Python UDFs, so a look-alike macro in a user catalog cannot shadow them.
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
            self._macro(f"sem_{op}", udf, "list([{}])" if aggregate else "[{}]")
        classify = self._classify_udf()
        if classify is not None:
            self._macro("sem_classify", classify, "[{}]", labels=True)
        for short, sql_type in PLAIN_TYPED_MAPS.items():
            spec = parse_type(sql_type)
            self.ensure_typed_map(spec)
            self._macro(f"sem_map_{short}", typed_map_function(spec), "[{}]")

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
        """Give back this session's share of the scheduler (the last share closes it); a shared
        session outlives the cursors that close and keeps it."""
        if not self._shared:
            self.engine.client.close()

    def ensure_typed_map(self, spec: TypeSpec) -> None:
        """Register the function that returns ``spec`` (idempotent): a UDF behind a macro."""
        name = typed_map_function(spec)
        with self._define_lock:
            udf = self._udf(f"__semudf{name[len('__sem') :]}", OperatorKind.MAP, spec.sql, spec.sql)
            if udf is not None:
                self._define(
                    name, f"CREATE OR REPLACE {self._temp}MACRO {name}(t, v) AS {udf}(t, v)"
                )
            else:
                self._ensure_defined(name)

    def install_macros(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create every recorded macro in ``con`` (a cursor served by a shared session)."""
        with self._define_lock:
            for sql in self.macros.values():
                con.execute(sql)

    def _define(self, name: str, sql: str) -> None:
        self.macros[name] = sql
        self._macro_connection().execute(sql)

    def _macro_connection(self) -> duckdb.DuckDBPyConnection:
        """Where a new macro is created (a shared session: the calling thread's cursor)."""
        return self.con

    def _ensure_defined(self, name: str) -> None:
        """Hook: a shared session creates macro ``name`` in the calling cursor if it lacks it."""

    def _macro(self, name: str, target: str | None, wrap: str, *, labels: bool = False) -> None:
        if target is None:
            return
        overloads = []
        lead = ["t", "l"] if labels else ["t"]  # sem_classify's labels come second
        for n in range(MAX_COLUMNS + 1):
            params = ", ".join([*lead, *(f"a{i}" for i in range(n))])
            values = ", ".join(f"a{i}::VARCHAR" for i in range(n))
            listed = (
                wrap.format(values)
                if n
                else "[]::VARCHAR[]"
                if wrap == "[{}]"
                else "[]::VARCHAR[][]"
            )
            overloads.append(f"({params}) AS {target}({', '.join(lead)}, {listed})")
        self._define(name, f"CREATE OR REPLACE {self._temp}MACRO {name}" + ", ".join(overloads))

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
        with self._lock:
            if name in self._registered:
                return None
            self._registered.add(name)
        full = name + self._suffix
        label = name.replace("__semudf_", "sem_")
        arg_type = "VARCHAR[][]" if list_of_lists else "VARCHAR[]"
        self.con.create_function(
            full,
            self._make_udf(kind, output_type, label),
            ["VARCHAR", arg_type],
            return_type,
            type=duckdb.func.ARROW,
            null_handling=duckdb.func.SPECIAL,
            exception_handling=duckdb.PythonExceptionHandling.DEFAULT,
            side_effects=True,
        )
        return f"system.main.{full}"

    def _classify_udf(self) -> str | None:
        """Register ``sem_classify``'s UDF (template, labels, values) -> VARCHAR; its full name,
        or None if already there."""
        name = "__semudf_classify"
        with self._lock:
            if name in self._registered:
                return None
            self._registered.add(name)
        full = name + self._suffix

        def udf(templates: pa.Array, labels: pa.Array, values: pa.Array) -> pa.Array:
            try:
                return self._classify(templates, labels, values)
            except SemError as err:
                self.last_error = err
                raise

        self.con.create_function(
            full,
            udf,
            ["VARCHAR", "VARCHAR[]", "VARCHAR[]"],
            "VARCHAR",
            type=duckdb.func.ARROW,
            null_handling=duckdb.func.SPECIAL,
            exception_handling=duckdb.PythonExceptionHandling.DEFAULT,
            side_effects=True,
        )
        return f"system.main.{full}"

    def _classify(self, templates: pa.Array, labels: pa.Array, values: pa.Array) -> pa.Array:
        """One run per distinct (template, labels) in the batch (almost always one)."""
        texts = _combined(templates).to_pylist()
        label_lists = _combined(labels).to_pylist()
        values = _combined(values)
        groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        for i, (template, row_labels) in enumerate(zip(texts, label_lists, strict=True)):
            if template is None:
                continue
            checked = check_labels(row_labels)
            groups.setdefault((template, checked), []).append(i)
        out: list[object] = [None] * len(texts)
        for (template, checked), idx in groups.items():
            part = values if len(idx) == len(texts) else values.take(pa.array(idx))
            answers = self._run_one(
                OperatorKind.MAP, "VARCHAR", "sem_classify", template, part, labels=checked
            )
            for i, value in zip(idx, answers.to_pylist(), strict=True):
                out[i] = value
        return pa.array(out, type=pa.string())

    def _make_udf(
        self, kind: OperatorKind, output_type: str | None, name: str
    ) -> Callable[[pa.Array, pa.Array], pa.Array]:
        def udf(templates: pa.Array, values: pa.Array) -> pa.Array:
            try:
                return self._evaluate(kind, output_type, name, templates, values)
            except SemError as err:
                self.last_error = err
                raise

        return udf

    def _evaluate(
        self,
        kind: OperatorKind,
        output_type: str | None,
        name: str,
        templates: pa.Array,
        values: pa.Array,
    ) -> pa.Array:
        if isinstance(templates, pa.ChunkedArray):
            templates = templates.combine_chunks()
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        texts = templates.to_pylist()
        distinct = list(dict.fromkeys(texts))
        if len(distinct) == 1 and distinct[0] is not None:
            return self._run_one(kind, output_type, name, distinct[0], values)
        # Several templates in one batch (rare): run each group, then scatter back.
        out: list[object] = [None] * len(texts)
        for template in distinct:
            if template is None:
                continue
            idx = [i for i, t in enumerate(texts) if t == template]
            part = self._run_one(kind, output_type, name, template, values.take(pa.array(idx)))
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
        *,
        labels: tuple[str, ...] = (),
    ) -> pa.Array:
        rows = values.to_pylist()
        columns: list[pa.Array]
        if kind is OperatorKind.AGG:
            # Each group is a list of records, each record the list of its column values.
            width = max((len(rec) for g in rows if g for rec in g if rec is not None), default=0)
            columns = [
                pa.array(
                    [None if g is None else [rec[i] for rec in g if rec is not None] for g in rows],
                    type=pa.list_(pa.string()),
                )
                for i in range(width)
            ]
        else:
            width = max((len(r) for r in rows if r is not None), default=0)
            columns = [
                pa.array(
                    [None if r is None or i >= len(r) else r[i] for r in rows], type=pa.string()
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
            labels=labels,
        )


def _combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
