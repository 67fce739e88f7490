"""Transaction scripts for differential tests: each is data, run twice, step by step.

A script is setup SQL and a list of steps on named sessions (``a``, ``b``: two connections to
one database). It runs on a semantic side (a ``duckdb_sem`` connection in process, or psycopg
against the wire server) and on a reference side (plain DuckDB on a database of its own, with
the same setup). Statements (:class:`Do`) and expected failures (:class:`Fails`) run on both;
each query (:class:`Ask`) runs on the semantic side with its semantic calls and on the
reference side with their relational equivalents, and the rows must be equal, step by step.

The equivalents hold for the ``test:?yes_if=good`` rule backend (``backends/rules.py``), which
says yes when the rendered row contains ``good``, case-insensitive; no template below contains
that word, so the decision comes from the row's value alone:

- ``POS(c)``: ``sem_filter('{c} is positive')``, ``contains(lower(c), 'good')``;
- ``FLAG(c)``: ``sem_map('Is {c} fine?', 'BOOLEAN')``, the same test;
- ``ECHO(c)``: ``sem_map('Echo {c}')`` (VARCHAR: the rendered row's first five words),
  ``'Echo ' || c`` (values of at most four single-spaced words).

Both sides' databases are files named ``db.duckdb`` (in folders of their own), so a
catalog-qualified name (``db.main.t``) means the same on both.

Example: ``Ask("SELECT id FROM t WHERE POS(text) ORDER BY id")`` runs
``SELECT id FROM t WHERE sem_filter('{text} is positive') ORDER BY id`` on the semantic side and
``SELECT id FROM t WHERE contains(lower(text), 'good') ORDER BY id`` on the reference side.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "BASE",
    "SCRIPTS",
    "Ask",
    "Do",
    "Fails",
    "Outcome",
    "Script",
    "Session",
    "plain",
    "run_script",
    "semantic",
]

_MARKER = re.compile(r"\b(POS|FLAG|ECHO)\(([\w.]+)\)")
_SEMANTIC = {
    "POS": "sem_filter('{{{c}}} is positive')",
    "FLAG": "sem_map('Is {{{c}}} fine?', 'BOOLEAN')",
    "ECHO": "sem_map('Echo {{{c}}}')",
}
_PLAIN = {
    "POS": "contains(lower({c}), 'good')",
    "FLAG": "contains(lower({c}), 'good')",
    "ECHO": "('Echo ' || {c})",
}


def _expand(sql: str, forms: Mapping[str, str]) -> str:
    return _MARKER.sub(lambda m: forms[m.group(1)].format(c=m.group(2)), sql)


def semantic(sql: str) -> str:
    """``sql`` with its markers as semantic calls."""
    return _expand(sql, _SEMANTIC)


def plain(sql: str) -> str:
    """``sql`` with its markers as their relational equivalents."""
    return _expand(sql, _PLAIN)


@dataclass(frozen=True, slots=True)
class Do:
    """A statement (markers allowed) both sides run; it must succeed on both."""

    sql: str
    on: str = "a"


@dataclass(frozen=True, slots=True)
class Ask:
    """A query with markers: the semantic rows must equal the reference rows.

    ``calls``: backend calls the semantic query makes (None: not checked, e.g. where a LIMIT
    may stop early); ``planned``: the statement must be on the optimizer's road (EXPLAIN
    SEMANTIC says so), else it may be on the UDF road, which the test is not about.
    """

    sql: str
    calls: int | None = None
    planned: bool = True
    on: str = "a"


@dataclass(frozen=True, slots=True)
class Fails:
    """A statement (markers allowed) that fails on both sides with a DuckDB error of class
    ``error`` whose message contains ``message`` (the semantic side's in any case: the wire
    server words some errors as PostgreSQL does); over the wire the error is a SQLSTATE."""

    sql: str
    error: str
    message: str
    on: str = "a"


Step = Do | Ask | Fails


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    steps: tuple[Step, ...]
    setup: tuple[str, ...] = ()  # after BASE
    covers: str = ""  # which rule of the issue it checks, for the reader

    def __post_init__(self) -> None:
        if not any(isinstance(s, Ask) for s in self.steps):
            raise ValueError(f"script {self.name} asks nothing")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one step gave: rows (with column names and types where the side knows them), or
    the error's class and message."""

    rows: list[tuple[Any, ...]] | None = None
    columns: list[tuple[str, str]] | None = None
    error: str | None = None
    message: str = ""


