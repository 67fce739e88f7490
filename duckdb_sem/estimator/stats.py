"""The statistics store: per operator signature, selectivity and tokens per row.

Statistics attach to an operator by :func:`~duckdb_sem.optimizer.cost.operator_signature`, so
every candidate plan that contains the operator reuses them: nothing is profiled per plan.
Values are exponentially weighted: each new batch of evidence counts ``rows`` and older
evidence is discounted by ``decay`` per update, so estimates follow drift within a query while
small samples do not swing them.

Example:
    >>> store = StatsStore()
    >>> store.update("sig", rows=10, selectivity=0.2, prompt_tokens=50, completion_tokens=1)
    >>> round(store.get("sig").selectivity, 2)
    0.2
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from duckdb_sem.optimizer.cost import Statistics

__all__ = ["StatsStore", "Weighted"]


@dataclass(frozen=True, slots=True)
class Weighted:
    """One operator's running estimate and the (discounted) rows behind it."""

    selectivity: float
    prompt_tokens: float
    completion_tokens: float
    weight: float
    rows_measured: int

    def statistics(self) -> Statistics:
        return Statistics(
            self.selectivity, self.prompt_tokens, self.completion_tokens, self.rows_measured
        )


class StatsStore:
    """Thread-safe map ``signature -> Weighted``; see the module docstring."""

    def __init__(self, *, decay: float = 0.5) -> None:
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.decay = decay
        self._values: dict[str, Weighted] = {}
        self._lock = threading.Lock()

    def get(self, signature: str) -> Weighted | None:
        with self._lock:
            return self._values.get(signature)

    def update(
        self,
        signature: str,
        *,
        rows: float,
        selectivity: float,
        prompt_tokens: float,
        completion_tokens: float,
        decay: float | None = None,
    ) -> None:
        """Fold in evidence measured on ``rows`` rows (per-row token counts)."""
        if rows <= 0:
            return
        d = self.decay if decay is None else decay
        with self._lock:
            old = self._values.get(signature)
            if old is None:
                self._values[signature] = Weighted(
                    selectivity, prompt_tokens, completion_tokens, rows, int(rows)
                )
                return
            w_old = old.weight * d
            total = w_old + rows

            def mix(a: float, b: float) -> float:
                return (a * w_old + b * rows) / total

            self._values[signature] = Weighted(
                mix(old.selectivity, selectivity),
                mix(old.prompt_tokens, prompt_tokens),
                mix(old.completion_tokens, completion_tokens),
                total,
                old.rows_measured + int(rows),
            )

    def snapshot(self) -> dict[str, Statistics]:
        """What the cost model reads: ``signature -> Statistics``."""
        with self._lock:
            return {sig: w.statistics() for sig, w in self._values.items()}

    def seed(self, stats: Mapping[str, Statistics]) -> None:
        """Start from profiled statistics (each weighted by the rows it was measured on)."""
        for sig, s in stats.items():
            self.update(
                sig,
                rows=max(1, s.rows_measured),
                selectivity=s.selectivity,
                prompt_tokens=s.prompt_tokens_per_row,
                completion_tokens=s.completion_tokens_per_row,
                decay=1.0,
            )
