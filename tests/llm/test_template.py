from __future__ import annotations

import pytest

from duckdb_sem.errors import TemplateError
from duckdb_sem.llm.template import parse_template


def test_fields_and_positional_rendering() -> None:
    t = parse_template("{title}: is {{this}} about {r.topic}? {title}")
    assert t.fields == ("title", "r.topic", "title")
    assert t.distinct_fields() == ("title", "r.topic")
    p = t.positional()
    assert p.source == "{0}: is {{this}} about {1}? {0}"
    assert p.render(["Dune", "sand"]) == "Dune: is {this} about sand? Dune"


def test_positional_template_is_recognised() -> None:
    t = parse_template("{0} and {1}")
    assert t.is_positional
    assert t.render(["a", "b"]) == "a and b"


def test_render_with_too_few_values_says_so() -> None:
    with pytest.raises(TemplateError, match="only 1 argument"):
        parse_template("{0} {1}").render(["a"])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("", "empty prompt template"),
        ("   ", "empty prompt template"),
        ("{text", "unclosed"),
        ("text}", "unmatched"),
        ("{}", "bad field"),
        ("{a b c!r}", "bad field"),
    ],
)
def test_bad_templates(source: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse_template(source)


def test_values_are_not_reinterpreted() -> None:
    # Braces inside a row's value are data, not fields.
    assert parse_template("{0}!").render(["{evil} }}"]) == "{evil} }}!"
