"""The LOTUS half of the side-by-side benchmark; runs in its own venv (``.venv-lotus``).

Each query of ``workloads/queries.py`` written as a LOTUS program over pandas, with the
operators in the same order as duckdb-sem's Static-1 plan (the SQL as written). Prints one JSON
line per query: rows (the result's key columns), wall seconds and LOTUS's own usage counters.

    .venv-lotus/bin/python benchmarks/lotus_side.py --base-url http://127.0.0.1:PORT/v1 \
        --model SIMULATED-Qwen3-32B --queries Q0 Q1 ...

Offline by construction: the LLM base URL is local, litellm reads its bundled model-cost map
(``LITELLM_LOCAL_MODEL_COST_MAP``), and the caller sets an unreachable HTTP(S) proxy for
everything but 127.0.0.1, so any other download fails instead of leaving the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import lotus
import pandas as pd
from lotus.models import LM
from workloads import queries as q

DATA = Path(__file__).resolve().parent / "workloads" / "data"


def table(name: str) -> pd.DataFrame:
    frame = pd.read_csv(DATA / f"{name}.csv")
    limit = os.environ.get("BENCH_ROW_LIMIT", "")  # same rows as duckdb-sem's side
    return frame.head(int(limit)) if limit else frame


def q0() -> pd.DataFrame:
    return table("reviews").sem_filter(f"{{text}} {q.POSITIVE}")[["id"]]


def q1() -> pd.DataFrame:
    df = table("emails").sem_filter(f"{{body}} {q.ADVERT}")
    return df.sem_filter(f"{{subject}} {q.REPLY}")[["id"]]


def q2() -> pd.DataFrame:
    df = table("packages")
    df = df[df.section != "libs"].sem_filter(f"The software {{description}} {q.VIEW_EDIT}")
    return df.sem_filter(f"{{description}} {q.CONVERT}")[["id"]]


def q3() -> pd.DataFrame:
    df = table("fortunes").sem_filter(f"{{quote}} {q.COMPUTERS}")
    df = df.sem_map(f"{q.TOPIC}: {{quote}}", suffix="topic")
    return df[["id", "topic"]]


def q4() -> pd.DataFrame:
    plots = table("plots")
    plots = plots[plots.id < "p2"].rename(columns={"id": "pid"})
    reviews = table("reviews")
    joined = reviews.sem_join(plots, f"{{text:left}} {q.ABOUT} {{plot:right}}")
    joined = joined.sem_filter(f"{{text}} {q.POSITIVE}")
    return joined.rename(columns={"movie:right": "movie_r"})[["id", "movie_r"]]


def q5() -> pd.DataFrame:
    df = table("packages").sem_filter(f"{{description}} {q.GAME}")
    df = df.sem_map(f"{q.MAIN_USE}: {{description}}", suffix="use")
    return df.sem_filter(f"The use {{use}} {q.VIEW_EDIT}")[["id"]]


def q6() -> pd.DataFrame:
    df = table("emails").sem_filter(f"{{subject}} {q.REPLY}")
    counts = df.groupby("spam").size().rename("n").reset_index()
    df.sem_agg(f"{q.SUMMARY}: {{subject}}", group_by=["spam"])
    return counts


def q7() -> pd.DataFrame:
    df = table("emails").sem_filter(f"{{body}} {q.ADVERT}")
    df = df.sem_filter(f"{{body}} {q.URL}")
    return df.sem_filter(f"{{subject}} {q.REPLY}")[["id"]]


def q8() -> pd.DataFrame:
    pk = table("packages")
    pk = pk[pk.section.isin(["games", "text"])]
    tags = table("tags").rename(columns={"id": "tid"})
    joined = pk.sem_join(tags, f"The software {{description:left}} {q.USED_FOR}: {{meaning:right}}")
    return joined.sem_filter(f"{{description}} {q.GAME}")[["id", "tag"]]


PROGRAMS: dict[str, Callable[[], pd.DataFrame]] = {
    "Q0": q0, "Q1": q1, "Q2": q2, "Q3": q3, "Q4": q4, "Q5": q5, "Q6": q6, "Q7": q7, "Q8": q8,
}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--queries", nargs="+", default=list(PROGRAMS))
    ap.add_argument("--max-batch-size", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    lm = LM(
        model=f"openai/{args.model}", api_base=args.base_url, api_key="not-needed",
        max_batch_size=args.max_batch_size, max_tokens=args.max_tokens, temperature=0.0,
    )  # fmt: skip
    lotus.settings.configure(lm=lm)
    for name in args.queries:
        lm.reset_stats()
        started = time.perf_counter()
        error = None
        rows: list[list[Any]] = []
        try:
            frame = PROGRAMS[name]()
            rows = [[str(v) for v in r] for r in frame.itertuples(index=False)]
        except Exception as err:  # noqa: BLE001 (a failing LOTUS query is a result too)
            error = f"{type(err).__name__}: {err}"[:500]
        seconds = time.perf_counter() - started
        usage = lm.stats.physical_usage
        print(json.dumps({
            "query": name, "wall_s": seconds, "rows": rows, "error": error,
            "lotus_prompt_tokens": usage.prompt_tokens,
            "lotus_completion_tokens": usage.completion_tokens,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
