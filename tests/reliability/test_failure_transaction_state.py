"""A failing statement leaves the session's transaction exactly as it found it, on every entry.

The invariant, after each of 2,100 generated failing statements (:mod:`failing_statements`:
bad output types, unknown columns and models, backend errors, budgets, DuckDB errors next to
the semantic call and late, while the result is read; SELECT, CTE, subquery, UNION, LIMIT,
GROUP BY, CREATE TABLE AS, INSERT, UPDATE, DELETE), on ``connect()`` (``execute``, ``sql``,
a partial read), the relation API, ``install(con)`` and the wire server (simple and extended
protocol):

- in autocommit, no transaction stays open: DuckDB itself says so (``txid_current()``), and
  the next write, acknowledged, is seen at once by another session and is in the file after
  it is closed and opened again;
- inside a transaction (every 10th statement), the transaction is aborted as DuckDB aborts it
  for a failing plain statement: the next statement is refused, ``ROLLBACK`` ends it, and
  nothing written in it stays; over the wire ReadyForQuery says ``E`` and COMMIT answers
  ``ROLLBACK``;
- nothing a failed statement wrote stays (no table it created, no row it changed).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import psycopg
import pytest
from failing_statements import BROKEN_MODEL, SCHEMA, Failing, failing
from psycopg import pq

import duckdb_sem
from duckdb_sem.errors import BindError, SemError
from duckdb_sem.session.transaction import transaction_id

pytestmark = pytest.mark.slow

SEED = 20261207
ABORTED = "aborted"


def _wire_helpers() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "pgwire" / "conftest.py"
    spec = importlib.util.spec_from_file_location("pgwire_conftest_tx", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _make_db(path: Path) -> Path:
    con = duckdb.connect(str(path))
    for sql in SCHEMA:
        con.execute(sql)
    con.close()
    return path


class Ledger:
    """What was acknowledged: the keys written to ``m``; checked against the file at the end."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.failed = 0
        self.ran = 0

    def check_file(self, path: Path) -> None:
        con = duckdb.connect(str(path))
        try:
            keys = sorted(k for (k,) in con.execute("SELECT k FROM m").fetchall())
            assert keys == sorted(self.keys), "acknowledged writes missing or extra in the file"
            notes = con.execute("SELECT id, note FROM w ORDER BY id").fetchall()
            assert notes == [(1, "a good film"), (2, "dull"), (3, "good acting"), (4, "bad")]
            made = con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'made_%'"
            ).fetchall()
            assert made == [], "a failed CREATE TABLE AS left its table"
        finally:
            con.close()


# -- in process --------------------------------------------------------------------------------
#: how an entry runs a statement: it is built (DuckDB's ``execute``, ``con.sql``, a relation
#: method), then read
Run = Callable[[Failing], Callable[[], Any]]
#: whether a failure aborts the transaction, as DuckDB's own entries do: ``execute`` always;
#: ``con.sql`` and relations unless it is a binding error of a query (DuckDB binds a relation
#: when it is made, and a binder error there does not abort; a write runs at once, and any
#: failure of one aborts). Ours bind a semantic relation lazily: the same rule, when read;
#: None: either outcome, checked to be one of the two exactly.
BuildAborts = Callable[[Failing, str, Exception | None], bool | None]


def _attempt(run: Run, statement: Failing, ledger: Ledger) -> tuple[str | None, Exception | None]:
    """Run ``statement``; where it failed (``"build"``, ``"read"`` or None) and with what."""
    ledger.ran += 1
    try:
        read = run(statement)
    except (SemError, duckdb.Error) as err:
        ledger.failed += 1
        return "build", err
    try:
        read()
    except (SemError, duckdb.Error) as err:
        ledger.failed += 1
        return "read", err
    return None, None


def _in_process(
    con: Any,
    raw: duckdb.DuckDBPyConnection,
    statements: list[Failing],
    ledger: Ledger,
    run: Run,
    *,
    build_aborts: BuildAborts,
) -> None:
    """Each statement in autocommit, every 10th also inside a transaction; the invariant."""
    other = raw.cursor()  # another session of the same database: sees what is committed
    try:
        for index, statement in enumerate(statements):
            if statement.setup:
                con.execute(statement.setup)
            try:
                _attempt(run, statement, ledger)
            finally:
                if statement.setup:
                    con.execute("RESET " + statement.setup.split()[1])
            assert transaction_id(raw) is None, f"left a transaction open: {statement.sql}"
            key = len(ledger.keys) + 1
            con.execute("INSERT INTO m VALUES (?)", [key])
            ledger.keys.append(key)
            assert other.execute("SELECT count(*) FROM m WHERE k = ?", [key]).fetchone() == (1,)
            if index % 10 == 0 and not statement.setup:
                _in_block(con, raw, statement, ledger, run, other, build_aborts=build_aborts)
    finally:
        other.close()


