"""Where a benchmark writes its tables and plots.

``benchmarks/results/`` (committed: the full-scale figures the docs quote), or the folder in
``$BENCH_RESULTS`` when set: ``run.py quick`` points it at ``results/quick/`` (gitignored), so
a smoke run never touches the committed results, even while a full run writes them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RESULTS", "write_report"]

RESULTS = Path(os.environ.get("BENCH_RESULTS") or Path(__file__).resolve().parent / "results")


def write_report(out: Path, lines: list[str], reproduce: str) -> None:
    """Write a Markdown report: ``lines``, then how to reproduce it (``reproduce``: the
    command, run alone on the machine)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join([*lines, "", f"Reproduce (alone on the machine): `{reproduce}`", ""]))
    print(f"wrote {out}")
