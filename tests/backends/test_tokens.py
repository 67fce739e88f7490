"""The token estimate: its separator-counting fast path gives exactly the counted answer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from duckdb_sem.backends.tokens import estimate_tokens


def _counted(text: str) -> int:
    """The definition: about four characters a token, at least one a word."""
    return max(len(text.split()), (len(text) + 3) // 4) if text else 0


# ASCII with every separator str.split() knows, and some that are not ASCII
_TEXT = st.text(
    alphabet=st.sampled_from([*"ab ,.\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f", "\xa0", "\u3000", "é"])
)


@given(_TEXT)
def test_the_estimate_is_the_counted_one(text: str) -> None:
    assert estimate_tokens(text) == _counted(text)


def test_short_words_count_as_words_and_long_rows_by_characters() -> None:
    assert estimate_tokens("a b c d e f g h") == 8  # 15 characters, 8 words
    assert estimate_tokens("a\x1cb\x1cc\x1cd\x1ce\x1cf") == 6  # separators str.split() knows
    row = "the critic found the pacing uneven " * 40
    assert estimate_tokens(row) == (len(row) + 3) // 4
    assert estimate_tokens("") == 0
