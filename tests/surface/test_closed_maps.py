"""An untyped ``sem_map`` whose template names a closed set is a choice on every entry.

The oracle (``test:``) answers a choice with the first label a column value names (else one by
a hash of the values) and free text with the row's first words, so the two are told apart by
the answer; every entry must ask the same requests (one cache: later entries make no call).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BindError

ROWS = [(1, "a positive take"), (2, "negative, sadly"), (3, "no opinion at all"), (4, None)]
WORDS = "Answer with exactly one word, POSITIVE or NEGATIVE. Review: {text}"
QUERY = f"SELECT id, sem_map('{WORDS}') AS verdict FROM reviews ORDER BY id"


def _table(con: duckdb.DuckDBPyConnection | duckdb_sem.SemConnection) -> None:
    con.execute("CREATE TABLE reviews (id INTEGER, text VARCHAR)")
    con.executemany("INSERT INTO reviews VALUES (?, ?)", ROWS)


def _check(rows: list[tuple[object, ...]]) -> None:
    verdicts = dict(rows)
    assert verdicts[1] == "POSITIVE" and verdicts[2] == "NEGATIVE"  # the value names it
    assert verdicts[3] in ("POSITIVE", "NEGATIVE")  # a hash picks one: never free text
    assert verdicts[4] is None


def test_every_entry_scores_the_named_choice_and_shares_one_cache(tmp_path: Path) -> None:
    cache = str(tmp_path / "c.sqlite")
    backend = RuleBackend()
    planned = duckdb_sem.connect(backend=backend, cache=cache)
    _table(planned)
    first = planned.sql(QUERY).fetchall()
    _check(first)
    assert backend.calls == 3
    verbose = "\n".join(r[0] for r in planned.sql(f"EXPLAIN SEMANTIC VERBOSE {QUERY}").fetchall())
    assert "answered as a choice among [POSITIVE, NEGATIVE]" in verbose
    planned.close()

    udf = duckdb_sem.connect(backend=backend, cache=cache, optimize=False)
    _table(udf)
    assert udf.sql(QUERY).fetchall() == first
    rel = udf.table("reviews").sem_map(WORDS, name="verdict").project("id, verdict").order("id")
    assert rel.fetchall() == first
    udf.close()

    plain = duckdb.connect()
    duckdb_sem.install(plain, backend=backend, cache=cache)
    _table(plain)
    positional = WORDS.replace("{text}", "{0}")
    assert (
        plain.sql(f"SELECT id, sem_map('{positional}', text) FROM reviews ORDER BY id").fetchall()
        == first
    )
    assert backend.calls == 3  # the same requests on every entry: all from the cache


@pytest.mark.parametrize("optimize", [True, False])
def test_choices_option_forces_and_refuses(tmp_path: Path, optimize: bool) -> None:
    backend = RuleBackend()
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"), optimize=optimize)
    _table(con)
    refused = con.sql(
        f"SELECT id, sem_map('{WORDS}', choices := []) FROM reviews WHERE id = 2"
    ).fetchall()
    assert refused == [(2, "Answer with exactly one word,")]  # generated: the row's first words
    forced = con.sql(
        "SELECT id, sem_map('Mood of {text}', choices := ['sadly', 'gladly']) "
        "FROM reviews WHERE id = 2"
    ).fetchall()
    assert forced == [(2, "sadly")]
    scale = con.sql(
        "SELECT id, sem_map('Rate {text} on a 1 to 5 scale, digit only') FROM reviews "
        "WHERE id <= 3 ORDER BY id"
    ).fetchall()
    assert all(v in {"1", "2", "3", "4", "5"} for _, v in scale)
    with pytest.raises(BindError, match="sem_map only"):
        con.sql("SELECT sem_filter('{text}', choices := ['a', 'b']) FROM reviews").fetchall()
    with pytest.raises(BindError, match="list of strings"):
        con.sql("SELECT sem_map('{text}', choices := 'a') FROM reviews").fetchall()
    con.close()
