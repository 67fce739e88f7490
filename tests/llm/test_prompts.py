"""Requests carry their template; closed answer sets are recognised from the template alone."""

from __future__ import annotations

import pytest

from duckdb_sem.llm.prompts import build_request, closed_answers, scale_in
from duckdb_sem.llm.request import (
    CALIBRATION_TEXTS,
    CONTENT_FREE_FILLERS,
    OperatorKind,
    OutputSpec,
    RowTemplate,
    Task,
)
from duckdb_sem.llm.template import parse_template


def test_template_travels_and_changes_the_signature() -> None:
    parsed = parse_template("Is this review positive? {text}").positional()
    plain = build_request(OperatorKind.FILTER, "Is this review positive? Fun")
    templated = build_request(OperatorKind.FILTER, "Is this review positive? Fun", template=parsed)
    assert templated.template == RowTemplate(("Is this review positive? ", ""), ("0",))
    assert plain.template is None
    assert plain.signature("m") != templated.signature("m")
    other = parse_template("{a} positive? {b}").positional()
    split = build_request(OperatorKind.FILTER, "Is this review positive? Fun", template=other)
    assert split.signature("m") != templated.signature("m")  # same text, other template
    named = parse_template("Is this review positive? {text}")
    same = build_request(OperatorKind.FILTER, "Is this review positive? Fun", template=named)
    assert same.signature("m") == templated.signature("m")  # field names do not matter


def test_signature_without_template_is_unchanged() -> None:
    # hand-built requests keep the signatures (and cache entries) they had before templates
    request = build_request(OperatorKind.FILTER, "row")
    assert request.signature("m") == build_request(OperatorKind.FILTER, "row").signature("m")
    assert len(request.signature("m")) == 64


def test_content_free_rows_blank_every_field() -> None:
    template = RowTemplate(("Review: ", " Plot: ", "."), ("0", "1"))
    rows = template.content_free()
    assert rows[0] == "Review:  Plot: ."
    assert "Review: N/A Plot: N/A." in rows
    assert template.lead == "Review: "


def test_one_row_decisions_also_calibrate_on_irrelevant_texts_joins_do_not() -> None:
    one = parse_template("Is this review positive? {0}")
    rows = build_request(OperatorKind.FILTER, "Is this review positive? x", template=one)
    assert rows.calibration_rows() == tuple(
        f"Is this review positive? {t}" for t in (*CONTENT_FREE_FILLERS, *CALIBRATION_TEXTS)
    )
    pair = parse_template("Same film? {0} / {1}")
    join = build_request(OperatorKind.JOIN, "Same film? a / b", template=pair)
    assert join.template is not None
    assert join.calibration_rows() == join.template.content_free()
    # each field of a pair gets a different text, so an irrelevant pair is not two copies
    irrelevant = join.template.irrelevant()
    assert irrelevant[0] == f"Same film? {CALIBRATION_TEXTS[0]} / {CALIBRATION_TEXTS[1]}"
    assert build_request(OperatorKind.FILTER, "hand-built").calibration_rows() == ("",)


@pytest.mark.parametrize(
    ("text", "scale"),
    [
        ("Rate the review from 1 (awful) to 5 (excellent): {0}", (1, 5)),
        ("On a 1 to 5 scale, how positive is {0}? Answer with the digit only.", (1, 5)),
        ("Score 0-3 for toxicity: {0}", (0, 3)),
        ("Rate between 1 and 10: {0}", (1, 10)),
        ("How many stars (1 to 100)? {0}", (1, 100)),  # beside a rating word: up to 101 values
        ("Which page (1 to 100)? {0}", None),  # too many values without one
        ("Give the year: {0}", None),
    ],
)
def test_scale_in_template(text: str, scale: tuple[int, int] | None) -> None:
    assert scale_in(text) == scale


def test_closed_answers() -> None:
    assert closed_answers("BOOLEAN", "Is it good? {0}") == ("yes", "no")
    assert closed_answers("INTEGER", "Rate 1 to 3: {0}") == ("1", "2", "3")
    assert closed_answers("INTEGER", "How many people? {0}") == ()
    assert closed_answers("VARCHAR", "Rate 1 to 3: {0}") == ("1", "2", "3")  # words name it
    assert closed_answers("VARCHAR", "Pages 1 to 3: {0}") == ()
    assert closed_answers("ENUM('pos', 'neg')", "Tone of {0}") == ("pos", "neg")
    assert closed_answers("STRUCT(t ENUM('pos', 'neg'))", "Tone of {0}") == ()  # a field: a schema


def test_an_enum_map_is_a_choice_in_the_enum_type() -> None:
    request = build_request(OperatorKind.MAP, "Tone of ok", output_type="enum('pos','neg')")
    assert request.output == OutputSpec.choice(("pos", "neg"), "ENUM('pos', 'neg')")
    assert request.prefix.endswith("Answer with one of: pos, neg.")


def test_integer_scale_becomes_a_closed_answer_but_row_values_never_do() -> None:
    rating = parse_template("Rate from 1 (awful) to 5 (excellent): {0}")
    request = build_request(
        OperatorKind.MAP, "Rate from 1 (awful) to 5 (excellent): ok", output_type="INTEGER",
        template=rating,
    )  # fmt: skip
    assert request.output == OutputSpec.choice(("1", "2", "3", "4", "5"), "INTEGER")
    assert "1, 2, 3, 4, 5" in request.prefix
    count = parse_template("How long is it in hours? {0}")
    request = build_request(
        OperatorKind.MAP, "How long is it in hours? 2 to 3 hours", output_type="INTEGER",
        template=count,
    )  # fmt: skip
    assert request.output.task is Task.GENERATE


def test_explicit_labels_and_their_validation() -> None:
    request = build_request(
        OperatorKind.MAP, "Which genre? A heist", output_type="VARCHAR", labels=("crime", "drama")
    )
    assert request.output.task is Task.CLASSIFY and request.output.labels == ("crime", "drama")
    assert request.signature("m") != build_request(
        OperatorKind.MAP, "Which genre? A heist", output_type="VARCHAR", labels=("crime", "war")
    ).signature("m")
    with pytest.raises(ValueError, match="two distinct labels"):
        OutputSpec.choice(("only",))


def test_agg_requests_carry_no_template() -> None:
    parsed = parse_template("Summarise: {0}")
    request = build_request(OperatorKind.AGG, "Summarise: 1. a", template=parsed)
    assert request.template is None
