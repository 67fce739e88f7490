"""Tuning-split experiments for closed answers asked in words (issue #27): 1-5 ratings and
POSITIVE/NEGATIVE labels on gemma-3-270m (the embedded default's closed-answer model).

Runs only on the TUNE movies (:data:`quality_shapes.TUNE_MOVIES`, held-out Rotten Tomatoes
reviews of 12 movies disjoint from the REPORT movies that ``bench_embedded_quality.py --tasks
rt-rating-words,rt-labels-words`` measures). It dumps raw, uncalibrated signals of every row and
of every calibration row to JSON, so scoring and calibration strategies are compared offline:

    python benchmarks/tune_closed.py --out /tmp/tune_closed.jsonl
    python benchmarks/tune_closed.py --analyse /tmp/tune_closed.jsonl

Not a benchmark: what it chose is then measured on the REPORT movies.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import quality_shapes

from duckdb_sem.backends.llama import LlamaBackend, _scale_decision
from duckdb_sem.backends.llama_model import gemma_model_path
from duckdb_sem.estimator.accuracy import spearman_rho
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

#: the issue's phrasings and two of our own per kind (tuned on; the report adds others)
RATINGS = (
    quality_shapes.RATING_WORDS,
    "How positive is this review, from 1 to 5? {0}",
)
LABELS = (
    quality_shapes.LABEL_WORDS,
    "Review: {0}\nClassify the review as positive or negative.",
)
UPPER = "\nIs the answer in the upper half of that scale?"
LOWER = "\nIs the answer in the lower half of that scale?"
TOP = "\nIs the answer 4 or 5?"
BOTTOM = "\nIs the answer 1 or 2?"
SCALE_QUESTIONS = (UPPER, LOWER, TOP, BOTTOM)


def _request(source: str, text: str) -> LLMRequest:
    template = parse_template(source)
    return build_request(
        OperatorKind.MAP, template.render([text]), template=template, options=CallOptions()
    )


def _asked(request: LLMRequest, question: str) -> LLMRequest:
    """``request``'s scale decision with ``question`` in place of the upper-half one."""
    derived = _scale_decision(request)
    assert derived.template is not None
    base = derived.row.removesuffix(UPPER)
    pieces = derived.template.pieces
    last = pieces[-1].removesuffix(UPPER)
    template = dataclasses.replace(derived.template, pieces=(*pieces[:-1], last + question))
    return dataclasses.replace(derived, row=base + question, template=template)


def _signals(
    backend: LlamaBackend, request: LLMRequest, questions: Sequence[str], part: str
) -> dict[str, Any]:
    """The choice scores (``part='choice'``) or the decision margins (``'decide'``): asked in
    separate passes, since their prompts share no KV-cached prefix."""
    if part == "decide":
        asked = [_asked(request, q) for q in questions]
        return {q: backend._margin(a, a.row)[0] for q, a in zip(questions, asked, strict=True)}
    out: dict[str, Any] = {"choice": backend._label_logprobs(request, request.row)[0]}
    labels = request.output.labels
    if len(labels) == 2:  # the instruction's list of labels in the other order
        swapped = request.prefix.replace(", ".join(labels), ", ".join(reversed(labels)))
        out["choice_swapped"] = backend._label_logprobs(
            dataclasses.replace(request, prefix=swapped), request.row
        )[0]
    return out


def run(out: Path) -> None:
    """Dump the signals of every tuning row, one JSON line per row as it is scored (so a slow
    machine's partial run is usable): the issue's phrasings first, rows interleaved by movie."""
    backend = LlamaBackend(path=gemma_model_path(), n_ctx=2048, threads=1)
    picked = quality_shapes.reviews_of(quality_shapes.TUNE_MOVIES, 10)
    picked = sorted(picked, key=lambda r: picked.index(r) % 10)  # one per movie, then again
    with out.open("w", encoding="utf-8") as f:
        for group, source in (
            ("ratings", RATINGS[0]), ("labels", LABELS[0]),
            ("ratings", RATINGS[1]), ("labels", LABELS[1]),
        ):  # fmt: skip
            first = _request(source, "x")
            questions = (
                list(SCALE_QUESTIONS)
                if group == "ratings"
                else [f"\nIs the answer {label}?" for label in first.output.labels]
            )
            head = {"group": group, "source": source, "labels": list(first.output.labels)}
            for part in ("decide", "choice"):
                for i, row in enumerate(first.calibration_rows()):
                    got = _signals(backend, dataclasses.replace(first, row=row), questions, part)
                    f.write(json.dumps({**head, "cal": i, **got}) + "\n")
                for i, r in enumerate(picked):
                    got = _signals(backend, _request(source, r.text), questions, part)
                    f.write(json.dumps({**head, "cal": None, "i": i, "movie": r.movie,
                                        "fresh": r.fresh, **got}) + "\n")  # fmt: skip
                    f.flush()
            print(group, source[:60], flush=True)


