"""How a semantic operator's template becomes an LLM request.

The *prefix* is the operator's fixed instruction (the same for every row, so backends reuse its
KV cache); the *row part* is the template rendered with one row's values. Backends wrap both in
the model's chat template.

Example:
    >>> req = build_request(OperatorKind.FILTER, "'Great fun' is a positive review")
    >>> req.output.task
    <Task.DECIDE: 'decide'>
"""

from __future__ import annotations

from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.llm.request import DecodingParams, LLMRequest, OperatorKind, OutputSpec, Task

__all__ = ["DECIDE_PREFIX", "build_request", "instruction_for"]

DECIDE_PREFIX = (
    "You judge whether a statement about the given data is true. "
    "Read the statement and answer with yes or no only."
)
_MAP_PREFIX = "You transform data as instructed. Follow the instruction for the given data."
_AGG_PREFIX = (
    "You aggregate many records into one answer. Follow the instruction over all the records."
)


def instruction_for(operator: OperatorKind, output: OutputSpec) -> str:
    if output.task is Task.DECIDE:
        return DECIDE_PREFIX
    hint = parse_type(output.sql_type).format_hint()
    base = _AGG_PREFIX if operator is OperatorKind.AGG else _MAP_PREFIX
    return f"{base} {hint}"


def build_request(
    operator: OperatorKind,
    rendered: str,
    *,
    output_type: str | None = None,
    max_tokens: int | None = None,
) -> LLMRequest:
    """The request for one rendered row: filters and joins decide, maps and aggs generate."""
    if operator in (OperatorKind.FILTER, OperatorKind.JOIN):
        output = OutputSpec.decision()
        params = DecodingParams(max_tokens=1)
    else:
        output = OutputSpec(Task.GENERATE, parse_type(output_type or "VARCHAR").sql)
        default = 64 if operator is OperatorKind.MAP else 160
        params = DecodingParams(max_tokens=max_tokens or default)
    return LLMRequest(
        operator=operator,
        prefix=instruction_for(operator, output),
        row=rendered,
        output=output,
        params=params,
    )
