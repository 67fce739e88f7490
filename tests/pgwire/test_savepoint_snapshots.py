"""Savepoints never re-run a write at a new snapshot, and isolation is what the server reports
(issue 44, items 2 and 3), step by step against PostgreSQL 15 on the same steps.

DuckDB has no savepoints: the server undoes to one by re-running the writes before it
(``pgwire/transaction.py``), and refuses to (``ROLLBACK TO`` fails, 40001 or 0A000, and the
transaction is aborted, so COMMIT answers ROLLBACK) where the re-run could write other rows than
were acknowledged. Each case runs on a real PostgreSQL 15 (a schema of its own in the ``test``
database) and on ``duckdb-sem pgwire``; the outcome must be PostgreSQL's, or the refusal, and
never a commit of rows other than those acknowledged.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, wire_server
from pg_sides import Seen, Side, play_once

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    db = tmp_path_factory.mktemp("savepoints") / "sp.duckdb"
    with wire_server(db, "--backend", "test:?yes_if=good") as server:
        yield server


@pytest.fixture
def sides(wire: WireProcess, needs_pg: None) -> Iterator[Any]:
    """``make(setup)``: the two sides of one case, each starting from ``setup``."""
    made: list[Side] = []
    schema = f"sp_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")

        def make(setup: list[str]) -> tuple[Side, Side]:
            names = {"dst", "src", "acct", "seqt", "oncall"}
            drops = [f"DROP TABLE IF EXISTS {n}" for n in sorted(names)]
            pg = Side(PG_DSN, setup, schema=schema)
            ours = Side(wire.dsn(), [*drops, "DROP SEQUENCE IF EXISTS seq", *setup])
            made.extend([pg, ours])
            return pg, ours

        try:
            yield make
        finally:
            for side in made:
                side.close()
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


SRC = [
    "CREATE TABLE src (id INTEGER)",
    "INSERT INTO src SELECT * FROM generate_series(1, 10)",
    "CREATE TABLE dst (id INTEGER)",
]
COMMITTED_DST = ("b", "SELECT id FROM dst ORDER BY id")


def _ids(seen: Seen) -> list[int]:
    return [row[0] for row in seen.rows]


def test_rollback_to_a_savepoint_with_nothing_after_it_keeps_the_acknowledged_rows(
    sides: Any,
) -> None:
    # issue 44: another session changes src; PostgreSQL commits the 10 rows acknowledged
    steps = [
        ("a", "BEGIN"),
        ("a", "INSERT INTO dst SELECT id FROM src"),
        ("b", "INSERT INTO src VALUES (11), (12), (13)"),
        ("b", "DELETE FROM src WHERE id <= 2"),
        ("a", "SAVEPOINT s"),
        ("a", "ROLLBACK TO SAVEPOINT s"),
        ("a", "COMMIT"),
        COMMITTED_DST,
    ]
    pg, ours = (side.play(steps) for side in sides(SRC))
    assert pg[1].status == ours[1].status == "INSERT 0 10"
    assert [s.sqlstate for s in ours] == [s.sqlstate for s in pg] == [None] * len(steps)
    assert ours[-2].status == pg[-2].status == "COMMIT"
    assert _ids(ours[-1]) == _ids(pg[-1]) == list(range(1, 11))


def test_rollback_to_after_another_session_committed_fails_rather_than_replay(
    sides: Any,
) -> None:
    # the same with a write after the savepoint: undoing it means re-running the INSERT, which
    # would read src as it is now (ids 3-13); the server refuses, and the transaction is aborted
    steps = [
        ("a", "BEGIN"),
        ("a", "INSERT INTO dst SELECT id FROM src"),
        ("b", "INSERT INTO src VALUES (11), (12), (13)"),
        ("b", "DELETE FROM src WHERE id <= 2"),
        ("a", "SAVEPOINT s"),
        ("a", "INSERT INTO dst VALUES (100)"),
        ("a", "ROLLBACK TO SAVEPOINT s"),
        ("a", "SELECT count(*) FROM dst"),
        ("a", "COMMIT"),
        COMMITTED_DST,
    ]
    pg, ours = (side.play(steps) for side in sides(SRC))
    assert pg[6].sqlstate is None and pg[-2].status == "COMMIT"
    assert _ids(pg[-1]) == list(range(1, 11))
    assert ours[6].sqlstate == "40001"  # serialization failure: clients retry
    assert ours[7].sqlstate == "25P02"  # aborted, as PostgreSQL aborts a failed statement's
    assert ours[-2].sqlstate is None and ours[-2].status == "ROLLBACK"  # not "COMMIT"
    assert _ids(ours[-1]) == []  # nothing but the acknowledged rows, or nothing at all


def test_rollback_to_replays_when_nothing_changed_meanwhile(sides: Any) -> None:
    steps = [
        ("a", "BEGIN"),
        ("a", "INSERT INTO dst SELECT id FROM src"),
        ("a", "SAVEPOINT s"),
        ("a", "INSERT INTO dst VALUES (100)"),
        ("a", "SELECT * FROM no_such_table"),
        ("a", "ROLLBACK TO SAVEPOINT s"),
        ("a", "INSERT INTO dst VALUES (200)"),
        ("a", "COMMIT"),
        COMMITTED_DST,
    ]
    pg, ours = (side.play(steps) for side in sides(SRC))
    assert [s.sqlstate for s in ours] == [s.sqlstate for s in pg]
    assert pg[4].sqlstate == "42P01"
    assert ours[-2].status == pg[-2].status == "COMMIT"
    assert _ids(ours[-1]) == _ids(pg[-1]) == [*range(1, 11), 200]


def test_a_read_modify_write_after_rollback_to_never_loses_a_concurrent_update(
    sides: Any,
) -> None:
    # REPEATABLE READ: a reads 100, b adds 50, a undoes to a savepoint and adds 10 to what it
    # read. PostgreSQL: 40001 at a's UPDATE (b's +50 is kept); a replay at a new snapshot would
    # let a's UPDATE read 150 while a's earlier SELECT said 100
    steps = [
        ("a", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
        ("a", "SELECT bal FROM acct WHERE id = 1"),
        ("b", "UPDATE acct SET bal = bal + 50 WHERE id = 1"),
        ("a", "SAVEPOINT s"),
        ("a", "SELECT * FROM no_such_table"),
        ("a", "ROLLBACK TO SAVEPOINT s"),
        ("a", "UPDATE acct SET bal = bal + 10 WHERE id = 1"),
        ("a", "COMMIT"),
        ("b", "SELECT bal FROM acct WHERE id = 1"),
    ]
    setup = ["CREATE TABLE acct (id INTEGER PRIMARY KEY, bal INTEGER)",
             "INSERT INTO acct VALUES (1, 100)"]  # fmt: skip
    pg, ours = (side.play(steps) for side in sides(setup))
    assert pg[1].rows == ours[1].rows == [(100,)]
    assert pg[6].sqlstate == "40001"  # PostgreSQL fails the UPDATE
    assert "40001" in {s.sqlstate for s in ours[5:7]}  # we fail the ROLLBACK TO instead
    assert pg[-2].status == ours[-2].status == "ROLLBACK"
    assert pg[-1].rows == ours[-1].rows == [(150,)]


def test_rollback_to_past_a_nextval_fails_instead_of_committing_another_value(
    sides: Any,
) -> None:
    # PostgreSQL keeps the value acknowledged (1); a replay would call nextval again (2)
    steps = [
        ("a", "BEGIN"),
        ("a", "INSERT INTO seqt VALUES (nextval('seq')) RETURNING id"),
        ("a", "SAVEPOINT s"),
        ("a", "SELECT * FROM no_such_table"),
        ("a", "ROLLBACK TO SAVEPOINT s"),
        ("a", "COMMIT"),
        ("b", "SELECT id FROM seqt"),
    ]
    setup = ["CREATE SEQUENCE seq", "CREATE TABLE seqt (id INTEGER)"]
    pg, ours = (side.play(steps) for side in sides(setup))
    assert pg[1].rows == ours[1].rows == [(1,)]
    assert pg[-1].rows == [(1,)]
    assert ours[4].sqlstate == "0A000"
    assert ours[-2].status == "ROLLBACK"
    assert ours[-1].rows == []  # never (2,)


def test_a_source_dropped_meanwhile_aborts_the_transaction_and_commit_says_rollback(
    wire: WireProcess,
) -> None:
    # issue 44: the replay failed (42P01), then COMMIT said COMMIT and the 4 rows were gone.
    # (PostgreSQL's DROP would wait for the reader's lock: no oracle run here)
    seen = play_once(
        wire.dsn(),
        [
            "DROP TABLE IF EXISTS dst",
            "DROP TABLE IF EXISTS src",
            "CREATE TABLE src AS SELECT range::INTEGER AS id FROM range(4)",
            "CREATE TABLE dst (id INTEGER)",
        ],
        [
            ("a", "BEGIN"),
            ("a", "INSERT INTO dst SELECT id FROM src"),
            ("b", "DROP TABLE src"),
            ("a", "SAVEPOINT s"),
            ("a", "SELECT * FROM no_such_table"),
            ("a", "ROLLBACK TO SAVEPOINT s"),
            ("a", "COMMIT"),
            ("b", "SELECT count(*) FROM dst"),
        ],
    )
    assert seen[1].status == "INSERT 0 4"
    assert seen[5].sqlstate == "40001"
    assert seen[6].status == "ROLLBACK"  # the client learns the 4 rows were not committed
    assert seen[7].rows == [(0,)]


ONCALL = ["CREATE TABLE oncall (name VARCHAR, on_call BOOLEAN)",
          "INSERT INTO oncall VALUES ('alice', true), ('bob', true)"]  # fmt: skip


def _write_skew(begin: str) -> list[tuple[str, str]]:
    """Each session sees two doctors on call and takes a different one off: write skew."""
    return [
        ("a", begin),
        ("b", begin),
        ("a", "SELECT count(*) FROM oncall WHERE on_call"),
        ("b", "SELECT count(*) FROM oncall WHERE on_call"),
        ("a", "UPDATE oncall SET on_call = false WHERE name = 'alice'"),
        ("b", "UPDATE oncall SET on_call = false WHERE name = 'bob'"),
        ("a", "COMMIT"),
        ("b", "COMMIT"),
        ("a", "SELECT count(*) FROM oncall WHERE on_call"),
    ]


def test_the_reported_isolation_behaves_as_postgresql_does_at_that_level(sides: Any) -> None:
    pg, ours = sides(ONCALL)
    assert ours.step("a", "SHOW transaction_isolation").rows == [("repeatable read",)]
    assert ours.step("a", "SHOW default_transaction_isolation").rows == [("repeatable read",)]
    # under REPEATABLE READ, PostgreSQL lets the write skew through too: same outcome
    on_pg = pg.play(_write_skew("BEGIN ISOLATION LEVEL REPEATABLE READ"))
    on_ours = ours.play(_write_skew("BEGIN ISOLATION LEVEL REPEATABLE READ"))
    assert [s.sqlstate for s in on_ours] == [s.sqlstate for s in on_pg] == [None] * 9
    assert on_ours[-1].rows == on_pg[-1].rows == [(0,)]


def test_serializable_is_refused_in_words_a_client_sees(sides: Any) -> None:
    pg, ours = sides(ONCALL)
    on_pg = pg.play(_write_skew("BEGIN ISOLATION LEVEL SERIALIZABLE"))
    assert on_pg[7].sqlstate == "40001"  # PostgreSQL detects the write skew
    assert on_pg[-1].rows == [(1,)]
    on_ours = ours.play(_write_skew("BEGIN ISOLATION LEVEL SERIALIZABLE"))
    notice = on_ours[0].notices
    assert notice and "REPEATABLE READ" in notice[0] and "write skew" in notice[0]
    assert on_ours[-1].rows == [(0,)]  # what the notice said: not detected
    assert ours.step("a", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
                     "SERIALIZABLE").notices  # fmt: skip
    assert ours.step("a", "SHOW transaction_isolation").rows == [("repeatable read",)]


def test_a_concurrent_commit_of_reads_only_does_not_fail_a_savepoint(wire: WireProcess) -> None:
    # psycopg outside autocommit wraps every SELECT in BEGIN/COMMIT: such commits change
    # nothing, so they must not make other sessions' ROLLBACK TO fail
    seen = play_once(
        wire.dsn(),
        ["DROP TABLE IF EXISTS dst", "CREATE TABLE dst (id INTEGER)"],
        [
            ("a", "BEGIN"),
            ("a", "INSERT INTO dst VALUES (1)"),
            ("b", "BEGIN"),
            ("b", "SELECT count(*) FROM dst"),
            ("b", "COMMIT"),
            ("a", "SAVEPOINT s"),
            ("a", "INSERT INTO dst VALUES (2)"),
            ("a", "ROLLBACK TO SAVEPOINT s"),
            ("a", "COMMIT"),
            ("b", "SELECT id FROM dst"),
        ],
    )
    assert [s.sqlstate for s in seen] == [None] * 10
    assert seen[-1].rows == [(1,)]


def test_set_local_and_a_rolled_back_set_end_with_their_transaction(sides: Any) -> None:
    # PostgreSQL: SET LOCAL lasts until the block ends (COMMIT or ROLLBACK); a plain SET in a
    # block that rolls back is undone; one that commits stays; SET LOCAL outside a block warns
    steps = [
        ("a", "SET TimeZone = 'UTC'"),
        ("a", "BEGIN"),
        ("a", "SET LOCAL TimeZone = 'Europe/Paris'"),
        ("a", "SHOW TimeZone"),
        ("a", "COMMIT"),
        ("a", "SHOW TimeZone"),
        ("a", "BEGIN"),
        ("a", "SET TimeZone = 'Asia/Tokyo'"),
        ("a", "ROLLBACK"),
        ("a", "SHOW TimeZone"),
        ("a", "BEGIN"),
        ("a", "SET TimeZone = 'Asia/Tokyo'"),
        ("a", "COMMIT"),
        ("a", "SHOW TimeZone"),
        ("a", "SET LOCAL TimeZone = 'Europe/Paris'"),
        ("a", "SHOW TimeZone"),
    ]
    pg, ours = (side.play(steps) for side in sides([]))
    shown = [s.rows for s in ours if s.rows]
    assert shown == [s.rows for s in pg if s.rows]
    assert shown == [[("Europe/Paris",)], [("UTC",)], [("UTC",)], [("Asia/Tokyo",)],
                     [("Asia/Tokyo",)]]  # fmt: skip
    assert "transaction blocks" in ours[-2].notices[0]


def test_set_local_of_a_budget_ends_with_its_transaction(wire: WireProcess) -> None:
    seen = play_once(
        wire.dsn(),
        [],
        [
            ("a", "SHOW duckdb_sem.max_llm_calls"),
            ("a", "BEGIN"),
            ("a", "SET LOCAL duckdb_sem.max_llm_calls = 3"),
            ("a", "SHOW duckdb_sem.max_llm_calls"),
            ("a", "ROLLBACK"),
            ("a", "SHOW duckdb_sem.max_llm_calls"),
        ],
    )
    assert seen[3].rows == [("3",)]
    assert seen[5].rows == seen[0].rows != [("3",)]


def test_sql_prepare_of_a_semantic_statement_over_the_wire(wire: WireProcess) -> None:
    seen = play_once(
        wire.dsn(),
        [
            "DROP TABLE IF EXISTS r",
            "CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a good film'), "
            "(2, 'dull'), (3, 'good acting')) v(id, text)",
        ],
        [
            (
                "a",
                "PREPARE p (INTEGER) AS SELECT id FROM r WHERE id > $1 "
                "AND sem_filter('{text} is positive') ORDER BY id",
            ),
            ("a", "EXECUTE p(0)"),
            ("a", "EXECUTE p(1)"),
            ("a", "DEALLOCATE p"),
            ("a", "EXECUTE p(0)"),
        ],
    )
    assert seen[1].rows == [(1,), (3,)] and seen[2].rows == [(3,)]
    assert seen[4].sqlstate is not None
