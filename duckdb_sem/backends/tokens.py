"""The one tokenizer-free token estimate, for backends without a tokenizer and for admission.

Real BPE tokenizers give about four characters per English token; counting words too keeps
runs of short words from being undercounted. Backends with a tokenizer count exactly
(``Backend.count_tokens``); everything that only needs an estimate uses this.

Example:
    >>> estimate_tokens("four words right here"), estimate_tokens("")
    (6, 0)
"""

from __future__ import annotations

from duckdb_sem.llm.request import LLMRequest, Task

__all__ = ["estimate_tokens", "request_tokens"]


def estimate_tokens(text: str) -> int:
    """About four characters a token, at least one a word; 0 for empty text."""
    if not text:
        return 0
    return max(len(text.split()), (len(text) + 3) // 4)


def request_tokens(request: LLMRequest) -> int:
    """A request's prompt plus the most output it may produce (one token for a decision)."""
    output = 1 if request.output.task is Task.DECIDE else max(1, request.params.max_tokens)
    return estimate_tokens(request.prefix) + estimate_tokens(request.row) + output
