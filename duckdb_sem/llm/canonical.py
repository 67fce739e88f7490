"""One layout for every phrasing of a one-field decision, for small models.

A tiny embedded model answers the same intent differently when it is written as a statement or
a question, with the field first or last, or quoted (``'The review "{text}" is positive'``
against ``'Is this review positive? {text}'``: accuracy 0.48 against 0.69 on held-out reviews).
The backends that score decisions on such a model ask every one-field decision in one fixed
layout instead: the template's own words as a yes/no question, then the row's value (the layout
of most of the few-shot examples, :data:`~duckdb_sem.llm.prompts.DECIDE_EXAMPLES`)::

    'The review "{text}" is positive'      ->  'Is the review positive? {text}'
    '{text} The critic liked the movie.'   ->  'Is it true that the critic liked the movie? {text}'
    'Is this review positive? {text}'      ->  unchanged

Measured on 80 of the bundled reviews with six phrasings of my own (none of the benchmark's) on
the default gemma-3-270m: accuracy 0.54-0.81 as written (spread 0.28), 0.61-0.66 in this layout
(spread 0.05). The value first (``'Text: {text}\\nIs ...?'``) scored higher on those rows
(0.61-0.76) but lost the held-out AUC of a question-first template (0.80 -> 0.65), so the question
comes first: a template already written that way is asked as written.

The rewrite is explicit and conservative (:func:`canonical_template`): a template keeps its own
layout when it has more than one field, when its words are not one claim or one question about
the value (a claim with a second question, an empty claim), or when a field sits inside a
word. Only the words around the value move; none is added but the label, the question's lead
("Is it true that") or the verb moved to the front of a simple ``X is Y`` sentence.

Example:
    >>> from duckdb_sem.llm.template import parse_template
    >>> canonical_template(parse_template('The review "{text}" is positive')).pieces
    ('Is the review positive? ', '')
    >>> canonical_template(parse_template("{a} or {b}")) is None
    True
"""

from __future__ import annotations

import dataclasses
import functools
import re

from duckdb_sem.llm.prompts import has_call_examples
from duckdb_sem.llm.request import LLMRequest, OperatorKind, RowTemplate, Task

__all__ = ["REFERENCE", "canonical_request", "canonical_template", "question_of"]

# quotes that may wrap the field in a template: opening -> closing
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb", "`": "`"}
# a label just before the field ("Review: {text}") or just after it ("{text} (review)") is
# dropped: the canonical layout writes its own
_LEAD_LABEL = re.compile(r"(?:^|(?<=[\s.?!]))[A-Z][\w-]*(?: [\w-]+){0,2}:\s*$")
#: what stands for the value where it is part of the sentence ("Is {text} positive?")
REFERENCE = "the text"
_DETERMINERS = frozenset(
    [
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "his",
        "her",
        "their",
        "a",
        "an",
        "each",
        "every",
        "some",
        "there",
        "they",
        "he",
        "she",
        "we",
        "i",
        "you",
    ]
)
# "the review is positive" -> "Is the review positive?": a determiner-led subject of at most
# five words, then a copula or an auxiliary, then the rest
_INVERT = re.compile(
    r"^(?P<subject>(?:the|this|that|these|those|it|its|his|her|their|each|every)"
    r"(?:\s+[\w'-]+){0,5}?)\s+"
    r"(?P<verb>is|are|was|were|has|have|had|can|could|will|would|should|does|do|did)\s+"
    r"(?P<rest>\S.*)$",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=256)
