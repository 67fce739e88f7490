"""The LLM request contract shared by the surface, the scheduler and every backend.

A request is a *shared prefix* (the operator's instruction, identical for every row of an
operator, so backends can reuse its KV cache) plus a *row part* (the rendered template), an
output specification and decoding parameters. It also carries the unrendered template
(:class:`RowTemplate`: literal pieces and field names), so a backend can calibrate decisions per
template (content-free rows built from the template with its fields blanked) and keep the text
before the first field in its KV-shared prefix. Its signature hashes all of these together with
the backend's identity: equal signatures mean equal answers, which is what the cache and
cross-query fusion rely on.
"""

from __future__ import annotations

import datetime
import enum
import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from duckdb_sem.llm.guard import OutputGuard

__all__ = [
    "CALIBRATION_TEXTS",
    "CONTENT_FREE_FILLERS",
    "Completion",
    "DecodingParams",
    "LLMRequest",
    "OperatorKind",
    "OutputSpec",
    "RowTemplate",
    "Task",
    "json_default",
    "signatures",
]

#: Neutral values for a template's fields in content-free calibration rows (Zhao et al. 2021
#: average "N/A", "" and "[MASK]"); a decision's threshold is the mean margin of these rows.
CONTENT_FREE_FILLERS: tuple[str, ...] = ("", "N/A", "[MASK]", "...")

#: Real-looking but irrelevant texts (notices, instructions, facts: a domain no operator is
#: likely to ask about) that also fill a one-row template's fields for calibration. Content-free
#: rows alone put the threshold near one end of a small model's margin range (an empty review
#: is "not favourable", an "N/A" package "not a game"), and where depends on the wording; these
#: rows are as plainly off-topic but read like data. Fixed and versioned with the backends'
#: calibration name: the same template gets the same offset whatever the query. Chosen on
#: tuning rows only (bundled reviews 1-100, our own phrasings, gemma-3-270m): on 3 filter
#: phrasings the yes-share went from 0.59 / 0.71 / 0.92 to 0.60 / 0.56 / 0.59 (true 0.51) and
#: accuracy from 0.70 / 0.70 / 0.57 to 0.71 / 0.79 / 0.70. Not used for pair templates (joins):
#: two unrelated texts are a plain "no" pair, which on the same rows pulled the threshold down
#: (SmolLM2 join yes-share 0.19 -> 0.53, true 0.25).
CALIBRATION_TEXTS: tuple[str, ...] = (
    "The 8:15 train to Leeds will depart from platform 4 today.",
    "Preheat the oven to 200 degrees and grease a baking tray.",
    "Tomorrow will be cloudy with light rain in the afternoon.",
    "The meeting room on the second floor is being repainted this week.",
    "Insert screw B into the left panel and tighten it by hand.",
    "The library closes at six on Saturdays.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Our office will be closed on Monday for the public holiday.",
)


class Task(enum.Enum):
    """What the backend is asked to do."""

    DECIDE = "decide"  # a yes/no decision, scored from the answer tokens' log-probabilities
    GENERATE = "generate"  # free generation, parsed into ``OutputSpec.sql_type``
    CLASSIFY = "classify"  # one of ``OutputSpec.labels``, scored rather than generated
    EMBED = "embed"  # a vector for ``row`` from an embedding model (``backends.embedder``)


