"""Prefix layout for speed: a 35-row filter whose template starts with a long question.

Information, not a gate. ``before`` sends requests without their template (only the instruction
and few-shot examples are KV-shared; each row re-evaluates the long question), ``after`` with it
(the template's text before its first field joins the shared prefix; the four content-free
calibration rows are included in the time). A fresh backend per run; the model stays loaded.

    python benchmarks/bench_prefix_layout.py --threads 2
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import time
from pathlib import Path

from _results import RESULTS

from duckdb_sem.backends.registry import create_backend
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template

TEMPLATE = (
    "Considering the whole of the following film review, its tone, its final verdict and any "
    "reservations the critic expresses along the way, is the critic's overall opinion of the "
    "movie favourable? Review: {0}"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "prefix_layout.md")
    args = parser.parse_args()
    with dataset_path("rt_reviews.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    movie = collections.Counter(r["movie"] for r in rows).most_common(1)[0][0]
    texts = [r["text"] for r in rows if r["movie"] == movie]
    texts = (texts * 35)[:35]
    template = parse_template(TEMPLATE)
    lines = [
        "# Prefix layout: a 35-row filter with a long leading question",
        "",
        f"`llama:` (the routed default: gemma-3-270m answers decisions), {args.threads} "
        f"thread(s), reviews of `{movie}`, load average {os.getloadavg()[0]:.1f} at the start.",
        "",
        "| run | layout | seconds | yes |",
        "|---|---|---|---|",
    ]
    for run in range(args.repeats):
        for mode in ("before", "after"):
            backend = create_backend(f"llama:?threads={args.threads}")
            requests = [
                build_request(
                    OperatorKind.FILTER,
                    template.render([t]),
                    template=template if mode == "after" else None,
                )
                for t in texts
            ]
            started = time.perf_counter()
            answers = []
            step = backend.capacity().max_batch
            for i in range(0, len(requests), step):
                answers += backend.complete(requests[i : i + step])
            seconds = time.perf_counter() - started
            yes = sum(bool(a.value) for a in answers)
            lines.append(f"| {run + 1} | {mode} | {seconds:.2f} | {yes}/35 |")
            print(lines[-1], flush=True)
    lines += [
        "",
        f"Reproduce: `python benchmarks/bench_prefix_layout.py --threads {args.threads}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
