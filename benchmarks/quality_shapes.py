"""Answers in the shape the question asks for (issue #27): phrasing robustness of a filter,
and closed sets asked for in words, on held-out Rotten Tomatoes reviews.

Information, not a gate; run through ``bench_embedded_quality.py --tasks rt-phrasings,...``
(the tasks below register there). Every row is held out (never the 300 bundled reviews, which
tuned the data-first layout with phrasings of our own); none of the phrasings here tuned
anything: they are the ones a user tried in the issue.

- ``rt-phrasings``: five phrasings of "the review is positive" (statement, question, field
  first, field last, quoted) as ``sem_filter`` on 200 reviews: accuracy, ROC AUC, yes-share;
  the summary line gives the worst accuracy and the spread (best - worst).
- ``rt-rating-words``: an untyped ``sem_map`` asking for a 1-5 rating in words ("Answer with
  the digit only"), 12 movies x 10 reviews. ``generated`` = free text then the first digit
  (what a user's ``regexp_extract`` gets; ``choices := []``), ``scored`` = the closed set the
  words name. ROC AUC against fresh, Spearman of the per-movie mean against the movie's fresh
  share, parse failures (no digit 1-5), completion tokens per row.
- ``rt-labels-words``: an untyped ``sem_map`` asking for POSITIVE or NEGATIVE, counted per
  movie as a user's ``GROUP BY`` would: the mean relative error of the POSITIVE count against
  the fresh count, accuracy, parse failures, completion tokens per row.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import quality_data

from duckdb_sem.backends.base import Backend
from duckdb_sem.estimator.accuracy import spearman_rho
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

__all__ = ["PHRASINGS", "ShapeRow", "run_requests", "shape_tasks"]

PHRASINGS = (
    'The review "{0}" is positive',  # the README tour's statement, quoted
    "Is this review positive? {0}",  # question, field last
    "{0} the review is positive",  # field first, statement
    "{0} The critic liked the movie.",  # field first, another wording
    'Is the review "{0}" positive?',  # question, quoted field mid-sentence
)
RATING_WORDS = (
    "Rate how much the critic liked the movie on a 1 to 5 scale (1 = hated it, 5 = loved it). "
    "Answer with the digit only. Review: {0}"
)
LABEL_WORDS = (
    "Label the overall verdict of this movie review. Answer with exactly one word, POSITIVE "
    "or NEGATIVE. Review: {0}"
)
#: phrasings of the same questions that tuned nothing (reported beside the issue's own)
RATING_OTHERS = (
    "On a scale from 1 to 5, how much did the critic like the film? Review: {0}",
    "Rate this review from 1 (very negative) to 5 (very positive): {0}",
)
LABEL_OTHERS = ("Review: {0}\nAnswer POSITIVE or NEGATIVE: did the critic like the film?",)
MODES = ("generated", "scored")


@dataclass(frozen=True, slots=True)
class ShapeRow:
    task: str
    template: str
    mode: str
    rows: int
    accuracy: float | None = None
    auc: float | None = None
    yes_share: float | None = None
    spearman: float | None = None
    count_error: float | None = None
    failures: int = 0
    tokens_per_row: float = 0.0
    seconds_per_row: float = 0.0

    def markdown(self) -> str:
        def f(v: float | None, fmt: str = ".3f") -> str:
            return "-" if v is None else format(v, fmt)

        template = self.template.replace("\n", "\\n").replace("|", "\\|")
        return (
            f"| {self.task} | `{template}` | {self.mode} | {self.rows} | {f(self.accuracy)} | "
            f"{f(self.auc)} | {f(self.yes_share, '.2f')} | {f(self.spearman)} | "
            f"{f(self.count_error, '.2f')} | {self.failures} | {self.tokens_per_row:.1f} | "
            f"{self.seconds_per_row:.2f} |"
        )


HEADER = (
    "| task | template | mode | rows | accuracy | ROC AUC | yes share | Spearman (per movie) "
    "| count error | parse failures | completion tokens/row | s/row |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def run_requests(backend: Backend, requests: list[LLMRequest]) -> tuple[list[Completion], float]:
    """The answers to ``requests`` in the backend's batches, and the seconds per request."""
    started = time.perf_counter()
    step = backend.capacity().max_batch
    out: list[Completion] = []
    for i in range(0, len(requests), step):
        out += backend.complete(requests[i : i + step])
    return out, (time.perf_counter() - started) / max(1, len(requests))


def _map_requests(source: str, texts: Sequence[str], options: CallOptions) -> list[LLMRequest]:
    template = parse_template(source)
    return [
        build_request(OperatorKind.MAP, template.render([t]), template=template, options=options)
        for t in texts
    ]


