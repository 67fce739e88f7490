"""Engine overhead and embedded-model throughput on a 2,000-row ``sem_filter``.

(a) Engine overhead per row: the same ``sem_filter`` query through duckdb-sem with the
    zero-latency ``test:`` rule backend (no model), against the same rows answered by calling
    that backend directly. The difference is what duckdb-sem's layers cost per row (binding,
    UDF batches, rendering, signatures, SEUs, scheduler, stats), with the cache off, with a cold
    cache file and with a warm one (rerun: zero backend calls).
(b) Embedded model: rows per second of the real SmolLM2 model through duckdb-sem, against
    calling the same backend's llama.cpp code directly with the same prompts (no DuckDB, no
    scheduler, no cache), and against a naive direct use of llama-cpp-python (one chat
    completion per row, free-text answer).

Ratios are compared within one run (the machine is shared and noisy). Results go to
``benchmarks/results/engine.md`` and ``engine.json``.

    python benchmarks/bench_engine.py                      # (a) 2,000 rows, (b) 2,000 rows
    python benchmarks/bench_engine.py --model-rows 200     # quicker (b)
    python benchmarks/bench_engine.py --skip-model         # (a) only
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import duckdb
from _results import RESULTS

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind

TEMPLATE = 'The movie review "{text}" is positive'


def _texts(rows: int) -> list[str]:
    """Real review texts, made distinct so no request is deduplicated."""
    base = [
        r[0]
        for r in duckdb.sql(
            f"SELECT text FROM read_csv('{dataset_path('rt_reviews.csv')}') ORDER BY review_id"
        ).fetchall()
    ]
    return [f"{base[i % len(base)]} (#{i})" for i in range(rows)]


def _table(con: Any, texts: list[str]) -> None:
    con.execute("CREATE OR REPLACE TABLE t (id INTEGER, text VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(texts)))


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def bench_overhead(rows: int) -> dict[str, Any]:
    texts = _texts(rows)
    requests = [build_request(OperatorKind.FILTER, TEMPLATE.replace("{text}", t)) for t in texts]
    direct_backend = RuleBackend(yes_if=["good", "great"])
    t_direct, _ = _timed(lambda: direct_backend.complete(requests))
    sql = f"SELECT count(*) FROM t WHERE sem_filter('{TEMPLATE}')"
    out: dict[str, Any] = {"rows": rows, "direct_backend_s": t_direct}
    warmup = duckdb_sem.connect(backend=RuleBackend(), cache="off")  # imports, first UDF call
    _table(warmup, texts[:100])
    warmup.execute(sql).fetchall()
    with tempfile.TemporaryDirectory() as tmp:
        for label, cache in (("cache_off", "off"), ("cache_cold", f"{tmp}/c.sqlite")):
            con = duckdb_sem.connect(backend=RuleBackend(yes_if=["good", "great"]), cache=cache)
            _table(con, texts)
            t_plain, _ = _timed(
                lambda con=con: con.execute(
                    "SELECT count(*) FROM t WHERE length(text) > 0"
                ).fetchall()
            )
            t_sem, result = _timed(lambda con=con: con.execute(sql).fetchall())
            out[label] = {
                "seconds": t_sem,
                "plain_duckdb_s": t_plain,
                "matches": result[0][0],
                "stats": con.stats().as_dict(),
            }
        con = duckdb_sem.connect(
            backend=RuleBackend(yes_if=["good", "great"]), cache=f"{tmp}/c.sqlite"
        )
        _table(con, texts)
        t_warm, result = _timed(lambda: con.execute(sql).fetchall())
        out["cache_warm"] = {
            "seconds": t_warm,
            "matches": result[0][0],
            "stats": con.stats().as_dict(),
        }
    for label in ("cache_off", "cache_cold", "cache_warm"):
        out[label]["overhead_us_per_row"] = (out[label]["seconds"] - t_direct) / rows * 1e6
    return out


def bench_model(rows: int) -> dict[str, Any]:
    from duckdb_sem.backends.registry import create_backend

    texts = _texts(rows)
    requests = [build_request(OperatorKind.FILTER, TEMPLATE.replace("{text}", t)) for t in texts]
    backend = create_backend("llama:")
    backend.complete(requests[:2])  # load the model and its prefix cache outside the timings
    t_direct, answers = _timed(lambda: backend.complete(requests))
    con = duckdb_sem.connect(backend=backend, cache="off")
    _table(con, texts)
    t_sem, result = _timed(
        lambda: con.execute(f"SELECT id, sem_filter('{TEMPLATE}') FROM t ORDER BY id").fetchall()
    )
    agree = sum(1 for (_, v), a in zip(result, answers, strict=True) if v == a.value) / rows
    naive_rows = min(rows, 100)
    from llama_cpp import Llama

    from duckdb_sem.backends.llama import default_model_path

    llm = Llama(model_path=str(default_model_path()), n_ctx=2048, n_threads=2, verbose=False)

    def naive() -> None:
        for r in requests[:naive_rows]:
            llm.create_chat_completion(
                messages=[
                    {"role": "system", "content": r.prefix},
                    {"role": "user", "content": r.row},
                ],
                max_tokens=3,
                temperature=0.0,
            )

    t_naive, _ = _timed(naive)
    return {
        "rows": rows,
        "backend": backend.describe(),
        "direct_rows_per_s": rows / t_direct,
        "duckdb_sem_rows_per_s": rows / t_sem,
        "duckdb_sem_over_direct": t_sem / t_direct,
        "same_answers": agree,
        "naive_llama_cpp_rows": naive_rows,
        "naive_llama_cpp_rows_per_s": naive_rows / t_naive,
        "stats": con.stats().as_dict(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--model-rows", type=int, default=2000)
    parser.add_argument("--skip-model", action="store_true")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"overhead": bench_overhead(args.rows)}
    if not args.skip_model:
        results["model"] = bench_model(args.model_rows)
    (RESULTS / "engine.json").write_text(json.dumps(results, indent=2))
    o = results["overhead"]
    lines = [
        "# Engine overhead and embedded-model throughput",
        "",
        f"(a) `sem_filter` over {o['rows']} distinct rows, zero-latency `test:` rule backend (not a model).",
        "",
        "| run | seconds | overhead per row (µs) | backend calls | cache hits |",
        "|---|---|---|---|---|",
        f"| backend called directly | {o['direct_backend_s']:.3f} | - | {o['rows']} | - |",
    ]
    for label in ("cache_off", "cache_cold", "cache_warm"):
        r = o[label]
        lines.append(
            f"| duckdb-sem, {label.replace('_', ' ')} | {r['seconds']:.3f} | {r['overhead_us_per_row']:.0f} | "
            f"{r['stats']['physical_calls']} | {r['stats']['cache_hits']} |"
        )
    if "model" in results:
        m = results["model"]
        lines += [
            "",
            f"(b) Real model, {m['rows']} rows: {m['backend']}",
            "",
            "| path | rows/s |",
            "|---|---|",
            f"| llama.cpp through the backend directly (same prompts, prefix KV reuse, log-prob decision) | {m['direct_rows_per_s']:.2f} |",
            f"| duckdb-sem `sem_filter` (DuckDB, UDF batches, scheduler) | {m['duckdb_sem_rows_per_s']:.2f} |",
            f"| naive llama-cpp-python chat completion per row ({m['naive_llama_cpp_rows']} rows) | {m['naive_llama_cpp_rows_per_s']:.2f} |",
            "",
            f"duckdb-sem / direct time ratio: {m['duckdb_sem_over_direct']:.3f}; same answers on {m['same_answers']:.1%} of rows.",
        ]
    (RESULTS / "engine.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
