"""Snapshot Debian package descriptions with their debtags categories (run once; the CSV is committed).

The apt indexes change, so the quality benchmark reads the committed sample
(``benchmarks/data/debian_packages.csv``), not the live index. Each package has exactly one of
four categories, read from its debtags facets: ``game::`` (game), ``devel::`` (programming),
``field::`` (science), ``network::``/``protocol::`` (networking).

    apt-get -o Acquire::Languages=en update && python benchmarks/snapshot_debian.py
"""

from __future__ import annotations

import csv
import random
import re
import subprocess
from pathlib import Path

OUT = Path(__file__).parent / "data" / "debian_packages.csv"
CATEGORIES = {
    "game": ("game::",),
    "programming": ("devel::",),
    "science": ("field::",),
    "networking": ("network::", "protocol::"),
}
PER_CATEGORY = 60


LISTS = Path("/var/lib/apt/lists")


def _translations() -> dict[str, str]:
    """Long English descriptions from the apt lists' Translation-en files."""
    out: dict[str, str] = {}
    for path in sorted(LISTS.glob("*_i18n_Translation-en*")):
        text = subprocess.run(
            ["/usr/lib/apt/apt-helper", "cat-file", str(path)], capture_output=True, text=True
        ).stdout
        for stanza in text.split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*(?:\n .*)*)", stanza, re.MULTILINE))
            if "Package" in fields and "Description-en" in fields:
                out.setdefault(fields["Package"], fields["Description-en"])
    return out


def main() -> None:
    long = _translations()
    text = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True).stdout
    rows: dict[str, list[tuple[str, str]]] = {c: [] for c in CATEGORIES}
    seen: set[str] = set()
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*(?:\n .*)*)", stanza, re.MULTILINE))
        name, tags = fields.get("Package", ""), fields.get("Tag", "")
        description = long.get(name, "")
        if not name or name in seen or not tags or "\n" not in description:
            continue
        seen.add(name)
        tagset = [t.strip() for t in tags.replace("\n", " ").split(",")]
        hits = {c for c, prefixes in CATEGORIES.items() for t in tagset if t.startswith(prefixes)}
        if len(hits) != 1:
            continue
        summary, _, body = description.partition("\n")
        body = " ".join(line.strip() for line in body.splitlines() if line.strip() != ".")
        if len(body) < 80:
            continue
        rows[hits.pop()].append((name, f"{summary.strip()}. {body[:500]}"))
    rng = random.Random(0)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["package", "description", "category"])
        for category, items in rows.items():
            for name, description in rng.sample(sorted(items), PER_CATEGORY):
                writer.writerow([name, description, category])
    print(f"wrote {OUT}: {PER_CATEGORY} packages per category, from {len(seen)} packages")


if __name__ == "__main__":
    main()
