"""How ``llama:`` asks an integer scale: as the decision "upper half?" about the row, in the
words of the template less any sentence about the answer's format (no model is loaded)."""

from __future__ import annotations

from duckdb_sem.backends.llama import SCALE_QUESTION, _scale_decision
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.prompts import DECIDE_PREFIX, build_request
from duckdb_sem.llm.request import OperatorKind, Task
from duckdb_sem.llm.template import parse_template

RATING = (
    "Rate how much the critic liked the movie on a 1 to 5 scale (1 = hated it, 5 = loved it). "
    "Answer with the digit only. Review: {0}"
)


def _asked(source: str, value: str) -> tuple[str, str, tuple[str, ...]]:
    template = parse_template(source)
    request = build_request(
        OperatorKind.MAP, template.render([value]), template=template, options=CallOptions()
    )
    assert request.output.labels == ("1", "2", "3", "4", "5")
    derived = _scale_decision(request)
    assert derived.output.task is Task.DECIDE and derived.prefix == DECIDE_PREFIX
    assert derived.template is not None
    return derived.row, derived.prefix, derived.template.pieces


def test_the_scale_decision_leaves_out_the_format_sentence() -> None:
    row, _, pieces = _asked(RATING, "A joyous delight. Answer with a smile.")
    assert row == (
        "Rate how much the critic liked the movie on a 1 to 5 scale (1 = hated it, 5 = loved "
        "it). Review: A joyous delight. Answer with a smile." + SCALE_QUESTION
    )  # the row's own words are never touched
    assert pieces == (
        "Rate how much the critic liked the movie on a 1 to 5 scale (1 = hated it, 5 = loved "
        "it). Review: ",
        SCALE_QUESTION,
    )


def test_calibration_rows_are_built_from_the_template_as_asked() -> None:
    template = parse_template(RATING)
    request = build_request(
        OperatorKind.MAP, template.render(["x"]), template=template, options=CallOptions()
    )
    rows = _scale_decision(request).calibration_rows()
    assert rows and all("Answer with" not in r and r.endswith(SCALE_QUESTION) for r in rows)


def test_a_template_without_a_format_sentence_is_asked_as_written() -> None:
    source = "Rate this review from 1 (very negative) to 5 (very positive): {0}"
    row, _, pieces = _asked(source, "Dull.")
    assert row == "Rate this review from 1 (very negative) to 5 (very positive): Dull." + (
        SCALE_QUESTION
    )
    assert pieces == ("Rate this review from 1 (very negative) to 5 (very positive): ",
                      SCALE_QUESTION)  # fmt: skip
