"""Held-out answer quality of the embedded model on three labelled datasets from packages.

Information, not a gate. Every row is held out: Rotten Tomatoes reviews beyond the 300 bundled
ones (bundled rows 1-100, and 60 of 101-300, tuned the prompts and few-shot examples),
SpamAssassin emails and Debian package descriptions, none of which tuned anything; no template
phrasing below was used for tuning either. Requests go through ``build_request`` and ``LlamaBackend.complete``
exactly as the operators send them, so the figures are what ``sem_filter`` / ``sem_join`` /
``sem_map`` / a closed-answer ``sem_map`` give.

Each task is run twice: ``before`` sends requests without their template (the calibration of
an empty row under the generic instruction, and free generation for ratings: what the
backend did before per-template calibration) and ``after`` with it (content-free rows built
from the template, scored closed answers).

- filter: ROC AUC of the calibrated score, accuracy of the decision, share of yes against the
  true share; RT "the review is positive" (label fresh), SpamAssassin "advertising" (spam),
  Debian "is a game" (debtags game::).
- join: RT review x plot, each review against its own movie's plot and three others.
- rating: ``INTEGER`` on a 1-5 scale named in the template; Spearman and AUC against fresh.
- classify: one of four Debian categories (labels), accuracy.

Results: ``benchmarks/results/embedded_quality.md`` and ``embedded_quality.png``. Data:
``sh benchmarks/fetch_quality_data.sh`` once (see :mod:`quality_data`).

    python benchmarks/bench_embedded_quality.py --threads 2            # ~25 min on 2 busy cores
    python benchmarks/bench_embedded_quality.py --rows 40 --tasks rt-filter

The tasks of :mod:`quality_shapes` (``rt-phrasings``, ``rt-rating-words``, ``rt-labels-words``:
phrasing robustness and closed sets asked for in words) run with ``--tasks shapes`` (or by
name) and write ``benchmarks/results/answer_shapes.md``.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import quality_data
import quality_shapes
from _results import RESULTS

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.estimator.accuracy import spearman_rho
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind
from duckdb_sem.llm.template import Template, parse_template

RT_FILTERS = (
    "Is the overall verdict of this film review clearly favourable to the movie? Review: {0}",
    "Review: {0}\nIs the reviewer's opinion of the film favourable?",
    "Did the critic enjoy the film described in this review? {0}",
)
RT_RATINGS = (
    "On a scale from 1 to 5, how much did the critic like the film? Review: {0}",
    "Rate this review from 1 (very negative) to 5 (very positive): {0}",
)
RT_JOINS = (
    "Is this review about the movie with this plot? Review: {0} Plot: {1}",
    "Does this review discuss the film summarised here? Review: {0} Summary: {1}",
)
SPAM_FILTERS = (
    "Is this email unsolicited advertising? {0}",
    "Email: {0}\nIs this email spam?",
)
DEBIAN_FILTERS = ("Is this software package a game? {0}",)
DEBIAN_CLASSIFY = (
    "Which kind of software is this package? {0}",
    "Package description: {0}\nWhat is this package for?",
)
DEBIAN_LABELS = ("game", "programming", "science", "networking")


@dataclass(frozen=True, slots=True)
class Row:
    task: str
    template: str
    mode: str
    rows: int
    auc: float | None = None
    accuracy: float | None = None
    yes_share: float | None = None
    true_share: float | None = None
    spearman: float | None = None
    nulls: int = 0
    seconds_per_row: float = 0.0

    def markdown(self) -> str:
        def f(v: float | None, fmt: str = ".3f") -> str:
            return "-" if v is None else format(v, fmt)

        share = "-" if self.yes_share is None else f"{self.yes_share:.2f} / {self.true_share:.2f}"
        template = self.template.replace("\n", "\\n").replace("|", "\\|")
        return (
            f"| {self.task} | `{template}` | {self.mode} | {self.rows} | {f(self.auc)} | "
            f"{f(self.accuracy)} | {share} | {f(self.spearman)} | {self.nulls} | "
            f"{self.seconds_per_row:.2f} |"
        )


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """ROC AUC by pairwise comparison (ties count half)."""
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / max(1, len(pos) * len(neg))


def _requests(
    kind: OperatorKind,
    template: Template,
    rows: Sequence[Sequence[str]],
    *,
    mode: str,
    output_type: str | None = None,
    labels: tuple[str, ...] = (),
) -> list[LLMRequest]:
    given = template if mode == "after" else None
    return [
        build_request(
            kind, template.render(list(r)), output_type=output_type, template=given, labels=labels
        )
        for r in rows
    ]


def decide(
    backend: Backend,
    task: str,
    kind: OperatorKind,
    source: str,
    rows: Sequence[Sequence[str]],
    labels: Sequence[bool],
    mode: str,
) -> Row:
    template = parse_template(source)
    answers, per_row = quality_shapes.run_requests(
        backend, _requests(kind, template, rows, mode=mode)
    )
    scores = [a.score if a.score is not None else 0.0 for a in answers]
    values = [a.value for a in answers]
    return Row(
        task,
        source,
        mode,
        len(rows),
        auc=auc(scores, labels),
        accuracy=sum(v == lab for v, lab in zip(values, labels, strict=True)) / len(rows),
        yes_share=sum(bool(v) for v in values) / len(rows),
        true_share=sum(labels) / len(labels),
        nulls=sum(v is None for v in values),
        seconds_per_row=per_row,
    )


def rate(
    backend: Backend, source: str, rows: Sequence[Sequence[str]], labels: Sequence[bool], mode: str
) -> Row:
    template = parse_template(source)
    requests = _requests(OperatorKind.MAP, template, rows, mode=mode, output_type="INTEGER")
    answers, per_row = quality_shapes.run_requests(backend, requests)
    # NULL ratings rank in the middle of the scale (no information), as a user's AVG ignores them
    values = [float(a.value) if isinstance(a.value, int) else 3.0 for a in answers]
    scores = [a.score if a.score is not None else v for a, v in zip(answers, values, strict=True)]
    truth = [float(lab) for lab in labels]
    return Row(
        "rt-rating",
        source,
        mode,
        len(rows),
        auc=auc(scores, labels),
        accuracy=sum((v >= 3) == lab for v, lab in zip(values, labels, strict=True)) / len(rows),
        spearman=spearman_rho(values, truth),
        nulls=sum(not isinstance(a.value, int) for a in answers),
        seconds_per_row=per_row,
    )


def classify(
    backend: Backend, source: str, rows: Sequence[Sequence[str]], truth: Sequence[str], mode: str
) -> Row:
    template = parse_template(source)
    if mode == "after":
        requests = _requests(
            OperatorKind.MAP, template, rows, mode=mode, output_type="VARCHAR", labels=DEBIAN_LABELS
        )
    else:  # before: free generation told the labels, matched by its first word
        hint = " Answer with one of: " + ", ".join(DEBIAN_LABELS) + "."
        requests = [
            build_request(OperatorKind.MAP, template.render(list(r)) + hint, max_tokens=6)
            for r in rows
        ]
    answers, per_row = quality_shapes.run_requests(backend, requests)
    got = [str(a.value or "").strip().lower().split(" ")[0].strip(".,") for a in answers]
    return Row(
        "debian-classify",
        source,
        mode,
        len(rows),
        accuracy=sum(g == t for g, t in zip(got, truth, strict=True)) / len(rows),
        nulls=sum(g not in DEBIAN_LABELS for g in got),
        seconds_per_row=per_row,
    )


def tasks(n: int, modes: Sequence[str]) -> dict[str, Callable[[Backend], list[Row]]]:
    def rt_filter(b: Backend) -> list[Row]:
        reviews, _ = quality_data.rotten_tomatoes()
        picked = random.Random(1).sample(reviews, n)
        rows, labels = [[r.text] for r in picked], [r.fresh for r in picked]
        return [
            decide(b, "rt-filter", OperatorKind.FILTER, t, rows, labels, m)
            for t in RT_FILTERS
            for m in modes
        ]

    def rt_rating(b: Backend) -> list[Row]:
        reviews, _ = quality_data.rotten_tomatoes()
        picked = random.Random(2).sample(reviews, n)
        rows, labels = [[r.text] for r in picked], [r.fresh for r in picked]
        return [rate(b, t, rows, labels, m) for t in RT_RATINGS for m in modes]

    def rt_join(b: Backend) -> list[Row]:
        reviews, plots = quality_data.rotten_tomatoes()
        rng = random.Random(3)
        movies = sorted(plots)
        chosen = rng.sample([r for r in reviews if r.movie in plots], max(1, n // 4))
        pairs = []
        for review in chosen:
            for movie in [review.movie, *rng.sample([m for m in movies if m != review.movie], 3)]:
                pairs.append(([review.text, plots[movie][:600]], movie == review.movie))
        rows, labels = [p for p, _ in pairs], [lab for _, lab in pairs]
        return [
            decide(b, "rt-join", OperatorKind.JOIN, t, rows, labels, m)
            for t in RT_JOINS
            for m in modes
        ]

    def spam_filter(b: Backend) -> list[Row]:
        emails = quality_data.spam(n * 2 // 5, n - n * 2 // 5, seed=4)
        rows, labels = [[e.text] for e in emails], [e.spam for e in emails]
        return [
            decide(b, "spam-filter", OperatorKind.FILTER, t, rows, labels, m)
            for t in SPAM_FILTERS
            for m in modes
        ]

    def debian_filter(b: Backend) -> list[Row]:
        packages = random.Random(5).sample(quality_data.debian(), min(n, 240))
        rows = [[p.description] for p in packages]
        labels = [p.category == "game" for p in packages]
        return [
            decide(b, "debian-filter", OperatorKind.FILTER, t, rows, labels, m)
            for t in DEBIAN_FILTERS
            for m in modes
        ]

    def debian_classify(b: Backend) -> list[Row]:
        packages = random.Random(6).sample(quality_data.debian(), min(n, 240))
        rows, truth = [[p.description] for p in packages], [p.category for p in packages]
        return [classify(b, t, rows, truth, m) for t in DEBIAN_CLASSIFY for m in modes]

    return {
        "rt-filter": rt_filter,
        "spam-filter": spam_filter,
        "debian-filter": debian_filter,
        "rt-join": rt_join,
        "rt-rating": rt_rating,
        "debian-classify": debian_classify,
    }


def plot(rows: Sequence[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.auc is not None or r.accuracy is not None]
    labels = sorted({(r.task, r.template) for r in shown}, key=lambda k: (k[0], k[1]))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.5))
    for offset, mode, color in ((-0.2, "before", "#bbbbbb"), (0.2, "after", "#3366cc")):
        values = []
        for key in labels:
            match = [r for r in shown if (r.task, r.template) == key and r.mode == mode]
            best = match[0] if match else None
            values.append(0.0 if best is None else (best.auc or best.accuracy or 0.0))
        ax.barh([i + offset for i in range(len(labels))], values, 0.4, label=mode, color=color)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels([f"{t}: {s[:38]}" for t, s in labels], fontsize=7)
    ax.axvline(0.5, color="black", lw=0.5, ls="--")
    ax.set_xlabel("ROC AUC (filters, joins, ratings) or accuracy (classify); held-out rows")
    ax.set_xlim(0, 1)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def shapes(
    backend: Backend,
    chosen: Sequence[Callable[[Backend], list[quality_shapes.ShapeRow]]],
    args: argparse.Namespace,
) -> None:
    """Run :mod:`quality_shapes` tasks and write ``answer_shapes.md``."""
    results: list[quality_shapes.ShapeRow] = []
    try:
        for task in chosen:
            for row in task(backend):
                results.append(row)
                print(row.markdown(), flush=True)
    except quality_data.MissingData as err:
        raise SystemExit(f"bench_embedded_quality: {err}") from None
    out = args.out if args.out != RESULTS / "embedded_quality.md" else RESULTS / "answer_shapes.md"
    lines = [
        "# Answers in the shape the question asks for (held-out Rotten Tomatoes reviews)",
        "",
        f"Backend `{backend.backend_id}`, {args.threads} thread(s); see the docstring of "
        "`benchmarks/quality_shapes.py` for what each task measures.",
        "",
        quality_shapes.HEADER,
        *(r.markdown() for r in results),
        "",
        *quality_shapes.summary(results),
        "",
        f"Reproduce: `python benchmarks/bench_embedded_quality.py --backend '{args.backend}' "
        f"--threads {args.threads} --rows {args.rows} --tasks {args.tasks} --modes {args.modes}`",
        "",
    ]
    out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="llama:?threads={threads}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=120, help="rows (or pairs) per template")
    parser.add_argument("--tasks", default="all", help="comma-separated; default: all")
    parser.add_argument(
        "--modes",
        default="before,after",
        help="before,after (default) or, for the closed-set shape tasks, generated,scored",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "embedded_quality.md")
    args = parser.parse_args()

    backend = create_backend(args.backend.format(threads=args.threads))
    modes = args.modes.split(",")
    chosen = tasks(args.rows, modes)
    shape_modes = [m for m in modes if m in quality_shapes.MODES] or quality_shapes.MODES
    shaped = quality_shapes.shape_tasks(args.rows, auc, shape_modes)
    names = list(chosen) if args.tasks == "all" else args.tasks.split(",")
    if names == ["shapes"]:
        names = list(shaped)
    if all(name in shaped for name in names):
        shapes(backend, [shaped[name] for name in names], args)
        return
    try:
        results: list[Row] = []
        for name in names:
            for row in chosen[name](backend):
                results.append(row)
                print(row.markdown(), flush=True)
    except quality_data.MissingData as err:
        raise SystemExit(f"bench_embedded_quality: {err}") from None
    command = (
        f"python benchmarks/bench_embedded_quality.py --backend '{args.backend}' "
        f"--threads {args.threads} --rows {args.rows} --tasks {args.tasks} --modes {args.modes}"
    )
    lines = [
        "# Embedded model quality on held-out labelled data",
        "",
        f"Backend `{backend.backend_id}`, {args.threads} thread(s). Every row is held out (see "
        "the module docstring); `before` = requests without their template (generic "
        "calibration, generated ratings), `after` = per-template calibration and scored "
        "closed answers. Share = share of yes / true share.",
        "",
        "| task | template | mode | rows | ROC AUC | accuracy | share | Spearman | NULL | s/row |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(r.markdown() for r in results),
        "",
        f"Reproduce: `{command}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    plot(results, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
