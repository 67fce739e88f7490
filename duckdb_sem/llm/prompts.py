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

from collections.abc import Sequence
from typing import Protocol

from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.closed import named_choices, scale_named
from duckdb_sem.llm.guard import OutputGuard
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
    "CALL_EXAMPLES_HEADING",
    "DECIDE_EXAMPLES",
    "DECIDE_PREFIX",
    "build_request",
    "check_labels",
    "closed_answers",
    "has_call_examples",
    "instruction_for",
    "scale_in",
    "with_examples",
]

DECIDE_PREFIX = (
    "You judge whether a statement about the given data is true. "
    "Read the statement or question and answer with yes or no only."
)
# Few-shot (question, answer) pairs that backends scoring yes/no log-probabilities put after the
# instruction: tiny models need them to answer with the label words at all. Varied domains so
# no one task is favoured; balanced so neither answer is primed; both layouts a template may
# have (question then text, text then question), so neither reads as unusual. Written by hand:
# none comes from a benchmark row, phrasing or task. Tuned on 60 of the bundled reviews 101-300
# with phrasings of our own (never the benchmark's): with gemma-3-270m these 12 pairs gave ROC
# AUC 0.78 and 0.82 on two templates against 0.71 and 0.84 with the previous 8 question-first
# pairs (benchmarks/bench_embedded_quality.py reports on held-out rows).
DECIDE_EXAMPLES: tuple[tuple[str, bool], ...] = (
    ("Is this movie review positive? A gorgeous, moving film with terrific performances.", True),
    ("Is this email an advertisement? Lunch moved to 1pm, see you in room 4.", False),
    ("Product: Stainless steel frying pan, 28 cm.\nIs this product kitchenware?", True),
    (
        "Is this comment about this article? Comment: My tomatoes finally ripened, thanks for "
        "the tips. Article: How to grow vegetables in a small garden.",
        True,
    ),
    ("Review: Dull, overlong and completely forgettable.\nIs this review positive?", False),
    ("Is this text about sports? The striker scored twice in the final minutes.", True),
    ("Is this city in Germany? Paris.", False),
    (
        "Does this title match this summary? Title: The Great Bake Off. Summary: Astronauts "
        "repair a damaged space station.",
        False,
    ),
    ("Sentence: Where did you park the car?\nIs this sentence a question?", True),
    (
        "Is this restaurant review negative? The waiters were friendly and the soup was superb.",
        False,
    ),
    ("Animal: a golden retriever puppy.\nIs this animal a reptile?", False),
    (
        "Does the answer fit the question? Question: What is the capital of Italy? Answer: Rome.",
        True,
    ),
)


#: what starts a call's own examples (``examples :=``) in its instruction; a backend that adds
#: the default few-shot examples leaves them out when it sees it (backends/llama_prompts.py)
CALL_EXAMPLES_HEADING = "\n\nExamples of inputs and the expected answers:"


def with_examples(instruction: str, examples: Sequence[tuple[str, str]]) -> str:
    """``instruction`` followed by a call's few-shot examples: they are part of the prefix, so
    every backend sends them, the signature (cache key) covers them and the rows share them.

    Example:
        >>> print(with_examples("Answer yes or no.", [("Great fun", "yes")]))
        Answer yes or no.
        <BLANKLINE>
        Examples of inputs and the expected answers:
        Input: Great fun
        Answer: yes
    """
    if not examples:
        return instruction
    shown = "".join(f"\nInput: {given}\nAnswer: {output}" for given, output in examples)
    return instruction + CALL_EXAMPLES_HEADING + shown


def has_call_examples(prefix: str) -> bool:
    """Whether ``prefix`` carries a call's own examples (which replace the defaults)."""
    return CALL_EXAMPLES_HEADING in prefix


class _Template(Protocol):
    """A parsed template (``llm.template.Template`` or ``RowTemplate``)."""

    @property
    def pieces(self) -> Sequence[str]: ...
    @property
    def fields(self) -> Sequence[str]: ...


_MAP_PREFIX = "You transform data as instructed. Follow the instruction for the given data."
# Tuned on the first 10 movies of benchmarks/quality_summaries.py (never the 30 it reports):
# the main finding first, in the model's own words, briefly; the records are not to be listed.
_AGG_PREFIX = (
    "You aggregate many records into one short answer. Follow the instruction over all the "
    "records together. Begin with the overall verdict in one plain sentence (for opinions: "
    "whether they are mostly positive or mostly negative), then add at most one sentence of "
    "detail, in your own words. Do not list, number or quote the records."
)


