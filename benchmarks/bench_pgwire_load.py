"""Load (information, not a gate): N concurrent psycopg connections, one wire server.

Every client runs semantic queries through one ``duckdb-sem pgwire`` process (one scheduler)
and checks each result; prints throughput and latency percentiles.

    python benchmarks/bench_pgwire_load.py --clients 64 --queries 10 --rows 2000 \\
        --backend 'test:?yes_if=good&latency_ms=5'
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import psycopg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--queries", type=int, default=10, help="per client")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--backend", default="test:?yes_if=good&latency_ms=5")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "load.duckdb"
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE reviews AS SELECT range::INTEGER AS id, 'review ' || range || "
        "CASE WHEN range % 3 = 0 THEN ' good' ELSE ' meh' END AS text FROM range(?)",
        [args.rows],
    )
    con.close()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "pgwire",
         "--db", str(db), "--listen", f"127.0.0.1:{port}", "--backend", args.backend,
         "--cache", "off"],
        env={**os.environ, "DUCKDB_SEM_BATCH_SIZE": "64"},
    )  # fmt: skip
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(args.clients)

        def client(n: int) -> None:
            dsn = f"host=127.0.0.1 port={port} user=load{n} dbname=load"
            with psycopg.connect(dsn, autocommit=True) as conn:
                barrier.wait()
                for q in range(args.queries):
                    low = (n * args.queries + q) % max(1, args.rows - 300)
                    started = time.perf_counter()
                    rows = conn.execute(
                        "SELECT id FROM reviews WHERE id >= %s AND id < %s "
                        "AND sem_filter('{text} is positive') ORDER BY id",
                        [low, low + 300],
                    ).fetchall()
                    elapsed = time.perf_counter() - started
                    expected = [i for i in range(low, min(low + 300, args.rows)) if i % 3 == 0]
                    with lock:
                        latencies.append(elapsed)
                        if [r[0] for r in rows] != expected:
                            failures.append(f"client {n} query {q}")

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=10)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(
        f"clients={args.clients} queries={len(latencies)} wall={wall:.1f}s "
        f"throughput={len(latencies) / wall:.1f} queries/s "
        f"p50={statistics.median(latencies) * 1000:.0f}ms p99={p99 * 1000:.0f}ms "
        f"wrong={len(failures)}"
    )
    if failures:
        raise SystemExit(f"wrong results: {failures[:5]}")


if __name__ == "__main__":
    main()