def canonical_template(template: RowTemplate) -> RowTemplate | None:
    """``template`` in the canonical layout, or None where it keeps its own (see the module
    docstring). Cached: every row of a query asks it of the same template."""
    if len(template.fields) != 1:
        return None
    before, after = template.pieces
    if before[-1:].isalnum() or after[:1].isalnum():
        return None  # the field sits inside a word ("{n}th", "re{verb}")
    closing = _QUOTES.get(before[-1:])
    if closing is not None and after.startswith(closing):
        # a quoted value is an apposition ('The review "{text}" is positive'): drop it
        words = f"{before[:-1]} {after[len(closing) :]}"
    elif _LEAD_LABEL.search(before):
        words = f"{_LEAD_LABEL.sub('', before)} {after}"  # "Review: {text}"
    elif _in_sentence(before, after):
        words = f"{before}{REFERENCE}{after}"  # "Is {text} positive?", "{text} mentions a price"
    else:
        words = f"{before} {after}"  # the value stands apart from the words
    words = _squash(words)
    question = question_of(words)
    if question is None:
        return None
    return RowTemplate((f"{question} ", ""), template.fields)


def question_of(words: str) -> str | None:
    """The template's words as one yes/no question, or None when they are not one claim or
    one question.

    Example:
        >>> question_of("the review is positive.")
        'Is the review positive?'
        >>> question_of("The critic liked the movie.")
        'Is it true that the critic liked the movie?'
        >>> question_of("Does it mention a price?")
        'Does it mention a price?'
        >>> question_of("Is it good? Is it cheap?") is None
        True
    """
    words = words.strip(" \t\n-:;,").lstrip(".!").strip()
    if not words or len(words) > 300:
        return None
    if words.count("?") > 1 or ("?" in words and not words.endswith("?")):
        return None  # several questions, or a question followed by more words
    if words.endswith("?"):
        return words[0].upper() + words[1:]
    claim = words.rstrip(".!").strip()
    if not claim or re.search(r"[.!?]\s", claim):
        return None  # more than one sentence
    inverted = _INVERT.match(claim)
    if inverted is not None:
        subject = _lower_lead(inverted["subject"])
        verb = inverted["verb"].lower()
        return f"{verb[0].upper()}{verb[1:]} {subject} {inverted['rest']}?"
    return f"Is it true that {_lower_lead(claim)}?"


def _in_sentence(before: str, after: str) -> bool:
    """Whether the value is a word of the template's sentence, not a block beside it: words
    before it with no sentence break or label between ("named in {text}", "Is {text} good?"),
    or a sentence it starts whose next word is not a determiner ("{text} mentions a price",
    not "{text} The critic liked it")."""
    head, tail = before.rstrip(" "), after.lstrip(" ")
    if head:
        return head[-1] not in ".?!:\n"  # after a sentence or a label it stands apart
    first = tail.split(" ", 1)[0]
    return first[:1].islower() and first.lower() not in _DETERMINERS


def _lower_lead(text: str) -> str:
    """``text`` with its first word lower-cased when that word is a determiner or pronoun
    ("The critic" -> "the critic"; "Paris" stays)."""
    first, _, rest = text.partition(" ")
    if first.lower() in _DETERMINERS:
        return f"{first.lower()} {rest}".rstrip()
    return text


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def canonical_request(request: LLMRequest) -> LLMRequest:
    """``request`` asked in the canonical layout: a one-field filter decision whose template
    :func:`canonical_template` rewrites and whose prefix carries no call's own examples
    (they are written in the template's layout); any other request unchanged.

    Example:
        >>> from duckdb_sem.llm.prompts import build_request
        >>> from duckdb_sem.llm.request import OperatorKind
        >>> from duckdb_sem.llm.template import parse_template
        >>> t = parse_template("Is {text} spam?")
        >>> canonical_request(build_request(OperatorKind.FILTER, "Is WIN NOW spam?", template=t)).row
        'Is the text spam? WIN NOW'
    """
    template = request.template
    if (
        template is None
        or request.operator is not OperatorKind.FILTER
        or request.output.task is not Task.DECIDE
        or has_call_examples(request.prefix)
    ):
        return request
    canonical = canonical_template(template)
    before, after = template.pieces if canonical is not None else ("", "")
    row = request.row
    if (
        canonical is None
        or len(row) < len(before) + len(after)
        or not (row.startswith(before) and row.endswith(after))
    ):
        return request
    value = row[len(before) : len(row) - len(after)]
    return dataclasses.replace(request, row=canonical.render([value]), template=canonical)
