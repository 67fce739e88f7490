"""Shared by bench_estimator and bench_dynamism: a labelled table whose batches flip, and
SIMULATED target and estimator backends whose answers come from the labels.

Rows come from the bundled Rotten Tomatoes reviews (``fresh`` is the label of filter A, "is a
positive review") joined with their movie's plot. Filter B ("describes a crime story") and C
("is set in a city") read a second column and have synthetic labels, drawn per batch. In a
*normal* batch A is cheap and selective (short reviews, 10% positive) and B expensive and
unselective (full plots, 90% yes); in a *flipped* batch the opposite (positive reviews with the
plot appended, 90%; short plot heads with 10% yes for B). C reads B's text and stays at 50%.
As in SeqoFlow's dynamism experiment the operators differ several-fold in cost and selectivity,
so the best filter order differs between the two kinds of batch (A first, or B then C first).
Each row carries a unique id so no two requests are identical.

The estimator is a faster SIMULATED small model whose answers disagree with the labels on
``noise`` of the requests (a small model is not the target model).
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from typing import Any

import duckdb

from duckdb_sem.backends.sim import SimBackend, SimProfile
from duckdb_sem.backends.sim.oracles import unit_hash
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.request import LLMRequest, Task

A = "{a_text} is a positive review"
B = "{b_text} describes a crime story"
C = "{b_text} is set in a city"
SQL = f"SELECT id FROM t WHERE sem_filter('{A}') AND sem_filter('{B}') AND sem_filter('{C}')"

SLM = SimProfile(
    name="qwen3-4b-sim", model="Qwen3-4B", hardware="1x A100 (assumed: ~4x the 32B's rates)",
    prefill_tokens_per_s=60_000.0, itl_single_s=0.006, decode_tokens_per_s_max=20_000.0,
    max_num_seqs=256, max_num_batched_tokens=8192, kv_cache_tokens=1_000_000,
)  # fmt: skip


class LabelOracle:
    """Answers from ``labels[request.row]``, optionally wrong on a hashed share ``noise``."""

    def __init__(self, labels: dict[str, bool], *, noise: float = 0.0, seed: int = 0) -> None:
        self.labels = labels
        self.noise = noise
        self.seed = seed

    @property
    def identity(self) -> str:
        return f"bench-labels:{len(self.labels)}:{self.noise}:{self.seed}"

    def answer(self, request: LLMRequest) -> Any:
        value = self.labels.get(request.row, False)
        decide = request.output.task is Task.DECIDE
        if decide and self.noise and unit_hash(str(self.seed), request.row) < self.noise:
            value = not value
        return value if request.output.task is Task.DECIDE else str(value)


@dataclass(frozen=True)
class Workload:
    labels: dict[str, bool]
    flipped: frozenset[int]
    batches: int
    batch_rows: int


def _reviews() -> tuple[list[dict[str, str]], dict[str, str]]:
    with open(dataset_path("rt_reviews.csv"), encoding="utf-8") as f:
        reviews = list(csv.DictReader(f))
    with open(dataset_path("rt_plots.csv"), encoding="utf-8") as f:
        plots = {r["movie"]: r["plot"] for r in csv.DictReader(f)}
    return [r for r in reviews if r["movie"] in plots], plots


def build(
    con: duckdb.DuckDBPyConnection,
    *,
    flip_ratio: float,
    batches: int = 20,
    batch_rows: int = 100,
    seed: int = 0,
    table: str = "t",
) -> Workload:
    """Create ``table`` (id, a_text, b_text) with ``flip_ratio`` of its batches flipped."""
    rng = random.Random(seed)
    reviews, plots = _reviews()
    fresh = [r for r in reviews if r["fresh"] == "True"]
    rotten = [r for r in reviews if r["fresh"] != "True"]
    flipped = frozenset(rng.sample(range(batches), round(flip_ratio * batches)))
    rows: list[tuple[int, str, str]] = []
    labels: dict[str, bool] = {}
    for b in range(batches):
        flip = b in flipped
        for k in range(batch_rows):
            i = b * batch_rows + k
            positive = rng.random() < (0.9 if flip else 0.1)
            review = rng.choice(fresh if positive else rotten)
            plot = plots[review["movie"]]
            if flip:
                a_text = f"[{i}] {review['text']} Context: {plot}"
                b_text = f"[{i}] {plot.split('.')[0]}."
            else:
                a_text = f"[{i}] {review['text']}"
                b_text = f"[{i}] {plot}"
            rows.append((i, a_text, b_text))
            labels[A.replace("{a_text}", a_text)] = positive
            labels[B.replace("{b_text}", b_text)] = rng.random() < (0.1 if flip else 0.9)
            labels[C.replace("{b_text}", b_text)] = rng.random() < 0.5
    con.execute(f"CREATE OR REPLACE TABLE {table} (id INTEGER, a_text VARCHAR, b_text VARCHAR)")
    con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
    return Workload(labels, flipped, batches, batch_rows)


def backends(labels: dict[str, bool], *, noise: float = 0.1) -> tuple[SimBackend, SimBackend]:
    """(target, estimator): SIMULATED Qwen3-32B on the labels, SIMULATED 4B with noise."""
    target = SimBackend("default", oracle=LabelOracle(labels), spec="sim:default")
    estimator = SimBackend(SLM, oracle=LabelOracle(labels, noise=noise, seed=1), spec="sim:slm")
    return target, estimator
