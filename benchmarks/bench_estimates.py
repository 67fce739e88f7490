"""Estimated against actual LLM calls: does ``EXPLAIN SEMANTIC`` say what a query will ask?

Each query is explained (``EXPLAIN SEMANTIC``: its ``estimated: calls≈N`` lines), then run with
the cache off, and ``con.stats().llm_calls`` (requests asked, as if nothing were cached: the
figure the estimate is of) is its actual. The queries are the README tour's and hidden-style
ones (relational predicates beside a filter, files and table functions in FROM, joins, LIMITs,
a map after a filter, a group summary) over the bundled 300 Rotten Tomatoes reviews
(``duckdb_sem/data/rt_reviews.csv``) and a generated 5,000-row table. The backend is the
deterministic ``test:`` rule backend, so the calls are the same on every run and nothing is timed: it is fine on a shared machine.

Three settings (:data:`SETTINGS`): plain ``test:`` (a hash says yes to half the rows, as the
cost model's default selectivity assumes); a selective ``test:`` (yes when the row names
"good", "great" or "best"); and the same with a small-model estimator sampling 8 rows per
operator (the rule backend stands in for it, ``DUCKDB_SEM_ESTIMATOR_BACKEND``). Target: every
ratio estimated / actual within 2x (0.5 to 2). Results: ``benchmarks/results/estimates.md``.

    python benchmarks/bench_estimates.py
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from _results import RESULTS

import duckdb_sem

SELECTIVE = "test:?yes_if=good|great|best"
CSV = str(resources.files("duckdb_sem") / "data" / "rt_reviews.csv")
SETUP = (
    f"CREATE TABLE reviews AS SELECT review_id AS id, movie, text, fresh FROM '{CSV}'",
    "CREATE TABLE movies AS SELECT DISTINCT movie, length(movie) AS title_len FROM reviews",
    "CREATE TABLE items AS SELECT i AS id, i % 7 AS shelf, 'item ' || i || CASE WHEN i % 5 = 0 "
    "THEN ' is good' ELSE ' is plain' END AS descr FROM range(5000) t(i)",
)
POSITIVE = "sem_filter('Is this movie review positive? {text}')"

#: (name, SQL): {csv} is the bundled file's path
QUERIES = (
    (
        "tour: filter beside length()",
        "SELECT id, text FROM reviews WHERE length(text) < 200 AND "
        "sem_filter('The review \"{text}\" is positive')",
    ),
    (
        "tour: typed map",
        "SELECT sem_map('Rate {text} from 1 to 5', 'INTEGER') AS stars FROM reviews",
    ),
    ("tour: filter", "SELECT id FROM reviews WHERE sem_filter('{text} is positive')"),
    (
        "tour: filter LIMIT 5",
        "SELECT id FROM reviews WHERE sem_filter('{text} is positive') LIMIT 5",
    ),
    (
        "sql/02: two predicates, LIMIT 8",
        f"SELECT id, movie, text FROM reviews WHERE id <= 60 AND length(text) < 100 AND {POSITIVE} "
        "ORDER BY id LIMIT 8",
    ),
    ("file in FROM", f"SELECT review_id FROM '{{csv}}' WHERE {POSITIVE}"),
    ("file, id <= 4", f"SELECT review_id FROM '{{csv}}' WHERE review_id <= 4 AND {POSITIVE}"),
    ("read_csv(), fresh", f"SELECT review_id FROM read_csv('{{csv}}') WHERE fresh AND {POSITIVE}"),
    (
        "movie IN (...) list",
        f"SELECT id FROM reviews WHERE movie IN ('the_ring', 'spider_man', 'signs') AND {POSITIVE}",
    ),
    (
        "filter then map",
        f"SELECT id, sem_map('One word for {{text}}') AS w FROM reviews WHERE {POSITIVE}",
    ),
    (
        "join on a key, filter",
        "SELECT r.id, m.title_len FROM reviews r JOIN movies m ON r.movie = m.movie "
        "WHERE m.title_len > 10 AND sem_filter('Is this movie review positive? {r.text}')",
    ),
    (
        "sem_join 10 x 5",
        "SELECT r.id, m.movie FROM (SELECT * FROM reviews WHERE id <= 10) r, "
        "(SELECT * FROM movies ORDER BY movie LIMIT 5) m "
        "WHERE sem_join('Is the review {r.text} about {m.movie}?')",
    ),
    (
        "sem_agg per movie",
        "SELECT movie, sem_agg('What do critics think? {text}') AS s FROM reviews "
        "WHERE id <= 40 GROUP BY movie",
    ),
    (
        "generated: id % 10 = 0",
        "SELECT id FROM items WHERE id % 10 = 0 AND sem_filter('Is {descr} fine?')",
    ),
    (
        "generated: BETWEEN, shelf",
        "SELECT id FROM items WHERE id BETWEEN 100 AND 1299 AND shelf = 3 AND "
        "sem_filter('Is {descr} fine?')",
    ),
    ("generated: LIMIT 20", "SELECT id FROM items WHERE sem_filter('Is {descr} fine?') LIMIT 20"),
    ("ORDER BY id LIMIT 5", f"SELECT id FROM reviews WHERE {POSITIVE} ORDER BY id LIMIT 5"),
    (
        "CTE with a predicate",
        f"WITH r AS (SELECT * FROM reviews WHERE id <= 100) SELECT id FROM r WHERE {POSITIVE}",
    ),
    (
        "IN (subquery)",
        "SELECT id FROM reviews WHERE movie IN (SELECT movie FROM movies WHERE title_len < 8) "
        f"AND {POSITIVE}",
    ),
    (
        "sem_classify, id <= 50",
        "SELECT sem_classify('Tone of {text}?', ['warm', 'cold']) AS tone FROM reviews "
        "WHERE id <= 50",
    ),
    (
        "outer join (dry run)",
        "SELECT r.id FROM reviews r LEFT JOIN movies m ON r.movie = m.movie "
        "WHERE m.title_len > 12 AND sem_filter('Is this movie review positive? {r.text}')",
    ),
)

_ESTIMATED = re.compile(r"estimated: calls≈([\d,.]+)")


@dataclass(frozen=True)
class Row:
    name: str
    estimated: float
    actual: int

    @property
    def ratio(self) -> float:
        if self.actual == 0:
            return 1.0 if self.estimated < 1 else float("inf")
        return self.estimated / self.actual


def measure(backend: str, estimator: str | None, folder: Path) -> list[Row]:
    """Explain and run every query on a fresh connection to ``backend`` (cache off)."""
    old = os.environ.get("DUCKDB_SEM_ESTIMATOR_BACKEND")
    if estimator is None:
        os.environ.pop("DUCKDB_SEM_ESTIMATOR_BACKEND", None)
    else:
        os.environ["DUCKDB_SEM_ESTIMATOR_BACKEND"] = estimator
    try:
        folder.mkdir(parents=True, exist_ok=True)
        con = duckdb_sem.connect(str(folder / "bench.duckdb"), backend=backend, cache="off")
        for sql in SETUP:
            con.execute(sql)
        rows = []
        for name, template in QUERIES:
            sql = template.replace("{csv}", CSV)
            text = con.explain_semantic(sql)
            found = _ESTIMATED.findall(text)  # a statement of several units: one per unit
            if not found:
                raise SystemExit(f"{name}: no estimated line in\n{text}")
            estimated = sum(float(f.replace(",", "")) for f in found)
            con.sql(sql).fetchall()
            rows.append(Row(name, estimated, con.stats().llm_calls))
        con.close()
        return rows
    finally:
        if old is None:
            os.environ.pop("DUCKDB_SEM_ESTIMATOR_BACKEND", None)
        else:
            os.environ["DUCKDB_SEM_ESTIMATOR_BACKEND"] = old


def _within(row: Row) -> bool:
    return 0.5 <= row.ratio <= 2.0


def _cell(row: Row) -> str:
    mark = "" if _within(row) else " **out**"
    return f"{row.estimated:,.1f} | {row.actual:,} | {row.ratio:.2f}{mark}"


def report(runs: list[tuple[str, list[Row]]]) -> str:
    lines = [
        "# Estimated vs actual LLM calls",
        "",
        f"`python benchmarks/bench_estimates.py`: {len(QUERIES)} queries, cache off, on the "
        "deterministic `test:` rule backend (no timing: the figures are the same on any "
        "machine). Estimated: `EXPLAIN SEMANTIC`'s `estimated: calls≈`; actual: "
        "`con.stats().llm_calls` of the run (requests asked, as if nothing were cached). "
        "Ratio = estimated / actual; target 0.5-2 (**out** marks a miss).",
        "",
    ]
    for title, rows in runs:
        lines.append(f"- {title}: **{sum(map(_within, rows))} of {len(rows)}** within 2x")
    heads = " | ".join(f"{i + 1}: estimated | actual | ratio" for i in range(len(runs)))
    lines += ["", f"| query | {heads} |", "|---|" + "---:|" * (3 * len(runs))]
    for i, (name, _) in enumerate(QUERIES):
        lines.append(f"| {name} | " + " | ".join(_cell(rows[i]) for _, rows in runs) + " |")
    return "\n".join(lines) + "\n"


#: (title, target backend, estimator backend)
SETTINGS = (
    ("1. `test:` (yes to a hash-chosen half of the rows), no estimator", "test:", None),
    (
        f"2. `{SELECTIVE}` (yes to the rows naming a word), no estimator: default selectivity 0.5",
        SELECTIVE,
        None,
    ),
    (
        f"3. `{SELECTIVE}` with an estimator sampling 8 rows per operator (the same rules "
        "standing in for the small model)",
        SELECTIVE,
        SELECTIVE,
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="estimates", help="results file stem")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (title, backend, estimator) in enumerate(SETTINGS):
            runs.append((title, measure(backend, estimator, Path(tmp) / str(i))))
    text = report(runs)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
