"""Guarded greedy decoding's choice of token, on fabricated vocabularies (no model)."""

from __future__ import annotations

from duckdb_sem.backends.llama_guarded import pick_allowed
from duckdb_sem.llm.guard import GuardCheck, OutputGuard

VOCAB = {1: "The film", 2: " is a gorgeous, moving", 3: " is moving", 4: "\n", 5: " film"}
STOP = frozenset({0})


def _text(tokens: list[int]) -> str:
    return "".join(VOCAB[t] for t in tokens)


def _decode(ranking: list[list[int]], check: GuardCheck) -> list[int]:
    """Greedy decoding where step i ranks the vocabulary as ``ranking[i]``."""
    out: list[int] = []
    for ranked in ranking:
        token = pick_allowed(ranked, out, _text, check, STOP)
        if token is None or token in STOP:
            break
        out.append(token)
    return out


def test_the_best_token_that_copies_is_passed_over() -> None:
    check = GuardCheck(OutputGuard(("The film is a gorgeous, moving picture.",)))
    assert _decode([[1], [2, 3], [0]], check) == [1, 3]


def test_without_a_copy_the_best_token_is_taken() -> None:
    check = GuardCheck(OutputGuard(("Something else entirely, at length.",)))
    assert _decode([[1], [2, 3], [0]], check) == [1, 2]


def test_a_line_is_not_written_twice_and_the_end_waits_for_a_new_line() -> None:
    check = GuardCheck(OutputGuard(()))
    # "The film\nThe film" may not end there: the stop token is passed over for " film"
    steps = [[1], [4], [1], [4, 0, 5], [0]]
    assert _text(_decode(steps, check)) == "The film\nThe film film"


def test_no_allowed_candidate_stops_decoding() -> None:
    check = GuardCheck(OutputGuard(("The film is a gorgeous, moving picture.",)))
    assert _decode([[1], [2], [3]], check) == [1]
