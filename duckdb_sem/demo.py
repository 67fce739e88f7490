"""The demo: example queries in ``sql/`` over bundled, labelled Rotten Tomatoes data.

Tables: ``reviews(review_id, movie, text, fresh)`` (300 critic reviews; ``fresh`` is the
critic's own positive/negative label) and ``plots(movie, plot)``, created in any connection by
:func:`load_demo` (``duckdb_sem.load_demo(con)``): the stable names the README and ``docs/``
query. A query whose result has the columns ``label`` and ``predicted`` is scored: accuracy,
and precision/recall of ``true``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from duckdb_sem.data import demo_path
from duckdb_sem.errors import ConfigError
from duckdb_sem.runtime.context import QueryStats
from duckdb_sem.session.connection import SemConnection

__all__ = [
    "DemoResult",
    "Score",
    "example_queries",
    "load_demo",
    "load_demo_tables",
    "run_demo",
    "score",
]


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


class _Executes(Protocol):
    """What :func:`load_demo` needs: a ``duckdb`` connection or a ``SemConnection``."""

    def execute(self, query: str, parameters: Any = ..., /) -> Any: ...


def load_demo(con: _Executes, *, rows: int | None = None) -> None:
    """Create (or replace) the demo tables ``reviews`` and ``plots`` in ``con``.

    ``rows`` keeps the first ``rows`` reviews (by ``review_id``) and the plots of their movies:
    a tour on a CPU model stays a few seconds. Works in a plain DuckDB connection too (after
    ``duckdb_sem.install(con)``), since it is plain SQL over the bundled CSV files.

    Example:
        >>> con = duckdb_sem.connect(backend="test:")  # doctest: +SKIP
        >>> duckdb_sem.load_demo(con, rows=6)  # doctest: +SKIP
    """
    if rows is not None and rows < 1:
        raise ConfigError(f"load_demo(rows={rows}): give a positive number of reviews, or None")
    limit = "" if rows is None else f" ORDER BY review_id LIMIT {int(rows)}"
    con.execute(
        f"CREATE OR REPLACE TABLE reviews AS SELECT * FROM read_csv(?, header = true){limit}",
        [str(demo_path("reviews"))],
    )
    con.execute(
        "CREATE OR REPLACE TABLE plots AS SELECT * FROM read_csv(?, header = true) "
        "WHERE movie IN (SELECT movie FROM reviews) ORDER BY movie",
        [str(demo_path("plots"))],
    )


def load_demo_tables(con: SemConnection) -> None:
    load_demo(con)


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
