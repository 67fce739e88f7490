"""What named models and per-call options cost: macro shape and model routing, no model.

(a) The UDF path's macros: since named arguments, each ``sem_*`` macro is one macro with eight
    defaulted column parameters (``a0 := NULL`` ...) plus ``model``/``temperature``/
    ``max_tokens``, passing the number of columns given (read with ``typeof`` at bind time).
    Against it, a macro of the exact arity (the shape before named arguments) calling the same
    UDF, on the same rows, in the same plain connection.
(b) Routing: the same ``sem_filter`` on the connection's default backend, and on a named
    model with the same rules (``model := 'same'``), planned (``connect()``) and on the UDF
    path (``optimize=False``).

The backend is the zero-latency ``test:`` rule backend (not a model) and the cache is off, so
what is timed is duckdb-sem's own work per row. Ratios within one run (the machine is shared);
medians of ``--repeats`` runs. Results go to ``benchmarks/results/models.md``.

    python benchmarks/bench_models.py                 # 20,000 rows, 5 repeats
    python benchmarks/bench_models.py --rows 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import duckdb
from _results import RESULTS

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend

TEMPLATE = "Is this review positive? {0}"


def _table(con: Any, rows: int) -> None:
    con.execute(
        "CREATE OR REPLACE TABLE t AS SELECT range AS id, 'review number ' || range || "
        "CASE WHEN range % 3 = 0 THEN ' good' ELSE ' dull' END AS text FROM range(?)",
        [rows],
    )


def _medians(fns: list[Callable[[], Any]], repeats: int) -> list[tuple[float, Any]]:
    """Median seconds and the last result of each of ``fns``, run in turn (A B A B ...) so
    the shared machine's drift falls on all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    outs: list[Any] = [None] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            started = time.perf_counter()
            outs[i] = fn()
            times[i].append(time.perf_counter() - started)
    return [(statistics.median(t), o) for t, o in zip(times, outs, strict=True)]


def bench_macros(rows: int, repeats: int) -> dict[str, Any]:
    raw = duckdb.connect()
    session = duckdb_sem.install(raw, backend=RuleBackend(yes_if=["good"]), cache="off")
    _table(raw, rows)
    # the UDF behind sem_filter, called by a macro of the exact arity (the old shape)
    body = session.macros["sem_filter"].split(" AS ", 1)[1]
    udf = body.split("(t,", 1)[0]
    raw.execute(
        f"CREATE TEMP MACRO exact_filter(t, a0) AS {udf}(t, [a0::VARCHAR], 1, NULL, NULL, NULL)"
    )
    new_sql = f"SELECT count(*) FROM t WHERE sem_filter('{TEMPLATE}', text)"
    old_sql = f"SELECT count(*) FROM t WHERE exact_filter('{TEMPLATE}', text)"
    raw.execute(new_sql).fetchall()  # warm: imports, first batches
    raw.execute(old_sql).fetchall()
    (t_new, n_new), (t_old, n_old) = _medians(
        [lambda: raw.execute(new_sql).fetchall(), lambda: raw.execute(old_sql).fetchall()],
        repeats,
    )
    assert n_new == n_old, (n_new, n_old)
    session.release()
    raw.close()
    return {"one macro, defaulted columns": t_new, "exact-arity macro": t_old, "rows": n_new}


def bench_routing(rows: int, repeats: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for label, optimize in (("planned (connect())", True), ("UDF path (optimize=False)", False)):
        con = duckdb_sem.connect(
            backend=RuleBackend(yes_if=["good"]), cache="off", optimize=optimize,
            models={"same": RuleBackend(yes_if=["good"])},
        )  # fmt: skip
        _table(con, rows)
        default = "SELECT count(*) FROM t WHERE sem_filter('Is this review positive? {text}')"
        named = default.replace("')", "', model := 'same')")
        con.sql(default).fetchall()
        con.sql(named).fetchall()
        (t_default, a), (t_named, b) = _medians(
            [
                lambda con=con, q=default: con.sql(q).fetchall(),
                lambda con=con, q=named: con.sql(q).fetchall(),
            ],
            repeats,
        )
        assert a == b, (a, b)
        out[label] = {"default backend": t_default, "model := 'same'": t_named}
        con.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    macros = bench_macros(args.rows, args.repeats)
    routing = bench_routing(args.rows, args.repeats)
    us = 1e6 / args.rows
    lines = [
        "# Named models and per-call options: what they cost",
        "",
        f"`sem_filter` over {args.rows:,} distinct rows, zero-latency `test:` rule backend (not a",
        f"model), cache off; median of {args.repeats} runs. "
        f"`python benchmarks/bench_models.py --rows {args.rows} --repeats {args.repeats}`",
        "",
        "(a) UDF path in a plain connection (`install(con)`), the same UDF behind both macros:",
        "",
        "| macro | seconds | µs per row |",
        "|---|---|---|",
    ]
    for name in ("one macro, defaulted columns", "exact-arity macro"):
        lines.append(f"| {name} | {macros[name]:.3f} | {macros[name] * us:.1f} |")
    ratio = macros["one macro, defaulted columns"] / macros["exact-arity macro"]
    lines += ["", f"ratio (one macro / exact arity): {ratio:.3f}", ""]
    lines += [
        "(b) The same call on the default backend and on a named model with the same rules:",
        "",
        "| path | default backend (s) | `model := 'same'` (s) | ratio |",
        "|---|---|---|---|",
    ]
    for label, got in routing.items():
        d, n = got["default backend"], got["model := 'same'"]
        lines.append(f"| {label} | {d:.3f} | {n:.3f} | {n / d:.3f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "models.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