def _in_block(
    con: Any,
    raw: duckdb.DuckDBPyConnection,
    statement: Failing,
    ledger: Ledger,
    run: Run,
    other: duckdb.DuckDBPyConnection,
    *,
    build_aborts: BuildAborts,
) -> None:
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO m VALUES (-1)")
    where, err = _attempt(run, statement, ledger)
    aborts = None if where is None else build_aborts(statement, where, err)
    if aborts is None and where is not None:  # either, but one of the two exactly
        try:
            usable = con.execute("SELECT count(*) FROM m WHERE k = -1").fetchall() == [(1,)]
        except duckdb.Error as refused:
            assert ABORTED in str(refused)
        else:
            assert usable, "the transaction goes on, but lost its write"
    elif aborts:
        with pytest.raises(duckdb.Error, match=ABORTED):  # as DuckDB: the rest is refused
            con.execute("SELECT 1").fetchall()
    elif where is not None:  # as DuckDB's binder errors in con.sql(): the transaction goes on
        assert con.execute("SELECT count(*) FROM m WHERE k = -1").fetchall() == [(1,)]
    con.execute("ROLLBACK")
    assert transaction_id(raw) is None
    assert other.execute("SELECT count(*) FROM m WHERE k = -1").fetchone() == (0,)


def _execute(con: Any) -> Run:
    def run(statement: Failing) -> Callable[[], Any]:
        con.execute(statement.sql)
        return con.fetchall if statement.rows else (lambda: None)

    return run


def _sql(con: Any) -> Run:
    def run(statement: Failing) -> Callable[[], Any]:
        rel = con.sql(statement.sql)
        return rel.fetchall if statement.rows and rel is not None else (lambda: None)

    return run


def _partial(con: Any) -> Run:
    """One row read, then the connection moves on (DuckDB discards the rest)."""

    def run(statement: Failing) -> Callable[[], Any]:
        con.execute(statement.sql)

        def read() -> None:
            if statement.rows:
                con.fetchmany(1)
            con.execute("SELECT 1").fetchall()

        return read

    return run


def _relation(con: Any) -> Run:
    """The statement's failing call through the relation API: ``filter``/``project`` with
    its predicate or expression, or a ``sem_*`` method with a bad template or type."""

    def run(statement: Failing) -> Callable[[], Any]:
        sql = statement.sql
        rel = con.table("big" if "big" in sql else "r")
        where = sql.split(" WHERE ", 1)[1] if " WHERE " in sql else ""
        where = where.split(" GROUP BY ")[0].split(" UNION ")[0].split(" ORDER BY ")[0]
        if (
            "sem_" in where
            and not sql.startswith("WITH")
            and ") s WHERE" not in sql
            and " IN (" not in sql
        ):
            return rel.filter(where).fetchall  # type: ignore[no-any-return]
        if "sem_map('abc'" in sql:
            return rel.sem_map("abc", type="x").fetchall  # type: ignore[no-any-return]
        if "{nosuch}" in sql or "{missing}" in sql:
            return rel.sem_filter("{nosuch} is good").fetchall  # type: ignore[no-any-return]
        return rel.project("id, " + _expression(sql)).fetchall  # type: ignore[no-any-return]

    return run


def _expression(sql: str) -> str:
    for start in ("SELECT id, ", "SELECT * FROM (SELECT id, "):
        if sql.startswith(start):
            return sql[len(start) :].split(" AS v")[0] + " AS v"
    return "sem_map('{nosuch} short') AS v"


