"""What a plan is estimated to spend: LLM calls and tokens, time on the backend, and money.

The calls and tokens are the cost model's per-operator estimates summed over the plan (before
cache hits: a rerun of the same query costs nothing). Time divides them by the backend's
:class:`~duckdb_sem.backends.throughput.Throughput` (and by its replicas); money multiplies
the tokens by the configured :class:`Price`. Each line says where its figure comes from.

Example (``EXPLAIN SEMANTIC`` prints these under the plan)::

    estimated: calls≈67  tokens≈5,000 prompt + 67 completion
    time≈0.35 s on sim:default (SIMULATED profile ...: prefill 17,000 tok/s, ...)
    money≈$0.00079 at $0.15 / $0.60 per million prompt / completion tokens (connect(price_per_mtok_in=...))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.optimizer.cost import Estimate

__all__ = ["Price", "Spend", "format_dollars", "spend_lines", "total"]


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million prompt and completion tokens, and where the figures were set."""

    prompt_per_mtok: float
    completion_per_mtok: float
    source: str

    def dollars(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (
            prompt_tokens * self.prompt_per_mtok + completion_tokens * self.completion_per_mtok
        ) / 1e6


@dataclass(frozen=True, slots=True)
class Spend:
    """A plan's estimated LLM work, summed over its operators."""

    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0


def total(estimates: Iterable[Estimate | Spend]) -> Spend:
    """The sum of operators' estimates (or of several spends)."""
    calls = prompt = completion = 0.0
    for e in estimates:
        calls += e.calls
        prompt += e.prompt_tokens
        completion += e.completion_tokens
    return Spend(calls, prompt, completion)


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:,.1f} h"
    if value >= 60:
        return f"{value / 60:,.1f} min"
    return f"{value:,.3g} s"


def format_dollars(value: float) -> str:
    """``$0.0079``, ``$0.50``, ``$12.50``: cents from a dime up, two significant figures
    under it."""
    return f"${value:,.2f}" if value >= 0.1 else f"${value:.2g}"


def spend_lines(
    spend: Spend,
    *,
    backend: str,
    throughput: Throughput | None,
    replicas: int = 1,
    price: Price | None = None,
) -> list[str]:
    """The lines ``EXPLAIN SEMANTIC`` prints: the totals, time and (with a price) money."""
    lines = [
        f"estimated: calls≈{_num(spend.calls)}  tokens≈{_num(spend.prompt_tokens)} prompt + "
        f"{_num(spend.completion_tokens)} completion (before cache hits)"
    ]
    if throughput is None:
        lines.append(
            f"time: not estimated on {backend} (no throughput figure for this backend; "
            "see docs/backends.md#throughput)"
        )
    else:
        seconds = throughput.seconds(
            calls=spend.calls,
            prompt_tokens=spend.prompt_tokens,
            completion_tokens=spend.completion_tokens,
        ) / max(1, replicas)
        on = f"{backend}, {replicas} replicas" if replicas > 1 else backend
        lines.append(f"time≈{_seconds(seconds)} on {on} ({throughput.source})")
    if price is not None:
        dollars = price.dollars(spend.prompt_tokens, spend.completion_tokens)
        lines.append(
            f"money≈{format_dollars(dollars)} at ${price.prompt_per_mtok:g} / "
            f"${price.completion_per_mtok:g} per million prompt / completion tokens "
            f"({price.source})"
        )
    return lines
