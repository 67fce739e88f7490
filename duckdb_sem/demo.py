"""The demo: example queries in ``sql/`` over bundled, labelled Rotten Tomatoes data.

Tables: ``reviews(review_id, movie, text, fresh)`` (300 critic reviews; ``fresh`` is the
critic's own positive/negative label) and ``plots(movie, plot)``. A query whose result has the
columns ``label`` and ``predicted`` is scored: accuracy, and precision/recall of ``true``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duckdb_sem.data import dataset_path
from duckdb_sem.errors import ConfigError
from duckdb_sem.runtime.context import QueryStats
from duckdb_sem.session.connection import SemConnection

__all__ = ["DemoResult", "Score", "example_queries", "load_demo_tables", "run_demo", "score"]


@dataclass(frozen=True, slots=True)
class Score:
    rows: int
    accuracy: float
    precision: float | None
    recall: float | None


@dataclass(frozen=True, slots=True)
class DemoResult:
    name: str
    sql: str
    table: Any  # pyarrow.Table
    seconds: float
    stats: QueryStats
    score: Score | None


def load_demo_tables(con: SemConnection) -> None:
    for table, file in (("reviews", "rt_reviews.csv"), ("plots", "rt_plots.csv")):
        con.execute(
            f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM read_csv(?, header = true)",
            [str(dataset_path(file))],
        )


def default_sql_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "sql"


def example_queries(sql_dir: Path | None = None) -> list[tuple[str, str]]:
    folder = sql_dir or default_sql_dir()
    files = sorted(folder.glob("*.sql")) if folder.is_dir() else []
    if not files:
        raise ConfigError(
            f"no example queries in {folder}; run the demo from a source checkout "
            "(pip install -e .) or pass --sql-dir"
        )
    return [(f.stem, f.read_text()) for f in files]


def score(table: Any) -> Score | None:
    if "label" not in table.column_names or "predicted" not in table.column_names:
        return None
    pairs = [
        (bool(lab), bool(pred))
        for lab, pred in zip(
            table["label"].to_pylist(), table["predicted"].to_pylist(), strict=True
        )
        if lab is not None and pred is not None
    ]
    if not pairs:
        return None
    tp = sum(1 for lab, pred in pairs if lab and pred)
    predicted_true = sum(1 for _, pred in pairs if pred)
    actual_true = sum(1 for lab, _ in pairs if lab)
    return Score(
        rows=len(pairs),
        accuracy=sum(1 for lab, pred in pairs if lab == pred) / len(pairs),
        precision=tp / predicted_true if predicted_true else None,
        recall=tp / actual_true if actual_true else None,
    )


def run_demo(con: SemConnection, queries: list[tuple[str, str]]) -> Iterator[DemoResult]:
    load_demo_tables(con)
    for name, sql in queries:
        started = time.perf_counter()
        table = con.execute(sql).arrow()
        yield DemoResult(name, sql, table, time.perf_counter() - started, con.stats(), score(table))