@pytest.fixture
def connected(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    path = _make_db(tmp_path / "tx.duckdb")
    con = duckdb_sem.connect(str(path), backend="test:?yes_if=good", cache="off")
    con.execute(BROKEN_MODEL)
    yield con, path
    with contextlib.suppress(Exception):
        con.close()


def _always(_: Failing, where: str, err: Exception | None) -> bool:
    return True


def _binding(err: Exception | None) -> bool:
    return isinstance(err, BindError | duckdb.BinderException)


def _unless_query_binding(statement: Failing, where: str, err: Exception | None) -> bool | None:
    if not statement.rows:
        return True
    return _unless_binding(statement, where, err)


def _unless_binding(statement: Failing, where: str, err: Exception | None) -> bool | None:
    """A relation only queries. A binding error found only when it runs (a template a UDF
    reads as the rows go through DuckDB) is DuckDB's runtime error there, and may abort."""
    if not _binding(err):
        return True
    return False if where == "build" else None


_ENTRIES: dict[str, tuple[Callable[[Any], Run], BuildAborts]] = {
    "execute": (_execute, _always),
    "sql": (_sql, _unless_query_binding),
    "partial": (_partial, _always),
    "relation": (_relation, _unless_binding),
}


@pytest.mark.parametrize(
    ("entry", "count"), [("execute", 500), ("sql", 400), ("partial", 100), ("relation", 200)]
)
def test_failing_statements_on_connect_leave_no_transaction_and_lose_no_write(
    connected: tuple[Any, Path], entry: str, count: int
) -> None:
    con, path = connected
    ledger = Ledger()
    make, build_aborts = _ENTRIES[entry]
    statements = failing(seed=SEED + count, count=count)
    _in_process(con, con.duckdb, statements, ledger, make(con), build_aborts=build_aborts)
    con.close()
    ledger.check_file(path)
    assert ledger.failed >= 0.9 * ledger.ran, f"only {ledger.failed} of {ledger.ran} failed"


def test_failing_statements_through_install_leave_no_transaction(tmp_path: Path) -> None:
    path = _make_db(tmp_path / "installed.duckdb")
    raw = duckdb.connect(str(path))
    duckdb_sem.install(raw, backend="test:?yes_if=good", cache="off",
                       models={"broken": "sim:default?fault=500&retries=0"})  # fmt: skip
    ledger = Ledger()
    # budgets are install()'s options, not SET statements, on a plain connection
    statements = [s for s in failing(seed=SEED, count=340, explicit=True) if s.setup is None]
    assert len(statements) >= 300
    _in_process(raw, raw, statements, ledger, _execute(raw), build_aborts=_always)
    raw.close()
    ledger.check_file(path)
    assert ledger.failed >= 0.9 * ledger.ran, f"only {ledger.failed} of {ledger.ran} failed"


# -- over the wire -----------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_failing_statements_over_the_wire_keep_ready_for_query_true(
    tmp_path: Path, protocol: str
) -> None:
    wire = _wire_helpers()
    path = _make_db(tmp_path / "wire.duckdb")
    ledger = Ledger()
    env = {"DUCKDB_SEM_MODELS": "broken=sim:default?fault=500&retries=0"}
    with wire.wire_server(path, "--backend", "test:?yes_if=good", env=env) as server:
        with (
            psycopg.connect(server.dsn(), autocommit=True) as con,
            psycopg.connect(server.dsn(), autocommit=True) as other,
        ):
            cursor = psycopg.ClientCursor(con) if protocol == "simple" else con.cursor()
            for index, statement in enumerate(failing(seed=SEED + 1, count=300)):
                _wire_one(con, cursor, other, statement, ledger, in_block=index % 10 == 0)
        server.process.terminate()
        server.process.wait(30)
    ledger.check_file(path)
    assert ledger.failed >= 0.9 * ledger.ran, f"only {ledger.failed} of {ledger.ran} failed"


def _wire_one(
    con: psycopg.Connection[Any],
    cursor: psycopg.Cursor[Any],
    other: psycopg.Connection[Any],
    statement: Failing,
    ledger: Ledger,
    *,
    in_block: bool,
) -> None:
    def attempt() -> None:
        ledger.ran += 1
        try:
            cursor.execute(statement.sql)
            if statement.rows:
                cursor.fetchall()
        except psycopg.Error:
            ledger.failed += 1

    if statement.setup:
        cursor.execute(statement.setup)
    attempt()
    if statement.setup:
        cursor.execute("RESET " + statement.setup.split()[1])
    status = con.info.transaction_status
    assert status == pq.TransactionStatus.IDLE, f"{status.name} after {statement.sql}"
    key = len(ledger.keys) + 1
    cursor.execute(f"INSERT INTO m VALUES ({key})")
    ledger.keys.append(key)
    assert other.execute(f"SELECT count(*) FROM m WHERE k = {key}").fetchone() == (1,)
    if not in_block or statement.setup:
        return
    cursor.execute("BEGIN")
    cursor.execute("INSERT INTO m VALUES (-1)")
    failed = ledger.failed
    attempt()
    if ledger.failed > failed:
        assert con.info.transaction_status == pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            cursor.execute("SELECT 1")
        cursor.execute("COMMIT")
        assert cursor.statusmessage == "ROLLBACK"  # as PostgreSQL answers a failed block's COMMIT
    else:
        cursor.execute("ROLLBACK")
    assert con.info.transaction_status == pq.TransactionStatus.IDLE
    assert other.execute("SELECT count(*) FROM m WHERE k = -1").fetchone() == (0,)
