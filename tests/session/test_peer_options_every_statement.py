"""Per-call options (``model :=``, ``examples :=``, ``batch_size :=``) in every statement kind
that holds a semantic call (SELECT, CTE, CREATE TABLE AS, INSERT ... SELECT, UPDATE), on both
roads: ``connect()`` (planned) and ``install(con)`` (DuckDB runs the UDFs).

Recording ``test:`` backends show what each option did: ``model := 'fast'`` sends every request
to the named model and none to the default one; ``examples :=`` puts the call's examples in
every request's instruction; ``batch_size := 2`` never sends more than two requests at once.
No option changes an answer here (the backend says yes to rows with "good").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.request import Completion, LLMRequest

ROWS = ["good film", "bad film", "good day", "dull plot", "good cast"]
NICE = sorted(r for r in ROWS if "good" in r)
CALL = "sem_filter('Is it nice? {{0}}', x{options})"
OPTIONS = {
    "model": ", model := 'fast'",
    "examples": ", examples := [{'input': 'lovely', 'output': 'yes'}]",
    "batch_size": ", batch_size := 2",
}
Run = Callable[..., object]


class Recording(RuleBackend):
    """Says yes to rows with 'good'; keeps each batch's instructions."""

    def __init__(self) -> None:
        super().__init__(spec="test:?yes_if=good", yes_if=("good",))
        self.batches: list[list[str]] = []
        self._seen = threading.Lock()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        with self._seen:
            self.batches.append([r.prefix for r in requests])
        return super().complete(requests)


#: statement kind -> the statements to run, then the query that reads the outcome
STATEMENTS: dict[str, tuple[list[str], str]] = {
    "select": ([], "SELECT x FROM t WHERE {call} ORDER BY x"),
    "cte": ([], "WITH n AS (SELECT x FROM t WHERE {call}) SELECT x FROM n ORDER BY x"),
    "create table as": (
        ["CREATE TABLE out AS SELECT x FROM t WHERE {call}"],
        "SELECT x FROM out ORDER BY x",
    ),
    "insert select": (
        ["CREATE TABLE out (x VARCHAR)", "INSERT INTO out SELECT x FROM t WHERE {call}"],
        "SELECT x FROM out ORDER BY x",
    ),
    "update": (
        ["ALTER TABLE t ADD COLUMN nice BOOLEAN", "UPDATE t SET nice = {call}"],
        "SELECT x FROM t WHERE nice ORDER BY x",
    ),
}


def _connect(default: Recording, fast: Recording) -> tuple[Run, Callable[[str], list[str]]]:
    con = duckdb_sem.connect(backend=default, models={"fast": fast}, cache="off")
    return con.execute, lambda sql: [r[0] for r in con.sql(sql).fetchall()]


def _install(default: Recording, fast: Recording) -> tuple[Run, Callable[[str], list[str]]]:
    con = duckdb.connect()
    duckdb_sem.install(con, backend=default, models={"fast": fast}, cache="off")
    return con.execute, lambda sql: [r[0] for r in con.sql(sql).fetchall()]


ROADS = {"connect": _connect, "install": _install}


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("kind", list(STATEMENTS))
@pytest.mark.parametrize("road", sorted(ROADS))
def test_an_option_holds_in_every_statement_kind(road: str, kind: str, option: str) -> None:
    default, fast = Recording(), Recording()
    execute, rows = ROADS[road](default, fast)
    execute("CREATE TABLE t (x VARCHAR)")
    for value in ROWS:
        execute("INSERT INTO t VALUES (?)", [value])
    writes, read = STATEMENTS[kind]
    call = CALL.format(options=OPTIONS[option])
    for sql in writes:
        execute(sql.format(call=call))
    assert rows(read.format(call=call)) == NICE
    asked = [p for batch in default.batches + fast.batches for p in batch]
    assert len(asked) == len(ROWS)  # each row asked once, whatever the statement
    if option == "model":
        assert default.batches == [] and sum(map(len, fast.batches)) == len(ROWS)
    elif option == "examples":
        assert all("Input: lovely\nAnswer: yes" in p for p in asked)
    else:
        assert max(map(len, default.batches)) <= 2
