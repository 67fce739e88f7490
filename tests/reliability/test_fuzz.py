"""Fuzz: a few hundred generated statements, in-process and over the wire, fail only cleanly.

A seeded generator (:func:`statements`, the same list on every run) puts ``sem_*`` calls in
odd places (``ORDER BY``, ``GROUP BY``, ``HAVING``, ``JOIN ... ON``, ``CASE``, window frames,
``LIMIT``, nested calls, ``VALUES``, writes, ``EXPLAIN``) over NULLs, huge strings and odd
ones (NUL, emoji, lone braces, quotes, invalid UTF-8 as a BLOB). Pass: every error is a
duckdb-sem or DuckDB error with a message (never a ``TypeError``/``KeyError``/... leaking, and
over the wire never SQLSTATE XX000, what the server answers an internal error with), no
statement runs past its timeout, and the server process is alive at the end.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import psycopg
import pytest

import duckdb_sem
from duckdb_sem.errors import SemError

pytestmark = pytest.mark.slow


def _wire_helpers() -> ModuleType:
    """tests/pgwire/conftest.py (the real server process), under a name of its own."""
    path = Path(__file__).resolve().parents[1] / "pgwire" / "conftest.py"
    spec = importlib.util.spec_from_file_location("pgwire_conftest", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SEED = 20261202
COUNT = 400
TIMEOUT_S = 15.0

SCHEMA = [
    "CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a good film', 'drama', 3.5), "
    "(2, 'dull', 'comedy', NULL), (3, NULL, 'drama', -1.0), (4, '', NULL, 1e300), "
    "(5, repeat('good ', 20000), 'epic', 0.0)) v(id, text, genre, score)",
    "CREATE TABLE m AS SELECT * FROM (VALUES (1, 'drama'), (2, 'comedy'), (3, NULL)) v(mid, genre)",
    "CREATE TABLE w (id INTEGER, note VARCHAR)",
]

#: values a template or an expression meets: NULLs, huge and odd strings, odd types
VALUES = [
    "NULL", "''", "'good'", "repeat('x', 100000)", "repeat('{text}', 1000)", "chr(0)",
    "'a' || chr(0) || 'b'", "'\U0001f600 caf\u00e9 \u202e good'", "'{'", "'}'", "'{{}}'",
    "'it''s'", "'\\\\'", "'\\xFF\\xFE'::BLOB", "NULL::VARCHAR", "[1, NULL, 3]",
    "{'a': 1, 'b': NULL}", "DATE '2024-02-29'", "INTERVAL 3 DAY", "9223372036854775807",
    "'nan'::DOUBLE", "'inf'::DOUBLE", "-0.0", "text", "genre", "r.text", "m.genre", "score",
    "id::VARCHAR", "NULL::INTEGER[]",
]  # fmt: skip

#: template texts: fields that exist and not, positions, braces that do not pair
TEMPLATES = [
    "{text} is positive", "{0}", "{0} and {1}", "{nope}", "", "{", "}", "{{text}}",
    "{text:>10}", "{r.text} about {m.genre}", "{genre}", "{text}" * 50, "good {text} \U0001f600",
    "{id} {score}", "{text!r}", "{ text }", "{0.x}", "{text}\x00",
]  # fmt: skip

FUNCTIONS = ["sem_filter", "sem_map", "sem_join", "sem_agg", "sem_frobnicate"]
EXTRAS = ["", ", 'INTEGER'", ", 'BOOLEAN'", ", 'STRUCT(a INTEGER)'", ", 'NOPE'", ", NULL",
          ", text", ", 1", ", {v}", ", {v}, {v}"]  # fmt: skip


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


#: well-formed calls, most of the mix, so statements get past binding into the runtime
#: (``@v``: a value from :data:`VALUES`, or another call)
GOOD = [
    "sem_filter('{text} is positive')", "sem_map('Summarize {text}')",
    "sem_map('Stars in {text}', 'INTEGER')", "sem_map('{genre} good?', 'BOOLEAN')",
    "sem_filter('{0} is good', @v)", "sem_map('Say {0} and {1}', @v, @v)",
    "sem_filter('{text} is about {genre}')", "sem_map('{text}', 'STRUCT(a INTEGER)')",
]  # fmt: skip


def _sem(rng: random.Random, depth: int = 0) -> str:
    """One semantic call, well-formed or not; its arguments may be values or (rarely)
    another semantic call."""
    if rng.random() < 0.65:
        call = rng.choice(GOOD)
        while "@v" in call:
            call = call.replace("@v", _value(rng, depth + 1), 1)
        return call
    fn = rng.choice(FUNCTIONS)
    extra = (
        rng.choice(EXTRAS).replace("{v}", "{}").format(*(_value(rng, depth + 1) for _ in range(2)))
    )
    return f"{fn}({_quote(rng.choice(TEMPLATES))}{extra})"


def _value(rng: random.Random, depth: int = 0) -> str:
    if depth < 2 and rng.random() < 0.15:
        return _sem(rng, depth)
    return rng.choice(VALUES)


def _statement(rng: random.Random) -> str:
    s, v = _sem(rng), _value(rng)
    shapes: list[Callable[[], str]] = [
        lambda: f"SELECT {s} FROM r",
        lambda: f"SELECT id, {s} FROM r WHERE {_sem(rng)}",
        lambda: f"SELECT {v}, {s}",
        lambda: f"SELECT genre, count(*) FROM r GROUP BY genre HAVING {s}",
        lambda: f"SELECT {s} AS x, count(*) FROM r GROUP BY x",
        lambda: f"SELECT id FROM r ORDER BY {s} LIMIT 2",
        lambda: f"SELECT r.id, m.mid FROM r JOIN m ON {s}",
        lambda: f"SELECT r.id FROM r LEFT JOIN m ON r.genre = m.genre AND {s}",
        lambda: f"SELECT CASE WHEN {s} THEN {v} ELSE {_sem(rng)} END FROM r",
        lambda: f"SELECT {s} OVER (PARTITION BY genre) FROM r",
        lambda: f"SELECT row_number() OVER (ORDER BY {s}) FROM r",
        lambda: f"SELECT * FROM r LIMIT {s}",
        lambda: f"SELECT * FROM (SELECT {s} AS x FROM r) t WHERE x IS NULL",
        lambda: f"WITH c AS (SELECT {s} AS x FROM r) SELECT x, {_sem(rng)} FROM c",
        lambda: f"SELECT {s} FROM (VALUES ({v}), (NULL)) t(text)",
        lambda: f"SELECT {s} FROM r UNION ALL SELECT {v}",
        lambda: f"SELECT id FROM r WHERE id IN (SELECT mid FROM m WHERE {s})",
        lambda: f"SELECT EXISTS (SELECT 1 FROM m WHERE {s})",
        lambda: f"SELECT {s} FROM r, m",
        lambda: f"SELECT sem_agg({_quote(rng.choice(TEMPLATES))}) FROM r WHERE {s}",
        lambda: f"INSERT INTO w SELECT id, {s} FROM r",
        lambda: f"UPDATE w SET note = {s} WHERE id = 1",
        lambda: f"DELETE FROM w WHERE {s}",
        lambda: f"CREATE OR REPLACE TEMP TABLE t AS SELECT {s} AS x FROM r",
        lambda: f"EXPLAIN SELECT {s} FROM r",
        lambda: f"EXPLAIN SEMANTIC SELECT {s} FROM r",
        lambda: f"SELECT {s}::VARCHAR || {v}",
        lambda: f"SELECT list_transform([1, 2], x -> {s})",
        lambda: f"SELECT {s} FROM r WHERE text = {v}",
        lambda: f"SELECT {v} FROM r WHERE {s} OR id IS NULL",
        lambda: f"SELECT {s}) FROM r",  # a syntax error
        lambda: f"SELECT {s} FROM nope",
        lambda: f"SELECT {s} FROM r GROUP BY",
        # errors after the first batches have streamed, with and without semantic work
        lambda: (
            f"SELECT CASE WHEN i < 3000 THEN i::VARCHAR ELSE error({v}) END FROM range(5000) t(i)"
        ),
        lambda: (
            f"SELECT i, CASE WHEN i < 3000 THEN {v} ELSE (i::VARCHAR || 'x')::INTEGER END "
            "FROM range(5000) t(i)"
        ),
        lambda: (
            f"SELECT {s} FROM (SELECT CASE WHEN i < 2 THEN 'good' ELSE error('late') END AS text "
            "FROM range(3000) t(i))"
        ),
    ]
    return rng.choice(shapes)()


def statements() -> list[str]:
    """``COUNT`` statements from ``SEED``: the same list on every run."""
    rng = random.Random(SEED)
    return [_statement(rng) for _ in range(COUNT)]


def _in_time(fn: Callable[[], object], on_timeout: Callable[[], None]) -> BaseException | None:
    """Run ``fn`` on a thread: its exception (None when it returned); fails on a hang."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - classified by the caller
            outcome.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(TIMEOUT_S)
    if worker.is_alive():
        on_timeout()
        worker.join(5)
        raise TimeoutError
    return outcome[0]


