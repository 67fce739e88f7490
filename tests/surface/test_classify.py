"""``sem_classify(template, ['label', ...])``: the best label, on every entry.

The oracle (``test:``) picks the first label a column value contains, else one by a hash of
the values, so the template's own words never decide; every entry must ask the same requests
(one cache: the second entry makes no call).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BindError

LABELS = ["game", "compiler", "editor"]
ROWS = [
    (1, "a chess game for two players"),
    (2, "the GNU C compiler"),
    (3, "a text editor for programmers"),
    (4, "a puzzle game with a compiler theme"),  # both: the first label in the list wins
    (5, "tools for astronomers"),  # neither: a hash of the value picks one
    (6, None),
]
NAMED = (
    "SELECT id, sem_classify('Which kind of software is this? {text}', "
    "['game', 'compiler', 'editor']) AS kind FROM packages ORDER BY id"
)
POSITIONAL = (
    "SELECT id, sem_classify('Which kind of software is this? {0}', "
    "['game', 'compiler', 'editor'], text) AS kind FROM packages ORDER BY id"
)


def _table(con: duckdb.DuckDBPyConnection | duckdb_sem.SemConnection) -> None:
    con.execute("CREATE TABLE packages (id INTEGER, text VARCHAR)")
    con.executemany("INSERT INTO packages VALUES (?, ?)", ROWS)


def _check(rows: list[tuple[object, ...]]) -> None:
    kinds = dict((int(str(i)), k) for i, k in rows)
    assert [kinds[i] for i in (1, 2, 3, 4)] == ["game", "compiler", "editor", "game"]
    assert kinds[5] in LABELS and kinds[6] is None  # NULL in, NULL out


def test_every_entry_answers_the_best_label_and_shares_one_cache(tmp_path: Path) -> None:
    cache = str(tmp_path / "c.sqlite")
    backend = RuleBackend()
    planned = duckdb_sem.connect(backend=backend, cache=cache)
    _table(planned)
    assert "SemMap kind := sem_classify(" in planned.explain_semantic(NAMED)  # planned
    first = planned.sql(NAMED).fetchall()
    _check(first)
    assert backend.calls == 5
    assert planned.sql(POSITIONAL).fetchall() == first
    planned.close()

    udf = duckdb_sem.connect(backend=backend, cache=cache, optimize=False)
    _table(udf)
    assert udf.sql(NAMED).fetchall() == first

    plain = duckdb.connect()
    duckdb_sem.install(plain, backend=backend, cache=cache)
    _table(plain)
    assert plain.sql(POSITIONAL).fetchall() == first
    assert backend.calls == 5  # the same requests on every entry: all from the cache

    rel = udf.table("packages").sem_classify("Which kind of software is this? {text}", LABELS,
                                             name="kind")  # fmt: skip
    assert sorted(rel.fetchall(), key=lambda r: r[0]) == [
        (i, text, kind) for (i, text), (_, kind) in zip(ROWS, first, strict=True)
    ]
    assert backend.calls == 5
    udf.close()


def test_classify_output_feeds_sql(tmp_path: Path) -> None:
    con = duckdb_sem.connect(backend=RuleBackend(), cache=str(tmp_path / "c.sqlite"))
    _table(con)
    got = con.sql(
        "SELECT id FROM packages WHERE sem_classify('{text}', ['game', 'compiler', 'editor']) = 'game' "
        "AND id < 5 ORDER BY id"
    ).fetchall()
    assert got == [(1,), (4,)]
    con.close()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("sem_classify('{text}', ['game'])", "at least two distinct labels"),
        ("sem_classify('{text}', ['game', 'game'])", "at least two distinct labels"),
        ("sem_classify('{text}', ['game', ''])", "not a non-empty string"),
        ("sem_classify('{text}', 'game')", "list of labels"),
        ("sem_classify('{text}')", "list of labels"),
        ("sem_classify('{0}', text)", "list of labels"),
        ("sem_classify('{text}', ['game', 1])", "string literal"),
    ],
)
@pytest.mark.parametrize("optimize", [True, False])
def test_bad_labels_are_refused_before_any_call(
    tmp_path: Path, call: str, message: str, optimize: bool
) -> None:
    backend = RuleBackend()
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"), optimize=optimize)
    _table(con)
    with pytest.raises(BindError, match=message):
        con.sql(f"SELECT {call} FROM packages").fetchall()
    assert backend.calls == 0
    con.close()


def test_installed_udf_checks_computed_labels(tmp_path: Path) -> None:
    backend = RuleBackend()
    plain = duckdb.connect()
    duckdb_sem.install(plain, backend=backend, cache=str(tmp_path / "c.sqlite"))
    _table(plain)
    with pytest.raises(duckdb.Error, match="at least two distinct labels"):
        plain.sql("SELECT sem_classify('{0}', list_value('game'), text) FROM packages").fetchall()
    assert backend.calls == 0


def test_relation_refuses_bad_labels(tmp_path: Path) -> None:
    con = duckdb_sem.connect(backend=RuleBackend(), cache=str(tmp_path / "c.sqlite"))
    _table(con)
    with pytest.raises(BindError, match="list of strings"):
        con.table("packages").sem_classify("{text}", "game")
    with pytest.raises(BindError, match="at least two distinct labels"):
        con.table("packages").sem_classify("{text}", ["game"])
    con.close()
