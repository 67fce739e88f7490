"""Benchmark (information, not a gate; SIMULATED): end-to-end time under internal dynamism.

As in SeqoFlow's dynamism experiment: operator cost and selectivity are flipped in 10% to 90%
of the batches (see ``_dynamism_data``: real Rotten Tomatoes labels, three filters). For each
ratio, the same query runs as

- ``adaptive``: the SEU loop, plan re-chosen per batch from the SIMULATED small model's sample
  (its time is included);
- ``static-best``: the fixed plan that was fastest in hindsight (every plan run, best kept);
- ``eddies``: per-tuple lottery routing among the filters.

Time is the SIMULATED target's virtual clock (Qwen3-32B, 8x A100 TP=8 profile), plus the
SIMULATED estimator's for adaptive. Writes ``results/dynamism.{md,csv,png}``.

    python benchmarks/bench_dynamism.py [--batches 20 --batch-rows 100 --sample 16]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).parent))

from _dynamism_data import SQL, backends, build
from _results import RESULTS

import duckdb_sem
from duckdb_sem.runtime import RuntimeOptions

RATIOS = (0.1, 0.3, 0.5, 0.7, 0.9)


def run(mode: str, ratio: float, args: argparse.Namespace) -> tuple[float, float, int]:
    """(target seconds, estimator seconds, rows out) of one run, all SIMULATED."""
    probe = duckdb.connect()
    work = build(probe, flip_ratio=ratio, batches=args.batches, batch_rows=args.batch_rows)
    target, estimator = backends(work.labels)
    con = duckdb_sem.connect(backend=target, cache="off")
    build(con.duckdb, flip_ratio=ratio, batches=args.batches, batch_rows=args.batch_rows)
    con.runtime = RuntimeOptions(
        mode=mode, batch_rows=args.batch_rows, adapt_batch=False,
        estimator=estimator if mode == "adaptive" else None, sample_rows=args.sample,
    )  # fmt: skip
    rows = len(con.sql(SQL).fetchall())
    the_run = con.session.query.run
    seconds = target.virtual_seconds
    if mode == "static-best":  # every candidate ran; the baseline is the best one alone
        seconds = min(the_run.costs)  # type: ignore[attr-defined]
    con.close()
    return seconds, estimator.virtual_seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-rows", type=int, default=100)
    parser.add_argument("--sample", type=int, default=16)
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    table: list[dict[str, float]] = []
    for ratio in RATIOS:
        row: dict[str, float] = {"flip_ratio": ratio}
        outs = set()
        for mode in ("adaptive", "static-best", "eddies"):
            seconds, est, out = run(mode, ratio, args)
            row[mode] = seconds + est
            if mode == "adaptive":
                row["estimator_s"] = est
            outs.add(out)
        assert len(outs) == 1, f"modes disagree on the result at ratio {ratio}: {outs}"
        row["vs_static_best"] = row["static-best"] / row["adaptive"]
        row["vs_eddies"] = row["eddies"] / row["adaptive"]
        table.append(row)
        print({k: round(v, 3) for k, v in row.items()}, flush=True)
    with open(RESULTS / "dynamism.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    lines = [
        "# Dynamism benchmark (SIMULATED)",
        "",
        "SIMULATED GPU time (virtual seconds, Qwen3-32B 8xA100 TP=8 profile); adaptive includes the",
        f"SIMULATED 4B estimator's time. {args.batches} batches of {args.batch_rows} rows, "
        f"{args.sample} sampled rows per operator when sampled (only when in doubt). Command: "
        "`python benchmarks/bench_dynamism.py`.",
        "",
        "| flipped batches | adaptive (s) | of which estimator | static-best (s) | eddies (s) "
        "| speed-up vs static-best | vs eddies |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['flip_ratio']:.0%} | {r['adaptive']:.2f} | {r['estimator_s']:.2f} | "
            f"{r['static-best']:.2f} | {r['eddies']:.2f} | {r['vs_static_best']:.2f}x | "
            f"{r['vs_eddies']:.2f}x |"
        )
    (RESULTS / "dynamism.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = [r["flip_ratio"] * 100 for r in table]
    for mode in ("adaptive", "static-best", "eddies"):
        ax.plot(xs, [r[mode] for r in table], marker="o", label=mode)
    ax.set_xlabel("batches with flipped cost and selectivity (%)")
    ax.set_ylabel("end-to-end time (SIMULATED s)")
    ax.set_title("Dynamism (SIMULATED backend)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "dynamism.png", dpi=120)


if __name__ == "__main__":
    main()
