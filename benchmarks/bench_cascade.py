"""Benchmark 5(c) of issue 21: a sem_filter cascade on Rotten Tomatoes reviews.

One query, ``SELECT id FROM reviews WHERE sem_filter('<is the review favourable?>')``, run
twice in one process on the same reviews:

- target only (``approximate`` off): the target model answers every row; its answers are the
  reference;
- cascade (``approximate=True``): the helper scores every row, the target labels a sample and
  the rows the helper is unsure of (``duckdb_sem.runtime.cascade``).

Reported: target calls of each (virtual: requests asked, as if nothing were cached; the two
runs share the target's cache so the cascade's target answers are the reference's own), the
saving, the cascade's precision and recall *relative to the target's answers* (targets 0.9/0.9),
the helper's calls, wall time, and both runs' accuracy against the fresh/rotten label.

Two configurations:

- real models (``--backend llama:``, the embedded default; ``--helper embed`` for MiniLM
  similarity to the template, or a small model's spec, ``llama:/path/model.gguf``): a few
  hundred rows (~0.1 s a row per model on 2 cores);
- SIMULATED (``--simulated``): the SIMULATED GPU backend as the target, answering from the
  fresh/rotten label, and a SIMULATED helper: the same backend answering from labels flipped on
  ``--sim-flip`` of the rows, scored by its (hash-drawn) confidence: 5,000 reviews.

Run (results appended to ``benchmarks/results/cascade.md``):

    sh benchmarks/fetch_quality_data.sh
    python benchmarks/bench_cascade.py --rows 300 --helper embed           # real, MiniLM helper
    python benchmarks/bench_cascade.py --rows 5000 --simulated             # SIMULATED
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from quality_data import MissingData, rotten_tomatoes

import duckdb_sem

RESULTS = Path(__file__).parent / "results"
TEMPLATE = "Is the overall verdict of this film review clearly favourable to the movie? Review: {0}"
QUERY = (
    "SELECT id FROM reviews WHERE sem_filter("
    "'Is the overall verdict of this film review clearly favourable to the movie? "
    "Review: {text}')"
)


@dataclass(frozen=True)
class Run:
    name: str
    ids: frozenset[int]
    target_calls: int
    helper_calls: int
    helper_rows: int
    seconds: float
    explain: str


def load(rows: int, seed: int) -> tuple[list[str], list[bool]]:
    reviews, _ = rotten_tomatoes()
    order = list(reviews)
    random.Random(seed).shuffle(order)  # a prefix of one order: smaller runs share the cache
    picked = order[:rows]
    return [r.text.replace("'", "’") for r in picked], [r.fresh for r in picked]


def labels_file(texts: list[str], labels: list[bool], path: Path) -> str:
    """A lookup-oracle CSV: each rendered prompt, yes iff ``labels``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["key", "label"])
        for text, label in zip(texts, labels, strict=True):
            out.writerow([TEMPLATE.format(text), "yes" if label else "no"])
    return f"labels={path}&positive=yes"


def run(name: str, texts: list[str], *, filter_sample: int, **options: object) -> Run:
    con = duckdb_sem.connect(**options)  # type: ignore[arg-type]
    # the rows the target labels before the first SEU (a filter needs 4x as many rows)
    con.approximation = dataclasses.replace(con.approximation, filter_sample=filter_sample)
    con.register("reviews_arrow", pa.table({"id": range(len(texts)), "text": texts}))
    con.execute("CREATE TABLE reviews AS SELECT * FROM reviews_arrow")
    started = time.perf_counter()
    explain = con.explain_semantic(QUERY)
    ids = frozenset(int(r[0]) for r in con.sql(QUERY).fetchall())
    seconds = time.perf_counter() - started
    stats = con.stats()
    con.close()
    helper = stats.helper_calls or stats.embed_calls
    return Run(name, ids, stats.llm_calls, helper, stats.cascade_helper_rows, seconds, explain)


