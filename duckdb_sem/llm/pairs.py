"""The per-row rewrite of a pair decision: ask each row once, then compare the answers.

``sem_join('... {r1.text} ... {r2.text}', per_row := 'Is this review positive? {text}')`` asks
the per-row question of every distinct value of either side (N + M decisions instead of N x M)
and keeps a pair when the two answers are the same, or, for a pair template that asks for a
difference, when they differ. Which of the two is read from ``per_row_match := 'same'`` or
``'different'``, else from the pair template's own words, conservatively: exactly one of the
word sets :data:`DIFFERENT_WORDS` / :data:`SAME_WORDS` must occur, otherwise the call is a
:class:`~duckdb_sem.errors.BindError` asking for ``per_row_match``. It is approximate (the
answer of another question, exact only when the pair question really is "the same property
of both sides"), so it is never chosen by the engine: the call opts in, and EXPLAIN SEMANTIC
says so (:func:`describe`).

Example:
    >>> plan = per_row_plan("Do {0} and {1} reach opposite verdicts?", "Positive? {text}", None)
    >>> plan.question, plan.match
    ('Positive? {0}', 'different')
    >>> compare([True, False, None], [False, False, True], plan.match)
    [True, False, None]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.errors import BindError
from duckdb_sem.llm.template import parse_template

__all__ = ["DIFFERENT_WORDS", "MATCHES", "SAME_WORDS", "PerRow", "compare", "describe",
           "per_row_plan"]  # fmt: skip

MATCHES = ("same", "different")
#: words of a pair template asking whether the two sides differ ...
DIFFERENT_WORDS = ("opposite", "different", "differ", "differs", "disagree", "disagrees",
                   "contradict", "contradicts", "contrary", "unlike")  # fmt: skip
#: ... or whether they are alike
SAME_WORDS = ("same", "agree", "agrees", "alike", "identical", "equal", "similar")


@dataclass(frozen=True, slots=True)
class PerRow:
    """A pair decision answered per row: ``question`` (positional, one field ``{0}``) asked of
    each side's value; a pair matches when the answers are equal (``same``) or not."""

    question: str
    match: str

    def __post_init__(self) -> None:
        if self.match not in MATCHES:
            raise BindError(
                f"per_row_match := {self.match!r}: use 'same' (a pair matches when both rows "
                "get the same answer) or 'different'"
            )
        fields = parse_template(self.question).distinct_fields()
        if fields != ("0",):
            raise BindError(f"per_row := {self.question!r} must have exactly one field")


def per_row_plan(pair_template: str, question: str, match: str | None) -> PerRow:
    """The rewrite of ``pair_template`` (positional, two fields) by ``question`` (one field,
    named or ``{0}``), checked; ``match`` None: read from the pair template's words."""
    pair = parse_template(pair_template)
    if len(pair.distinct_fields()) != 2:
        raise BindError(
            f"per_row := needs a pair template with exactly two fields, one of each side "
            f"(e.g. '{{r1.text}} and {{r2.text}} agree'), got {pair_template!r}"
        )
    asked = parse_template(question)
    if len(asked.distinct_fields()) != 1:
        raise BindError(
            f"per_row := {question!r} must name exactly one field, the value each side gives "
            "(e.g. per_row := 'Is this review positive? {text}')"
        )
    positional = asked.source if asked.is_positional else asked.positional().source
    if not positional.count("{0}"):
        positional = re.sub(r"\{[^{}]*\}", "{0}", asked.source)
    return PerRow(positional, match if match is not None else _match_of(pair_template))


def _match_of(pair_template: str) -> str:
    words = set(re.findall(r"[a-z]+", pair_template.lower()))
    found = [m for m, w in (("different", DIFFERENT_WORDS), ("same", SAME_WORDS))
             if words & set(w)]  # fmt: skip
    if len(found) != 1:
        why = "names both a sameness and a difference" if found else "names neither"
        raise BindError(
            f"per_row :=: the pair template {why} (words like 'same'/'agree' or "
            "'opposite'/'different'); say which pairs match with per_row_match := 'same' or "
            "per_row_match := 'different'"
        )
    return found[0]


def compare(left: Sequence[bool | None], right: Sequence[bool | None],
            match: str) -> list[bool | None]:  # fmt: skip
    """Each pair's answer from its two rows' answers (NULL when either is NULL)."""
    same = match == "same"
    return [None if a is None or b is None else (a == b) == same
            for a, b in zip(left, right, strict=True)]  # fmt: skip


def describe(question: str, match: str, left_rows: float, right_rows: float) -> str:
    """The EXPLAIN SEMANTIC line of a rewritten join."""
    pairs = left_rows * right_rows
    return (
        f"APPROXIMATE rewrite (per_row :=, asked by the call): sem_join answered per row: "
        f"{question!r} is asked once per distinct value of each side (calls <= "
        f"{left_rows + right_rows:,.0f} instead of {pairs:,.0f}) and a pair matches when the "
        f"two answers are {'the same' if match == 'same' else 'different'}; exact only if the "
        "pair question compares that one property of both sides"
    )
