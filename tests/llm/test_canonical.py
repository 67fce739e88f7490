"""The canonical layout of one-field decisions (duckdb_sem.llm.canonical)."""

from __future__ import annotations

import pytest

from duckdb_sem.llm.canonical import canonical_template
from duckdb_sem.llm.template import parse_template

# Phrasings here are about other tasks than the quality benchmark's (no benchmark phrasing
# tunes the rules).
CASES = [
    ("Is {text} spam?", "Is the text spam?"),
    ("{body} is spam", "Is the text spam?"),
    ('The email "{body}" is an advertisement', "Is the email an advertisement?"),
    ("Is the email '{body}' an advertisement?", "Is the email an advertisement?"),
    ("Does this email sell something? {body}", "Does this email sell something?"),
    ("{body}\nDoes this email sell something?", "Does this email sell something?"),
    ("Email: {body}\nIs it unsolicited?", "Is it unsolicited?"),
    ("{body} The sender wants money.", "Is it true that the sender wants money?"),
    ("{abstract} is about query optimization", "Is the text about query optimization?"),
    ("The author of {book} was French", "Was the author of the text French?"),
    ("This package is a game: {descr}", "Is this package a game?"),
    (
        "Paris is the capital named in {t}",
        "Is it true that Paris is the capital named in the text?",
    ),
]


@pytest.mark.parametrize(("source", "question"), CASES)
def test_one_field_decisions_become_question_then_value(source: str, question: str) -> None:
    template = parse_template(source)
    canonical = canonical_template(template)
    assert canonical is not None
    assert canonical.fields == template.fields
    assert canonical.pieces == (f"{question} ", "")
    assert canonical.render(["hello"]) == f"{question} hello"


@pytest.mark.parametrize(
    "source",
    [
        "{a} and {b} agree",  # two fields: a pair, kept as written
        "Is {n}th place good?",  # the field inside a word
        "Is it cheap? Is it good? {x}",  # two questions
        "Is it cheap? {x} Answer briefly.",  # a question followed by more words
        "{x}",  # no words at all
        "Rate {x}. Then say why.",  # two sentences
    ],
)
def test_templates_that_are_not_one_claim_keep_their_layout(source: str) -> None:
    assert canonical_template(parse_template(source)) is None


def test_the_same_intent_in_five_layouts_asks_one_question() -> None:
    """Statement, question, field first or last, quoted: one canonical question (the
    property the layout exists for)."""
    forms = [
        'The message "{m}" is friendly',
        "Is the message '{m}' friendly?",
        "{m} the message is friendly",
        "Is the message friendly? {m}",
        "Message: {m}\nIs the message friendly?",
    ]
    questions = {canonical_template(parse_template(f)).pieces for f in forms}  # type: ignore[union-attr]
    assert questions == {("Is the message friendly? ", "")}
