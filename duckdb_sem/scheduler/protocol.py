"""The sidecar's wire format: SEUs, results and errors as JSON.

One SEU is one ``POST /v1/seu`` whose response carries every completion, so a batch of LLM
work costs one round trip. Errors travel as ``{"error": {"type": ..., "message": ...}}`` and are
raised on the client as the same class of the error tree (:mod:`duckdb_sem.errors`).

=================  ======  ==========================================================
path               method  body -> answer
=================  ======  ==========================================================
``/v1/health``     GET     -> ``{"ok": true, "backend_id": ..., "policy": ...}``
``/v1/seu``        POST    an SEU -> ``{"completions": [...], "served": [...]}``
``/v1/cancel``     POST    ``{"query_id": ...}`` -> ``{"ok": true}``
``/v1/finish``     POST    ``{"query_id": ...}`` -> ``{"ok": true}``
``/v1/status``     GET     -> the scheduler's status snapshot (``duckdb-sem top``)
``/metrics``       GET     -> Prometheus text exposition
=================  ======  ==========================================================
"""

from __future__ import annotations

import json
from typing import Any

from duckdb_sem import errors
from duckdb_sem.llm.guard import OutputGuard
from duckdb_sem.llm.request import (
    Completion,
    DecodingParams,
    LLMRequest,
    OperatorKind,
    OutputSpec,
    RowTemplate,
    Task,
    json_default,
)
from duckdb_sem.scheduler.seu import SEU, Served, SEUResult

__all__ = [
    "decode_error",
    "decode_result",
    "decode_seu",
    "encode_error",
    "encode_result",
    "encode_seu",
]


def _request_to_json(r: LLMRequest) -> list[Any]:
    p = r.params
    return [
        r.operator.value,
        r.prefix,
        r.row,
        r.output.task.value,
        r.output.sql_type,
        p.max_tokens,
        p.temperature,
        p.seed,
        list(r.output.labels),
        None if r.template is None else [list(r.template.pieces), list(r.template.fields)],
        None if r.guard is None else [list(r.guard.sources), r.guard.max_copy],
    ]


#: what the rows of one operator share: operator, output, decoding, template, guard
_Shape = tuple[OperatorKind, OutputSpec, DecodingParams, RowTemplate | None, OutputGuard | None]


def _shape_from_json(raw: list[Any]) -> _Shape:
    op, _prefix, _row, task, sql_type, max_tokens, temperature, seed, *rest = raw
    # labels and template trail (absent from clients older than closed answers)
    labels = tuple(str(x) for x in rest[0]) if rest and rest[0] else ()
    unrendered = rest[1] if len(rest) > 1 else None
    guarded = rest[2] if len(rest) > 2 else None
    template = (
        None
        if not unrendered
        else RowTemplate(tuple(map(str, unrendered[0])), tuple(map(str, unrendered[1])))
    )
    return (
        OperatorKind(op),
        OutputSpec(Task(task), str(sql_type), labels),
        DecodingParams(int(max_tokens), float(temperature), int(seed)),
        template,
        None if not guarded else OutputGuard(tuple(map(str, guarded[0])), int(guarded[1])),
    )


def _request_from_json(raw: list[Any], shapes: dict[str, _Shape] | None = None) -> LLMRequest:
    """One request; ``shapes`` memoizes the parts the rows of an SEU share, so they are
    validated and built once per SEU rather than once per row."""
    key = repr([raw[0], *raw[3:]])
    shape = shapes.get(key) if shapes is not None else None
    if shape is None:
        shape = _shape_from_json(raw)
        if shapes is not None:
            shapes[key] = shape
    operator, output, params, template, guard = shape
    return LLMRequest(operator, str(raw[1]), str(raw[2]), output, params, template, guard)


def encode_seu(seu: SEU) -> bytes:
    # Operators send the same prefix for every row: send each distinct prefix once.
    prefixes = list(dict.fromkeys(r.prefix for r in seu.requests))
    index = {p: i for i, p in enumerate(prefixes)}
    requests = []
    for r in seu.requests:
        item = _request_to_json(r)
        item[1] = index[r.prefix]
        requests.append(item)
    body = {
        "query_id": seu.query_id,
        "operator": seu.operator,
        "connection": seu.connection,
        "remaining_cost": seu.remaining_cost,
        "prefixes": prefixes,
        "requests": requests,
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")


def decode_seu(data: bytes) -> SEU:
    body = json.loads(data)
    prefixes = body["prefixes"]
    shapes: dict[str, _Shape] = {}
    requests = []
    for item in body["requests"]:
        item = list(item)
        item[1] = prefixes[int(item[1])]
        requests.append(_request_from_json(item, shapes))
    return SEU(
        query_id=str(body["query_id"]),
        operator=str(body.get("operator", "")),
        requests=tuple(requests),
        remaining_cost=float(body.get("remaining_cost", 0.0)),
        connection=str(body.get("connection", "")),
    )


def _completion_to_json(c: Completion) -> list[Any]:
    return [c.value, c.text, c.prompt_tokens, c.completion_tokens, c.score, c.error,
            c.cached_tokens]  # fmt: skip


def encode_result(result: SEUResult) -> bytes:
    body = {
        "completions": [_completion_to_json(c) for c in result.completions],
        "served": [s.value for s in result.served],
    }
    return json.dumps(body, ensure_ascii=False, default=json_default).encode(
        "utf-8", "surrogatepass"
    )


def decode_result(data: bytes) -> SEUResult:
    body = json.loads(data)
    if "error" in body:
        raise decode_error(body)
    # a sidecar of a release before cached_tokens sends six fields
    completions = tuple(
        Completion(value, text, int(pt), int(ct), score, error, int(cached[0]) if cached else 0)
        for value, text, pt, ct, score, error, *cached in body["completions"]
    )
    return SEUResult(completions, tuple(Served(s) for s in body["served"]))


def encode_error(err: BaseException) -> bytes:
    name = type(err).__name__ if isinstance(err, errors.SemError) else "SchedulerError"
    message = str(err) if isinstance(err, errors.SemError) else f"{type(err).__name__}: {err}"
    return json.dumps({"error": {"type": name, "message": message}}).encode()


def decode_error(body: dict[str, Any]) -> errors.SemError:
    """The error-tree exception an error body stands for (SchedulerError when unknown)."""
    info = body.get("error") or {}
    cls = getattr(errors, str(info.get("type", "")), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.SemError)):
        cls = errors.SchedulerError
    return cls(f"{info.get('message', 'unknown error')} (from the scheduler sidecar)")
