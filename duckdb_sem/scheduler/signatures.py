"""Signatures of LLM work above the single request: operators, batches and subplans.

A request's signature (:meth:`LLMRequest.signature`) hashes everything that determines its
answer, so identical requests of different queries, tables or row orders match. Above it:

- :func:`operator_signature` hashes an operator's kind, template, output type, decoding
  parameters and backend, plus the signatures of its predecessors (HeraSys' node signature), so
  two plans match only when their whole upstream subplans match;
- :func:`batch_signature` hashes an operator signature with the *set* of its input requests'
  signatures, so the same batch recognised in another query (in any row order) matches.

Example:
    >>> scan = input_signature(["a", "b"])
    >>> f = operator_signature("test:", "filter", "{0} is good", predecessors=[scan])
    >>> f == operator_signature("test:", "filter", "{0} is good", predecessors=[scan])
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from duckdb_sem.llm.request import DecodingParams

__all__ = ["batch_signature", "input_signature", "operator_signature"]


def _hash(parts: object) -> str:
    payload = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def input_signature(rows: Iterable[str]) -> str:
    """A base relation's signature: its rendered rows as a multiset (row order ignored)."""
    return _hash(["input", sorted(rows)])


def operator_signature(
    backend_id: str,
    kind: str,
    template: str,
    *,
    output_type: str = "",
    params: DecodingParams | None = None,
    predecessors: Sequence[str] = (),
) -> str:
    """An operator node's signature, covering its whole upstream subplan via ``predecessors``."""
    p = params or DecodingParams()
    return _hash(
        [
            "operator",
            backend_id,
            kind,
            template,
            output_type,
            [p.max_tokens, p.temperature, p.seed],
            list(predecessors),  # order kept: a join's left and right inputs differ
        ]
    )


def batch_signature(operator: str, request_signatures: Iterable[str]) -> str:
    """One SEU's signature: its operator's and its requests' (as a set: row order ignored)."""
    return _hash(["batch", operator, sorted(set(request_signatures))])