def scale_in(text: str) -> tuple[int, int] | None:
    """The integer range a typed INTEGER map's template names (``1 to 5``), or None: up to 11
    values by themselves, up to 101 beside a rating word (``llm.closed.scale_named``)."""
    return scale_named(text, need_rating_word=False)


def check_labels(
    values: Sequence[object] | None, *, where: str = "sem_classify"
) -> tuple[str, ...]:
    """The labels of a ``sem_classify``, distinct and in order; a :class:`BindError` unless there
    are at least two distinct non-empty strings (said before any LLM call).

    Example:
        >>> check_labels(["game", "science", "game"])
        ('game', 'science')
    """
    example = f"e.g. {where}('{{text}} kind', ['game', 'science'])"
    if values is None or isinstance(values, str):
        raise BindError(f"{where}: the labels must be a list of strings, {example}")
    labels: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise BindError(
                f"{where}: label {value!r} is not a non-empty string; every label must be one, "
                f"{example}"
            )
        if value not in labels:
            labels.append(value)
    if len(labels) < 2:
        raise BindError(
            f"{where}: needs at least two distinct labels to choose from, got {list(values)!r}; "
            f"{example}"
        )
    return tuple(labels)


def closed_answers(sql_type: str | None, template_text: str) -> tuple[str, ...]:
    """The labels of a ``sem_map`` whose answer set is small and known, else ``()``.

    BOOLEAN is yes/no; ENUM is its labels; INTEGER or BIGINT is the range the template's own
    words name (only the template, never a row's values: a review saying "2 to 3 hours" names
    no scale); an untyped (VARCHAR) map is the option list or rating scale its words name
    (:func:`llm.closed.named_choices`: "Answer POSITIVE or NEGATIVE", "on a 1 to 5 scale").
    """
    spec = parse_type(sql_type or "VARCHAR")
    sql = spec.sql
    if spec.labels:
        return spec.labels
    if sql == "VARCHAR":
        return named_choices(template_text) or ()
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
    guard: OutputGuard | None = None,
) -> LLMRequest:
    """The request for one rendered row: filters and joins decide, maps and aggs generate.

    ``template`` is the unrendered template ``rendered`` came from (backends calibrate per
    template and share its leading text). A map with a closed answer set (``labels``, a
    BOOLEAN, an integer scale its template names, or the options or scale an untyped
    template's words name; ``choices :=`` forces or refuses one) is scored by backends that
    can score and decoded under a choice constraint by the others. ``guard`` (a ``sem_agg``'s
    records) constrains generated text, not typed or closed answers (see :mod:`.guard`).
    ``options`` (a call's ``temperature :=`` and ``max_tokens :=``) override the decoding
    parameters; the model is chosen by the engine. A call's ``examples :=`` follow the
    instruction (:func:`with_examples`).
    """
    unrendered = None
    if template is not None and operator is not OperatorKind.AGG:
        unrendered = RowTemplate(tuple(template.pieces), tuple(template.fields))
    if not labels and operator is OperatorKind.MAP:
        if options.choices is not None:
            labels = options.choices
        else:
            # a row's values never count: "\n" between the pieces ends any list or range
            words = "\n".join(unrendered.pieces) if unrendered else ""
            labels = closed_answers(output_type, words)
    if operator in (OperatorKind.FILTER, OperatorKind.JOIN):
        output = OutputSpec.decision()
        params = DecodingParams(max_tokens=1)
    elif labels:
        output = OutputSpec.choice(labels, parse_type(output_type or "VARCHAR").sql)
        longest = max(len(label) for label in labels)
        params = DecodingParams(max_tokens=max_tokens or max(4, longest // 2 + 4))
    else:
        output = OutputSpec(Task.GENERATE, parse_type(output_type or "VARCHAR").sql)
        default = 64  # maps and aggregates alike: an aggregate is asked for a short answer
        params = DecodingParams(max_tokens=max_tokens or default)
    params = options.decoding(params)
    examples = options.example_pairs(decision=output.task is Task.DECIDE)
    text = output.task is Task.GENERATE and parse_type(output.sql_type).is_text
    return LLMRequest(
        operator=operator,
        prefix=with_examples(instruction_for(operator, output), examples),
        row=rendered,
        output=output,
        params=params,
        template=unrendered,
        guard=guard if text else None,
    )
