"""Whether a query may run on an approximate (lossy) plan, and the guarantee it asks for.

Approximation is opt-in, per connection (``connect(approximate=True, join_recall=0.9)``,
``DUCKDB_SEM_APPROXIMATE=on``) and per session in SQL (``SET duckdb_sem.approximate = on``,
``SET duckdb_sem.join_recall = 0.9``, ``RESET``/``SHOW`` likewise; the wire server passes them
through). Off, every plan is lossless: exactly the rows of the nested loop. On, a ``sem_join``
of more than :attr:`Approximation.min_pairs` pairs may be *blocked*: only the pairs whose
embeddings are at least as similar as a threshold learned for this query from
``join_sample`` LLM-labelled pairs (doubled until they hold ``min_matches`` matches, up to
``max_sample``) go to the LLM, the threshold chosen so that the estimated recall of the sample
is at least ``join_recall`` (see ``runtime.blocking``; EXPLAIN SEMANTIC
shows the threshold, the candidate pairs and the sample recall, and says the plan is
approximate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from duckdb_sem.config import parse_bool
from duckdb_sem.errors import ConfigError

__all__ = ["SETTINGS", "Approximation"]

#: the SQL names of these settings (``SET duckdb_sem.<name> = value``)
SETTINGS = ("approximate", "join_recall")


@dataclass(frozen=True, slots=True)
class Approximation:
    """What a query may trade for speed (default: nothing)."""

    allowed: bool = False
    join_recall: float = 0.95  # recall target of a blocked sem_join, in (0, 1]
    join_sample: int = 100  # pairs the LLM labels to learn the threshold (DocETL: ~100)
    min_matches: int = 10  # the sample doubles until it holds this many matches ...
    max_sample: int = 1600  # ... or this many pairs (and never past a quarter of the pairs)

    def __post_init__(self) -> None:
        if not 0.0 < self.join_recall <= 1.0:
            raise ConfigError(
                f"duckdb_sem.join_recall must be in (0, 1], got {self.join_recall}; e.g. 0.95"
            )
        if self.join_sample < 10:
            raise ConfigError(f"the join sample must be at least 10 pairs, got {self.join_sample}")

    @property
    def min_pairs(self) -> int:
        """Joins with fewer pairs run as a nested loop: labelling the sample would cost a
        quarter of it or more."""
        return 4 * self.join_sample

    def value(self, name: str) -> str:
        """The setting as ``SHOW duckdb_sem.<name>`` prints it."""
        return ("on" if self.allowed else "off") if name == "approximate" else str(self.join_recall)

    def with_setting(self, name: str, value: str | None, default: Approximation) -> Approximation:
        """This with ``SET duckdb_sem.<name> = value`` applied (None: back to ``default``)."""
        if value is None or value.strip().strip("'").lower() == "default":
            return replace(self, **{_FIELD[name]: getattr(default, _FIELD[name])})
        if name == "approximate":
            return replace(self, allowed=parse_bool("duckdb_sem.approximate", value))
        try:
            recall = float(value.strip().strip("'"))
        except ValueError:
            raise ConfigError(
                f"duckdb_sem.join_recall takes a number in (0, 1], got {value!r}; e.g. 0.9"
            ) from None
        return replace(self, join_recall=recall)


_FIELD = {"approximate": "allowed", "join_recall": "join_recall"}
