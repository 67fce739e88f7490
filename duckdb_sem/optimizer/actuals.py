"""What each operator of a plan did in a run, for ``EXPLAIN ANALYZE SEMANTIC``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Actual"]


@dataclass
class Actual:
    """What one operator did: rows in and out, LLM calls asked, seconds (filled as it runs)."""

    rows_in: int = 0
    rows_out: int = 0
    calls: int = 0
    seconds: float = 0.0
