"""Online refinement: fold each batch's observed outcomes back into the statistics.

After an SEU ran, every semantic operator reports what it really did on that batch (rows in and
out, prompt and completion tokens under the target). Those outcomes are free and exact, so they
are the primary statistics; the small model's sample only tells *which* past evidence applies
to the next batch. Per operator, :class:`Refiner` keeps a few *regimes*: the counted prompt
tokens per row of the batches they came from (free: the target's tokenizer on every row) and a
Beta posterior of the selectivity from the observed rows. Before a batch:

- its prompt tokens are counted; if they match exactly one regime (within ``tolerance``) and
  that regime has not drifted, no sample is needed (:meth:`Refiner.needs_sample`);
- otherwise the small model samples the batch, and the sample picks the regime it is
  consistent with (within a ``z``-sigma band widened by the small model's error), or, when none
  is, stands alone (blended with the running store only before any regime exists);
- after the batch, its outcome updates the regime it was estimated from; an outcome outside
  the band opens a new regime and marks the operator stale (the next batch is sampled);
- every sampled batch also pairs the small model's selectivity with the target's observed
  one, and later samples are read through the calibration fitted on those pairs.

Selectivities observed for an operator placed after others are conditional on those passing
them; they are used as the operator's selectivity in every plan (exact when the predicates are
independent, the usual assumption of cost-based optimizers).

The class also learns, per operator, the tokens the target adds to every request beyond those
counted on the rendered rows (its chat template: a constant per request, not a ratio, so it
stays right when the rows' length changes from batch to batch), so exact prompt counts stay
exact after the first batch. The offset is a mean over past batches weighted by the rows the
operator saw: an operator placed after a filter sees a subset of the counted rows, whose length
differs from the batch's mean by chance, so its batches say less.

Example:
    >>> refiner = Refiner(StatsStore())
    >>> refiner.observe(Observation("s", rows_in=10, rows_out=2, prompt_tokens=500,
    ...                             completion_tokens=10))
    >>> refiner.store.get("s").selectivity
    0.2
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

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


@dataclass(slots=True)
class _Regime:
    """Observed outcomes of batches that looked alike (counted prompt tokens per row)."""

    counted: float
    yes: float  # rows passed, discounted by ``memory`` per update
    no: float
    completion: float  # per row

    @property
    def selectivity(self) -> float:
        return (self.yes + 1) / (self.yes + self.no + 2)

    @property
    def rows(self) -> float:
        return self.yes + self.no


@dataclass(slots=True)
class _Calibration:
    """What the target says, given what the small model said: ``o ≈ a + b·s`` over pairs of
    (the small model's sampled selectivity, the target's observed one) on the same batches,
    least squares with a ridge toward the identity (``a = 0, b = 1``) of strength ``ridge``.

    A small model that errs symmetrically on a share ``e`` of rows reports ``e + (1-2e)·p``
    for a true ``p`` (10% becomes 18% at ``e = 0.1``): the ridge keeps its samples as they are
    until the pairs show such a bias."""

    ridge: float
    w: float = 0.0
    s: float = 0.0
    o: float = 0.0
    ss: float = 0.0
    so: float = 0.0

    def add(self, sampled: float, observed: float) -> None:
        self.w += 1.0
        self.s += sampled
        self.o += observed
        self.ss += sampled * sampled
        self.so += sampled * observed

    def __call__(self, sampled: float) -> float:
        if not self.w:
            return sampled
        lam = self.ridge
        # normal equations of  sum (o - a - b s)^2 + lam (a^2 + (b - 1)^2)
        m11, m12, m22 = self.w + lam, self.s, self.ss + lam
        r1, r2 = self.o, self.so + lam
        det = m11 * m22 - m12 * m12
        if det <= 1e-12:
            return sampled
        a = (r1 * m22 - m12 * r2) / det
        b = (m11 * r2 - m12 * r1) / det
        return min(1.0, max(0.0, a + b * sampled))


class Refiner:
    """Per-batch estimates from observed outcomes, with the estimator's sample as a selector."""

    def __init__(
        self,
        store: StatsStore,
        *,
        prior_weight: float = 4.0,
        tolerance: float = 0.15,
        z: float = 3.0,
        slm_error: float = 0.1,
        memory: float = 0.9,
        max_regimes: int = 8,
        calibration_ridge: float = 0.1,
    ) -> None:
        self.store = store
        self.prior_weight = prior_weight
        self.tolerance = tolerance
        self.z = z
        self.slm_error = slm_error  # how far a small model's sample may sit from the truth
        self.memory = memory
        self.max_regimes = max_regimes
        # tokens the target adds per request: (weighted sum of offsets, sum of weights)
        self._overhead: dict[str, tuple[float, float]] = {}
        self._counted: dict[str, float] = {}  # counted prompt tokens per row, last estimate
        self._regimes: dict[str, list[_Regime]] = {}
        # per running batch: (regime used, counted tokens, the small model's raw selectivity)
        self._pending: dict[str, tuple[int, float, float | None]] = {}
        self.calibration = _Calibration(calibration_ridge)  # small model -> target
        self._stale: set[str] = set()

    # -- which operators need the small model on this batch -------------------------------
    def _alike(self, signature: str, counted: float) -> list[int]:
        regimes = self._regimes.get(signature, [])
        return [i for i, r in enumerate(regimes)
                if abs(counted - r.counted) <= self.tolerance * max(r.counted, 1e-9)]  # fmt: skip

    def needs_sample(self, signature: str, counted: float) -> bool:
        """Whether the free evidence (counted tokens, past outcomes) leaves the operator's
        statistics for a batch with ``counted`` prompt tokens per row in doubt."""
        return signature in self._stale or len(self._alike(signature, counted)) != 1

    def _match(self, signature: str, sample: Statistics) -> int:
        alike = self._alike(signature, sample.prompt_tokens_per_row)
        regimes = self._regimes.get(signature, [])
        n = sample.rows_measured
        if n <= 0:
            return alike[0] if len(alike) == 1 else -1
        best, gap = -1, math.inf
        for i in alike:
            p = regimes[i].selectivity
            band = self.z * math.sqrt(p * (1 - p) / n) + self.slm_error
            d = abs(sample.selectivity - p)
            if d <= band and d < gap:
                best, gap = i, d
        return best

    # -- estimating ---------------------------------------------------------------------------
    def estimate(self, signature: str, sample: Statistics | None) -> Statistics | None:
        prior = self.store.get(signature)
        if sample is None:
            return None if prior is None else prior.statistics()
        self._counted[signature] = sample.prompt_tokens_per_row
        prompt = max(1.0, sample.prompt_tokens_per_row + self.overhead(signature))
        raw: float | None = None
        if sample.rows_measured > 0:
            self._stale.discard(signature)
            raw = sample.selectivity
            sample = replace(sample, selectivity=self.calibration(raw))
        at = self._match(signature, sample)
        self._pending[signature] = (at, sample.prompt_tokens_per_row, raw)
        if at >= 0:
            r = self._regimes[signature][at]
            yes, no = r.yes + 1, r.no + 1
            if sample.rows_measured > 0:  # a small model's rows count half a target's
                w = 0.5 * sample.rows_measured
                yes, no = yes + w * sample.selectivity, no + w * (1 - sample.selectivity)
            return Statistics(yes / (yes + no), prompt, r.completion,
                              int(r.rows) + sample.rows_measured)  # fmt: skip
        if prior is None or (sample.rows_measured > 0 and self._regimes.get(signature)):
            # nothing seen yet, or a batch unlike every regime seen (by its tokens or its
            # sample): the past says nothing about it, the sample stands alone
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

    def overhead(self, signature: str) -> float:
        """Prompt tokens per request the target adds to the counted ones (0 until seen)."""
        total, weight = self._overhead.get(signature, (0.0, 0.0))
        return total / weight if weight else 0.0

    # -- after the batch ----------------------------------------------------------------------
    def observe(self, obs: Observation) -> None:
        observe_batch(self.store, [obs])
        counted = self._counted.get(obs.signature)
        if counted and obs.rows_in > 0 and obs.prompt_tokens > 0:
            offset = obs.prompt_tokens / obs.rows_in - counted
            total, weight = self._overhead.get(obs.signature, (0.0, 0.0))
            m = self.memory
            self._overhead[obs.signature] = (m * total + obs.rows_in * offset,
                                             m * weight + obs.rows_in)  # fmt: skip
        pending = self._pending.pop(obs.signature, None)
        if pending is None or obs.rows_in <= 0:
            return
        at, counted_now, raw = pending
        if raw is not None and not (raw == 1.0 and obs.rows_out == obs.rows_in):
            self.calibration.add(raw, obs.rows_out / obs.rows_in)  # (a map passes every row)
        regimes = self._regimes.setdefault(obs.signature, [])
        yes, no = float(obs.rows_out), float(obs.rows_in - obs.rows_out)
        completion = obs.completion_tokens / obs.rows_in
        if at >= 0:
            r = regimes[at]
            p = r.selectivity
            seen = obs.rows_out / obs.rows_in
            band = self.z * math.sqrt(p * (1 - p) * (1 / obs.rows_in + 1 / (r.rows + 1)))
            if abs(seen - p) <= band + 0.02:
                m = self.memory
                r.yes, r.no = r.yes * m + yes, r.no * m + no
                r.completion = 0.5 * r.completion + 0.5 * completion
                r.counted = 0.8 * r.counted + 0.2 * counted_now
                return
            self._stale.add(obs.signature)  # drifted: sample again before trusting it
        regimes.append(_Regime(counted_now, yes, no, completion))
        if len(regimes) > self.max_regimes:
            del regimes[0]
