"""The one tokenizer-free token estimate, for backends without a tokenizer and for admission.

Real BPE tokenizers give about four characters per English token; counting words too keeps
runs of short words from being undercounted. Backends with a tokenizer count exactly
(``Backend.count_tokens``); everything that only needs an estimate uses this.

Example:
    >>> estimate_tokens("four words right here"), estimate_tokens("")
    (6, 0)
"""

from __future__ import annotations

import functools

from duckdb_sem.llm.request import LLMRequest, Task

__all__ = ["estimate_tokens", "request_tokens", "shared_tokens"]


#: every ASCII character ``str.split()`` splits on (and a word needs one to end it)
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"


def estimate_tokens(text: str) -> int:
    """About four characters a token, at least one a word; 0 for empty text."""
    if not text:
        return 0
    by_chars = (len(text) + 3) // 4
    if text.isascii():
        # A text has at most one word more than separators. When that bound is under the
        # character estimate, the words need not be counted: splitting a 1,500-character row
        # into 250 strings was the sidecar's largest single cost per request
        # (benchmarks/bench_sidecar_load.py); counting separators makes no objects.
        raw = text.encode("ascii")
        if len(raw) - len(raw.translate(None, _ASCII_SPACE)) < by_chars:
            return by_chars
    return max(len(text.split()), by_chars)


@functools.lru_cache(maxsize=1024)
def shared_tokens(text: str) -> int:
    """:func:`estimate_tokens` of a text that many requests share (an operator's prefix),
    remembered: every row of an operator asks it again."""
    return estimate_tokens(text)


def request_tokens(request: LLMRequest) -> int:
    """A request's prompt plus the most output it may produce (one token for a decision)."""
    output = 1 if request.output.task is Task.DECIDE else max(1, request.params.max_tokens)
    return shared_tokens(request.prefix) + estimate_tokens(request.row) + output
