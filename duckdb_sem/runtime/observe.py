"""An evaluator wrapper that records what each semantic operator did on the current SEU.

It sits between the plan executor and the ``SemEngine``: per call it counts rows in and out and
the target's prompt and completion tokens (the query's *virtual* usage, so cached or shared
answers still count as work the plan asked for), keyed by operator signature. When the run
ends it tells every model's scheduler (:meth:`ObservingEvaluator.finish`), so ``duckdb-sem
top`` shows the query as done, then drops it, rather than as idle with work left.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.estimator.refine import Observation
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.runtime.execute_plan import Evaluator
from duckdb_sem.runtime.finish import finish_query

__all__ = ["ObservingEvaluator"]

log = logging.getLogger(__name__)


class ObservingEvaluator:
    def __init__(self, engine: Evaluator, signatures: dict[str, str]) -> None:
        self.engine = engine
        self.signatures = signatures  # operator label -> signature
        self._seen: dict[str, list[float]] = {}

    @property
    def embeddings(self) -> Any:
        """The wrapped engine's embedding model (blocked joins embed through it)."""
        return getattr(self.engine, "embeddings", None)

    def run_operator(
        self,
        kind: OperatorKind,
        template: str,
        args: Sequence[pa.Array],
        *,
        output_type: str | None = None,
        query: Any,
        label: str = "",
        options: CallOptions = DEFAULT_OPTIONS,
        labels: tuple[str, ...] = (),
    ) -> pa.Array:
        before = query.stats() if query is not None else None
        out = self.engine.run_operator(
            kind, template, args, output_type=output_type, query=query, label=label,
            options=options, labels=labels,
        )  # fmt: skip
        sig = self.signatures.get(label)
        if sig is None:
            return out
        rows_in = len(out)
        if kind in (OperatorKind.FILTER, OperatorKind.JOIN):
            rows_out = int(pc.sum(pc.fill_null(out, False)).as_py() or 0)
        else:
            rows_out = rows_in
        prompt = completion = 0.0
        if before is not None:
            after = query.stats()
            prompt = after.prompt_tokens - before.prompt_tokens
            completion = after.completion_tokens - before.completion_tokens
        seen = self._seen.setdefault(sig, [0.0, 0.0, 0.0, 0.0])
        for i, v in enumerate((rows_in, rows_out, prompt, completion)):
            seen[i] += v
        return out

    def take(self) -> list[Observation]:
        """Observations since the last call (one per operator that ran)."""
        out = [Observation(sig, int(v[0]), int(v[1]), v[2], v[3]) for sig, v in self._seen.items()]
        self._seen = {}
        return out

    def finish(self, query_id: str) -> None:
        """Tell each model's scheduler that ``query_id`` is done (:func:`.finish.finish_query`)."""
        models = getattr(self.engine, "models", None)
        clients = models.clients() if models is not None else [getattr(self.engine, "client", None)]
        finish_query(clients, query_id)