#: The movies each closed-set task reports on (12 x 10 held-out reviews each), fixed by name.
#: Nothing was tuned on them; :data:`TUNE_MOVIES` (disjoint from both) tuned closed answers
#: (``benchmarks/tune_closed.py``). The report sets were drawn by ``random.Random(12)`` and
#: ``(13)`` from the movies with at least 10 held-out reviews (:func:`report_reviews`), the
#: tune set by ``Random(27)`` from the rest, its reviews by a seed of each movie's name.
REPORT_RATING_MOVIES = (
    "ringu", "ice_age", "the_mothman_prophecies", "skins", "the_pinochet_case",
    "maid_in_manhattan", "deuces_wild", "mr_deeds", "a_walk_to_remember", "monsoon_wedding",
    "rxmas", "im_going_home",
)  # fmt: skip
REPORT_LABEL_MOVIES = (
    "how_to_kill_your_neighbors_dog", "invincible", "the_scorpion_king",
    "family_fundamentals", "the_lord_of_the_rings_the_two_towers", "harrisons_flowers",
    "the_pinochet_case", "divine_secrets_of_the_yaya_sisterhood", "half_past_dead", "the_isle",
    "tully", "cremaster_3",
)  # fmt: skip
TUNE_MOVIES = (
    "beijing_bicycle", "big_fat_liar", "friday_after_next", "ichi_the_killer", "igby_goes_down",
    "janice_beard_45_wpm", "just_a_kiss", "maryam", "serving_sara", "stuart_little_2",
    "the_sum_of_all_fears", "uzumaki",
)  # fmt: skip


def _movies(n_movies: int, per_movie: int, seed: int) -> list[quality_data.Review]:
    """``per_movie`` reviews of each of ``n_movies`` movies that have that many (the REPORT
    draws: the rows answer_shapes.md has reported on since ef5d62a)."""
    reviews, _ = quality_data.rotten_tomatoes()
    by_movie: dict[str, list[quality_data.Review]] = {}
    for review in reviews:
        by_movie.setdefault(review.movie, []).append(review)
    rng = random.Random(seed)
    eligible = sorted(m for m, rs in by_movie.items() if len(rs) >= per_movie)
    picked: list[quality_data.Review] = []
    for movie in rng.sample(eligible, n_movies):
        picked += rng.sample(by_movie[movie], per_movie)
    return picked


def report_reviews(kind: str) -> list[quality_data.Review]:
    """The REPORT rows of ``rating`` or ``labels`` (120: 12 movies x 10), checked against the
    movie names written down here."""
    seed, names = {"rating": (12, REPORT_RATING_MOVIES), "labels": (13, REPORT_LABEL_MOVIES)}[kind]
    picked = _movies(len(names), 10, seed)
    assert tuple(dict.fromkeys(r.movie for r in picked)) == names, "report movies changed"
    return picked


def reviews_of(movies: Sequence[str], per_movie: int) -> list[quality_data.Review]:
    """``per_movie`` held-out reviews of each movie (drawn by a seed of the movie's name)."""
    reviews, _ = quality_data.rotten_tomatoes()
    by_movie: dict[str, list[quality_data.Review]] = {}
    for review in reviews:
        by_movie.setdefault(review.movie, []).append(review)
    picked: list[quality_data.Review] = []
    for movie in movies:
        picked += random.Random(movie).sample(by_movie[movie], per_movie)
    return picked


def phrasing_reviews(n: int) -> list[quality_data.Review]:
    """The ``n`` held-out reviews ``rt-phrasings`` asks its phrasings of (seeded)."""
    reviews, _ = quality_data.rotten_tomatoes()
    return random.Random(11).sample(reviews, n)


def phrasings(backend: Backend, n: int, auc: Callable[..., float]) -> list[ShapeRow]:
    picked = phrasing_reviews(n)
    texts, labels = [r.text for r in picked], [r.fresh for r in picked]
    out = []
    for source in PHRASINGS:
        template = parse_template(source)
        requests = [
            build_request(OperatorKind.FILTER, template.render([t]), template=template)
            for t in texts
        ]
        answers, per_row = run_requests(backend, requests)
        values = [bool(a.value) for a in answers]
        out.append(
            ShapeRow(
                "rt-phrasings", source, "filter", n,
                accuracy=sum(v == lab for v, lab in zip(values, labels, strict=True)) / n,
                auc=auc([a.score or 0.0 for a in answers], labels),
                yes_share=sum(values) / n,
                seconds_per_row=per_row,
            )
        )  # fmt: skip
    return out


def _modes(modes: Sequence[str]) -> list[tuple[str, CallOptions]]:
    known = {"generated": CallOptions(choices=()), "scored": CallOptions()}
    return [(m, known[m]) for m in modes]


