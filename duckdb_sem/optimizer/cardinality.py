"""How many rows each scan of a plan reads, from the data rather than from a default.

The cost model's ``table_rows`` are filled here, for every scan of a plan:

- *the source's rows* (key: the table's SQL, as the scan names it): DuckDB's own estimate, the
  root operator's ``Estimated Cardinality`` in ``EXPLAIN (FORMAT JSON) SELECT * FROM source``
  (a table's row count, a Parquet file's metadata, a CSV's size over its sampled lines). When
  that says at most :data:`EXACT_ROWS`, the rows are counted instead (a fraction of a second
  at that size, and the run counts them anyway before its first SEU);
- *the rows its pushed-down predicates leave* (key: ``kept_key(alias)``, which the cost model
  takes as the scan's output): counted with the source's rows in the same query up to
  :data:`EXACT_ROWS`; beyond, the predicates' selectivity on a repeatable reservoir sample of
  :data:`SAMPLE_ROWS` rows, times the source's rows;
- *the groups of a GROUP BY* whose keys read one scan (key: ``groups_key(keys)``): the distinct
  keys among that scan's rows (``count(DISTINCT ...)``, or ``approx_count_distinct`` past
  :data:`EXACT_ROWS`), which the cost model scales to the rows that reach the aggregate.

A source DuckDB cannot describe (a failing EXPLAIN) keeps the cost model's default.

Example:
    ``FROM 'reviews.csv' WHERE id <= 4`` over a 20-row file gives
    ``{"'reviews.csv'": 20.0, "=reviews": 4.0}`` (the default was 1,000 and 333).
"""

from __future__ import annotations

import json
from typing import Any

import duckdb

from duckdb_sem.optimizer.cost import groups_key, kept_key
from duckdb_sem.plan.nodes import Node, Scan, quote
from duckdb_sem.plan.setwise import Aggregate

__all__ = ["EXACT_ROWS", "SAMPLE_ROWS", "duckdb_estimate", "table_rows"]

#: up to this many rows (by DuckDB's estimate) a source and its predicates are counted exactly
EXACT_ROWS = 200_000
#: rows of the sample a larger source's predicates are measured on
SAMPLE_ROWS = 10_000
_SEED = 7


def table_rows(con: Any, plan: Node) -> dict[str, float]:
    """The rows of every source ``plan`` scans and, for a scan with predicates, its output."""
    out: dict[str, float] = {}
    for node in plan.walk():
        if not isinstance(node, Scan):
            continue
        estimate = duckdb_estimate(con, node.table)
        if estimate is None:
            continue
        if not node.filters and (node.table in out or estimate > EXACT_ROWS):
            out.setdefault(node.table, estimate)  # large and nothing to measure: DuckDB's
            continue
        try:
            counted, passed = _count(con, node, sample=estimate > EXACT_ROWS)
        except duckdb.Error:
            continue
        base, kept = float(counted), float(passed)
        if estimate > EXACT_ROWS:  # a sample: its share of rows the predicates keep
            kept = estimate * (passed / counted if counted else 1.0)
            base = estimate
        out[node.table] = base
        if node.filters:
            out[kept_key(node.alias)] = kept
    out.update(_groups(con, plan, out))
    return out


def _groups(con: Any, plan: Node, rows: dict[str, float]) -> dict[str, float]:
    """For each GROUP BY whose keys read one scan: the distinct keys among the scan's rows
    (counted up to :data:`EXACT_ROWS`, else ``approx_count_distinct``) and those rows."""
    scans = [n for n in plan.walk() if isinstance(n, Scan)]
    out: dict[str, float] = {}
    for node in plan.walk():
        if not isinstance(node, Aggregate) or not node.keys or not node.key_reads:
            continue
        owner = next((s for s in scans if node.key_reads <= s.produces), None)
        if owner is None:
            continue
        scanned = rows.get(kept_key(owner.alias), rows.get(owner.table))
        if scanned is None:
            continue
        keys = ", ".join(node.key_sql)
        count = "approx_count_distinct" if scanned > EXACT_ROWS else "count"
        distinct = f"{count}(DISTINCT ({keys}))" if count == "count" else f"{count}(({keys}))"
        try:
            ((found,),) = con.sql(f"SELECT {distinct} FROM ({_source(owner)})").fetchall()
        except duckdb.Error:
            continue
        out[groups_key(node.key_sql)] = float(found or 0)
        out[groups_key(node.key_sql) + "@rows"] = scanned
    return out


def _source(scan: Scan) -> str:
    """The scan's attributes (``alias.col``) with its predicates applied."""
    cols = ", ".join(f"{quote(scan.alias)}.{quote(c)} AS {quote(scan.alias + '.' + c)}"
                     for c in scan.columns)  # fmt: skip
    sql = f"SELECT {cols} FROM {scan.table} AS {quote(scan.alias)}"
    if scan.filters:
        sql = f"SELECT * FROM ({sql}) WHERE " + " AND ".join(f"({f.sql})" for f in scan.filters)
    return sql


def duckdb_estimate(con: Any, table: str) -> float | None:
    """DuckDB's estimated rows of ``SELECT * FROM table`` (None if it has none)."""
    try:
        rows = con.sql(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table}").fetchall()
    except duckdb.Error:
        return None
    try:
        tree = json.loads(rows[0][1])
    except (IndexError, TypeError, ValueError):
        return None
    return _cardinality(tree[0] if isinstance(tree, list) and tree else tree)


def _cardinality(node: Any) -> float | None:
    """The first ``Estimated Cardinality`` from the root down (a projection may lack one)."""
    if not isinstance(node, dict):
        return None
    info = node.get("extra_info") or {}
    value = info.get("Estimated Cardinality") if isinstance(info, dict) else None
    if value is not None:
        try:
            return float(str(value).lstrip("~"))
        except ValueError:
            pass
    for child in node.get("children") or []:
        found = _cardinality(child)
        if found is not None:
            return found
    return None


def _count(con: Any, scan: Scan, *, sample: bool) -> tuple[int, int]:
    """(rows, rows the scan's predicates keep) of the source, or of a sample of it."""
    cols = ", ".join(f"{quote(scan.alias)}.{quote(c)} AS {quote(scan.alias + '.' + c)}"
                     for c in scan.columns)  # fmt: skip
    source = f"SELECT {cols} FROM {scan.table} AS {quote(scan.alias)}"
    if sample:
        size = f"reservoir({SAMPLE_ROWS} ROWS) REPEATABLE ({_SEED})"
        source = f"SELECT * FROM ({source}) USING SAMPLE {size}"
    kept = "count(*)"
    if scan.filters:
        kept = "count(*) FILTER (WHERE " + " AND ".join(f"({f.sql})" for f in scan.filters) + ")"
    ((base, passed),) = con.sql(f"SELECT count(*), {kept} FROM ({source})").fetchall()
    return int(base), int(passed)