class Session(Protocol):
    """One connection of a side, as the runner drives it."""

    def run(self, sql: str, *, fetch: bool) -> Outcome: ...

    def planned(self, sql: str) -> bool: ...

    def calls(self) -> int | None:
        """Backend calls of the last query (None: this side cannot tell)."""


BASE = (
    "CREATE TABLE t (id INTEGER, text VARCHAR)",
    "INSERT INTO t VALUES (1, 'good one'), (2, 'bad two'), (3, 'good three'), "
    "(4, 'fine four'), (5, 'good five'), (6, 'poor six')",
    "CREATE TABLE r (id INTEGER, tag VARCHAR)",
    "INSERT INTO r VALUES (1, 'red'), (2, 'good blue'), (3, 'green'), (5, 'good gold'), "
    "(6, 'grey')",
)

ALL_IDS = "SELECT list(id ORDER BY id) AS ids FROM t WHERE POS(text)"
SOME_IDS = "SELECT list(id ORDER BY id) AS ids FROM t WHERE id >= 2 AND POS(text)"
FLAGS = "SELECT id, FLAG(text) AS f FROM t ORDER BY id"
ECHOES = "SELECT id, ECHO(text) AS e FROM t WHERE id % 2 = 1 ORDER BY id"
TOP2 = "SELECT id, text FROM t WHERE POS(text) ORDER BY id DESC LIMIT 2"
COUNTS = "SELECT count(*) AS n, min(id) AS lo, max(text) AS hi FROM t WHERE POS(text)"
GROUPS = "SELECT id % 2 AS k, count(*) AS n FROM t WHERE POS(text) GROUP BY k ORDER BY k"
JOIN_T = "SELECT t.id, r.tag FROM t JOIN r ON t.id = r.id WHERE POS(t.text) ORDER BY t.id, r.tag"
JOIN_R = "SELECT t.id, t.text FROM t JOIN r ON t.id = r.id WHERE POS(r.tag) ORDER BY t.id"
ABORTED = "Current transaction is aborted"

# the issue's own case: BEGIN; INSERT a good row; DELETE a good one; UPDATE a bad one to good
CHANGES = (
    Do("BEGIN"),
    Do("INSERT INTO t VALUES (7, 'good seven')"),
    Do("DELETE FROM t WHERE id = 1"),
    Do("UPDATE t SET text = 'good two' WHERE id = 2"),
)


def _own(name: str, *asks: Ask, covers: str = "own uncommitted changes") -> Script:
    return Script(name, (*CHANGES, *asks, Do("ROLLBACK"), *asks), covers=covers)