def pr(got: frozenset[int], want: set[int]) -> tuple[float, float]:
    tp = len(got & want)
    return (tp / len(got) if got else 1.0), (tp / len(want) if want else 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--backend", default="llama:", help="the target model's spec")
    parser.add_argument("--helper", default="embed", help="embed, or a small model's spec")
    parser.add_argument("--embed", default="minilm:", help="the embedding model (embed helper)")
    parser.add_argument("--simulated", action="store_true", help="SIMULATED target and helper")
    parser.add_argument("--sim-flip", type=float, default=0.07)
    parser.add_argument("--precision", type=float, default=0.9)
    parser.add_argument("--recall", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.9,
                        help="how often the targets must hold (the thresholds' bounds)")  # fmt: skip
    parser.add_argument(
        "--filter-sample",
        type=int,
        default=100,
        help="rows the target labels first (a cascade needs 4x as many rows)",
    )
    parser.add_argument("--cache", type=Path, help="cache file (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "cascade.md")
    args = parser.parse_args()
    try:
        texts, fresh = load(args.rows, args.seed)
    except MissingData as err:
        raise SystemExit(f"bench_cascade: {err}") from None
    work = Path(tempfile.mkdtemp(prefix="bench_cascade_"))
    backend, helper, embed = args.backend, args.helper, args.embed
    if args.simulated:
        backend = "sim:default?" + labels_file(texts, fresh, work / "target.csv")
        rng = random.Random(args.seed + 1)
        noisy = [f if rng.random() >= args.sim_flip else not f for f in fresh]
        helper = "sim:default?" + labels_file(texts, noisy, work / "helper.csv")
        embed = "sim-embed:"
    cache = args.cache or work / "cache.sqlite"
    common = dict(backend=backend, cache=str(cache), embed_backend=embed,
                  filter_sample=args.filter_sample)  # fmt: skip
    reference = run("target only", texts, **common)
    cascade = run("cascade", texts, approximate=True, filter_precision=args.precision,
                  filter_recall=args.recall, filter_helper=helper, confidence=args.confidence,
                  **common)  # fmt: skip
    want = set(reference.ids)
    p, r = pr(cascade.ids, want)
    truth = {i for i, f in enumerate(fresh) if f}
    saved = reference.target_calls / max(1, cascade.target_calls)
    label = "SIMULATED " if args.simulated else ""
    helper_name = f"SIMULATED helper (labels flipped on {args.sim_flip:.0%})" if args.simulated \
        else f"helper `{helper}`" + (f" (`{embed}`)" if helper == "embed" else "")  # fmt: skip
    lines = [
        f"## {label}sem_filter cascade, {args.rows:,} Rotten Tomatoes reviews",
        "",
        f"Target `{'SIMULATED GPU, answers from the fresh label' if args.simulated else backend}`, "
        f"{helper_name}; targets precision {args.precision} / recall {args.recall} relative to "
        f"the target's own answers, learned at confidence {args.confidence}. `{' '.join(sys.argv[1:]) or '(defaults)'}`",
        "",
        "| run | target calls | helper calls | rows the helper decided | rows passed | "
        "P vs target | R vs target | P/R vs fresh label | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in (reference, cascade):
        rp, rr = pr(row.ids, want)
        tp, tr = pr(row.ids, truth)
        lines.append(
            f"| {row.name} | {row.target_calls:,} | {row.helper_calls:,} | {row.helper_rows:,} | "
            f"{len(row.ids):,} | {rp:.3f} | {rr:.3f} | {tp:.2f}/{tr:.2f} | {row.seconds:.1f} |"
        )
    met = p >= 0.9 and r >= 0.9 and saved >= 2
    lines += [
        "",
        f"Target calls saved: **{saved:.2f}x** at precision {p:.3f} and recall {r:.3f} of the "
        f"target's answers; target (>= 2x at >= 0.9/0.9) **{'met' if met else 'MISSED'}**.",
        "",
        "EXPLAIN SEMANTIC of the cascade run:",
        "",
        "```",
        *[ln for ln in cascade.explain.splitlines() if "CASCADE" in ln or "APPROXIMATE" in ln],
        "```",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
