"""What a generated aggregate may not contain: a line it already wrote, or a copied span.

A :class:`OutputGuard` travels on a ``sem_agg`` request: its ``sources`` are the records being
aggregated. A text *passes* the guard when, compared case-insensitively with runs of
whitespace read as one space (:func:`normalize`),

- no span longer than ``max_copy`` characters occurs in any one source (no copied sentence), nor
  twice in the text itself (no loop: "The film is great. The film is great."), and
- no line repeats an earlier one (lines compared after dropping list markers such as ``2.`` or
  ``-``, so "1. Great" and "2. Great" are the same line; blank lines never count).

Backends that decode token by token (``llama:``) enforce it while decoding: a token is taken
only when the text with it still passes (:meth:`GuardCheck.allows`); the others generate
freely and the engine drops repeated lines afterwards (:func:`drop_repeated_lines`).

Example:
    >>> check = GuardCheck(OutputGuard(("A gorgeous, moving film with terrific acting.",)))
    >>> check.allows("Critics praise the acting.")
    True
    >>> check.allows("A gorgeous, moving film with")
    False
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_COPY",
    "GuardCheck",
    "OutputGuard",
    "drop_repeated_lines",
    "longest_copied_span",
    "normalize",
    "repeated_lines",
]

#: the longest span (in normalized characters) a summary may share with one of its records
MAX_COPY = 20

_SPACE = re.compile(r"\s+")
_MARKER = re.compile(r"^(?:\d{1,3}[.):]|[-*\u2022])\s*")


def normalize(text: str) -> str:
    """Lower case, every run of whitespace one space: the form spans are compared in."""
    return _SPACE.sub(" ", text.lower())


def _line_key(line: str) -> str:
    return _MARKER.sub("", normalize(line).strip()).strip()


@dataclass(frozen=True, slots=True)
class OutputGuard:
    """The records an aggregate's answer must not copy from, and how long a span may be."""

    sources: tuple[str, ...]
    max_copy: int = MAX_COPY

    def __post_init__(self) -> None:
        if self.max_copy < 1:
            raise ValueError("max_copy must be at least 1")

    def digest(self) -> bytes:
        """What the guard adds to a request's signature."""
        h = hashlib.sha256(str(self.max_copy).encode())
        for source in self.sources:
            h.update(b"\x1f" + source.encode("utf-8", "surrogatepass"))
        return h.digest()


class GuardCheck:
    """An :class:`OutputGuard` prepared for checking many texts (the sources' spans indexed)."""

    def __init__(self, guard: OutputGuard) -> None:
        self.guard = guard
        self._width = guard.max_copy + 1
        self._spans = {
            text[i : i + self._width]
            for text in (normalize(s) for s in guard.sources)
            for i in range(len(text) - self._width + 1)
        }

    def copies(self, text: str) -> bool:
        """Whether ``text`` holds a span longer than ``max_copy`` of a source or of itself."""
        norm, width = normalize(text), self._width
        seen: set[str] = set()
        for i in range(len(norm) - width + 1):
            span = norm[i : i + width]
            if span in self._spans or span in seen:
                return True
            seen.add(span)
        return False

    def allows(self, text: str, *, final: bool = False) -> bool:
        """Whether ``text`` passes: no copied span, no repeated finished line (with ``final``,
        the last line counts as finished too)."""
        if self.copies(text):
            return False
        lines = text.split("\n")
        return repeated_lines("\n".join(lines if final else lines[:-1])) == 0


def repeated_lines(text: str) -> int:
    """How many non-blank lines of ``text`` repeat an earlier one (list markers ignored)."""
    seen: set[str] = set()
    repeats = 0
    for line in text.split("\n"):
        key = _line_key(line)
        if not key:
            continue
        repeats += key in seen
        seen.add(key)
    return repeats


def drop_repeated_lines(text: str) -> str:
    """``text`` without the lines that repeat an earlier one.

    Example:
        >>> drop_repeated_lines("1. Fun\\n2. Fun\\nDull ending")
        '1. Fun\\nDull ending'
    """
    seen: set[str] = set()
    kept: list[str] = []
    for line in text.split("\n"):
        key = _line_key(line)
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def longest_copied_span(text: str, sources: Sequence[str]) -> int:
    """The length of the longest span of ``text`` found in one of ``sources`` (normalized)."""
    norm = normalize(text)
    normalized = [normalize(s) for s in sources]
    best, start = 0, 0
    for end in range(1, len(norm) + 1):
        while start < end and not any(norm[start:end] in s for s in normalized):
            start += 1
        best = max(best, end - start)
    return best
