"""What each operator of a plan did in a run, for ``EXPLAIN ANALYZE SEMANTIC``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Actual"]


@dataclass
class Actual:
    """What one operator did: rows in and out, LLM calls asked, seconds, and the prompt tokens
    it sent to a backend with those the backend took from its KV or prefix cache (filled as it
    runs)."""

    rows_in: int = 0
    rows_out: int = 0
    calls: int = 0
    seconds: float = 0.0
    sent_tokens: int = 0
    cached_tokens: int = 0
