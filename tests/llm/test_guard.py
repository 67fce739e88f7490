"""The sem_agg output guard as pure functions on text (see duckdb_sem/llm/guard.py)."""

from __future__ import annotations

import pytest

from duckdb_sem.llm.guard import (
    MAX_COPY,
    GuardCheck,
    OutputGuard,
    drop_repeated_lines,
    longest_copied_span,
    normalize,
    repeated_lines,
)
from duckdb_sem.llm.request import LLMRequest, OperatorKind, OutputSpec, Task
from duckdb_sem.scheduler.protocol import _request_from_json, _request_to_json

RECORD = "A gorgeous, moving film with terrific performances from the whole cast."


def test_normalize_ignores_case_and_whitespace_runs() -> None:
    assert normalize("A  Gorgeous,\n\tFilm") == "a gorgeous, film"


def test_a_span_of_max_copy_characters_passes_one_more_does_not() -> None:
    check = GuardCheck(OutputGuard((RECORD,)))
    assert check.allows("Critics said: " + RECORD[:MAX_COPY])
    assert not check.allows("Critics said: " + RECORD[: MAX_COPY + 1])
    assert not check.allows(RECORD[10 : 11 + MAX_COPY].upper())  # case does not hide a copy


def test_a_span_spanning_two_records_is_not_a_copy() -> None:
    check = GuardCheck(OutputGuard(("the film is long", "and very dull indeed")))
    assert check.allows("the film is long and very dull")


def test_the_output_may_not_repeat_its_own_long_spans() -> None:
    check = GuardCheck(OutputGuard(()))
    assert not check.allows("The film is a beautiful one, and the film is a beautiful one")
    assert check.allows("The film is beautiful. The cast is strong.")


def test_a_repeated_line_is_refused_once_finished() -> None:
    check = GuardCheck(OutputGuard(()))
    assert check.allows("1. Fun\n2. Fun")  # the last line may still go on
    assert not check.allows("1. Fun\n2. Fun", final=True)
    assert not check.allows("1. Fun\n2. Fun\n")
    assert check.allows("Fun\n\n\nDull", final=True)  # blank lines never count


def test_repeated_lines_and_dropping_them() -> None:
    text = "1. Great fun\n2. great  FUN\n- Dull ending\n3. Great fun"
    assert repeated_lines(text) == 2
    assert drop_repeated_lines(text) == "1. Great fun\n- Dull ending"
    assert repeated_lines(drop_repeated_lines(text)) == 0


def test_longest_copied_span() -> None:
    assert longest_copied_span("they call it " + RECORD[:30] + "!", [RECORD]) == 30
    assert longest_copied_span("nothing shared", ["xyz"]) == 0
    assert longest_copied_span("", [RECORD]) == 0


def test_max_copy_must_be_positive() -> None:
    with pytest.raises(ValueError):
        OutputGuard((), max_copy=0)


def _request(guard: OutputGuard | None) -> LLMRequest:
    return LLMRequest(OperatorKind.AGG, "p", "row", OutputSpec(Task.GENERATE), guard=guard)


def test_the_guard_is_part_of_the_signature_and_the_wire() -> None:
    guarded = _request(OutputGuard((RECORD,)))
    assert guarded.signature("b") != _request(None).signature("b")
    assert guarded.signature("b") != _request(OutputGuard((RECORD, "x"))).signature("b")
    assert _request_from_json(_request_to_json(guarded)) == guarded
    assert _request_from_json(_request_to_json(_request(None))).guard is None
