"""Online refinement: fold each batch's observed outcomes back into the statistics.

After an SEU ran, every semantic operator reports what it really did on that batch (rows in and
out, prompt and completion tokens under the target). :func:`observe_batch` folds that into the
:class:`~duckdb_sem.estimator.stats.StatsStore`; :class:`Refiner` combines the store (what the
query has seen so far) with the small model's sample of the *next* batch into the estimate the
plan choice uses. It also learns, per operator, the ratio between the prompt tokens the target
reports and those counted on the rendered rows (chat-template tokens, tokenizer differences),
so exact prompt counts stay exact after the first batch.

Example:
    >>> refiner = Refiner(StatsStore())
    >>> refiner.observe(Observation("s", rows_in=10, rows_out=2, prompt_tokens=500,
    ...                             completion_tokens=10))
    >>> refiner.store.get("s").selectivity
    0.2
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from duckdb_sem.estimator.stats import StatsStore
from duckdb_sem.optimizer.cost import Statistics

__all__ = ["Observation", "Refiner", "observe_batch"]


@dataclass(frozen=True, slots=True)
class Observation:
    """What one operator did on one batch (totals over the batch, not per row)."""

    signature: str
    rows_in: int
    rows_out: int
    prompt_tokens: float
    completion_tokens: float


def observe_batch(store: StatsStore, observations: Iterable[Observation]) -> None:
    for obs in observations:
        if obs.rows_in <= 0:
            continue
        store.update(
            obs.signature,
            rows=obs.rows_in,
            selectivity=obs.rows_out / obs.rows_in,
            prompt_tokens=obs.prompt_tokens / obs.rows_in,
            completion_tokens=obs.completion_tokens / obs.rows_in,
        )


class Refiner:
    """Per-batch estimates from the store and the estimator's sample of the batch."""

    def __init__(self, store: StatsStore, *, prior_weight: float = 4.0) -> None:
        self.store = store
        self.prior_weight = prior_weight
        self._ratio: dict[str, float] = {}  # observed / counted prompt tokens per row
        self._counted: dict[str, float] = {}  # counted prompt tokens per row, last estimate

    def estimate(self, signature: str, sample: Statistics | None) -> Statistics | None:
        prior = self.store.get(signature)
        if sample is None:
            return None if prior is None else prior.statistics()
        self._counted[signature] = sample.prompt_tokens_per_row
        prompt = sample.prompt_tokens_per_row * self._ratio.get(signature, 1.0)
        if prior is None:
            return Statistics(sample.selectivity, prompt, sample.completion_tokens_per_row,
                              sample.rows_measured)  # fmt: skip
        s, k = float(sample.rows_measured), self.prior_weight
        if s == 0:  # no estimator: the prompt is still counted exactly on this batch
            return Statistics(prior.selectivity, prompt, prior.completion_tokens,
                              prior.rows_measured)  # fmt: skip

        def mix(new: float, old: float) -> float:
            return (s * new + k * old) / (s + k)

        return Statistics(
            mix(sample.selectivity, prior.selectivity),
            prompt,
            mix(sample.completion_tokens_per_row, prior.completion_tokens),
            prior.rows_measured + sample.rows_measured,
        )

    def observe(self, obs: Observation) -> None:
        observe_batch(self.store, [obs])
        counted = self._counted.get(obs.signature)
        if counted and obs.rows_in > 0 and obs.prompt_tokens > 0:
            ratio = obs.prompt_tokens / obs.rows_in / counted
            old = self._ratio.get(obs.signature)
            self._ratio[obs.signature] = ratio if old is None else 0.5 * old + 0.5 * ratio