def rating_words(
    backend: Backend, auc: Callable[..., float], modes: Sequence[str] = MODES
) -> list[ShapeRow]:
    picked = report_reviews("rating")
    texts = [r.text for r in picked]
    out = []
    for source in (RATING_WORDS, *RATING_OTHERS):
        for mode, options in _modes(modes):
            answers, per_row = run_requests(backend, _map_requests(source, texts, options))
            digits = [re.search(r"[1-5]", str(a.value or "")) for a in answers]
            values = [float(d.group(0)) if d else None for d in digits]
            filled = [3.0 if v is None else v for v in values]  # no digit: the middle
            per: dict[str, list[tuple[float, bool]]] = {}
            for review, value in zip(picked, filled, strict=True):
                per.setdefault(review.movie, []).append((value, review.fresh))
            means = [statistics.mean(v for v, _ in rows) for rows in per.values()]
            shares = [sum(f for _, f in rows) / len(rows) for rows in per.values()]
            out.append(
                ShapeRow(
                    "rt-rating-words", source, mode, len(texts),
                    auc=auc(filled, [r.fresh for r in picked]),
                    spearman=spearman_rho(means, shares),
                    failures=sum(v is None for v in values),
                    tokens_per_row=statistics.mean(a.completion_tokens for a in answers),
                    seconds_per_row=per_row,
                )
            )  # fmt: skip
    return out


def label_words(backend: Backend, modes: Sequence[str] = MODES) -> list[ShapeRow]:
    picked = report_reviews("labels")
    texts = [r.text for r in picked]
    out = []
    for source in (LABEL_WORDS, *LABEL_OTHERS):
        for mode, options in _modes(modes):
            answers, per_row = run_requests(backend, _map_requests(source, texts, options))
            said = [str(a.value or "").strip().upper() for a in answers]
            positive = [s.startswith("POSITIVE") for s in said]
            unparsed = sum(not s.startswith(("POSITIVE", "NEGATIVE")) for s in said)
            per: dict[str, list[tuple[bool, bool]]] = {}
            for review, yes in zip(picked, positive, strict=True):
                per.setdefault(review.movie, []).append((yes, review.fresh))
            errors = [
                abs(sum(y for y, _ in rows) - sum(f for _, f in rows))
                / max(1, sum(f for _, f in rows))
                for rows in per.values()
            ]
            out.append(
                ShapeRow(
                    "rt-labels-words", source, mode, len(texts),
                    accuracy=sum(p == r.fresh for p, r in zip(positive, picked, strict=True))
                    / len(texts),
                    yes_share=sum(positive) / len(texts),
                    count_error=statistics.mean(errors),
                    failures=unparsed,
                    tokens_per_row=statistics.mean(a.completion_tokens for a in answers),
                    seconds_per_row=per_row,
                )
            )  # fmt: skip
    return out


def rating_query_time(backend: Backend, rows: int = 35) -> list[ShapeRow]:
    """Seconds for ``SELECT sem_map(RATING_WORDS)`` over ``rows`` reviews through SQL (cache
    off, model loaded): the first query (it measures the template's calibration rows too)
    and the same query again on a fresh connection of the same backend."""
    import duckdb_sem

    picked = report_reviews("rating")[:rows]
    sql = "SELECT sem_map('" + RATING_WORDS.replace("{0}", "{text}") + "') AS r FROM reviews"
    backend.complete(_map_requests("Is this {0} positive? Answer yes or no.", ["x"], CallOptions()))
    out = []
    for run in ("first", "again"):
        con = duckdb_sem.connect(backend=backend, cache="off")
        con.execute("CREATE TABLE reviews (text VARCHAR)")
        con.executemany("INSERT INTO reviews VALUES (?)", [[r.text] for r in picked])
        started = time.perf_counter()
        got = con.sql(sql).fetchall()
        seconds = time.perf_counter() - started
        failures = sum(re.fullmatch(r"[1-5]", str(v).strip()) is None for (v,) in got)
        out.append(
            ShapeRow(
                "rt-rating-query", f"{rows} rows, {run} query: {seconds:.1f} s", "sql", rows,
                failures=failures, seconds_per_row=seconds / rows,
            )
        )  # fmt: skip
    return out


def shape_tasks(
    n: int, auc: Callable[..., float], modes: Sequence[str] = MODES
) -> dict[str, Callable[[Backend], list[ShapeRow]]]:
    """The tasks, by name; ``n`` rows for the phrasings (the issue asks 200); ``modes`` of the
    closed-set tasks (``generated``, ``scored``)."""
    return {
        "rt-phrasings": lambda b: phrasings(b, n, auc),
        "rt-rating-words": lambda b: rating_words(b, auc, modes),
        "rt-labels-words": lambda b: label_words(b, modes),
        "rt-rating-query": rating_query_time,
    }


def summary(rows: Sequence[ShapeRow]) -> list[str]:
    """The phrasing robustness line: worst accuracy and spread."""
    accs = [r.accuracy for r in rows if r.task == "rt-phrasings" and r.accuracy is not None]
    if not accs:
        return []
    return [
        f"rt-phrasings: worst accuracy {min(accs):.3f}, spread (best - worst) "
        f"{max(accs) - min(accs):.3f} over {len(accs)} phrasings"
    ]
