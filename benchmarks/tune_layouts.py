"""Tuning-row experiment: decision layouts alone and averaged (issue 27 item 3).

Runs only on *tuning* rows (bundled reviews 1-120, ``duckdb_sem/data/rt_reviews.csv``) under
phrasings of our own that the held-out benchmark (``bench_embedded_quality.py --tasks
rt-phrasings``) does not use. For every row and phrasing it records the calibrated decision
score of gemma-3-270m under each ``layout=`` of the ``llama:`` backend (``canonical``: one
yes/no question, then the value; ``template``: as written), so layouts and their average can be
compared offline:

    python benchmarks/tune_layouts.py --out /tmp/layouts.json
    python benchmarks/tune_layouts.py --analyse /tmp/layouts.json

Not a benchmark: what it chooses is then measured on held-out rows.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

from bench_embedded_quality import auc
from decision_ceiling import accuracy

from duckdb_sem.backends import llama_prompts
from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_identity import LAYOUTS
from duckdb_sem.backends.llama_model import gemma_model_path
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import DECIDE_EXAMPLES, build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template

#: "the review is positive" in words of our own: none is a benchmark phrasing
PHRASINGS = (
    "Does this review recommend the film? {0}",
    "{0}\nThis critic recommends the film.",
    "Review: '{0}'. The reviewer enjoyed the movie.",
    "The following review is favourable: {0}",
    "Is the critic's take on the film a good one? {0}",
    "{0} -- is this a thumbs-up review?",
)


def tuning_rows(limit: int) -> list[dict[str, str]]:
    with dataset_path("rt_reviews.csv").open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if int(r["review_id"]) <= limit]


#: what is compared: each ``layout=``, and the canonical layout with the few-shot examples in
#: reverse order (``-rev``: for few-shot order ensembling)
VARIANTS = (*LAYOUTS, "canonical-rev")


def run(out: Path, limit: int, threads: int, variants: list[str]) -> None:
    rows = tuning_rows(limit)
    result: dict[str, Any] = {"labels": [r["fresh"] == "True" for r in rows], "scores": {}}
    for variant in variants:
        layout = variant.removesuffix("-rev")
        order = DECIDE_EXAMPLES[::-1] if variant.endswith("-rev") else DECIDE_EXAMPLES
        llama_prompts.DECIDE_EXAMPLES = order  # type: ignore[attr-defined]  # read per prefix
        backend = LlamaBackend(path=gemma_model_path(), n_ctx=2048, threads=threads,
                               layout=layout, share_cpu=False)  # fmt: skip
        for source in PHRASINGS:
            template = parse_template(source)
            requests = [
                build_request(OperatorKind.FILTER, template.render([r["text"]]), template=template)
                for r in rows
            ]
            scores = [c.score for c in backend.complete(requests)]
            result["scores"][f"{variant}|{source}"] = scores
            print(variant, source[:40], flush=True)
            out.write_text(json.dumps(result), encoding="utf-8")  # what is done so far
        backend.close()
    out.write_text(json.dumps(result), encoding="utf-8")


def analyse(paths: list[Path]) -> None:
    """Accuracy (calibrated score > 0), ROC AUC and yes-share per phrasing, for each variant
    and for the mean score of each combination of variants."""
    labels: list[bool] = []
    scores: dict[str, list[float]] = {}
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        labels = data["labels"]
        scores.update(data["scores"])
    variants = sorted({k.split("|", 1)[0] for k in scores})
    print(f"{len(labels)} rows, true share {sum(labels) / len(labels):.2f}")
    combos = [c for n in range(1, len(variants) + 1)
              for c in itertools.combinations(variants, n)]  # fmt: skip
    print("| variants (mean score) | worst accuracy | mean accuracy | spread | mean AUC |")
    print("|---|---|---|---|---|")
    for combo in combos:
        accs, aucs = [], []
        for source in PHRASINGS:
            got = [statistics.fmean(v) for v in
                   zip(*(scores[f"{x}|{source}"] for x in combo), strict=True)]  # fmt: skip
            accs.append(accuracy(got, labels))
            aucs.append(auc(got, labels))
        print(f"| {' + '.join(combo)} | {min(accs):.3f} | {statistics.fmean(accs):.3f} | "
              f"{max(accs) - min(accs):.3f} | {statistics.fmean(aucs):.3f} |")  # fmt: skip
    print()
    print("| phrasing | " + " | ".join(f"{x}: acc / AUC / yes" for x in variants) + " |")
    print("|---|" + "---|" * len(variants))
    for source in PHRASINGS:
        cells = []
        for x in variants:
            got = scores[f"{x}|{source}"]
            acc = accuracy(got, labels)
            yes = sum(s > 0 for s in got) / len(got)
            cells.append(f"{acc:.3f} / {auc(got, labels):.3f} / {yes:.2f}")
        print(f"| `{source!r}` | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--analyse", type=Path, nargs="+")
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", default=",".join(VARIANTS[:2]))
    args = parser.parse_args()
    if args.analyse:
        analyse(args.analyse)
    elif args.out:
        run(args.out, args.rows, args.threads, args.variants.split(","))
    else:
        parser.error("--out or --analyse")


if __name__ == "__main__":
    main()