def load(path: Path) -> dict[str, Any]:
    """The JSON lines of :func:`run` as {group: {source: {labels, rows, cal, movies, fresh}}}."""
    data: dict[str, Any] = {"ratings": {}, "labels": {}}
    merged: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        kind = "cal" if rec["cal"] is not None else "row"
        at = rec["cal"] if rec["cal"] is not None else rec["i"]
        merged.setdefault((rec["group"], rec["source"], kind, at), {}).update(rec)
    for (group, source, kind, _), rec in merged.items():
        if not any(k.startswith("\n") for k in rec):
            continue  # a row the decision pass has not reached yet
        got = data[group].setdefault(
            source, {"labels": rec["labels"], "rows": [], "cal": [], "movies": [], "fresh": []}
        )
        if kind == "cal":
            got["cal"].append(rec)
        else:
            got["rows"].append(rec)
            got["movies"].append(rec["movie"])
            got["fresh"].append(rec["fresh"])
    return data


# -- analysis -------------------------------------------------------------------------------


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / max(1, len(pos) * len(neg))


def softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def per_movie(values: Sequence[float], data: dict[str, Any]) -> float:
    per: dict[str, list[tuple[float, bool]]] = {}
    for movie, value, fresh in zip(data["movies"], values, data["fresh"], strict=True):
        per.setdefault(movie, []).append((value, fresh))
    means = [statistics.mean(v for v, _ in rows) for rows in per.values()]
    shares = [sum(f for _, f in rows) / len(rows) for rows in per.values()]
    return spearman_rho(means, shares)


def count_error(positive: Sequence[bool], data: dict[str, Any]) -> float:
    per: dict[str, list[tuple[bool, bool]]] = {}
    for movie, yes, fresh in zip(data["movies"], positive, data["fresh"], strict=True):
        per.setdefault(movie, []).append((yes, fresh))
    return statistics.mean(
        abs(sum(y for y, _ in rows) - sum(f for _, f in rows)) / max(1, sum(f for _, f in rows))
        for rows in per.values()
    )


def _scale_report(
    name: str, scores: list[float], values: list[float], data: dict[str, Any]
) -> None:
    fresh = data["fresh"]
    hist = [sum(v == k for v in values) for k in (1, 2, 3, 4, 5)]
    print(
        f"   {name:34} score AUC {auc(scores, fresh):.3f}  value AUC {auc(values, fresh):.3f}"
        f"  movie rho {per_movie(values, data):.3f}  hist {hist}"
    )


