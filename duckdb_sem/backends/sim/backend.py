"""``sim:``: a SIMULATED GPU server (answers from an oracle, time from a vLLM-like model).

It is not a model. Answers come from an oracle (labels supplied by a benchmark, or a seeded
hash with a configured selectivity); time comes from :mod:`.cost_model` under a named profile
and is accounted on a virtual clock (``virtual_seconds``), optionally slept in real time scaled
by ``time_scale``. Every description, log line and server response says SIMULATED.

Spec options: ``sim:PROFILE?selectivity=0.3&seed=1&time_scale=0.001&output_words=8``
``&malformed=0.0&labels=/path/labels.csv&positive=fresh``; injected transport faults
``&fault=timeout|hang|reset|429|500|truncate&fail_rate=0.2&hang_s=30`` (see :mod:`.faults`),
retried per ``&retries=4&retry_budget=60&retry_backoff=0.25`` (:mod:`~duckdb_sem.backends.retry`).

Example:
    >>> backend = from_spec(parse_spec("sim:default?selectivity=0.3"))
    >>> backend.describe().startswith("SIMULATED")
    True
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duckdb_sem.backends.base import RETRY_POLICY, Answers, Backend, Capacity, Load, RetryPolicy
from duckdb_sem.backends.output_retry import answer_with_retries
from duckdb_sem.backends.registry import BackendSpec, SpecOption, parse_spec
from duckdb_sem.backends.retry import (
    RETRY_OPTIONS,
    TRANSPORT_RETRY,
    TransportRetry,
    call_with_retry,
    policy_from_spec,
)
from duckdb_sem.backends.sim.blocks import prompt_block_hashes
from duckdb_sem.backends.sim.cost_model import SeqState
from duckdb_sem.backends.sim.engine import EngineStats, VirtualEngine
from duckdb_sem.backends.sim.faults import FaultPlan
from duckdb_sem.backends.sim.oracles import (
    HashOracle,
    LookupOracle,
    NoLabel,
    Oracle,
    estimate_tokens,
    unit_hash,
)
from duckdb_sem.backends.sim.profiles import SimProfile, get_profile
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.backends.tokens import shared_tokens
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.outputs import OutputParseError, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task, json_default

__all__ = ["OPTIONS", "SimAnswers", "SimBackend", "from_spec"]

logger = logging.getLogger(__name__)

OPTIONS = (
    SpecOption("selectivity", "share of yes decisions of the hash oracle (default 0.5)", True),
    SpecOption("seed", "seed of the hash oracle and of injected faults (default 0)", True),
    SpecOption("output_words", "words per generated answer (default 8)", True),
    SpecOption("malformed", "share of generated answers that do not parse (default 0)", True),
    SpecOption("labels", "CSV file of key,label answers (a lookup oracle)", True),
    SpecOption("positive", "labels that count as yes, |-separated", True),
    SpecOption("time_scale", "real seconds slept per simulated second (default 0)"),
    SpecOption("fault", "injected transport fault: timeout|hang|reset|429|500|truncate"),
    SpecOption("fail_rate", "share of batches the fault hits (default 1)"),
    SpecOption("hang_s", "seconds a hang fault lasts (default 30)"),
    *RETRY_OPTIONS,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimAnswers(Answers):
    oracle: str  # the oracle's identity: its rule, seed, labels
    malformed: float = 0.0


class SimBackend(Backend):
    """The SIMULATED backend; see the module docstring."""

    simulated = True

    def __init__(
        self,
        profile: SimProfile | str = "default",
        *,
        oracle: Oracle | None = None,
        time_scale: float = 0.0,
        malformed: float = 0.0,
        retry: RetryPolicy = RETRY_POLICY,
        faults: FaultPlan | None = None,
        transport_retry: TransportRetry = TRANSPORT_RETRY,
        spec: str | None = None,
    ) -> None:
        self.profile = get_profile(profile) if isinstance(profile, str) else profile
        self.oracle: Oracle = oracle if oracle is not None else HashOracle()
        if not 0.0 <= malformed <= 1.0:
            raise ConfigError(f"sim malformed={malformed} must be between 0 and 1")
        self.malformed = malformed
        self.retry = retry
        self.faults = faults
        self.transport_retry = transport_retry
        self.spec = spec or f"sim:{self.profile.name}"
        self.answers = SimAnswers(
            kind="sim", model=self.profile.model, oracle=self.oracle.identity, malformed=malformed
        )
        self.engine = VirtualEngine(self.profile, time_scale=time_scale)
        self.warnings = 0  # requests answered NULL after all retries
        self._lock = threading.Lock()
        self._live: dict[int, list[SeqState]] = {}  # id(request) -> its live sequences
        logger.info("SIMULATED backend %s: %s", self.spec, self.profile.summary())

    @property
    def virtual_seconds(self) -> float:
        """Busy time of the simulated GPU so far, in (virtual) seconds."""
        return self.engine.virtual_seconds

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def capacity(self) -> Capacity:
        p = self.profile
        # Twice max_num_seqs keeps the simulated engine's own queue full between batches.
        return Capacity(
            max_batch=p.max_num_seqs,
            max_concurrent_batches=2,
            max_tokens_in_flight=p.kv_cache_tokens,
        )

    def load(self) -> Load:
        waiting, running = self.engine.load()
        return Load(queued=waiting, running=running)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    def throughput(self) -> Throughput:
        """The profile's prefill rate and its decode rate at a full batch (simulated time)."""
        p = self.profile
        return Throughput(
            p.prefill_tokens_per_s,
            p.decode_tokens_per_s_max,
            source=f"SIMULATED profile {p.name} ({p.model} on {p.hardware}): prefill "
            f"{p.prefill_tokens_per_s:,.0f} tok/s, decode {p.decode_tokens_per_s_max:,.0f} tok/s "
            f"at {p.max_num_seqs} sequences; simulated seconds",
        )

    def describe(self) -> str:
        return f"SIMULATED {self.spec} ({self.profile.summary()}; oracle {self.oracle.identity})"

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        with self._lock:
            seqs = [s for r in requests for s in self._live.get(id(r), [])]
        self.engine.abort(seqs)
        if self.faults is not None:
            self.faults.wake()

    def close(self) -> None:
        if self.faults is not None:
            self.faults.wake()
        self.engine.close()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        faults = self.faults
        if faults is None or not requests:
            return self._complete(requests)
        rows = [r.row for r in requests]

        def attempt(n: int) -> list[Completion]:
            faults.inject(self.spec, rows, attempt=n)  # before any simulated GPU time
            return self._complete(requests)

        return call_with_retry(attempt, policy=self.transport_retry, what=self.spec)

    def _complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        def attempt(indices: Sequence[int], tries: int) -> list[Completion]:
            drafts = [self._draft(requests[i], tries) for i in indices]
            seqs = self._run([requests[i] for i in indices], drafts)
            return [
                Completion(None, "", 0, 0, error="aborted (SIMULATED)") if seq.aborted
                else _with_cached(draft, seq.cached)  # its prefix cache hit
                for draft, seq in zip(drafts, seqs, strict=True)
            ]  # fmt: skip

        done, failed = answer_with_retries(
            len(requests), attempt, what=f"SIMULATED {self.spec}", policy=self.retry
        )
        if failed:
            with self._lock:
                self.warnings += failed
        return done

    def _run(self, requests: list[LLMRequest], drafts: list[Completion]) -> list[SeqState]:
        p = self.profile
        shapes = [
            (
                completion.prompt_tokens,
                completion.completion_tokens,
                prompt_block_hashes(
                    request.prefix,
                    request.row,
                    prompt_tokens=completion.prompt_tokens,
                    template_tokens=p.template_tokens,
                    block_size=p.block_size,
                ),
            )
            for request, completion in zip(requests, drafts, strict=True)
        ]
        seqs = self.engine.submit(shapes)
        with self._lock:
            for request, seq in zip(requests, seqs, strict=True):
                self._live.setdefault(id(request), []).append(seq)
        try:
            self.engine.wait(seqs)
        finally:
            with self._lock:
                for request in requests:
                    self._live.pop(id(request), None)
        return seqs

    def _draft(self, request: LLMRequest, attempt: int) -> Completion:
        """The answer this attempt would produce (``error`` set when it did not parse)."""
        prompt = (
            shared_tokens(request.prefix)
            + estimate_tokens(request.row)
            + self.profile.template_tokens
        )
        try:
            value = self.oracle.answer(request)
        except NoLabel as err:
            return Completion(None, "", prompt, 1, error=f"SIMULATED oracle: {err}")
        if request.output.task is Task.DECIDE:
            yes = bool(value)
            margin = 0.5 + 4.0 * unit_hash("score", request.prefix, request.row)
            return Completion(yes, "yes" if yes else "no", prompt, 1, margin if yes else -margin)
        text = _render(value)
        max_tokens = max(1, request.params.max_tokens)
        if (
            self.malformed
            and unit_hash("malformed", str(attempt), request.prefix, request.row) < self.malformed
        ):
            text = "I am not sure how to answer that."
        out_tokens = min(max_tokens, estimate_tokens(text) + 1)  # +1: end of sequence
        try:
            parsed = parse_type(request.output.sql_type).parse(text)
        except OutputParseError as err:
            return Completion(None, text, prompt, out_tokens, error=str(err))
        return Completion(parsed, text, prompt, out_tokens)


