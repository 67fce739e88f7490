"""Many chat requests in one HTTP request: vLLM's ``POST /v1/chat/completions/batch``.

vLLM's OpenAI-compatible server takes a list of conversations in ``messages`` and the other
fields of one chat request (sampling, ``logprobs``, ``response_format``, ``priority``) for all
of them; it runs each conversation as its own engine request (so continuous batching and the
prefix cache see the same requests as N single calls) and answers one ``choices`` entry per
conversation, ``index`` 0..N-1, with one ``usage`` for the whole batch. One bad conversation
fails the whole batch. Sending an SEU's rows this way costs the client one HTTP round trip per
batch instead of one per row: the HTTP client, not the scheduler, was most of the sidecar's
CPU per request against real servers (``docs/scheduler.md``, "The sidecar's ceiling").

This module builds the batch body from the single-request bodies (:func:`batch_key` groups the
requests that may share one) and splits the answer back into one single-request answer per
conversation (:func:`split_answer`). The batch's ``usage`` is shared out over its rows in
proportion to their lengths (prompt and answer characters), so totals (``con.stats()``,
EXPLAIN ANALYZE) are the server's and a row's share is an estimate.

Example:
    >>> bodies = [{"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": t}]}
    ...           for t in ("a", "b")]
    >>> batch_body(bodies)["messages"]
    [[{'role': 'user', 'content': 'a'}], [{'role': 'user', 'content': 'b'}]]
    >>> shares(10, [1, 3])
    [2, 8]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BATCH_PATH",
    "NO_ROUTE",
    "REFUSED",
    "batch_body",
    "batch_key",
    "chunks",
    "shares",
    "split_answer",
]

BATCH_PATH = "/chat/completions/batch"
#: statuses that mean the server has no batch route (an older vLLM, another server)
NO_ROUTE = (404, 405, 501)
#: statuses of a batch refused as a whole: one conversation may be at fault, so its rows are
#: sent one by one, each then answered or failed on its own
REFUSED = (400, 413, 422)


def batch_key(body: dict[str, Any]) -> str:
    """What the requests of one batch share: every field of the body but its messages."""
    return json.dumps({k: v for k, v in body.items() if k != "messages"}, sort_keys=True)


def batch_body(bodies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One batch request of ``bodies`` (which share :func:`batch_key`)."""
    batch = {k: v for k, v in bodies[0].items() if k != "messages"}
    batch["messages"] = [body["messages"] for body in bodies]
    return batch


def chunks(count: int, most: int) -> list[range]:
    """``range(count)`` cut into the fewest runs of at most ``most``, of even sizes."""
    parts = max(1, -(-count // max(1, most)))
    size, extra = divmod(count, parts)
    runs, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        runs.append(range(start, end))
        start = end
    return [r for r in runs if len(r)]


def shares(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` into integers that sum to it (largest
    remainder first)."""
    if not weights:
        return []
    whole = sum(weights)
    if whole <= 0:
        weights, whole = [1] * len(weights), len(weights)
    exact = [total * w / whole for w in weights]
    out = [int(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: out[i] - exact[i])
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def split_answer(data: dict[str, Any], bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch answer ``data`` as one single-request answer per body, in order.

    Raises ValueError when the choices do not match the conversations one to one (the caller
    treats that as an unreadable answer)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or len(choices) != len(bodies):
        got = len(choices) if isinstance(choices, list) else "no"
        raise ValueError(f"{got} choices for {len(bodies)} conversations")
    by_index: dict[int, dict[str, Any]] = {}
    for choice in choices:
        index = choice.get("index") if isinstance(choice, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(bodies) or index in by_index:
            raise ValueError(f"choice index {index!r} is not one of 0..{len(bodies) - 1}, once")
        by_index[index] = choice
    ordered = [by_index[i] for i in range(len(bodies))]
    usage = data.get("usage") or {}
    prompt_weights = [_prompt_chars(body) for body in bodies]
    prompt = shares(_int(usage, "prompt_tokens"), prompt_weights)
    completion = shares(
        _int(usage, "completion_tokens"),
        [len(_text(choice)) + 4 for choice in ordered],  # a token ~ 4 characters, +1 (end)
    )
    details = usage.get("prompt_tokens_details")
    cached_total = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = shares(cached_total if isinstance(cached_total, int) else 0, prompt_weights)
    return [
        {
            "choices": [choice],
            "usage": {
                "prompt_tokens": p,
                "completion_tokens": c,
                "total_tokens": p + c,
                "prompt_tokens_details": {"cached_tokens": min(h, p)},
            },
        }
        for choice, p, c, h in zip(ordered, prompt, completion, cached, strict=True)
    ]


def _prompt_chars(body: dict[str, Any]) -> int:
    """A conversation's length in characters: shares go by proportion, and estimated tokens
    are characters over four."""
    messages = body.get("messages") or []
    return sum(len(str(m.get("content", ""))) for m in messages) + 4


def _text(choice: dict[str, Any]) -> str:
    message = choice.get("message")
    return str((message or {}).get("content") or "") if isinstance(message, dict) else ""


def _int(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value > 0 else 0
