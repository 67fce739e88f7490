"""Closed answer sets a template names in words: "POSITIVE or NEGATIVE", "one of a, b, c",
"answer yes or no", "on a 1 to 5 scale".

A question with a closed answer should be *scored* (each option's probability in one forward
pass, or a constrained decode on a server), never generated: a small model asked for "the digit
only" rambles for 45 tokens and then says something no regexp finds. This module reads the
options from the template's own words (never from a row's values) so ``sem_map`` can ask for a
choice instead of free text. It is explicit and conservative: an option list counts only after
an answer cue ("answer", "respond", "one of", "classify ... as", ...), with options that are
written as options (quoted, upper case, after "one of" or joined by "or" after "as"); a
numeric range counts only beside a rating word ("scale", "rate", "score", "stars", ...). A
template that names no closed set is generated as before, and a call can force a set or refuse
one with ``choices := [...]`` / ``choices := []`` (``llm.call_options``).

Example:
    >>> named_choices("Label the verdict. Answer with one word, POSITIVE or NEGATIVE. {0}")
    ('POSITIVE', 'NEGATIVE')
    >>> named_choices("Rate the review on a 1 to 5 scale. Answer with the digit only: {0}")
    ('1', '2', '3', '4', '5')
    >>> named_choices("Summarize {0} in positive or negative terms") is None
    True
"""

from __future__ import annotations

import re

from duckdb_sem.llm.request import OutputSpec, Task

__all__ = ["MAX_CHOICES", "MAX_SCALE", "describe", "is_scale", "named_choices", "scale_named"]

MAX_CHOICES = 20  # options a template may name and still be read as a closed set
MAX_SCALE = 101  # values of a numeric range (0-100 is the largest usual one)

# a range: "1 to 5", "1 (awful) to 5 (great)", "1-10", "0–100", "between 0 and 3"
_RANGE = re.compile(
    r"(?<![\d.])(\d{1,3})\s*(?:\([^()]{0,40}\)\s*)?(?:to|-|\u2013|and)\s*(\d{1,3})(?!\d|\.\d)",
    re.IGNORECASE,
)
# words that make a range a rating scale rather than, say, "ages 1 to 5" or "pages 10-20"
_RATING = re.compile(r"\b(scale|rate|rating|rated|score|scored|grade|stars?|out of)\b", re.I)

_WORD = r"[A-Za-z][\w\-]*"
_QUOTED = r"\"[^\"\n]{1,40}\"|'[^'\n]{1,40}'"
_ITEM = rf"(?:{_QUOTED}|{_WORD})"
_SEP = r"\s*(?:,\s*(?:or\s+|and\s+)?|\s+or\s+|\s*/\s*|\s*\|\s*)"
_LIST = rf"{_ITEM}(?:{_SEP}{_ITEM})+"
# "one of: a, b, c" / "one of the labels 'x', 'y'"
_ONE_OF = re.compile(
    r"\bone of(?: the)?(?: (?:following|labels?|options?|categories|classes|words|values|answers))?"
    rf"\s*[:\-]?\s*({_LIST})",
    re.IGNORECASE,
)
# "Answer with exactly one word, POSITIVE or NEGATIVE" / "respond 'fresh' or 'rotten'"
_CUE = re.compile(
    r"\b(?:answer|respond|reply|output|return|say|write|choose|pick|select)\b[^.?!\n]{0,40}?"
    rf"[\s:,(]({_LIST})",
    re.IGNORECASE,
)
# "classify the review as positive or negative" / "label it as spam or ham"
_AS = re.compile(
    rf"\b(?:classify|label|categori[sz]e|tag|mark)\b[^.?!\n]{{0,40}}?\bas\s+({_LIST})",
    re.IGNORECASE,
)
# "JSON or CSV" names output formats, not answers
_FORMATS = frozenset({"JSON", "CSV", "XML", "HTML", "YAML", "SQL", "MARKDOWN", "TEXT", "TSV"})
_YES_NO = re.compile(
    r"\b(?:answer|respond|reply|say|output|return)\b[^.?!\n]{0,20}?\b(yes)\s+or\s+(no)\b",
    re.IGNORECASE,
)


def scale_named(text: str, *, need_rating_word: bool = True) -> tuple[int, int] | None:
    """The integer range ``text`` names as a scale (``1 to 5``), or None.

    With ``need_rating_word`` (untyped maps) the range counts only when the text also has a
    rating word; a typed INTEGER map asks for a number already, so a small range suffices.
    """
    rated = _RATING.search(text) is not None
    for match in _RANGE.finditer(text):
        low, high = int(match.group(1)), int(match.group(2))
        size = high - low + 1
        if low < 0 or high <= low or size > MAX_SCALE:
            continue
        if rated or (not need_rating_word and size <= 11):
            return low, high
    return None


def named_choices(text: str) -> tuple[str, ...] | None:
    """The closed answer set ``text`` (a template's literal words) names, or None."""
    options = _options(text)
    if options is not None:
        return options
    scale = scale_named(text)
    if scale is not None:
        return tuple(str(v) for v in range(scale[0], scale[1] + 1))
    return None


def _options(text: str) -> tuple[str, ...] | None:
    match = _YES_NO.search(text)
    if match is not None:
        return (match.group(1), match.group(2))
    for pattern, plain_ok in ((_ONE_OF, True), (_AS, True), (_CUE, False)):
        for found in pattern.finditer(text):
            items = _items(found.group(1), plain_ok=plain_ok)
            if items is not None:
                return items
    return None


def _items(listed: str, *, plain_ok: bool) -> tuple[str, ...] | None:
    """The options of a list, or None when they do not read as options. Without
    ``plain_ok`` only the trailing run of items written as options (quoted or upper case)
    counts: in "answer with one word, POSITIVE or NEGATIVE" the list starts at POSITIVE."""
    raw = [r for r in re.findall(_ITEM, listed) if r.lower() not in ("or", "and")]
    if not plain_ok:
        start = len(raw)
        while start > 0 and _written_as_option(raw[start - 1]):
            start -= 1
        raw = raw[start:]
    items = [r[1:-1].strip() if r[:1] in "\"'" else r for r in raw]
    distinct = tuple(dict.fromkeys(items))
    if not 2 <= len(distinct) <= MAX_CHOICES or any(not i for i in distinct):
        return None
    if all(i.upper() in _FORMATS for i in distinct):
        return None  # "return it as JSON or CSV" asks for a format, not one of two answers
    return distinct


def _written_as_option(item: str) -> bool:
    return item[:1] in "\"'" or item.isupper()


def is_scale(labels: tuple[str, ...]) -> bool:
    """Labels that are a run of at least three consecutive integers (``'1'`` .. ``'5'``)."""
    if len(labels) < 3 or not all(label.isdigit() for label in labels):
        return False
    first = int(labels[0])
    return [int(v) for v in labels] == list(range(first, first + len(labels)))


def describe(output: OutputSpec) -> str | None:
    """How a closed answer is answered, for EXPLAIN SEMANTIC VERBOSE; None for other tasks."""
    if output.task is not Task.CLASSIFY:
        return None
    if is_scale(output.labels):
        return f"scored on the scale {output.labels[0]}-{output.labels[-1]}"
    return "answered as a choice among [" + ", ".join(output.labels) + "]"
