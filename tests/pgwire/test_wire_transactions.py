"""The transaction scripts over the wire: psycopg sessions of a real ``duckdb-sem pgwire``.

The scripts of ``transaction_scripts`` that cover a transaction's own changes, COMMIT and
ROLLBACK, TEMP tables and two sessions run step by step on two psycopg connections to one
server (sessions ``a`` and ``b``, autocommit, so ``BEGIN``/``COMMIT`` are the scripts' own) and
on a plain DuckDB database with the same setup; rows must be equal, every semantic query must
be planned (``EXPLAIN SEMANTIC`` over the wire), and an expected failure must carry the
SQLSTATE the server maps DuckDB's error to. The server keeps savepoints itself (DuckDB has none),
so its SAVEPOINT test is its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
from conftest import WireProcess, wire_server
from transaction_scripts import (
    ALL_IDS,
    BASE,
    SCRIPTS,
    Outcome,
    Script,
    plain,
    run_script,
    semantic,
)

from duckdb_sem.pgwire.sqlstate import describe_error

pytestmark = pytest.mark.integration

BACKEND = "test:?yes_if=good"
Conn = psycopg.Connection[tuple[Any, ...]]

OVER_THE_WIRE = (
    "own_changes_filter",
    "own_changes_filter_and_predicate",
    "own_changes_sem_map_boolean",
    "own_changes_order_by_limit",
    "own_changes_aggregates",
    "own_changes_join_filter_on_left",
    "own_changes_seen_after_each_statement",
    "commit_keeps_changes",
    "commit_then_rollback",
    "failed_statement_aborts_the_transaction",
    "temp_table_shadows_main_table",
    "temp_view",
    "snapshot_ignores_another_sessions_insert",
    "uncommitted_changes_stay_in_their_session",
    "both_sessions_in_transactions",
)
WIRE_SCRIPTS = [s for s in SCRIPTS if s.name in OVER_THE_WIRE]
assert len(WIRE_SCRIPTS) == len(OVER_THE_WIRE)


@dataclass(frozen=True, slots=True)
class Wire:
    """A psycopg session; errors as their SQLSTATE."""

    conn: Conn

    def run(self, sql: str, *, fetch: bool) -> Outcome:
        try:
            cur = self.conn.execute(sql)
            rows = cur.fetchall() if fetch and cur.description is not None else None
        except psycopg.Error as err:
            return Outcome(error=err.sqlstate or type(err).__name__, message=str(err))
        return Outcome(rows=rows)

    def planned(self, sql: str) -> bool:
        lines = [row[0] for row in self.conn.execute("EXPLAIN SEMANTIC " + sql).fetchall()]
        return not lines[0].startswith("not planned") and lines[1].startswith("chosen plan")

    def calls(self) -> int | None:
        return None


@dataclass(frozen=True, slots=True)
class Local:
    con: duckdb.DuckDBPyConnection

    def run(self, sql: str, *, fetch: bool) -> Outcome:
        try:
            result = self.con.execute(sql)
            rows = result.fetchall() if fetch else None
        except duckdb.Error as err:
            return Outcome(error=type(err).__name__, message=str(err))
        return Outcome(rows=rows)

    def planned(self, sql: str) -> bool:
        raise AssertionError("the reference side plans nothing")

    def calls(self) -> int | None:
        return None


def same_error(got: Outcome, want: Outcome) -> bool:
    """The wire's SQLSTATE is the one the server maps the reference's DuckDB error to."""
    error = getattr(duckdb, want.error or "Error")(want.message)
    return got.error == describe_error(error)[0]


def _database(folder: Path, setup: tuple[str, ...]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "db.duckdb"  # one catalog name on both sides: db
    con = duckdb.connect(str(path))
    for sql in setup:
        con.execute(sql)
    con.close()
    return path


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    """One server for the module (it takes seconds to start); each test resets its database."""
    with wire_server(_database(tmp_path_factory.mktemp("wire"), ()), "--backend", BACKEND) as s:
        yield s


def _fresh(server: WireProcess, setup: tuple[str, ...]) -> None:
    """The server's database emptied of what earlier tests made, then ``setup`` run."""
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        schemas = admin.execute(
            "SELECT schema_name FROM duckdb_schemas() WHERE database_name = 'db' AND NOT internal"
        ).fetchall()
        for (schema,) in schemas:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for kind, catalog in (("VIEW", "duckdb_views()"), ("TABLE", "duckdb_tables()")):
            names = admin.execute(
                f"SELECT {kind.lower()}_name FROM {catalog} "
                "WHERE database_name = 'db' AND schema_name = 'main' AND NOT temporary"
                + (" AND NOT internal" if kind == "VIEW" else "")
            ).fetchall()
            for (name,) in names:
                admin.execute(f'DROP {kind} "{name}"')
        for sql in setup:
            admin.execute(sql)