class OperatorKind(enum.Enum):
    FILTER = "filter"
    MAP = "map"
    JOIN = "join"
    AGG = "agg"
    EMBED = "embed"  # not an LLM operator: the text of ``row`` to an embedding vector


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The shape of an answer: a task, the DuckDB type the answer is parsed into, and for a
    closed answer set (``Task.CLASSIFY``) the labels, one of which is the answer."""

    task: Task
    sql_type: str = "VARCHAR"
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.task is Task.CLASSIFY and len(set(self.labels)) < 2:
            raise ValueError("a closed answer set needs at least two distinct labels")

    @staticmethod
    def decision() -> OutputSpec:
        return OutputSpec(Task.DECIDE, "BOOLEAN")

    @staticmethod
    def choice(labels: tuple[str, ...], sql_type: str = "VARCHAR") -> OutputSpec:
        """One of ``labels`` (parsed into ``sql_type``: integer scales are labels '1'..'5')."""
        return OutputSpec(Task.CLASSIFY, sql_type, tuple(labels))


@dataclass(frozen=True, slots=True)
class RowTemplate:
    """An operator's template before rendering: ``len(pieces) == len(fields) + 1``.

    Example:
        >>> RowTemplate(("Is ", " positive?"), ("text",)).render(["Dune"])
        'Is Dune positive?'
    """

    pieces: tuple[str, ...]
    fields: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.pieces) != len(self.fields) + 1:
            raise ValueError("a template has one more literal piece than fields")

    def render(self, values: Sequence[str]) -> str:
        out = [self.pieces[0]]
        for value, piece in zip(values, self.pieces[1:], strict=True):
            out += [value, piece]
        return "".join(out)

    def content_free(self) -> tuple[str, ...]:
        """Rows with every field replaced by one neutral filler, one row per filler."""
        return tuple(self.render([f] * len(self.fields)) for f in CONTENT_FREE_FILLERS)

    def irrelevant(self) -> tuple[str, ...]:
        """Rows with every field filled from :data:`CALIBRATION_TEXTS`, one row per text."""
        n = len(CALIBRATION_TEXTS)
        return tuple(
            self.render([CALIBRATION_TEXTS[(i + k) % n] for k in range(len(self.fields))])
            for i in range(n)
        )

    @property
    def lead(self) -> str:
        """The text before the first field: the same for every row."""
        return self.pieces[0]


@dataclass(frozen=True, slots=True)
class DecodingParams:
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One unit of LLM work: one row through one semantic operator."""

    operator: OperatorKind
    prefix: str
    row: str
    output: OutputSpec
    params: DecodingParams = field(default_factory=DecodingParams)
    #: the unrendered template ``row`` came from; None for hand-built requests
    template: RowTemplate | None = None
    #: what generated text may not contain (a sem_agg's records; see :mod:`.guard`)
    guard: OutputGuard | None = None

    def first_side(self, row: str | None = None) -> str | None:
        """A pair's (a join's) text up to the end of the template text after its first field,
        for ``row`` (default: this request's row); None for other requests.

        ``'First: {a.t} Second: {b.t}'`` rendered ``'First: x Second: y'`` gives ``'First: x
        Second: '``. The first field's value is the text between the lead and the first
        occurrence of the next piece, so the cut is a function of the row alone. Pairs that
        share it are asked next to each other (``runtime.submit``), and backends that keep a
        KV cache evaluate it once for them (``backends/llama.py``).
        """
        row = self.row if row is None else row
        template = self.template
        if self.operator is not OperatorKind.JOIN or template is None or len(template.fields) < 2:
            return None
        lead, after = template.pieces[0], template.pieces[1]
        if not after.strip() or not row.startswith(lead):
            return None
        end = row.find(after, len(lead))
        return None if end < 0 else row[: end + len(after)]

    def calibration_rows(self) -> tuple[str, ...]:
        """The rows whose mean score is this request's decision threshold: its template's
        content-free rows, plus irrelevant-text rows unless it decides about a pair (a join);
        an empty row when it has no template."""
        template = self.template
        if template is None or not template.fields:
            return ("",)
        if self.operator is OperatorKind.JOIN:
            return template.content_free()
        return template.content_free() + template.irrelevant()

    def signature(self, backend_id: str) -> str:
        """A stable hash of everything that determines the answer on ``backend_id``: the
        digest of what the rows of one operator share (computed once per operator), then the
        row itself, so a row costs one short hash."""
        return self._row_signature(self._shared(backend_id))

    def _shared(self, backend_id: str) -> bytes:
        return _shared_digest(backend_id, self.operator, self.prefix, self.output, self.params,
                              self.template.pieces if self.template is not None else None)  # fmt: skip

    def _row_signature(self, shared: bytes) -> str:
        digest = hashlib.sha256(shared)
        digest.update(self.row.encode("utf-8", "surrogatepass"))
        if self.guard is not None:
            digest.update(b"\x00guard" + self.guard.digest())
        return digest.hexdigest()


def signatures(requests: Sequence[LLMRequest], backend_id: str) -> list[str]:
    """``[r.signature(backend_id) for r in requests]``, with the shared digest looked up once
    for each run of rows that share their operator's parts (the same objects, as an SEU's rows
    decoded by the sidecar do): hashing the lookup's key was a cost per row."""
    out: list[str] = []
    last: LLMRequest | None = None
    shared = b""
    for r in requests:
        if not (
            last is not None
            and r.prefix is last.prefix
            and r.output is last.output
            and r.params is last.params
            and r.template is last.template
            and r.operator is last.operator
        ):
            shared = r._shared(backend_id)
            last = r
        out.append(r._row_signature(shared))
    return out


@functools.lru_cache(maxsize=4096)
def _shared_digest(
    backend_id: str,
    operator: OperatorKind,
    prefix: str,
    output: OutputSpec,
    params: DecodingParams,
    pieces: tuple[str, ...] | None,
) -> bytes:
    extra: list[Any] = []
    if pieces is not None:
        # pieces only: backends use nothing else, and a template with named fields
        # (the estimator's) and its positional form (the engine's) must share answers
        extra.append(list(pieces))
    if output.labels:
        extra.append(list(output.labels))
    payload = json.dumps(
        [backend_id, operator.value, prefix, output.task.value, output.sql_type,
         params.max_tokens, params.temperature, params.seed, *extra],
        ensure_ascii=False,
        separators=(",", ":"),
    )  # fmt: skip
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).digest() + b"\x00"


@dataclass(frozen=True, slots=True)
class Completion:
    """A backend's answer to one request.

    ``value`` is the parsed Python value (``bool`` for decisions, or the value of the requested
    SQL type), ``None`` when the output could not be parsed after all retries; then ``error``
    says why. ``text`` is the raw model output, kept for debugging and the cache.
    ``cached_tokens``: how many of ``prompt_tokens`` the backend took from its KV or prefix
    cache instead of evaluating them (a fact of this evaluation, not of the answer: the
    persistent cache does not keep it).
    """

    value: Any
    text: str
    prompt_tokens: int
    completion_tokens: int
    score: float | None = None
    error: str | None = None
    cached_tokens: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "value": self.value,
                "text": self.text,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "score": self.score,
                "error": self.error,
            },
            ensure_ascii=False,
            default=json_default,
        )

    @staticmethod
    def from_json(data: str) -> Completion:
        raw = json.loads(data)
        return Completion(
            value=raw["value"],
            text=raw["text"],
            prompt_tokens=int(raw["prompt_tokens"]),
            completion_tokens=int(raw["completion_tokens"]),
            score=raw.get("score"),
            error=raw.get("error"),
        )


def json_default(value: object) -> str:
    """How an answer's non-JSON value is written (a DATE as ISO text: ``outputs.to_arrow``
    reads it back), for ``json.dumps(default=...)``."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a JSON value")
