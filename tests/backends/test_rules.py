"""The ``test:`` rule backend's oracles: ``hash=P`` answers from the column values only."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from duckdb_sem.backends.rules import RuleBackend, column_values
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind, RowTemplate

words = st.text("abc good great ", min_size=0, max_size=12)


def _request(pieces: tuple[str, ...], values: list[str]) -> LLMRequest:
    template = RowTemplate(pieces, tuple(f"f{i}" for i in range(len(values))))
    return build_request(OperatorKind.FILTER, template.render(values), template=template)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(words, min_size=1, max_size=3),
    lead=words,
    sep=st.text("xyz ,", min_size=1, max_size=3),
    tail=words,
)
@example(values=[" ", ""], lead="", sep="  ", tail="")  # a value ending in the separator's start
def test_column_values_recovers_what_was_rendered(
    values: list[str], lead: str, sep: str, tail: str
) -> None:
    pieces = (lead, *([sep] * (len(values) - 1)), tail)
    request = _request(pieces, values)
    got = column_values(request)
    # a split that renders back to the row (ambiguous only when a value holds a separator),
    # or the whole row
    template = request.template
    assert template is not None
    assert got == (request.row,) or template.render(list(got)) == request.row
    # exact when each separator is first found where it was put (a value ending in a prefix
    # of the separator, such as " " before "  ", shifts the cut) and the tail is unambiguous
    unambiguous = all((v + sep).find(sep) == len(v) for v in values[:-1])
    if unambiguous and not (tail and values[-1].endswith(tail)):
        assert got == tuple(values)


def test_hash_decisions_ignore_the_template_words() -> None:
    oracle = RuleBackend(hash_share=0.5)
    values = [f"row {i}" for i in range(200)]
    good = [_request(("{", " is good and great"), [v]) for v in values]
    dull = [_request(("Is ", " dull?"), [v]) for v in values]
    answers_good = [c.value for c in oracle.complete(good)]
    assert answers_good == [c.value for c in oracle.complete(dull)]
    assert 60 < sum(answers_good) < 140  # about half, whatever the wording
    by_words = RuleBackend(yes_if=["good"])
    assert all(c.value for c in by_words.complete(good))  # the old oracle: always true here
