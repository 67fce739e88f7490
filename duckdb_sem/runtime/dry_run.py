"""Dry runs: what a statement off the optimizer would ask its models, with no LLM call.

A statement the optimizer does not plan (a CTE, an outer join, ``CREATE TABLE ... AS``, a table
function, ...) runs through DuckDB with the ``sem_*`` functions where they are written, so the
cost model cannot count its calls. ``EXPLAIN SEMANTIC`` instead runs it once on a *dry twin* of
the connection (``SemConnection.dry_run``): the same database, SQL front end, engine and
scheduler code, but every model, the default and each named one, is a :class:`DryBackend`
that answers at once and counts what it was asked. The relational work really runs (DuckDB
reads the tables), inside a transaction that is rolled back, so the statement changes nothing.

What the counts mean:

- **calls** are the distinct requests the statement sends with an empty cache (what a first
  run pays; a rerun is answered from the cache);
- **prompt tokens** are counted with :func:`~duckdb_sem.backends.tokens.estimate_tokens` on
  the instruction and the rendered row, as the planned road's estimate counts them without an
  estimator model; **completion tokens** are the cost model's defaults per output type
  (:class:`~duckdb_sem.optimizer.cost.CostDefaults`);
- decisions (``sem_filter``, ``sem_join``) say yes to a hash share of the rows, the cost
  model's default selectivity (0.5), so what a later operator sees is a guess like any
  estimate; maps answer placeholders of their type (the first words of the row, a length).

Example (``EXPLAIN SEMANTIC`` of ``WITH r AS (...) SELECT sem_map(...) FROM r`` prints)::

    estimated: calls≈120  tokens≈9,400 prompt + 2,880 completion (before cache hits)
    time≈... on llama: (...)
    estimated by a dry run: the statement ran once in a rolled-back transaction ...
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.llm.request import Completion, LLMRequest, Task
from duckdb_sem.optimizer.cost import DEFAULTS, CostModel
from duckdb_sem.optimizer.spend import Spend

__all__ = ["DRY_RUN_NOTE", "DryBackend", "DryRun"]

#: how ``EXPLAIN SEMANTIC`` labels a dry run's figures
DRY_RUN_NOTE = (
    "estimated by a dry run: the statement ran once in a rolled-back transaction with every model "
    f"answered by a counter, no LLM call; decisions said yes to {DEFAULTS.sem_filter_selectivity:.0%} "
    "of rows, the cost model's default"
)


class DryBackend(RuleBackend):
    """Answers every request at once (yes to a hash share of decisions; typed placeholders)
    and counts the requests and their estimated tokens: the model of a dry run."""

    def __init__(self, model: str) -> None:
        super().__init__(spec=f"dry:{model}", selectivity=DEFAULTS.sem_filter_selectivity)
        self.model = model
        self._costs = CostModel()
        self._spend = Spend()
        self._count_lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        answers = [self._estimated(r, c) for r, c in zip(requests, super().complete(requests),
                                                          strict=True)]  # fmt: skip
        with self._count_lock:
            self._spend = Spend(
                self._spend.calls + len(answers),
                self._spend.prompt_tokens + sum(a.prompt_tokens for a in answers),
                self._spend.completion_tokens + sum(a.completion_tokens for a in answers),
            )
        return answers

    def spend(self) -> Spend:
        """What this model was asked so far."""
        with self._count_lock:
            return self._spend

    def _estimated(self, request: LLMRequest, answer: Completion) -> Completion:
        decides = request.output.task is Task.DECIDE
        completion = self._costs.completion_tokens(None if decides else request.output.sql_type)
        prompt = estimate_tokens(request.prefix) + estimate_tokens(request.row)
        return replace(answer, prompt_tokens=prompt, completion_tokens=round(completion))


@dataclass(frozen=True, slots=True)
class DryRun:
    """What a dry run counted: per model (``None``: the default), or why there is nothing."""

    spend: dict[str | None, Spend]
    seconds: float  # wall time of the dry run itself (DuckDB's relational work)
    refused: str | None = None  # why the statement was not dry-run (then ``spend`` is empty)
