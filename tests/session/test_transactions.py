"""A planned statement runs inside the user's session: differential transaction scripts.

Every script of ``transaction_scripts`` runs on a ``duckdb_sem`` file database (sessions
``a``: the connection, ``b``: its ``cursor()``) and on a plain DuckDB database of its own; each
semantic query's rows, column names and types must equal plain DuckDB's for the relational
equivalent, and each must be planned (the UDF road sees the transaction trivially). Then what a
script cannot say: another session's commit *during* a semantic query (made by the backend
itself, between two SEUs), a failure in the middle of a planned statement, and DuckDB's result
habits (``execute(...).fetchone()`` in a loop, a result left half read).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
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

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BackendError
from duckdb_sem.llm.request import Completion, LLMRequest

BACKEND = "test:?yes_if=good"

Connection = duckdb_sem.SemConnection | duckdb.DuckDBPyConnection


@dataclass(frozen=True, slots=True)
class InProcess:
    """A session of either side: a ``SemConnection`` or a plain DuckDB connection."""

    con: Connection

    def run(self, sql: str, *, fetch: bool) -> Outcome:
        try:
            result = self.con.execute(sql)
            if not fetch:
                return Outcome()
            rows = result.fetchall()
            columns = [(str(d[0]), str(d[1])) for d in result.description or ()]
        except (duckdb.Error, duckdb_sem.SemError) as err:
            return Outcome(error=type(err).__name__, message=str(err))
        return Outcome(rows=rows, columns=columns)

    def planned(self, sql: str) -> bool:
        assert isinstance(self.con, duckdb_sem.SemConnection)
        first = self.con.explain_semantic(sql).splitlines()[:2]
        return not first[0].startswith("not planned") and first[1].startswith("chosen plan")

    def calls(self) -> int | None:
        if isinstance(self.con, duckdb_sem.SemConnection):
            return self.con.stats().physical_calls
        return None


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[dict[str, InProcess], dict[str, InProcess]]]:
    (tmp_path / "sem").mkdir()
    (tmp_path / "ref").mkdir()
    sem = duckdb_sem.connect(str(tmp_path / "sem" / "db.duckdb"), backend=BACKEND, cache="off")
    ref = duckdb.connect(str(tmp_path / "ref" / "db.duckdb"))
    sem_b, ref_b = sem.cursor(), ref.cursor()
    yield {"a": InProcess(sem), "b": InProcess(sem_b)}, {"a": InProcess(ref), "b": InProcess(ref_b)}
    for con in (sem_b, sem, ref_b, ref):
        con.close()


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_script_matches_plain_duckdb(
    script: Script, sides: tuple[dict[str, InProcess], dict[str, InProcess]]
) -> None:
    ours, reference = sides
    for sql in (*BASE, *script.setup):
        for side in (ours, reference):
            assert side["a"].run(sql, fetch=False).error is None, sql
    run_script(script, ours, reference)


def test_there_are_enough_scripts() -> None:
    assert len(SCRIPTS) >= 30


# -- another session commits while a semantic query runs -------------------------------------

WIDE = (
    "CREATE TABLE w AS SELECT range::INTEGER AS id, 'row ' || range || "
    "CASE WHEN range % 3 = 0 THEN ' good' ELSE ' bad' END AS text FROM range(3000)"
)
# rows of every later window change: had the statement read them after the commit, its
# answer would hold rows 1500+ as good, miss 2200..2499, and hold the new ones
LATE_COMMIT = (
    "UPDATE w SET text = 'good late ' || id WHERE id >= 1500",
    "DELETE FROM w WHERE id BETWEEN 2200 AND 2499",
    "INSERT INTO w SELECT range + 10000, 'good extra ' || range FROM range(100)",
)
SUMMARY = "SELECT count(*) AS n, sum(id)::BIGINT AS s, max(id) AS top FROM w WHERE POS(text)"
SEVENTHS = "SELECT id FROM w WHERE id % 7 = 0 AND POS(text) ORDER BY id"


class CommitsDuringTheQuery(RuleBackend):
    """The rule backend that, on its first call, has another session run ``statements`` (each
    committed, autocommit) before it answers: a commit between the query's first SEU and the
    rest of its windows."""

    def __init__(self, *, writer: Callable[[], duckdb.DuckDBPyConnection]) -> None:
        super().__init__(spec=BACKEND, yes_if=["good"])
        self._writer = writer
        self.armed = False
        self.calls_before_commit: int | None = None
        self._hook_lock = threading.Lock()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        with self._hook_lock:
            if self.armed:
                self.armed = False
                self.calls_before_commit = self.calls
                other = self._writer()
                for sql in LATE_COMMIT:
                    other.execute(sql)
                other.close()
        return super().complete(requests)


@pytest.fixture
def wide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[duckdb_sem.SemConnection, CommitsDuringTheQuery, duckdb.DuckDBPyConnection]]:
    monkeypatch.setenv("DUCKDB_SEM_SEU_ROWS", "128")
    path = str(tmp_path / "wide.duckdb")
    backend = CommitsDuringTheQuery(writer=lambda: duckdb.connect(path))
    con = duckdb_sem.connect(path, backend=backend, cache="off")
    con.duckdb.execute(WIDE)
    observer = duckdb.connect(path)  # another session, to read what is committed
    yield con, backend, observer
    observer.close()
    con.close()


def _plain_rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return con.execute(plain(sql)).fetchall()


@pytest.mark.parametrize("explicit", [False, True], ids=["autocommit", "transaction"])
@pytest.mark.parametrize("query", [SUMMARY, SEVENTHS], ids=["summary", "rows"])
def test_a_commit_during_the_query_is_never_seen_by_it(
    wide: tuple[duckdb_sem.SemConnection, CommitsDuringTheQuery, duckdb.DuckDBPyConnection],
    query: str,
    explicit: bool,
) -> None:
    con, backend, observer = wide
    before = _plain_rows(observer, query)
    if explicit:
        con.execute("BEGIN")
    assert InProcess(con).planned(semantic(query))
    backend.armed = True
    got = con.execute(semantic(query)).fetchall()
    assert not backend.armed, "the backend never committed during the query"
    assert got == before
    stats = con.stats()
    assert stats.physical_calls == (429 if query == SEVENTHS else 3000)  # every row, once
    assert stats.seus >= 3 and backend.calls > (backend.calls_before_commit or 0) + 128
    after = _plain_rows(observer, query)
    assert after != before  # the commit did change the answer
    if explicit:  # the transaction still reads its snapshot, to its end
        assert con.execute(semantic(query)).fetchall() == before
        con.execute("COMMIT")
    assert con.execute(semantic(query)).fetchall() == after  # the statement's transaction ended


def test_a_commit_between_two_fetches_of_one_result_is_not_seen(
    wide: tuple[duckdb_sem.SemConnection, CommitsDuringTheQuery, duckdb.DuckDBPyConnection],
) -> None:
    con, backend, observer = wide
    unordered = SEVENTHS.removesuffix(" ORDER BY id")  # rows come as their SEUs finish
    before = _plain_rows(observer, unordered)
    con.execute(semantic(unordered))
    first = con.fetchmany(3)
    assert backend.calls < 1500  # the rest of the table is not read yet
    for sql in LATE_COMMIT:
        observer.execute(sql)
    assert sorted(first + con.fetchall()) == sorted(before)
    after = con.execute(semantic(SEVENTHS)).fetchall()
    assert after == _plain_rows(observer, SEVENTHS) != sorted(before)


# -- a planned statement that fails midway ---------------------------------------------------


class FailsOnBoom(RuleBackend):
    """The rule backend, failing a batch that holds a row with ``boom``."""

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        if any("boom" in r.row for r in requests):
            raise BackendError("test backend: a row said boom")
        return super().complete(requests)


Fragile = tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection, FailsOnBoom]


@pytest.fixture
def fragile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fragile]:
    monkeypatch.setenv("DUCKDB_SEM_SEU_ROWS", "64")
    path = str(tmp_path / "fragile.duckdb")
    backend = FailsOnBoom(spec=BACKEND, yes_if=["good"])
    con = duckdb_sem.connect(path, backend=backend, cache="off")
    for sql in BASE:
        con.duckdb.execute(sql)
    con.duckdb.execute("INSERT INTO t SELECT range + 100, 'filler ' || range FROM range(600)")
    con.duckdb.execute("INSERT INTO t VALUES (9999, 'boom at the end')")
    observer = duckdb.connect(path)
    yield con, observer, backend
    observer.close()
    con.close()


def test_a_failure_midway_aborts_the_users_transaction(fragile: Fragile) -> None:
    con, observer, backend = fragile
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (7, 'good seven')")
    with pytest.raises(BackendError, match="boom"):
        con.execute(semantic(ALL_IDS)).fetchall()
    assert backend.calls >= 64  # SEUs ran before the failing one
    with pytest.raises(duckdb.TransactionException, match="Current transaction is aborted"):
        con.execute("SELECT count(*) FROM t").fetchall()
    con.execute("COMMIT")  # as in DuckDB: the aborted transaction is rolled back
    assert con.execute("SELECT count(*) FROM t WHERE id = 7").fetchall() == [(0,)]
    assert observer.execute("SELECT count(*) FROM t").fetchall() == [(607,)]


def test_a_failure_midway_in_autocommit_ends_its_own_transaction(fragile: Fragile) -> None:
    con, observer, backend = fragile
    with pytest.raises(BackendError, match="boom"):
        con.execute(semantic(ALL_IDS)).fetchall()
    assert backend.calls >= 64
    con.execute("BEGIN")  # no transaction is left open: BEGIN works
    con.execute("INSERT INTO t VALUES (7, 'good seven')")
    con.execute("COMMIT")
    assert observer.execute("SELECT count(*) FROM t").fetchall() == [(608,)]
    con.execute("DELETE FROM t WHERE id = 9999")
    assert con.execute(semantic(ALL_IDS)).fetchall() == [([1, 3, 5, 7],)]


# -- DuckDB's result habits ------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection]]:
    path = str(tmp_path / "habits.duckdb")
    con = duckdb_sem.connect(path, backend=BACKEND, cache="off")
    for sql in BASE:
        con.duckdb.execute(sql)
    con.duckdb.execute("INSERT INTO t SELECT range + 100, 'row ' || range || "
                       "CASE WHEN range % 2 = 0 THEN ' good' ELSE '' END FROM range(500)")  # fmt: skip
    observer = duckdb.connect(path)
    yield con, observer
    observer.close()
    con.close()


ONE = "SELECT id, ECHO(text) AS e FROM t WHERE id = ? AND POS(text)"
MANY = "SELECT id, text FROM t WHERE POS(text) ORDER BY id"


def test_execute_fetchone_in_a_loop_inside_a_transaction(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, _ = pair
    assert InProcess(con).planned(semantic(ONE.replace("?", "3")))
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (7, 'good seven')")
    con.execute("UPDATE t SET text = 'bad one' WHERE id = 1")
    got = [con.execute(semantic(ONE), [k]).fetchone() for k in range(1, 9)]
    want = [con.duckdb.execute(plain(ONE), [k]).fetchone() for k in range(1, 9)]
    assert got == want == [None, None, (3, "Echo good three"), None, (5, "Echo good five"),
                           None, (7, "Echo good seven"), None]  # fmt: skip
    con.execute("ROLLBACK")
    assert con.execute(semantic(ONE), [1]).fetchone() == (1, "Echo good one")


def test_fetchone_then_fetchall_reads_the_rest(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, observer = pair
    want = _plain_rows(observer, MANY)
    result = con.execute(semantic(MANY))
    first, second = result.fetchone(), result.fetchone()
    rest = result.fetchall()
    assert [first, second, *rest] == want and len(want) == 253
    assert result.fetchone() is None and result.fetchall() == []


def test_a_half_read_result_then_a_write_in_autocommit(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, observer = pair
    assert con.execute(semantic(MANY)).fetchone() == (1, "good one")
    con.execute("INSERT INTO t VALUES (7, 'good seven')")  # discards the half-read result
    # committed at once, by itself: not kept in the discarded statement's transaction
    assert observer.execute("SELECT count(*) FROM t WHERE id = 7").fetchall() == [(1,)]
    assert con.execute(semantic(MANY)).fetchall() == _plain_rows(observer, MANY)
    assert con.execute(semantic(MANY)).fetchmany(2) == [(1, "good one"), (3, "good three")]
    con.execute("BEGIN")  # a half-read result leaves no transaction open
    con.execute("DELETE FROM t WHERE id = 1")
    assert con.execute(semantic(MANY)).fetchone() == (3, "good three")
    con.execute("ROLLBACK")
    assert con.execute(semantic(MANY)).fetchone() == (1, "good one")


def test_a_half_read_result_then_commit_in_a_transaction(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, observer = pair
    con.execute("BEGIN")
    con.execute("DELETE FROM t WHERE id = 1")
    assert con.execute(semantic(MANY)).fetchmany(2) == [(3, "good three"), (5, "good five")]
    con.execute("COMMIT")  # the user's transaction commits, the half-read result is discarded
    assert observer.execute("SELECT count(*) FROM t WHERE id = 1").fetchall() == [(0,)]
    con.execute("BEGIN")
    con.execute("INSERT INTO t VALUES (1, 'good again')")
    assert con.execute(semantic(MANY)).fetchone() == (1, "good again")
    assert con.execute("SELECT count(*) FROM t WHERE id = 1").fetchone() == (1,)
    con.execute("ROLLBACK")
    assert observer.execute("SELECT count(*) FROM t WHERE id = 1").fetchall() == [(0,)]


def test_a_relation_runs_when_fetched_as_in_duckdb(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, observer = pair
    sql = "SELECT list(id ORDER BY id) AS ids FROM t WHERE id < 10 AND POS(text)"
    rel = con.sql(semantic(sql))  # built before the changes, read after each
    con.execute("BEGIN")
    con.execute("DELETE FROM t WHERE id = 1")
    con.execute("INSERT INTO t VALUES (7, 'good seven')")
    assert rel.fetchall() == con.duckdb.execute(plain(sql)).fetchall() == [([3, 5, 7],)]
    con.execute("ROLLBACK")
    assert rel.fetchall() == _plain_rows(observer, sql) == [([1, 3, 5],)]


def test_a_planned_aggregate_keeps_duckdbs_types(
    pair: tuple[duckdb_sem.SemConnection, duckdb.DuckDBPyConnection],
) -> None:
    con, observer = pair
    sql = "SELECT sum(id) AS s, count(*) AS n FROM t WHERE id < 10 AND POS(text)"
    result = con.execute(semantic(sql))
    rows, types = result.fetchall(), [str(d[1]) for d in result.description]
    want = observer.execute(plain(sql))
    assert types == [str(d[1]) for d in want.description] == ["HUGEINT", "BIGINT"]
    assert [[type(v) for v in row] for row in rows] == [[int, int]]
    assert rows == want.fetchall() == [(9, 3)]