def _fetch_in_parts(con: duckdb_sem.SemConnection, sql: str) -> object:
    rel = con.sql(sql)
    return rel.fetchmany(2), rel.fetchall()


#: how a result is read in-process, in turn: each has its own road from the Arrow stream
READS: list[Callable[[duckdb_sem.SemConnection, str], object]] = [
    lambda con, sql: con.sql(sql).fetchall(),
    _fetch_in_parts,
    lambda con, sql: con.sql(sql).arrow(),
]


def test_the_generator_is_seeded_and_varied() -> None:
    first = statements()
    assert first == statements()
    assert len(set(first)) > COUNT * 0.8  # repeats: the well-formed calls recur
    for needle in ("ORDER BY sem_", "ON sem_", "HAVING sem_", "OVER", "NULL", "chr(0)"):
        assert any(needle in s for s in first), needle


def test_in_process_statements_fail_only_cleanly() -> None:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    for sql in SCHEMA:
        con.execute(sql)
    bad: list[str] = []
    ok = 0
    for i, sql in enumerate(statements()):
        read = READS[i % len(READS)]
        try:
            error = _in_time(lambda sql=sql, read=read: read(con, sql), con.interrupt)
        except TimeoutError:
            bad.append(f"hung {TIMEOUT_S:g}s: {sql[:200]!r}")
            continue
        if error is None:
            ok += 1
        elif not isinstance(error, SemError | duckdb.Error):
            bad.append(f"{type(error).__name__}: {error} <- {sql[:200]!r}")
        elif not str(error).strip():
            bad.append(f"{type(error).__name__} without a message <- {sql[:200]!r}")
    con.close()
    assert not bad, "\n".join(bad)
    assert ok > COUNT // 10  # the statements are not all rejected at the door


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("fuzz") / "sem.duckdb"
    con = duckdb.connect(str(path))
    for sql in SCHEMA:
        con.execute(sql)
    con.close()
    with _wire_helpers().wire_server(path, "--backend", "test:?yes_if=good") as proc:
        yield proc


