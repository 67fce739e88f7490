"""The demo data by its stable names: ``load_demo``, ``demo_path``, ``demo --path``, ``query --demo``."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import duckdb_sem
from duckdb_sem.cli.main import cli


def test_load_demo_creates_the_two_tables_in_a_sem_connection() -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    duckdb_sem.load_demo(con)
    assert con.sql("SELECT count(*), count(DISTINCT movie) FROM reviews").fetchall() == [(300, 50)]
    assert con.sql("SELECT count(*) FROM plots").fetchall() == [(50,)]
    assert list(con.table("reviews").columns) == ["review_id", "movie", "text", "fresh"]


def test_rows_keeps_the_first_reviews_and_their_movies_plots() -> None:
    db = duckdb.connect()
    duckdb_sem.load_demo(db, rows=6)  # plain DuckDB too, as after install(db)
    assert db.sql("SELECT list(review_id ORDER BY review_id) FROM reviews").fetchall() == [
        ([1, 2, 3, 4, 5, 6],)
    ]
    assert db.sql(
        "SELECT count(*) FROM plots WHERE movie NOT IN (SELECT movie FROM reviews)"
    ).fetchall() == [(0,)]
    assert db.sql("SELECT count(*) FROM plots").fetchall() == [(6,)]


def test_a_bad_row_count_or_table_name_says_what_to_give() -> None:
    with pytest.raises(duckdb_sem.ConfigError, match="positive number"):
        duckdb_sem.load_demo(duckdb.connect(), rows=0)
    with pytest.raises(duckdb_sem.ConfigError, match="reviews, plots"):
        duckdb_sem.demo_path("movies")


def test_demo_path_is_the_bundled_csv() -> None:
    path = duckdb_sem.demo_path("reviews")
    assert path.name == "rt_reviews.csv" and path.read_text().startswith("review_id,movie,")


def test_demo_dash_dash_path_prints_the_data_folder() -> None:
    result = CliRunner().invoke(cli, ["demo", "--path"])
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.strip())
    assert (folder / "rt_reviews.csv").is_file() and (folder / "rt_plots.csv").is_file()


def test_query_dash_dash_demo_loads_the_tables_first() -> None:
    result = CliRunner().invoke(
        cli,
        ["query", "--backend", "test:", "--cache", "off", "--no-progress", "--demo",
         "--format", "json", "SELECT count(*) AS n FROM reviews JOIN plots USING (movie)"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 300}]
