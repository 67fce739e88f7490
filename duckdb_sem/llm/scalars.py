"""Reading one scalar answer: numbers, booleans, dates, JSON and ENUM labels from model text.

Each reader takes the model's raw text (or a value a JSON answer already decoded) and returns
the Python value of its SQL type, or raises :class:`OutputParseError` saying what it got.
Readers are lenient where the model may wrap the answer (``The answer is 7.``, a quoted label,
a date inside a sentence) and strict about the value itself (an ENUM answer is one of its
labels, a DATE a real calendar date in ISO 8601 ``YYYY-MM-DD``, JSON valid JSON).

Example:
    >>> read_scalar("DATE", "Released on 1999-03-31.")
    datetime.date(1999, 3, 31)
    >>> read_label('"Positive"', ("positive", "negative"))
    'positive'
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

__all__ = [
    "OutputParseError",
    "close_json",
    "dump_json",
    "read_date_value",
    "read_json",
    "read_label",
    "read_scalar",
]

_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_WRAPPING = " \t\r\n`'\".,;:!?()[]{}"


class OutputParseError(ValueError):
    """Model output that does not parse into the requested type (retried, then NULL)."""


def read_scalar(sql: str, text: str) -> Any:
    """``text`` as a value of the scalar type ``sql`` (not ENUM: see :func:`read_label`)."""
    cleaned = text.strip().strip("`").strip()
    if sql == "VARCHAR":
        return cleaned
    if sql == "JSON":
        return read_json(text)
    if sql == "DATE":
        return _read_date(cleaned)
    if sql == "BOOLEAN":
        word = re.sub(r"[^a-z0-9]", "", cleaned.lower().split()[0]) if cleaned.split() else ""
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise OutputParseError(f"expected yes/no or true/false, got {text[:60]!r}")
    match = _NUMBER.search(cleaned.replace(",", ""))
    if match is None:
        raise OutputParseError(f"expected a number, got {text[:60]!r}")
    number = float(match.group())
    if sql == "DOUBLE":
        return number
    if number != int(number):
        raise OutputParseError(f"expected an integer, got {match.group()!r}")
    value = int(number)
    if sql == "INTEGER" and not -(2**31) <= value < 2**31:
        raise OutputParseError(f"integer {value} out of INTEGER range")
    return value


def _read_date(text: str) -> datetime.date:
    match = _DATE.search(text)
    if match is None:
        raise OutputParseError(f"expected a date as YYYY-MM-DD, got {text[:60]!r}")
    try:
        return datetime.date(*(int(part) for part in match.groups()))
    except ValueError as err:
        raise OutputParseError(f"{match.group()!r} is not a calendar date ({err})") from None


def read_date_value(data: Any) -> datetime.date:
    """A DATE from a decoded JSON value (a string) or a value already read."""
    if isinstance(data, datetime.datetime):
        return data.date()
    if isinstance(data, datetime.date):
        return data
    if not isinstance(data, str):
        raise OutputParseError(f"expected a date string, got {type(data).__name__}")
    return _read_date(data)


def read_label(text: str, labels: tuple[str, ...]) -> str:
    """The label ``text`` answers: itself (quotes, spaces and end punctuation aside, any case),
    else the one label named as a whole word in it; an error when none or several are."""
    stripped = text.strip().strip(_WRAPPING)
    if stripped in labels:
        return stripped
    folded = {label.casefold(): label for label in labels}
    if stripped.casefold() in folded:
        return folded[stripped.casefold()]
    named = [
        label
        for label in labels
        if re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text, flags=re.IGNORECASE)
    ]
    if len(named) == 1:
        return named[0]
    raise OutputParseError(f"expected one of {', '.join(labels)}, got {text[:60]!r}")


def read_json(text: str) -> str:
    """Valid JSON in ``text`` (the whole text, else the first object or array in it), as
    compact JSON text. Raw control characters inside strings (a newline a model wrote) are
    read as if escaped."""
    stripped = text.strip()
    if stripped.startswith("```"):  # a fenced block: ```json ... ```
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        return dump_json(json.loads(stripped, strict=False))
    except json.JSONDecodeError:
        pass
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if starts:
        try:
            value, _ = json.JSONDecoder(strict=False).raw_decode(stripped[min(starts) :])
            return dump_json(value)
        except json.JSONDecodeError as err:
            raise OutputParseError(f"invalid JSON ({err.msg}) in {text[:60]!r}") from None
    raise OutputParseError(f"expected JSON, got {text[:60]!r}")


def dump_json(value: Any) -> str:
    """A decoded JSON value as the text a JSON column holds."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_LITERALS = ("true", "false", "null")


def close_json(prefix: str) -> str:
    """``prefix`` of a JSON value (what a grammar-constrained decode cut off at ``max_tokens``
    wrote) completed into JSON: an open string closed, a dangling key given ``null``, a
    trailing comma dropped, a cut literal or number finished, open arrays and objects closed.

    Example:
        >>> close_json('{"tone": "positive", "tags": ["a", "b')
        '{"tone": "positive", "tags": ["a", "b"]}'
    """
    stack: list[str] = []  # "[" or "{" per open container
    key_next = False  # in an object, where a key (not a value) comes next
    after_key = False  # a key was written and its ":" not yet
    in_string = escaped = False
    for ch in prefix:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                after_key, key_next = key_next, False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append(ch)
            key_next = ch == "{"
        elif ch in "]}":
            if stack:
                stack.pop()
        elif ch == ":":
            after_key = False
        elif ch == ",":
            key_next = bool(stack) and stack[-1] == "{"
    out = prefix
    if in_string:
        if escaped:  # a backslash whose escape was cut off
            out = out[:-1]
        cut = re.search(r"(\\+)u[0-9a-fA-F]{0,3}$", out)
        if cut is not None and len(cut.group(1)) % 2:  # a cut \uXXXX escape
            out = out[: cut.end(1) - 1]
        out += '"'
        after_key, key_next = key_next, False
    out = out.rstrip()
    word = re.search(r"(?<![\d.])[a-z]+$", out)  # a literal, not a number's exponent
    if not in_string and word is not None:
        full = next((lit for lit in _LITERALS if lit.startswith(word.group())), "null")
        out = out[: word.start()] + full
    if re.search(r"(\d[.eE][-+]?|-)$", out):  # a number cut after its sign, point or exponent
        out += "0"
    if out.endswith(","):
        out = out[:-1]
    if after_key:
        out += ": null"
    elif out.endswith(":"):
        out += " null"
    return out + "".join("]" if c == "[" else "}" for c in reversed(stack))