SCRIPTS: tuple[Script, ...] = (
    # 1. a transaction's own inserts, updates and deletes, in every form of query
    _own(
        "own_changes_filter",
        Ask(ALL_IDS, calls=6),
        Ask("SELECT id, POS(text) AS p FROM t ORDER BY id", calls=6, planned=False),
    ),
    Script(
        "own_changes_filter_and_predicate",
        (*CHANGES, Ask(SOME_IDS, calls=6), Do("ROLLBACK"), Ask(SOME_IDS, calls=5)),
        covers="own uncommitted changes",
    ),
    _own("own_changes_sem_map_boolean", Ask(FLAGS, calls=6)),
    _own("own_changes_sem_map_text", Ask(ECHOES, calls=3)),
    _own("own_changes_order_by_limit", Ask(TOP2)),
    _own("own_changes_aggregates", Ask(COUNTS, calls=6), Ask(GROUPS, calls=6)),
    _own("own_changes_join_filter_on_left", Ask(JOIN_T)),
    Script(
        "own_changes_join_filter_on_right",
        (
            Do("BEGIN"),
            Do("INSERT INTO r VALUES (4, 'good green')"),
            Do("UPDATE r SET tag = 'dull blue' WHERE id = 2"),
            Do("DELETE FROM r WHERE id = 5"),
            Ask(JOIN_R),
            Do("ROLLBACK"),
            Ask(JOIN_R),
        ),
        covers="own uncommitted changes, join",
    ),
    Script(
        "own_changes_seen_after_each_statement",
        (
            Do("BEGIN"),
            Ask(ALL_IDS, calls=6),
            Do("INSERT INTO t VALUES (8, 'good eight'), (9, 'bad nine')"),
            Ask(ALL_IDS, calls=8),
            Do("UPDATE t SET text = 'gone ' || id WHERE id IN (3, 8)"),
            Ask(ALL_IDS, calls=8),
            Do("DELETE FROM t WHERE id < 5"),
            Ask(ALL_IDS, calls=4),
            Ask(SOME_IDS, calls=4),
            Do("COMMIT"),
            Ask(ALL_IDS, calls=4),
        ),
        covers="own changes, one after the other",
    ),
    Script(
        "own_delete_of_every_row",
        (
            Do("BEGIN"),
            Do("DELETE FROM t"),
            Ask(ALL_IDS, calls=0),
            Ask(FLAGS, calls=0),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="own uncommitted changes: an empty table",
    ),
    Script(
        "own_insert_select_doubles_the_table",
        (
            Do("BEGIN"),
            Do("INSERT INTO t SELECT id + 10, text || ' again' FROM t"),
            Ask(ALL_IDS, calls=12),
            Ask(TOP2),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="own uncommitted changes: rows appended to the table read",
    ),
    Script(
        "own_new_table_and_column",
        (
            Do("BEGIN"),
            Do("CREATE TABLE n AS SELECT id, text FROM t WHERE id > 3"),
            Do("INSERT INTO n VALUES (10, 'good ten')"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM n WHERE POS(text)", calls=4),
            Do("ALTER TABLE t ADD COLUMN note VARCHAR DEFAULT 'good by default'"),
            Do("UPDATE t SET note = 'plain' WHERE id > 4"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM t WHERE POS(note)", calls=2),  # 2 notes
            Do("ROLLBACK"),
            Fails("SELECT id FROM n WHERE POS(text)", "CatalogException", "n does not exist"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="own uncommitted DDL",
    ),
    Script(
        "own_changes_in_a_wide_table",
        (
            Do("BEGIN"),
            Do("DELETE FROM w WHERE id BETWEEN 1000 AND 1999"),
            Do("UPDATE w SET text = 'good again ' || id WHERE id BETWEEN 2000 AND 2099"),
            Do("INSERT INTO w SELECT range + 5000, 'good new ' || range FROM range(300)"),
            Ask("SELECT count(*) AS n, sum(id)::BIGINT AS s FROM w WHERE POS(text)", calls=2300),
            Ask("SELECT id FROM w WHERE POS(text) ORDER BY id DESC LIMIT 3"),
            Do("ROLLBACK"),
            Ask("SELECT count(*) AS n, sum(id)::BIGINT AS s FROM w WHERE POS(text)", calls=3000),
        ),
        setup=(
            "CREATE TABLE w AS SELECT range::INTEGER AS id, 'row ' || range || "
            "CASE WHEN range % 3 = 0 THEN ' good' ELSE ' bad' END AS text FROM range(3000)",
        ),
        covers="own changes across several rowid windows (gaps, local rows)",
    ),
    Script(
        "own_changes_read_by_semantic_writes",
        (
            *CHANGES,
            Do("CREATE TABLE kept AS SELECT id, text FROM t WHERE POS(text)"),
            Do("INSERT INTO kept SELECT id + 100, ECHO(text) FROM t WHERE id > 4 AND POS(text)"),
            Ask("SELECT id, text FROM kept ORDER BY id", planned=False),
            Ask("SELECT list(id ORDER BY id) AS ids FROM kept WHERE POS(text)", calls=6),
            Do("ROLLBACK"),  # the writes' statements must not have committed the transaction
            Fails("SELECT id FROM kept", "CatalogException", "kept does not exist"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="own changes read by CREATE TABLE AS and INSERT ... SELECT",
    ),
    # 2. ROLLBACK undoes, COMMIT keeps, for the semantic query too
    Script(
        "commit_keeps_changes",
        (
            *CHANGES,
            Do("COMMIT"),
            Ask(ALL_IDS, calls=6),
            Ask(SOME_IDS, calls=6),
            Ask(ALL_IDS, on="b", calls=6),
        ),
        covers="commit",
    ),
    Script(
        "autocommit_changes",
        (
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Ask(ALL_IDS, calls=7),
            Do("DELETE FROM t WHERE id = 1"),
            Ask(ALL_IDS, calls=6),
            Ask(ALL_IDS, on="b", calls=6),
        ),
        covers="autocommit",
    ),
    Script(
        "commit_then_rollback",
        (
            Do("BEGIN"),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Do("COMMIT"),
            Do("BEGIN"),
            Do("DELETE FROM t WHERE id >= 5"),
            Ask(ALL_IDS, calls=4),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=7),
            Ask(COUNTS, calls=7),
        ),
        covers="commit, then rollback",
    ),
    Script(
        "failed_statement_aborts_the_transaction",
        (
            Do("BEGIN"),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Fails("SELECT error('boom')", "InvalidInputException", "boom"),
            Fails(ALL_IDS, "TransactionException", ABORTED),
            Fails("SELECT id, POS(text) AS p FROM t", "TransactionException", ABORTED),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="an aborted transaction",
    ),
    Script(
        "commit_of_an_aborted_transaction_rolls_back",
        (
            Do("BEGIN"),
            Do("UPDATE t SET text = 'good two' WHERE id = 2"),
            Fails("SELECT error('boom')", "InvalidInputException", "boom"),
            Do("COMMIT"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="an aborted transaction",
    ),
    Script(
        "begin_inside_a_transaction",
        (
            Do("BEGIN"),
            Do("DELETE FROM t WHERE id = 3"),
            Fails("BEGIN", "TransactionException", "within a transaction"),
            Fails(SOME_IDS, "TransactionException", ABORTED),
            Do("ROLLBACK"),
            Ask(SOME_IDS, calls=5),
        ),
        covers="an aborted transaction",
    ),
    # DuckDB has no SAVEPOINT: a parser error, which aborts the transaction it is in
    Script(
        "savepoint_is_refused_in_a_transaction",
        (
            Do("BEGIN"),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Fails(
                "SAVEPOINT before_delete", "ParserException", 'syntax error at or near "SAVEPOINT"'
            ),
            Fails(ALL_IDS, "TransactionException", ABORTED),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="SAVEPOINT",
    ),
    Script(
        "savepoint_is_refused_in_autocommit",
        (
            Fails("SAVEPOINT s", "ParserException", 'syntax error at or near "SAVEPOINT"'),
            Fails("ROLLBACK TO SAVEPOINT s", "ParserException", "syntax error"),
            Fails("RELEASE SAVEPOINT s", "ParserException", "syntax error"),
            Ask(ALL_IDS, calls=6),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Ask(ALL_IDS, calls=7),
        ),
        covers="SAVEPOINT",
    ),
    # 3. TEMP tables and views: a name means what DuckDB says
    Script(
        "temp_table_shadows_main_table",
        (
            Do("CREATE TEMP TABLE t (id INTEGER, text VARCHAR)"),
            Do("INSERT INTO t VALUES (10, 'good ten'), (11, 'bad eleven'), (12, 'good twelve')"),
            Ask(ALL_IDS, calls=3),
            Ask(TOP2),
            # DuckDB looks for schema main in the temp catalog first: main.t is the temp table
            Ask("SELECT list(id ORDER BY id) AS ids FROM main.t WHERE POS(text)", calls=3),
            Ask("SELECT list(id ORDER BY id) AS ids FROM db.main.t WHERE POS(text)", calls=6),
            Ask("SELECT list(id ORDER BY id) AS ids FROM temp.t WHERE POS(text)", calls=3),
            Ask(ALL_IDS, on="b", calls=6),
            Do("DROP TABLE temp.t"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="TEMP table shadowing",
    ),
    Script(
        "temp_table_alone",
        (
            Do("CREATE TEMP TABLE tt AS SELECT id * 100 AS id, text FROM t WHERE id <= 3"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM tt WHERE POS(text)", calls=3),
            Do("INSERT INTO tt VALUES (400, 'good four hundred')"),
            Do("UPDATE tt SET text = 'bad' WHERE id = 100"),
            Ask("SELECT id, FLAG(text) AS f FROM tt ORDER BY id", calls=4),
            Fails(
                "SELECT id FROM tt WHERE POS(text)", "CatalogException", "tt does not exist", on="b"
            ),
        ),
        covers="TEMP table",
    ),
    Script(
        "temp_view",
        (
            Do("CREATE TEMP VIEW v AS SELECT id, upper(text) AS text FROM t WHERE id > 2"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM v WHERE POS(text)", calls=4),
            Do("BEGIN"),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM v WHERE POS(text)", calls=5),
            Do("ROLLBACK"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM v WHERE POS(text)", calls=4),
        ),
        covers="TEMP view over a changed table",
    ),
    Script(
        "temp_view_over_a_shadowing_temp_table",
        (
            Do("CREATE TEMP TABLE t AS SELECT id + 20 AS id, text FROM main.t WHERE id % 2 = 1"),
            Do("CREATE TEMP VIEW odd AS SELECT * FROM t"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM odd WHERE POS(text)", calls=3),
            Ask(
                "SELECT o.id, r.tag FROM odd AS o JOIN r ON o.id - 20 = r.id WHERE POS(o.text) "
                "ORDER BY o.id"
            ),
        ),
        covers="TEMP view, TEMP shadowing, join with a main table",
    ),
    Script(
        "temp_table_created_in_a_rolled_back_transaction",
        (
            Do("BEGIN"),
            Do("CREATE TEMP TABLE t AS SELECT 42 AS id, 'good answer' AS text"),
            Ask(ALL_IDS, calls=1),
            Do("ROLLBACK"),
            Ask(ALL_IDS, calls=6),
        ),
        covers="TEMP table in a transaction",
    ),
    Script(
        "view_reads_the_transaction",
        (
            Do("CREATE VIEW pv AS SELECT id, text FROM t WHERE id < 100"),
            Do("BEGIN"),
            Do("DELETE FROM t WHERE id = 5"),
            Do("INSERT INTO t VALUES (50, 'good fifty')"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM pv WHERE POS(text)", calls=6),
            Do("ROLLBACK"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM pv WHERE POS(text)", calls=6),
        ),
        covers="a view over a changed table",
    ),
    # 4. two sessions: a transaction reads its snapshot, whatever the other commits
    Script(
        "snapshot_ignores_another_sessions_insert",
        (
            Do("BEGIN"),
            Ask(ALL_IDS, calls=6),
            Do("INSERT INTO t VALUES (7, 'good seven')", on="b"),
            Ask(ALL_IDS, calls=6),
            Ask(COUNTS, calls=6),
            Ask(ALL_IDS, on="b", calls=7),
            Do("COMMIT"),
            Ask(ALL_IDS, calls=7),
        ),
        covers="snapshot",
    ),
    Script(
        "snapshot_ignores_another_sessions_update_and_delete",
        (
            Do("BEGIN"),
            Ask(FLAGS, calls=6),
            Do("UPDATE t SET text = 'good two' WHERE id = 2", on="b"),
            Do("DELETE FROM t WHERE id = 3", on="b"),
            Ask(FLAGS, calls=6),
            Ask(JOIN_T),
            Do("ROLLBACK"),
            Ask(FLAGS, calls=5),
        ),
        covers="snapshot",
    ),
    Script(
        "snapshot_ignores_another_sessions_transaction",
        (
            Do("BEGIN"),
            Do("BEGIN", on="b"),
            Do("INSERT INTO t VALUES (8, 'good eight')", on="b"),
            Ask(ALL_IDS, calls=6),
            Ask(ALL_IDS, on="b", calls=7),
            Do("COMMIT", on="b"),
            Ask(ALL_IDS, calls=6),
            Do("COMMIT"),
            Ask(ALL_IDS, calls=7),
        ),
        covers="snapshot",
    ),
    Script(
        "uncommitted_changes_stay_in_their_session",
        (
            *CHANGES,
            Ask(ALL_IDS, on="b", calls=6),
            Ask(TOP2, on="b"),
            Ask(ALL_IDS, calls=6),
            Do("COMMIT"),
            Ask(ALL_IDS, on="b", calls=6),
        ),
        covers="isolation of uncommitted changes",
    ),
    Script(
        "both_sessions_in_transactions",
        (
            Do("BEGIN"),
            Do("BEGIN", on="b"),
            Do("INSERT INTO t VALUES (7, 'good seven')"),
            Do("INSERT INTO r VALUES (7, 'good gray')", on="b"),
            Ask(JOIN_T),
            Ask(JOIN_R, on="b"),
            Do("COMMIT", on="b"),
            Ask(JOIN_R),
            Do("COMMIT"),
            Ask(JOIN_R),
            Ask(JOIN_T, on="b"),
        ),
        covers="two transactions",
    ),
    # 6. session settings
    Script(
        "time_zone_renders_timestamps",
        (
            Do("SET TimeZone = 'America/New_York'"),
            Ask("SELECT id, ECHO(ts) AS e FROM stamps ORDER BY id", calls=2),
            Do("SET TimeZone = 'Asia/Kolkata'"),
            Ask("SELECT id, ECHO(ts) AS e FROM stamps WHERE hour(ts) > 6 ORDER BY id", calls=1),
        ),
        setup=(
            "CREATE TABLE stamps AS SELECT * FROM (VALUES "
            "(1, TIMESTAMPTZ '2024-03-10 01:30:00+00'), (2, TIMESTAMPTZ '2024-07-01 23:05:00+00')"
            ") v(id, ts)",
        ),
        covers="TimeZone",
    ),
    Script(
        "search_path_finds_a_table_in_another_schema",
        (
            Do("SET search_path = 's,main'"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM only_s WHERE POS(text)", calls=2),
            Ask(ALL_IDS, calls=3),  # s.t shadows main.t on this path
            Do("SET search_path = 'main,s'"),
            Ask(ALL_IDS, calls=6),
            Ask("SELECT list(id ORDER BY id) AS ids FROM only_s WHERE POS(text)", calls=2),
            Do("RESET search_path"),
            Ask("SELECT list(id ORDER BY id) AS ids FROM s.t WHERE POS(text)", calls=3),
        ),
        setup=(
            "CREATE SCHEMA s",
            "CREATE TABLE s.t AS SELECT * FROM (VALUES (31, 'good s one'), (32, 'bad s two'), "
            "(33, 'good s three')) v(id, text)",
            "CREATE TABLE s.only_s AS SELECT * FROM (VALUES (41, 'good'), (42, 'no')) v(id, text)",
        ),
        covers="search_path",
    ),
    Script(
        "null_order_setting_orders_the_planned_sort",
        (
            Do("SET default_null_order = 'nulls_first'"),
            Ask("SELECT id, rank FROM ranked WHERE POS(text) ORDER BY rank, id", calls=4),
            Ask("SELECT id FROM ranked WHERE POS(text) ORDER BY rank DESC, id LIMIT 2"),
        ),
        setup=(
            "CREATE TABLE ranked AS SELECT * FROM (VALUES (1, 'good a', 2), (2, 'good b', NULL), "
            "(3, 'bad c', 1), (4, 'good d', 1)) v(id, text, rank)",
        ),
        covers="other settings",
    ),
)
_NAMES = [s.name for s in SCRIPTS]
assert len(set(_NAMES)) == len(_NAMES), "script names must be unique"


def run_script(
    script: Script,
    semantic_side: Mapping[str, Session],
    reference: Mapping[str, Session],
    *,
    compare_errors: Callable[[Outcome, Outcome], bool] | None = None,
) -> None:
    """Run ``script`` on both sides (setup already done), asserting step by step."""
    for number, step in enumerate(script.steps):
        where = f"{script.name} step {number}: {step}"
        ours, theirs = semantic_side[step.on], reference[step.on]
        if isinstance(step, Do):
            got = ours.run(semantic(step.sql), fetch=False)
            want = theirs.run(plain(step.sql), fetch=False)
            assert want.error is None, f"{where}: the reference failed: {want.message}"
            assert got.error is None, f"{where}: {got.error}: {got.message}"
        elif isinstance(step, Fails):
            got = ours.run(semantic(step.sql), fetch=True)
            want = theirs.run(plain(step.sql), fetch=True)
            assert want.error == step.error and step.message in want.message, (where, want)
            assert got.error is not None, f"{where}: succeeded with {got.rows}"
            same = compare_errors(got, want) if compare_errors else got.error == want.error
            assert same and step.message.lower() in got.message.lower(), (where, got, want)
        else:
            sql = semantic(step.sql)
            if step.planned:
                assert ours.planned(sql), f"{where}: not planned"
            got, want = ours.run(sql, fetch=True), theirs.run(plain(step.sql), fetch=True)
            assert want.error is None, f"{where}: the reference failed: {want.message}"
            assert got.error is None, f"{where}: {got.error}: {got.message}"
            assert got.rows == want.rows, where
            if got.columns is not None:
                assert got.columns == want.columns, where
            if step.calls is not None and (calls := ours.calls()) is not None:
                assert calls == step.calls, f"{where}: {calls} backend calls"
