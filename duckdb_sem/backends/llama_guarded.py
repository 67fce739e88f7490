"""Greedy decoding under an :class:`~duckdb_sem.llm.guard.OutputGuard` (``llama:``).

At each step the candidates are taken in order of logit (ties by token id, so the result is
deterministic), and the first whose text keeps the output passing the guard is emitted: a
token that would complete a span longer than ``max_copy`` characters of a record, a span the
output already holds, or a repeated line is never emitted. The end-of-turn token is taken only
when the last line is not a repeat. When none of the ``TOP`` best candidates passes, decoding
stops there (what was emitted already passes).

Example: over the record "A gorgeous, moving film with terrific acting." the model may write
"A gorgeous, moving film" (20 characters) but not "A gorgeous, moving film with".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from duckdb_sem.llm.guard import GuardCheck

__all__ = ["TOP", "pick_allowed", "sample_guarded"]

#: candidates tried per step before decoding stops
TOP = 64


def pick_allowed(
    ranked: list[int],
    out: list[int],
    text_of: Callable[[list[int]], str],
    check: GuardCheck,
    stop_ids: frozenset[int],
) -> int | None:
    """The first of ``ranked`` that keeps ``out`` passing ``check`` (a stop token: when the
    finished text passes), or None."""
    for token in ranked:
        if token in stop_ids:
            if check.allows(text_of(out), final=True):
                return token
        elif check.allows(text_of([*out, token])):
            return token
    return None


def sample_guarded(
    llama: Any,
    prompt: list[int],
    *,
    max_tokens: int,
    stop_ids: frozenset[int],
    check: GuardCheck,
    logits: Callable[[], Any],
) -> list[int]:
    """The tokens greedy decoding under ``check`` emits after ``prompt`` (stop token excluded).

    ``logits`` reads the last position's logits (a ctypes float array of ``n_vocab``).
    """
    import numpy as np

    n_vocab = llama.n_vocab()

    def text_of(tokens: list[int]) -> str:
        raw: bytes = llama.detokenize(tokens)
        return raw.decode("utf-8", "replace")

    llama.n_tokens = 0
    llama.eval(prompt)
    out: list[int] = []
    while len(out) < max_tokens:
        row = np.ctypeslib.as_array(logits(), shape=(n_vocab,))
        top = np.argpartition(-row, TOP)[:TOP]
        ranked = sorted((int(t) for t in top), key=lambda t: (-float(row[t]), t))
        token = pick_allowed(ranked, out, text_of, check, stop_ids)
        if token is None or token in stop_ids:
            break
        out.append(token)
        llama.eval([token])
    return out