Conn = psycopg.Connection[Any]
#: parameter values a client binds ($1): NULL, huge and odd text, bytes, odd numbers
PARAMS: list[object] = [None, "", "good", "x" * 200_000, "{text}", "{", "\U0001f600", b"\xff\xfe",
                        2**62, -1.5, float("nan"), [1, None], True]  # fmt: skip


def _read(conn: Conn, sql: str, params: list[object] | None = None) -> None:
    cur = conn.execute(sql, params)  # type: ignore[arg-type]
    if cur.description is not None:
        cur.fetchall()


def _stream(conn: Conn, sql: str) -> None:
    for _ in conn.cursor().stream(sql):  # Execute without a row limit, a row at a time
        pass


def _copy(conn: Conn, sql: str) -> None:
    with conn.cursor().copy(f"COPY ({sql}) TO STDOUT") as copy:
        for _ in copy:
            pass


def _cursor(conn: Conn, sql: str) -> None:
    with conn.transaction(), conn.cursor(name="fuzz") as cur:  # DECLARE, then FETCH
        cur.execute(sql)
        cur.fetchmany(2)
        cur.fetchall()


def wire_steps() -> list[tuple[str, Callable[[Conn], None]]]:
    """The statements of :func:`statements`, each read in one of the wire's ways (plain,
    streamed, a COPY, a server-side cursor), and ``COUNT // 4`` more with a parameter."""
    steps: list[tuple[str, Callable[[Conn], None]]] = []
    for i, sql in enumerate(statements()):
        way = (_read, _stream, _copy, _cursor)[i % 4] if sql.startswith("SELECT") else _read
        steps.append((f"{way.__name__}: {sql}", lambda c, sql=sql, way=way: way(c, sql)))
    rng = random.Random(SEED + 1)
    for _ in range(COUNT // 4):
        shape = rng.choice([
            "SELECT sem_filter('{0} is good', %s) FROM r", "SELECT sem_map('Say {0}', %s)",
            f"SELECT {_sem(rng)}, %s FROM r", f"SELECT id FROM r WHERE text = %s AND {_sem(rng)}",
            f"SELECT {_sem(rng)} FROM r WHERE id = %s::INTEGER", "SET duckdb_sem.max_calls = %s",
        ])  # fmt: skip
        value = rng.choice(PARAMS)
        label = f"{shape} with {str(value)[:40]!r}"
        steps.append((label, lambda c, shape=shape, value=value: _read(c, shape, [value])))
    return steps


@pytest.mark.integration
def test_wire_statements_fail_only_cleanly(wire: Any) -> None:
    bad: list[str] = []
    ok = 0
    conn = psycopg.connect(wire.dsn(), autocommit=True)
    for label, step in wire_steps():
        try:
            error = _in_time(lambda step=step, conn=conn: step(conn), conn.cancel_safe)
        except TimeoutError:
            bad.append(f"hung {TIMEOUT_S:g}s: {label[:200]!r}")
            conn.close()
            conn = psycopg.connect(wire.dsn(), autocommit=True)
            continue
        if error is None:
            ok += 1
        elif not isinstance(error, psycopg.Error):
            bad.append(f"client {type(error).__name__}: {error} <- {label[:200]!r}")
        elif error.sqlstate in {None, "XX000"} or not str(error).strip():
            bad.append(f"{error.sqlstate}: {str(error)[:300]} <- {label[:200]!r}")
        if conn.closed:  # the server dropped the connection: counted above (no SQLSTATE)
            conn = psycopg.connect(wire.dsn(), autocommit=True)
    assert conn.execute("SELECT 42").fetchone() == (42,)
    conn.close()
    assert wire.process.poll() is None, "the server died"
    assert not bad, "\n".join(bad)
    assert ok > COUNT // 10
