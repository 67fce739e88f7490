"""Per-template calibration of scored decisions, for backends that score them remotely.

A small model's yes/no margin is biased, and the bias depends on the question. Contextual
calibration (Zhao et al. 2021) measures the margin of *content-free* rows, the request's own
template with every field blanked or filled with a neutral filler
(:data:`~duckdb_sem.llm.request.CONTENT_FREE_FILLERS`), and for one-row templates also with
real-looking irrelevant texts (:data:`~duckdb_sem.llm.request.CALIBRATION_TEXTS`; see
:meth:`~duckdb_sem.llm.request.LLMRequest.calibration_rows`), and subtracts their mean: the decision
is ``margin - offset > threshold``. One offset per (instruction, template), measured once per
backend instance with the same scorer as the rows; requests without a template are left as
scored (there is nothing to build content-free rows from). The ``llama:`` backend does the same
in-process, sharing the KV cache (:mod:`duckdb_sem.backends.llama`).

Example:
    >>> from duckdb_sem.llm.request import OperatorKind, OutputSpec, RowTemplate
    >>> offsets = TemplateOffsets()
    >>> t = RowTemplate(("Is ", " good?"), ("0",))
    >>> req = LLMRequest(OperatorKind.FILTER, "p", "Is tea good?", OutputSpec.decision(), template=t)
    >>> offsets.offset(req, lambda r: 1.0 if r.row == "Is tea good?" else -0.5)
    -0.5
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable

from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["TemplateOffsets", "calibrated"]

Scorer = Callable[[LLMRequest], float | None]


class TemplateOffsets:
    """Content-free offsets per (operator, prefix, template pieces), bounded, safe across threads."""

    def __init__(self, *, limit: int = 256) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._offsets: OrderedDict[tuple[str, str, tuple[str, ...]], float] = OrderedDict()
        self._measuring: dict[tuple[str, str, tuple[str, ...]], threading.Lock] = {}

    def offset(self, request: LLMRequest, score: Scorer) -> float:
        """The mean content-free score of ``request``'s template (0 without a template, or
        when no content-free row could be scored)."""
        template = request.template
        if template is None or not template.fields:
            return 0.0
        key = (request.operator.value, request.prefix, template.pieces)
        with self._lock:
            known = self._offsets.get(key)
            if known is not None:
                return known
            measuring = self._measuring.setdefault(key, threading.Lock())
        # one thread measures a template's offset; the others wait for it (single flight)
        with measuring:
            with self._lock:
                known = self._offsets.get(key)
            if known is not None:
                return known
            rows = request.calibration_rows()
            scores = [score(dataclasses.replace(request, row=row)) for row in rows]
            got = [s for s in scores if s is not None]
            value = sum(got) / len(got) if got else 0.0
            with self._lock:
                self._offsets[key] = value
                self._measuring.pop(key, None)
                while len(self._offsets) > self._limit:
                    self._offsets.popitem(last=False)
        return value


def calibrated(completion: Completion, offset: float, threshold: float) -> Completion:
    """A scored decision shifted by ``offset``; anything else unchanged."""
    if completion.score is None or completion.error is not None:
        return completion
    score = completion.score - offset
    return dataclasses.replace(completion, value=score > threshold, score=score)
