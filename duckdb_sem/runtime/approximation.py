"""Whether a query may run on an approximate (lossy) plan, and the guarantee it asks for.

Approximation is opt-in, per connection (``connect(approximate=True, join_recall=0.9)``,
``DUCKDB_SEM_APPROXIMATE=on``) and per session in SQL (``SET duckdb_sem.approximate = on``,
``SET duckdb_sem.join_recall = 0.9``, ``RESET``/``SHOW`` likewise; the wire server passes them
through). Off, every plan is lossless: exactly the rows of the nested loop. On, a ``sem_join``
of more than :attr:`Approximation.min_pairs` pairs may be *blocked*: only the pairs whose
embeddings are at least as similar as a threshold learned for this query from
``join_sample`` LLM-labelled pairs (doubled until the bound reaches the target, up to
``max_sample``) go to the LLM, the threshold chosen so that a lower confidence bound of its
recall is at least ``join_recall`` at ``confidence`` (see ``runtime.blocking``; EXPLAIN SEMANTIC
shows the threshold, the candidate pairs and the sample recall, and says the plan is
approximate).

On, a ``sem_filter`` over at least :attr:`Approximation.min_filter_rows` rows may run as a
*cascade* (``runtime.cascade``): a cheaper helper scores every row, the rows scoring at or
above an accept threshold pass and those below a reject threshold fail without a target call,
and the target model answers the rest. The thresholds are learned from ``filter_sample`` rows
the target labels to meet ``filter_precision`` and ``filter_recall`` (relative to the target's
own answers; LOTUS-style, default 0.9/0.9; ``SET duckdb_sem.filter_precision = 0.95``), and
re-learned on every SEU from ``seu_sample`` more target-labelled rows of that batch.

Both learn against confidence bounds, not the sample's point estimates: ``confidence``
(default 0.9; ``SET duckdb_sem.confidence = 0.95``) is the probability, over the labelled
sample, that the plan's true recall (and, for a cascade, precision) reaches its target
(``estimator.recall``, ``estimator.cascade_thresholds`` say exactly how). A higher confidence
or a smaller sample widens the margin, and the plan saves less; where the sample cannot reach
the target at that confidence the plan stays lossless (blocking) or the target answers more
rows (cascade). EXPLAIN SEMANTIC shows the bound and the confidence beside the sample figures.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from duckdb_sem.config import parse_bool
from duckdb_sem.errors import ConfigError

__all__ = ["SETTINGS", "Approximation", "approximation_of", "decline"]

log = logging.getLogger(__name__)

#: the SQL names of these settings (``SET duckdb_sem.<name> = value``)
SETTINGS = ("approximate", "join_recall", "filter_precision", "filter_recall", "confidence")


@dataclass(frozen=True, slots=True)
class Approximation:
    """What a query may trade for speed (default: nothing)."""

    allowed: bool = False
    join_recall: float = 0.95  # recall target of a blocked sem_join, in (0, 1]
    join_sample: int = 100  # pairs the LLM labels to learn the threshold (DocETL: ~100)
    max_sample: int = 1600  # the sample doubles until its bound reaches the target, or this
    # many pairs (and never past a quarter of the pairs)
    filter_precision: float = 0.9  # a cascaded sem_filter's targets, against the target's
    filter_recall: float = 0.9  # own answers (runtime.cascade)
    filter_sample: int = 100  # rows the target labels before the first SEU
    seu_sample: float = 0.05  # share of each SEU's rows the target labels (at least 8 rows)
    window: int = 1000  # the latest labelled rows the thresholds are learned from
    confidence: float = 0.9  # the targets hold with at least this probability (bounds)

    def __post_init__(self) -> None:
        if not 0.0 < self.join_recall <= 1.0:
            raise ConfigError(
                f"duckdb_sem.join_recall must be in (0, 1], got {self.join_recall}; e.g. 0.95"
            )
        for name in ("filter_precision", "filter_recall"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(
                    f"duckdb_sem.{name} must be in (0, 1], got {getattr(self, name)}; e.g. 0.9"
                )
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(
                f"duckdb_sem.confidence must be in (0, 1), got {self.confidence}; e.g. 0.9"
            )
        if self.filter_sample < 10 or not 0.0 <= self.seu_sample <= 1.0:
            raise ConfigError(
                f"the filter sample must be at least 10 rows and the SEU sample a share in "
                f"[0, 1], got {self.filter_sample} and {self.seu_sample}"
            )
        if self.join_sample < 10:
            raise ConfigError(f"the join sample must be at least 10 pairs, got {self.join_sample}")

    @property
    def min_pairs(self) -> int:
        """Joins with fewer pairs run as a nested loop: labelling the sample would cost a
        quarter of it or more."""
        return 4 * self.join_sample

    @property
    def min_filter_rows(self) -> int:
        """Filters over fewer rows run on the target alone: the sample would be a quarter."""
        return 4 * self.filter_sample

    def value(self, name: str) -> str:
        """The setting as ``SHOW duckdb_sem.<name>`` prints it."""
        if name == "approximate":
            return "on" if self.allowed else "off"
        return str(getattr(self, _FIELD[name]))

    def with_setting(self, name: str, value: str | None, default: Approximation) -> Approximation:
        """This with ``SET duckdb_sem.<name> = value`` applied (None: back to ``default``)."""
        if value is None or value.strip().strip("'").lower() == "default":
            return replace(self, **{_FIELD[name]: getattr(default, _FIELD[name])})
        if name == "approximate":
            return replace(self, allowed=parse_bool("duckdb_sem.approximate", value))
        try:
            target = float(value.strip().strip("'"))
        except ValueError:
            raise ConfigError(
                f"duckdb_sem.{name} takes a number in (0, 1], got {value!r}; e.g. 0.9"
            ) from None
        changes: dict[str, Any] = {_FIELD[name]: target}
        return replace(self, **changes)


def decline(query: Any, label: str, why: str) -> None:
    """Say that operator ``label``'s approximate plan is not taken, and why: logged, and noted
    on ``query`` (a ``QueryContext``) for ``EXPLAIN SEMANTIC``."""
    log.info("%s: %s", label, why)
    notes = getattr(query, "declined", None)
    if isinstance(notes, list):
        notes.append(f"{label}: {why}")


def approximation_of(settings: object) -> Approximation:
    """The approximation a connection's ``Settings`` ask for (``connect()``, the environment)."""
    return Approximation(
        allowed=bool(getattr(settings, "approximate", False)),
        join_recall=float(getattr(settings, "join_recall", 0.95)),
        filter_precision=float(getattr(settings, "filter_precision", 0.9)),
        filter_recall=float(getattr(settings, "filter_recall", 0.9)),
        confidence=float(getattr(settings, "confidence", 0.9)),
    )


_FIELD = {"approximate": "allowed", "join_recall": "join_recall",
          "filter_precision": "filter_precision", "filter_recall": "filter_recall",
          "confidence": "confidence"}  # fmt: skip
