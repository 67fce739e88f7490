"""The ``vllm:`` backend's sampling parameters: what each kind of request is constrained to.

A decision is one token among the yes/no tokens (``allowed_token_ids``), with its top
log-probabilities. A closed answer (``Task.CLASSIFY``: an ENUM, a BOOLEAN map, a named scale,
``sem_classify``'s labels) is decoded as a structured-output *choice* among its labels, so the
text is exactly one label. A typed answer (every SQL type but VARCHAR) is decoded under the
type's JSON schema (``outputs.json_schema``), so it parses. vLLM spells the constraint
``StructuredOutputsParams`` (``SamplingParams(structured_outputs=...)``, 0.10 and later) or,
before, ``GuidedDecodingParams`` (``guided_decoding=``); a vLLM with neither generates free
text, which is parsed and checked as before, and :func:`structured_kind` says ``none`` (part
of the backend identity, and logged once).

Example: ``ENUM('positive', 'negative')`` becomes
``SamplingParams(..., structured_outputs=StructuredOutputsParams(choice=['positive', 'negative']))``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from duckdb_sem.backends.base import RetryPolicy
from duckdb_sem.llm.outputs import json_schema, parse_type
from duckdb_sem.llm.request import LLMRequest, Task

__all__ = ["sampling_params", "structured_kind"]

log = logging.getLogger(__name__)


def structured_kind(vllm: Any) -> str:
    """How this vLLM takes a structured-output constraint: ``structured_outputs``,
    ``guided_decoding`` or ``none``."""
    module = getattr(vllm, "sampling_params", None)
    if getattr(module, "StructuredOutputsParams", None) is not None:
        return "structured_outputs"
    if getattr(module, "GuidedDecodingParams", None) is not None:
        return "guided_decoding"
    return "none"


def sampling_params(
    vllm: Any,
    request: LLMRequest,
    attempt: int,
    *,
    retry: RetryPolicy,
    top_logprobs: int,
    answer_ids: Sequence[int],
) -> Any:
    """``vllm.SamplingParams`` for try ``attempt`` of ``request`` (a retry: new seed, more
    heat)."""
    if request.output.task is Task.DECIDE:
        return vllm.SamplingParams(
            max_tokens=1, temperature=0.0, logprobs=top_logprobs, allowed_token_ids=list(answer_ids)
        )
    p = request.params
    temperature = p.temperature if attempt == 0 else retry.retry_temperature
    constraint = _constraint(vllm, request)
    return vllm.SamplingParams(
        max_tokens=p.max_tokens, temperature=temperature, seed=p.seed + attempt, **constraint
    )


@functools.cache
def _warn_unconstrained() -> None:
    """Said once per process: a vLLM without structured outputs."""
    log.warning(
        "this vLLM has no structured outputs (StructuredOutputsParams or GuidedDecodingParams); "
        "typed and closed answers are generated free and parsed (upgrade vLLM to constrain them)"
    )


def _constraint(vllm: Any, request: LLMRequest) -> dict[str, Any]:
    """The ``SamplingParams`` keyword that constrains ``request``'s answer, if any."""
    spec = parse_type(request.output.sql_type)
    wanted: dict[str, Any]
    if request.output.task is Task.CLASSIFY:
        wanted = {"choice": list(request.output.labels)}
    elif not spec.is_text:
        wanted = {"json": json_schema(spec)}
    else:
        return {}  # free text: nothing to constrain
    kind = structured_kind(vllm)
    if kind == "none":
        _warn_unconstrained()
        return {}
    module = vllm.sampling_params
    if kind == "structured_outputs":
        return {"structured_outputs": module.StructuredOutputsParams(**wanted)}
    return {"guided_decoding": module.GuidedDecodingParams(**wanted)}