def analyse(path: Path) -> None:
    data = load(path)
    for source, got in data["ratings"].items():
        fresh = got["fresh"]
        print(f"{source[:70]!r}: {len(fresh)} rows, fresh share {sum(fresh) / len(fresh):.2f}")
        rows, cal = got["rows"], got["cal"]
        n = len(got["labels"])
        digits = [float(v) for v in got["labels"]]
        # current: calibrated upper-half margin -> sigmoid(m / 0.2) quantile; and variants
        signals: dict[str, Any] = {
            "upper": lambda r: r[UPPER],
            "upper-lower": lambda r: r[UPPER] - r[LOWER],
            "45": lambda r: r[TOP],
            "45-12": lambda r: r[TOP] - r[BOTTOM],
            "all4": lambda r: r[UPPER] - r[LOWER] + r[TOP] - r[BOTTOM],
        }
        for qname, sign_of in signals.items():
            off = statistics.mean(sign_of(c) for c in cal)
            ms = [sign_of(r) - off for r in rows]
            for tau in (0.1, 0.2, 0.4, 0.8):
                ps = [1 / (1 + math.exp(-m / tau)) for m in ms]
                values = [digits[min(n - 1, int(n * p))] for p in ps]
                _scale_report(f"{qname} tau={tau}", ms, values, got)
        # the digits' own distribution, calibrated or not (once the choice pass reached them)
        if not all("choice" in r for r in rows + cal):
            continue
        prior = [math.log(statistics.mean(softmax(c["choice"])[j] for c in cal)) for j in range(n)]
        for cname, sub in (("raw", [0.0] * n), ("cal", prior)):
            probs = [
                softmax([lp - c for lp, c in zip(r["choice"], sub, strict=True)]) for r in rows
            ]
            expect = [sum(d * p for d, p in zip(digits, ps, strict=True)) for ps in probs]
            argmax = [digits[max(range(n), key=lambda j: ps[j])] for ps in probs]
            _scale_report(f"digits {cname} argmax", expect, argmax, got)
            _scale_report(
                f"digits {cname} rounded E", expect, [float(round(e)) for e in expect], got
            )
    for source, got in data["labels"].items():
        fresh = got["fresh"]
        print(f"{source[:70]!r}: {len(fresh)} rows, fresh share {sum(fresh) / len(fresh):.2f}")
        rows, cal, labels = got["rows"], got["cal"], got["labels"]
        pos = next(j for j, lab in enumerate(labels) if lab.upper().startswith("POS"))

        def show(
            name: str, scores: list[float], yes: list[bool], got: dict[str, Any] = got
        ) -> None:
            fresh = got["fresh"]
            acc = sum(y == f for y, f in zip(yes, fresh, strict=True)) / len(yes)
            print(
                f"   {name:34} AUC {auc(scores, fresh):.3f} acc {acc:.3f} "
                f"share {sum(yes) / len(yes):.2f} count err {count_error(yes, got):.3f}"
            )

        def lp_of(r: dict[str, Any], pos: int = pos) -> float:
            p = softmax(r["choice"])
            return math.log(p[pos]) - math.log(p[1 - pos])

        qs = [f"\nIs the answer {label}?" for label in labels]
        for name, f in (
            ("decision pos", lambda r, q=qs[pos]: r[q]),
            ("decision pos-neg", lambda r, q=qs[pos], o=qs[1 - pos]: r[q] - r[o]),
        ):
            ms = [f(r) for r in rows]
            for cname, cset in (("cf", cal[:4]), ("irrelevant", cal[4:]), ("cf+irr", cal)):
                off = statistics.mean(f(c) for c in cset)
                show(f"{name} cal {cname}", ms, [m - off > 0 for m in ms])
        if not all("choice" in r for r in rows + cal):
            continue
        raw = [lp_of(r) for r in rows]
        show("choice raw", raw, [s > 0 for s in raw])

        def lp_sw(r: dict[str, Any], pos: int = pos) -> float:
            p = softmax(r["choice_swapped"])
            return math.log(p[pos]) - math.log(p[1 - pos])

        both = [lp_of(r) + lp_sw(r) for r in rows]
        for cname, cset in (("cf", cal[:4]), ("irrelevant", cal[4:]), ("cf+irr", cal)):
            offb = statistics.mean(lp_of(c) + lp_sw(c) for c in cset)
            show(f"choice+swapped cal {cname}", both, [s - offb > 0 for s in both])
        for cname, cset in (("cf", cal[:4]), ("irrelevant", cal[4:]), ("cf+irr (now)", cal)):
            prior = [
                math.log(statistics.mean(softmax(c["choice"])[j] for c in cset)) for j in (0, 1)
            ]
            off = prior[pos] - prior[1 - pos]
            show(f"choice cal {cname}", raw, [s - off > 0 for s in raw])
            offm = statistics.mean(lp_of(c) for c in cset)
            show(f"choice cal-mean-lp {cname}", raw, [s - offm > 0 for s in raw])
        show("choice batch-median (reference)", raw, [s > statistics.median(raw) for s in raw])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--analyse", type=Path)
    args = parser.parse_args()
    if args.analyse:
        analyse(args.analyse)
    else:
        run(args.out)


if __name__ == "__main__":
    main()
