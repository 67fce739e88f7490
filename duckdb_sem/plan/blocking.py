"""What an approximate ``SemJoin`` keeps: the embedding-similarity block in front of the LLM.

A :class:`Blocking` on a :class:`~duckdb_sem.plan.nodes.SemJoin` means: of the pairs its inputs
(and relational condition) allow, only those whose embeddings have a cosine similarity of at
least ``threshold`` are asked of the LLM; the others are taken as no match without a call. The
threshold was learned for this query (``runtime.blocking``) from ``sample_pairs`` pairs the LLM
labelled, ``sample_positives`` of them matches, to reach ``recall_target``; ``sample_recall``
is the recall the sample estimates for it, and ``recall_bound`` the stratified lower bound
(``estimator.recall.bounded_threshold``) that the true recall reaches with probability at
least ``confidence``. Such a plan is lossy, and only built when the query
allows approximation (``runtime.approximation``).

Example:
    >>> b = Blocking(0.41, 0.95, 0.96, 100, 12, 1250, 50000, "minilm:all-MiniLM-L6-v2")
    >>> b.fraction
    0.025
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Blocking"]


@dataclass(frozen=True, slots=True)
class Blocking:
    threshold: float  # cosine similarity a pair needs to reach the LLM
    recall_target: float
    sample_recall: float  # estimated on the labelled sample
    sample_pairs: int
    sample_positives: int
    candidates: int  # pairs at or above the threshold (counted on the embeddings)
    pairs: int  # pairs without blocking (the cross product the learning saw)
    embedder: str  # identity of the embedding model
    recall_bound: float = 0.0  # lower confidence bound of the true recall ...
    confidence: float = 0.0  # ... holding with at least this probability

    @property
    def fraction(self) -> float:
        """The share of the pairs that reach the LLM."""
        return self.candidates / self.pairs if self.pairs else 1.0

    def label(self) -> str:
        return f"BLOCKED cosine >= {self.threshold:.3f}"

    def describe(self) -> str:
        """The EXPLAIN line: approximate, and with which estimated guarantee."""
        return (
            f"APPROXIMATE plan (duckdb_sem.approximate = on): sem_join blocked by embedding "
            f"similarity on {self.embedder}: cosine >= {self.threshold:.3f} keeps "
            f"{self.candidates:,} of {self.pairs:,} pairs ({self.fraction:.1%}) for the LLM; "
            f"threshold learned from {self.sample_pairs} LLM-labelled pairs "
            f"({self.sample_positives} matches), sample recall {self.sample_recall:.2f}, "
            f"recall >= {self.recall_bound:.2f} at confidence {self.confidence:.2f} "
            f"(target {self.recall_target:.2f}); pairs below it count as no match"
        )
