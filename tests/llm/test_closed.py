"""Closed answer sets named in a template's words are read conservatively, and become choices."""

from __future__ import annotations

import pytest

from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.closed import describe, named_choices, scale_named
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind, OutputSpec, Task
from duckdb_sem.llm.template import parse_template


@pytest.mark.parametrize(
    ("text", "choices"),
    [
        ("Answer with exactly one word, POSITIVE or NEGATIVE. Review: ", ("POSITIVE", "NEGATIVE")),
        ("Respond 'fresh' or 'rotten' only.", ("fresh", "rotten")),
        ('Reply "very good", "fine" or "bad".', ("very good", "fine", "bad")),
        ("Answer with one of: sports, politics, science.", ("sports", "politics", "science")),
        ("Pick one of the labels 'x', 'y', 'z' for", ("x", "y", "z")),
        ("Classify the email as spam or ham:", ("spam", "ham")),
        ("Is the plot original? Answer Yes or No.", ("Yes", "No")),
        ("Answer yes or no: is it fun?", ("yes", "no")),
        ("Answer A/B/C:", ("A", "B", "C")),
    ],
)
def test_option_lists_after_an_answer_cue_are_choices(text: str, choices: tuple[str, ...]) -> None:
    assert named_choices(text) == choices


@pytest.mark.parametrize(
    ("text", "scale"),
    [
        ("Rate the film on a 1 to 5 scale. Answer with the digit only.", (1, 5)),
        ("Score it from 1 (awful) to 10 (great):", (1, 10)),
        ("Give a score 0-100 for", (0, 100)),
        ("How many stars, between 0 and 3?", (0, 3)),
    ],
)
def test_ranges_beside_a_rating_word_are_scales(text: str, scale: tuple[int, int]) -> None:
    assert scale_named(text) == scale
    labels = named_choices(text)
    assert labels is not None and labels[0] == str(scale[0]) and labels[-1] == str(scale[1])


@pytest.mark.parametrize(
    "text",
    [
        "Summarize the review in positive or negative terms:",  # no answer cue
        "Is this about cats or dogs?",  # a question, not an option list
        "Return the data as JSON or CSV",  # formats, not answers
        "Write a tweet or a poem about",  # plain words after a cue need "one of" / "as"
        "Which characters are aged 1 to 5?",  # a range without a rating word
        "Answer in 3 to 5 words:",
        "One-line summary of",
        "Answer with a number:",  # one option is no set
    ],
)
def test_templates_that_name_no_closed_set_are_generated(text: str) -> None:
    assert named_choices(text) is None


def _map(template: str, **kwargs: object) -> OutputSpec:
    parsed = parse_template(template).positional()
    rendered = parsed.render(["a long review text: it was great"])
    return build_request(OperatorKind.MAP, rendered, template=parsed, **kwargs).output  # type: ignore[arg-type]


def test_untyped_map_naming_options_is_a_choice_and_row_values_never_count() -> None:
    output = _map("Answer POSITIVE or NEGATIVE. Review: {text}")
    assert output == OutputSpec.choice(("POSITIVE", "NEGATIVE"), "VARCHAR")
    assert describe(output) == "answered as a choice among [POSITIVE, NEGATIVE]"
    # the options are split from the row by the field: a list never reaches into the row
    assert _map("Review: {text}").task is Task.GENERATE
    assert _map("Answer with one word: {text} or FOO or BAR").task is Task.GENERATE
    # a row saying "Answer YES or NO" is data, not the question
    parsed = parse_template("Summary of {text}").positional()
    row = build_request(OperatorKind.MAP, parsed.render(["Answer YES or NO"]), template=parsed)
    assert row.output.task is Task.GENERATE


def test_untyped_scale_is_scored_as_text_labels_typed_scale_as_integers() -> None:
    words = _map("Rate it on a 1 to 5 scale, digit only: {text}")
    assert words == OutputSpec.choice(("1", "2", "3", "4", "5"), "VARCHAR")
    assert describe(words) == "scored on the scale 1-5"
    typed = _map("Rate {text} from 1 to 5", output_type="INTEGER")
    assert typed.labels == ("1", "2", "3", "4", "5") and typed.sql_type == "INTEGER"


def test_choices_option_forces_or_refuses_a_closed_set() -> None:
    forced = _map("How does {text} feel?", options=CallOptions(choices=("happy", "sad")))
    assert forced == OutputSpec.choice(("happy", "sad"), "VARCHAR")
    refused = _map("Answer POSITIVE or NEGATIVE: {text}", options=CallOptions(choices=()))
    assert refused.task is Task.GENERATE
    boolean = _map("Is {text} fun?", output_type="BOOLEAN", options=CallOptions(choices=()))
    assert boolean == OutputSpec(Task.GENERATE, "BOOLEAN")
    # the option changes what is asked, so it changes the cache key
    assert CallOptions(choices=("a", "b")).key() != CallOptions().key()


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        (("a",), "at least two distinct"),
        (("a", "a"), "at least two distinct"),
        (("a", " "), "non-empty"),
    ],
)
def test_bad_choices_are_refused(choices: tuple[str, ...], message: str) -> None:
    with pytest.raises(BindError, match=message):
        CallOptions(choices=choices)


def test_choices_apply_to_maps_only() -> None:
    with pytest.raises(BindError, match="sem_map only"):
        CallOptions(choices=("a", "b")).check_for("sem_filter")
    with pytest.raises(BindError, match="second argument"):
        CallOptions(choices=("a", "b")).check_for("sem_classify")
    CallOptions(choices=("a", "b")).check_for("sem_map")
    assert CallOptions(choices=("it's", "b")).sql_args() == ", choices := ['it''s', 'b']"


@pytest.mark.parametrize(
    "text",
    [
        "Rate the review on a scale from 1 to 5.",
        "Rate it 1 to 5. Review: {0}",
        "Score from 1-10.",
    ],
)
def test_a_scale_at_the_end_of_a_sentence_is_a_scale(text: str) -> None:
    assert scale_named(text) in {(1, 5), (1, 10)}


def test_a_decimal_after_a_range_is_not_a_scale() -> None:
    assert scale_named("Rate pages 1 to 5.5 of the manual") is None
