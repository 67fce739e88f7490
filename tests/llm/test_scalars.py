"""Reading one scalar answer, and closing a JSON answer cut off at ``max_tokens``."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from duckdb_sem.llm.scalars import close_json, read_label

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


@given(_JSON, st.booleans())
def test_every_prefix_of_json_closes_into_json(value: object, spaced: bool) -> None:
    text = json.dumps(value, indent=1 if spaced else None)
    for end in range(1, len(text) + 1):
        json.loads(close_json(text[:end]))  # raises if it did not close


def test_closing_keeps_what_was_written() -> None:
    assert json.loads(close_json('{"tone": "positive", "tags": ["a", "b')) == {
        "tone": "positive",
        "tags": ["a", "b"],
    }
    assert json.loads(close_json('{"a": 1, "b')) == {"a": 1, "b": None}
    assert json.loads(close_json("[1.5e")) == [1.5]
    assert json.loads(close_json('{"ok": tr')) == {"ok": True}
    assert json.loads(close_json('["caf\\u00')) == ["caf"]


def test_labels_are_read_only_when_one_is_meant() -> None:
    labels = ("positive", "negative")
    assert read_label("  'Negative'!", labels) == "negative"
    assert read_label("I'd say negative overall", labels) == "negative"
    for text in ("neutral", "positive, not negative", "positively"):
        try:
            read_label(text, labels)
        except ValueError:
            continue
        raise AssertionError(f"{text!r} read as a label")
