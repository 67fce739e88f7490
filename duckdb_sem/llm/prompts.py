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

from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.llm.request import DecodingParams, LLMRequest, OperatorKind, OutputSpec, Task

__all__ = ["DECIDE_EXAMPLES", "DECIDE_PREFIX", "build_request", "instruction_for"]

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
