"""Benchmark (information, not a gate; SIMULATED): results stream with bounded memory.

A table of ``--rows`` rows (1,000,000 by default) goes through ``sem_filter`` on the SIMULATED
backend (hash oracle, 30% yes, ``time_scale=0``); the result is read batch by batch from the
Arrow stream the runtime returns. Peak memory: the largest Arrow allocation seen while reading
(``pyarrow.total_allocated_bytes``) and the process's peak RSS growth (``ru_maxrss``), against
the size of the table itself. Writes ``results/streaming.md``.

    python benchmarks/bench_streaming.py [--rows 1000000 --batch-rows 4096]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import pyarrow as pa

import duckdb_sem
from duckdb_sem.backends.sim import HashOracle, SimBackend
from duckdb_sem.runtime import RuntimeOptions, run_query

RESULTS = Path(__file__).parent / "results"


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=4096)
    args = parser.parse_args()
    backend = SimBackend("default", oracle=HashOracle(0.3), spec="sim:default")
    con = duckdb_sem.connect(backend=backend, cache="off", batch_size=1024)
    con.execute(f"CREATE TABLE big AS SELECT i AS id, 'review number ' || i || ' of a film' AS text "
                f"FROM range({args.rows}) t(i)")  # fmt: skip
    table_mib = con.sql("SELECT sum(strlen(text)) + 8 * count(*) FROM big").fetchall()[0][0] / 2**20
    sql = "SELECT id FROM big WHERE sem_filter('{text} is positive')"
    bound = con._prepare(sql)  # bind {text} as the connection does
    options = RuntimeOptions(mode="static", batch_rows=args.batch_rows, adapt_batch=False)
    rss_before = rss_mib()
    started = time.perf_counter()
    reader = run_query(con, bound.sql, con.session.engine, con.session.query, options=options)
    rows = batches = 0
    peak_arrow = pa.total_allocated_bytes()
    for batch in reader:
        rows += batch.num_rows
        batches += 1
        peak_arrow = max(peak_arrow, pa.total_allocated_bytes())
    seconds = time.perf_counter() - started
    progress = con.query_progress()
    lines = [
        "# Streaming (SIMULATED backend)",
        "",
        f"`{sql}` over {args.rows:,} rows ({table_mib:,.0f} MiB of data), SEUs of "
        f"{args.batch_rows:,} rows, SIMULATED backend (hash oracle 30% yes, time_scale=0). "
        "Command: `python benchmarks/bench_streaming.py`.",
        "",
        f"- rows out: {rows:,} in {batches:,} Arrow batches; {progress.batches_done} SEUs",
        f"- wall time {seconds:,.1f} s (CPU-bound: request building, scheduler, simulator); "
        f"SIMULATED GPU time {backend.virtual_seconds:,.1f} s",
        f"- peak Arrow memory while streaming: {peak_arrow / 2**20:,.1f} MiB",
        f"- peak RSS growth while streaming: {rss_mib() - rss_before:,.1f} MiB "
        "(the query memo is dropped above 50,000 answers)",
    ]
    print("\n".join(lines))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "streaming.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