_COMPLETION_FIELDS = ("value", "text", "prompt_tokens", "completion_tokens", "score", "error",
                      "cached_tokens")  # fmt: skip
if tuple(f.name for f in dataclasses.fields(Completion)) != _COMPLETION_FIELDS:
    raise ImportError("Completion's fields changed: update _with_cached in backends/sim")


def _with_cached(d: Completion, cached: int) -> Completion:
    """The draft with its prefix-cache hit, built directly (``dataclasses.replace`` inspects
    the fields on every call: a cost per row the sidecar benchmark saw)."""
    if cached == d.cached_tokens:
        return d
    return Completion(d.value, d.text, d.prompt_tokens, d.completion_tokens, d.score, d.error,
                      cached)  # fmt: skip


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value, default=json_default) if isinstance(value, list | dict) else str(value)


def from_spec(spec: BackendSpec) -> SimBackend:
    seed = spec.int_option("seed", 0)
    oracle: Oracle = HashOracle(
        spec.float_option("selectivity", 0.5),
        seed,
        output_words=spec.int_option("output_words", 8),
    )
    labels = spec.option("labels")
    if labels:
        positive = spec.option("positive")
        oracle = LookupOracle.from_csv(
            labels, positive=positive.split("|") if positive else None, fallback=oracle
        )
    fault = spec.option("fault")
    faults = None
    if fault:
        faults = FaultPlan(
            fault,
            spec.float_option("fail_rate", 1.0),
            seed,
            hang_s=spec.float_option("hang_s", 30.0),
        )
    return SimBackend(
        spec.target or "default",
        oracle=oracle,
        time_scale=spec.float_option("time_scale", 0.0),
        malformed=spec.float_option("malformed", 0.0),
        faults=faults,
        transport_retry=policy_from_spec(spec),
        spec=spec.raw,
    )


def create(spec: str) -> SimBackend:
    """Build from a spec string without going through the registry (for the sim server)."""
    return from_spec(parse_spec(spec))