@pytest.fixture
def reference(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(_database(tmp_path / "ref", BASE)))
    yield con
    con.close()


@pytest.mark.parametrize("script", WIRE_SCRIPTS, ids=[s.name for s in WIRE_SCRIPTS])
def test_script_over_the_wire_matches_plain_duckdb(
    script: Script, shared: WireProcess, reference: duckdb.DuckDBPyConnection
) -> None:
    for sql in script.setup:
        reference.execute(sql)
    _fresh(shared, (*BASE, *script.setup))
    with (
        psycopg.connect(shared.dsn(), autocommit=True) as a,
        psycopg.connect(shared.dsn(), autocommit=True) as b,
    ):
        run_script(
            script,
            {"a": Wire(a), "b": Wire(b)},
            {"a": Local(reference), "b": Local(reference.cursor())},
            compare_errors=same_error,
        )


def test_there_are_enough_wire_scripts() -> None:
    assert len(WIRE_SCRIPTS) >= 10


@pytest.mark.parametrize("explicit", [False, True], ids=["autocommit", "transaction"])
def test_a_write_and_a_semantic_query_in_one_simple_query(
    shared: WireProcess, reference: duckdb.DuckDBPyConnection, explicit: bool
) -> None:
    _fresh(shared, BASE)
    both = "INSERT INTO t VALUES (7, 'good seven'); DELETE FROM t WHERE id = 1; {query}"
    with psycopg.connect(shared.dsn(), autocommit=True) as conn:
        if explicit:
            conn.execute("BEGIN")
            reference.execute("BEGIN")
        cur = conn.execute(both.format(query=semantic(ALL_IDS)))  # no parameters: one Query
        while cur.nextset():  # to the last statement's rows
            pass
        want = reference.execute(both.format(query=plain(ALL_IDS))).fetchall()
        assert cur.fetchall() == want == [([3, 5, 7],)]
        if explicit:
            conn.execute("ROLLBACK")
            reference.execute("ROLLBACK")
        got = conn.execute(semantic(ALL_IDS)).fetchall()
        assert got == reference.execute(plain(ALL_IDS)).fetchall()


# DuckDB has no savepoints; the wire server keeps them as PostgreSQL does (pgwire/transaction):
# a semantic query after ROLLBACK TO sees exactly the work before the savepoint
def test_savepoints_over_the_wire(shared: WireProcess) -> None:
    _fresh(shared, BASE)
    with (
        psycopg.connect(shared.dsn(), autocommit=True) as a,
        psycopg.connect(shared.dsn(), autocommit=True) as b,
    ):
        ours, other = Wire(a), Wire(b)
        query = semantic(ALL_IDS)
        assert ours.planned(query)
        for sql in (
            "BEGIN",
            "INSERT INTO t VALUES (7, 'good seven')",
            "SAVEPOINT s",
            "DELETE FROM t WHERE id = 1",
            "UPDATE t SET text = 'good two' WHERE id = 2",
        ):
            assert ours.run(sql, fetch=False).error is None, sql
        assert ours.run(query, fetch=True).rows == [([2, 3, 5, 7],)]
        assert ours.run("ROLLBACK TO SAVEPOINT s", fetch=False).error is None
        assert ours.run(query, fetch=True).rows == [([1, 3, 5, 7],)]
        assert ours.run("SAVEPOINT t2", fetch=False).error is None
        failed = ours.run("SELECT error('boom')", fetch=True)
        assert failed.error == "22023" and "boom" in failed.message
        assert ours.run(query, fetch=True).error == "25P02"  # aborted until ROLLBACK TO
        assert ours.run("ROLLBACK TO t2", fetch=False).error is None
        assert ours.run("DELETE FROM t WHERE id = 3", fetch=False).error is None
        assert ours.run(query, fetch=True).rows == [([1, 5, 7],)]
        assert other.run(query, fetch=True).rows == [([1, 3, 5],)]  # nothing committed yet
        assert ours.run("RELEASE SAVEPOINT s", fetch=False).error is None
        assert ours.run("COMMIT", fetch=False).error is None
        assert other.run(query, fetch=True).rows == [([1, 5, 7],)]
