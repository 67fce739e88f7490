"""How a semantic operator's template becomes an LLM request.

The *prefix* is the operator's fixed instruction (the same for every row, so backends reuse its
KV cache); the *row part* is the template rendered with one row's values. Backends wrap both in
the model's chat template.

Example:
    >>> req = build_request(OperatorKind.FILTER, "Is this review positive? Great fun")
    >>> req.output.task
    <Task.DECIDE: 'decide'>
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.llm.request import (
    DecodingParams,
    LLMRequest,
    OperatorKind,
    OutputSpec,
    RowTemplate,
    Task,
)

__all__ = [
    "DECIDE_EXAMPLES",
    "DECIDE_PREFIX",
    "build_request",
    "closed_answers",
    "instruction_for",
    "scale_in",
]

DECIDE_PREFIX = (
    "You judge whether a statement about the given data is true. "
    "Read the statement or question and answer with yes or no only."
)
# Few-shot (question, answer) pairs that backends scoring yes/no log-probabilities put after the
# instruction: tiny models need them to answer with the label words at all. Questions, because
# SmolLM2-135M ranked reviews far better when asked "Is this review positive? ..." than when
# judging a statement (ROC AUC 0.71-0.83 against 0.58-0.67 on 80 Rotten Tomatoes reviews).
# Varied domains so no one task is favoured; balanced so neither answer is primed. The two
# questions about a pair of texts (the shape of a join) also helped single-text questions:
# on reviews 1-100 they raised the filter's ROC AUC from 0.70 to 0.79 and its accuracy from
# 0.63 to 0.74 (benchmarks/bench_embedded_quality.py reports on held-out rows).
DECIDE_EXAMPLES: tuple[tuple[str, bool], ...] = (
    ("Is this movie review positive? A gorgeous, moving film with terrific performances.", True),
    ("Is this email an advertisement? Lunch moved to 1pm, see you in room 4.", False),
    ("Is this product kitchenware? Stainless steel frying pan.", True),
    (
        "Is this comment about this article? Comment: My tomatoes finally ripened, thanks for "
        "the tips. Article: How to grow vegetables in a small garden.",
        True,
    ),
    ("Is this movie review positive? Dull, overlong and completely forgettable.", False),
    ("Is this text about sports? The striker scored twice in the final minutes.", True),
    ("Is this city in Germany? Paris.", False),
    (
        "Does this title match this summary? Title: The Great Bake Off. Summary: Astronauts "
        "repair a damaged space station.",
        False,
    ),
)


class _Template(Protocol):
    """A parsed template (``llm.template.Template`` or ``RowTemplate``)."""

    @property
    def pieces(self) -> Sequence[str]: ...
    @property
    def fields(self) -> Sequence[str]: ...


_MAP_PREFIX = "You transform data as instructed. Follow the instruction for the given data."
_AGG_PREFIX = (
    "You aggregate many records into one answer. Follow the instruction over all the records."
)


# "from 1 (awful) to 5 (excellent)", "on a 1 to 5 scale", "1-10", "between 0 and 3"
_SCALE = re.compile(
    r"(?<![\d.])(\d{1,2})\s*(?:\([^()]{0,40}\)\s*)?(?:to|-|\u2013|and)\s*(\d{1,2})(?![\d.])",
    re.IGNORECASE,
)
_MAX_LABELS = 11


def scale_in(text: str) -> tuple[int, int] | None:
    """The integer range a template names (``1 to 5``), or None; at most 11 values."""
    for match in _SCALE.finditer(text):
        low, high = int(match.group(1)), int(match.group(2))
        if 0 <= low < high and high - low + 1 <= _MAX_LABELS:
            return low, high
    return None


def closed_answers(sql_type: str, template_text: str) -> tuple[str, ...]:
    """The labels of a ``sem_map`` whose answer set is small and known, else ``()``.

    BOOLEAN is yes/no; INTEGER or BIGINT is the range the template's own words name (only
    the template, never a row's values: a review saying "2 to 3 hours" names no scale).
    """
    sql = parse_type(sql_type).sql
    if sql == "BOOLEAN":
        return ("yes", "no")
    if sql in ("INTEGER", "BIGINT"):
        scale = scale_in(template_text)
        if scale is not None:
            return tuple(str(v) for v in range(scale[0], scale[1] + 1))
    return ()


def instruction_for(operator: OperatorKind, output: OutputSpec) -> str:
    if output.task is Task.DECIDE:
        return DECIDE_PREFIX
    hint = parse_type(output.sql_type).format_hint()
    if output.task is Task.CLASSIFY:
        hint = "Answer with one of: " + ", ".join(output.labels) + "."
    base = _AGG_PREFIX if operator is OperatorKind.AGG else _MAP_PREFIX
    return f"{base} {hint}"


def build_request(
    operator: OperatorKind,
    rendered: str,
    *,
    output_type: str | None = None,
    max_tokens: int | None = None,
    template: _Template | None = None,
    labels: tuple[str, ...] = (),
    options: CallOptions = DEFAULT_OPTIONS,
) -> LLMRequest:
    """The request for one rendered row: filters and joins decide, maps and aggs generate.

    ``template`` is the unrendered template ``rendered`` came from (backends calibrate per
    template and share its leading text). A map with a closed answer set (``labels``, a
    BOOLEAN, or an integer scale its template names) is scored by backends that can score,
    and generated then parsed by the others. ``options`` (a call's ``temperature :=`` and
    ``max_tokens :=``) override the decoding parameters; the model is chosen by the engine.
    """
    unrendered = None
    if template is not None and operator is not OperatorKind.AGG:
        unrendered = RowTemplate(tuple(template.pieces), tuple(template.fields))
    if not labels and operator is OperatorKind.MAP and output_type:
        labels = closed_answers(output_type, "".join(unrendered.pieces) if unrendered else "")
    if operator in (OperatorKind.FILTER, OperatorKind.JOIN):
        output = OutputSpec.decision()
        params = DecodingParams(max_tokens=1)
    elif labels:
        output = OutputSpec.choice(labels, parse_type(output_type or "VARCHAR").sql)
        longest = max(len(label) for label in labels)
        params = DecodingParams(max_tokens=max_tokens or max(4, longest // 2 + 4))
    else:
        output = OutputSpec(Task.GENERATE, parse_type(output_type or "VARCHAR").sql)
        default = 64 if operator is OperatorKind.MAP else 160
        params = DecodingParams(max_tokens=max_tokens or default)
    params = options.decoding(params)
    return LLMRequest(
        operator=operator,
        prefix=instruction_for(operator, output),
        row=rendered,
        output=output,
        params=params,
        template=unrendered,
    )
