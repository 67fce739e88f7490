"""What an approximate ``SemFilter`` runs: a cheap helper first, the target for the rest.

A :class:`Cascade` on a :class:`~duckdb_sem.plan.nodes.SemFilter` means: ``helper`` scores every
row; rows scoring at least ``accept`` pass and rows under ``reject`` fail without a target call;
the target model answers the rows between. The thresholds shown were learned for this query
(``runtime.cascade``) from ``sample_rows`` rows the target labelled, to reach the precision and
recall targets against the target's own answers, at ``confidence`` (lower confidence bounds
``precision_bound`` / ``recall_bound``, not the sample's figures, meet the targets); each SEU
re-learns them with more labelled rows. Such a plan is lossy, and only built when the query allows approximation
(``runtime.approximation``).

Example:
    >>> c = Cascade("embed minilm:", 0.31, 0.12, 0.9, 0.9, 0.93, 0.91, 0.6, 100, 41)
    >>> c.label()
    'CASCADE helper embed minilm: accept >= 0.310, reject < 0.120'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Cascade"]


@dataclass(frozen=True, slots=True)
class Cascade:
    helper: str  # what scores the rows (a model's identity, or the embedding model's)
    accept: float  # score at or above which the helper passes a row
    reject: float  # score below which the helper fails a row
    precision_target: float
    recall_target: float
    sample_precision: float  # estimated on the labelled sample, against the target
    sample_recall: float
    helper_share: float  # share of the sample the helper decides alone
    sample_rows: int
    sample_positives: int
    confidence: float = 0.0  # both bounds hold together with at least this probability
    precision_bound: float = 0.0  # lower confidence bounds of the true precision and recall
    recall_bound: float = 0.0
    seu_sample: float = 0.0  # share of each SEU's rows the target labels anyway
    operator: str = "sem_filter"  # or sem_join: its candidate pairs are the rows

    @property
    def target_share(self) -> float:
        """The expected share of the rows the target answers: each SEU's sample, and of the
        rest those the helper does not decide (its share on the labelled sample)."""
        return self.seu_sample + (1.0 - self.seu_sample) * (1.0 - self.helper_share)

    def label(self) -> str:
        return (
            f"CASCADE helper {self.helper} accept >= {self.accept:.3f}, reject < {self.reject:.3f}"
        )

    def describe(self) -> str:
        """The EXPLAIN line: approximate, and with which estimated guarantee."""
        return (
            f"APPROXIMATE plan (duckdb_sem.approximate = on): {self.operator} runs as a cascade: "
            f"helper {self.helper} passes rows scoring >= {self.accept:.3f} and fails rows "
            f"under {self.reject:.3f} without the target model, which answers the rest; "
            f"thresholds learned from {self.sample_rows} target-labelled "
            f"{'pairs' if self.operator == 'sem_join' else 'rows'} "
            f"({self.sample_positives} positive): the helper decides {self.helper_share:.0%} "
            f"of them at sample precision {self.sample_precision:.2f} and recall "
            f"{self.sample_recall:.2f}, bounds precision >= {self.precision_bound:.2f} and "
            f"recall >= {self.recall_bound:.2f} at confidence {self.confidence:.2f} (targets "
            f"{self.precision_target:.2f}/{self.recall_target:.2f}); re-learned on every SEU"
        )
