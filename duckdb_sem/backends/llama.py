"""``llama:/path/model.gguf``: one GGUF model on the CPU through llama-cpp-python.

``llama:/path/model.gguf`` answers everything with that file; ``llama:`` alone is the embedded
default, two packaged models each answering the task kinds it measured best on, each a
``LlamaBackend`` (:mod:`.llama_default`). Options: ``threads`` (default: the CPUs this
process may use, at most 8) and ``n_ctx`` (default 2048).

Decisions are not generated text: the instruction and fixed few-shot examples form a shared chat
prefix whose KV cache is reused across rows, and the answer is the log-probability margin of the
"yes" tokens over the "no" tokens at the start of the assistant turn. Tiny models are biased
towards one answer, and the bias depends on the question, so the margin is *contextually
calibrated per template* (Zhao et al. 2021): the mean margin of content-free rows built from the
request's own template (its fields blanked, or filled with "N/A", "[MASK]", "...", and for a
one-row template with fixed irrelevant texts: ``LLMRequest.calibration_rows``) is subtracted,
and the decision is ``calibrated > 0``. A closed answer (``Task.CLASSIFY``: BOOLEAN maps,
labels) is scored in one forward pass, no decoding: each label's log-probability, calibrated
against the same content-free rows; the answer is the best label. An integer scale is answered
from the calibrated decision "is the answer in the upper half of that scale?" mapped onto the
scale by fixed cut points (see ``SCALE_QUESTION``; its ``score`` ranks rows more finely). The template's text before its first field joins the KV-shared prefix, so only the
row's own values are evaluated per row. Typed generation uses a grammar derived from the
output type (``outputs.json_schema``: an ENUM field is one of its labels, a DATE a calendar
date), so the output parses; a nested answer (JSON, a list, a STRUCT) cut off at ``max_tokens``
is closed where it stopped (``scalars.close_json``: a truncated value, never a NULL); malformed
output is retried per ``RETRY_POLICY`` and then returned as ``value=None``.

One llama.cpp context per (path, n_ctx, threads) per process, shared by all backend instances and
guarded by a lock: contexts are not thread-safe, and a second copy would only halve the cache
(:mod:`.llama_model` loads them; :mod:`.llama_prompts` renders chats and output grammars).

Example: ``llama:?threads=2`` or ``llama:/models/qwen.gguf?n_ctx=4096``
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from duckdb_sem.backends.base import RETRY_POLICY, Backend, Capacity, plain_chat
from duckdb_sem.backends.cpu_turns import cpu_turn
from duckdb_sem.backends.llama_guarded import sample_guarded
from duckdb_sem.backends.llama_identity import LAYOUTS, OPTIONS, llama_answers
from duckdb_sem.backends.llama_model import (
    DEFAULT_MODEL_FILE,
    default_model_path,
    default_threads,
    load_model,
)
from duckdb_sem.backends.llama_prompts import (
    choice_messages,
    decide_messages,
    fit_prompt,
    grammar_schema,
    shared_tokens,
    tokenize,
)
from duckdb_sem.backends.llama_rates import RateMeter
from duckdb_sem.backends.llama_segments import eval_segments
from duckdb_sem.backends.output_retry import answer_with_retries, retry_params
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.canonical import canonical_request
from duckdb_sem.llm.closed import is_scale
from duckdb_sem.llm.guard import GuardCheck
from duckdb_sem.llm.outputs import OutputParseError, TypeSpec, parse_type
from duckdb_sem.llm.prompts import DECIDE_PREFIX
from duckdb_sem.llm.request import (
    Completion,
    DecodingParams,
    LLMRequest,
    OutputSpec,
    RowTemplate,
    Task,
)
from duckdb_sem.llm.scalars import close_json

__all__ = [
    "CALIBRATION",
    "DEFAULT_MODEL_FILE",
    "OPTIONS",
    "LlamaBackend",
    "default_model_path",
    "from_spec",
]

log = logging.getLogger(__name__)

# Content-free calibration rows (Zhao et al. 2021): a request without a template (hand-built)
# is calibrated on an empty user turn; one with a template on the template with its fields
# filled by each of ``llm.request.CONTENT_FREE_FILLERS``, averaged.
CALIBRATION = "template-v2+scale-v1"  # calibration rows and scale scoring; part of the id

# An integer scale the template names (``1 to 5``) is answered from a calibrated decision, not
# from the digits' logits: on held-out reviews gemma-3-270m's digit expectation had Spearman
# about 0 with the label, its yes/no margins rank well. The template is asked whether the answer
# is in the upper half of its scale; the calibrated margin m gives p = sigmoid(m / SCALE_TAU)
# and the value is the p-quantile of the scale (n values: floor(n * p), fixed cut points at
# 1/n, 2/n, ...). SCALE_TAU is the spread of gemma's margins: chosen on tuning rows (bundled
# reviews 1-100, two phrasings of our own: Spearman 0.37 / 0.41 at 0.2, 0.35-0.39 at 0.1-0.3).
SCALE_QUESTION = "\nIs the answer in the upper half of that scale?"
SCALE_TAU = 0.2
_MAX_CALIBRATIONS = 256  # (prefix, template) pairs whose content-free scores are remembered


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


class LlamaBackend(Backend):
    """Embedded llama.cpp; see the module docstring for how decisions are scored."""

    def __init__(
        self,
        *,
        path: Path,
        spec: str = "llama:",
        n_ctx: int = 2048,
        threads: int = 2,
        share_cpu: bool = True,
        layout: str = "canonical",
    ) -> None:
        self.spec = spec
        self.share_cpu = share_cpu  # take turns on the CPU with other processes (cpu_turns)
        self.layout = layout  # one of LAYOUTS: how one-field filter decisions are laid out
        self.path = path
        self.n_ctx = n_ctx
        self.threads = threads
        self._model = load_model(path, n_ctx, threads)
        # (task, prefix, template) -> content-free margin (decisions) or label log-probabilities
        self._calibration: dict[tuple[object, ...], Any] = {}
        self._grammars: dict[str, Any] = {}  # sql type -> LlamaGrammar
        # id() of the requests being answered, and of those among them to skip (abort)
        self._inflight: set[int] = set()
        self._aborted: set[int] = set()
        self._abort_lock = threading.Lock()
        # (prefix, lead, few-shot?) -> tokens shared by all its rows
        self._shared: dict[tuple[str, str, bool], list[int]] = {}
        self._last_segment: tuple[object, list[int]] = (None, [])  # a pair's first side
        self.tokens_prompted = 0  # prompt tokens of every evaluation ...
        self.tokens_evaluated = 0  # ... and those not reused from the KV cache
        self.answers = llama_answers(path, n_ctx=n_ctx, calibration=CALIBRATION, layout=layout)
        self._rates = RateMeter()  # EXPLAIN SEMANTIC's time: this model's measured speed

    def capacity(self) -> Capacity:
        return Capacity(max_batch=16, max_concurrent_batches=1, one_by_one=True)

    def throughput(self) -> Throughput:
        """Rates measured on the requests answered so far, else the documented reference."""
        return self._rates.throughput(self.threads)

    def count_tokens(self, text: str) -> int:
        # The vocabulary is read-only, so tokenising needs no lock.
        return len(tokenize(self._model, text, special=False))

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        # Same-prefix requests back to back keep the prefix's KV cache warm.
        # Pairs sharing their first side follow each other (they share its KV cache too).
        def key(i: int) -> tuple[object, ...]:
            return (_cache_key(requests[i]), requests[i].first_side() or "", i)

        order = sorted(range(len(requests)), key=key)
        out: dict[int, Completion] = {}
        with self._abort_lock:
            self._inflight.update(id(r) for r in requests)
        with self._model.lock:
            for i in order:
                request = requests[i]
                started = time.perf_counter()
                if id(request) in self._aborted:  # cancelled: stop between rows
                    out[i] = Completion(None, "", 0, 0, error="aborted")
                    continue
                with cpu_turn(self.share_cpu):  # one row at a time on this machine
                    if request.output.task is Task.DECIDE:
                        out[i] = self._decide(request)
                    elif request.output.task is Task.CLASSIFY:
                        out[i] = self._classify(request)
                    else:
                        out[i] = self._generate_with_retries(request)
                kind = "generate" if request.output.task is Task.GENERATE else "decide"
                self._rates.add(kind, out[i].prompt_tokens, out[i].completion_tokens,
                                time.perf_counter() - started)  # fmt: skip
        with self._abort_lock:
            done = {id(r) for r in requests}
            self._inflight -= done
            self._aborted -= done
        return [out[i] for i in range(len(requests))]

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        """Rows of ``requests`` not yet evaluated are answered ``aborted`` (between rows)."""
        with self._abort_lock:
            self._aborted |= {id(r) for r in requests} & self._inflight

    def close(self) -> None:
        """Models are shared per process; dropping this backend keeps the model loaded."""

    # -- decisions -----------------------------------------------------------------------

    def _laid_out(self, request: LLMRequest) -> LLMRequest:
        """``request`` in this backend's decision layout (``layout=``)."""
        return canonical_request(request) if self.layout == "canonical" else request

    def _decide(self, request: LLMRequest) -> Completion:
        request = self._laid_out(request)
        key = _cache_key(request)
        offset = self._calibration.get(key)
        if offset is None:
            rows = _content_free_rows(request)
            offset = sum(self._margin(request, row)[0] for row in rows) / len(rows)
            self._remember(key, offset)
        margin, n_prompt, reused = self._margin(request, request.row)
        score = margin - offset
        yes = score > 0
        return Completion(yes, "yes" if yes else "no", n_prompt, 1, score, cached_tokens=reused)

    def messages(self, request: LLMRequest) -> list[dict[str, str]]:
        """Decisions carry the few-shot examples; closed answers and generation do not."""
        if request.output.task is Task.DECIDE:
            request = self._laid_out(request)
            return decide_messages(request.prefix, request.row)
        if request.output.task is Task.CLASSIFY and _is_scale(request):
            derived = _scale_decision(request)
            return decide_messages(derived.prefix, derived.row)
        if request.output.task is Task.CLASSIFY:
            return choice_messages(request.prefix, request.row)
        return plain_chat(request)

    def _margin(self, request: LLMRequest, row: str) -> tuple[float, int, int]:
        """log P(yes tokens) - log P(no tokens) as the assistant turn starts, the prompt's size
        and how many of its tokens came from the KV cache."""
        messages = decide_messages(request.prefix, row)
        tokens = fit_prompt(self._model, messages, reserve=1, n_ctx=self.n_ctx)
        shared = self._shared_for(request, row, tokens, examples=True)
        if tokens[: len(shared)] != shared:
            shared = []  # the row was truncated into the prefix: no reuse, still deterministic
        # a content-free calibration row shares no first side with another: evaluated whole
        cuts = self._pair_cut(request, row, tokens) if row == request.row else []
        reused = self._eval_segments(tokens, len(shared), cuts)
        logits = self._last_logits()
        yes = _logsumexp([logits[t] for t in self._model.yes_ids])
        no = _logsumexp([logits[t] for t in self._model.no_ids])
        return yes - no, len(tokens), reused

    def _remember(self, key: tuple[object, ...], value: Any) -> None:
        if len(self._calibration) >= _MAX_CALIBRATIONS:
            self._calibration.pop(next(iter(self._calibration)))
        self._calibration[key] = value

    def _last_logits(self) -> Any:
        import llama_cpp

        return llama_cpp.llama_get_logits_ith(self._model.llama._ctx.ctx, -1)

    # -- closed answers --------------------------------------------------------------------

    def _classify(self, request: LLMRequest) -> Completion:
        """The label of highest calibrated probability, scored, not generated."""
        if _is_scale(request):
            return self._scale(request)
        labels = request.output.labels
        key = _cache_key(request)
        prior = self._calibration.get(key)
        if prior is None:
            rows = _content_free_rows(request)
            probs = [_softmax(self._label_logprobs(request, row)[0]) for row in rows]
            prior = [math.log(sum(p[j] for p in probs) / len(probs)) for j in range(len(labels))]
            self._remember(key, prior)
        raw, n_prompt, reused = self._label_logprobs(request, request.row)
        calibrated = _softmax([lp - c for lp, c in zip(raw, prior, strict=True)])
        best = max(range(len(labels)), key=lambda j: calibrated[j])
        try:
            value = parse_type(request.output.sql_type).parse(labels[best])
        except OutputParseError as err:  # a label that is not of the type: NULL, said why
            return Completion(None, labels[best], n_prompt, 1, error=str(err), cached_tokens=reused)
        # The score ranks rows: a scale's expectation (argmax alone ties too often), else the
        # best label's calibrated probability.
        score = calibrated[best]
        if isinstance(value, int | float) and not isinstance(value, bool):
            score = sum(float(lab) * p for lab, p in zip(labels, calibrated, strict=True))
        return Completion(value, labels[best], n_prompt, 1, score, cached_tokens=reused)

    def _scale(self, request: LLMRequest) -> Completion:
        """An integer scale from the calibrated decision "upper half?" (see SCALE_QUESTION)."""
        decided = self._decide(_scale_decision(request))
        labels = request.output.labels
        p = 1.0 / (1.0 + math.exp(-float(decided.score or 0.0) / SCALE_TAU))
        best = min(len(labels) - 1, int(len(labels) * p))
        low, high = int(labels[0]), int(labels[-1])
        score = low + (high - low) * p  # ranks rows more finely than the value
        value = parse_type(request.output.sql_type).parse(labels[best])  # '4' or 4
        return Completion(value, labels[best], decided.prompt_tokens, 1, score,
                          cached_tokens=decided.cached_tokens)  # fmt: skip

    def _label_logprobs(self, request: LLMRequest, row: str) -> tuple[list[float], int, int]:
        """log P(label) for each label at the start of the assistant turn, prompt size and
        the prompt tokens taken from the KV cache."""
        messages = choice_messages(request.prefix, row)
        tokens = fit_prompt(self._model, messages, reserve=8, n_ctx=self.n_ctx)
        shared = self._shared_for(request, row, tokens, examples=False)
        reused = self._eval_after_prefix(shared, tokens)
        spellings = [self._spellings(label) for label in request.output.labels]
        if all(len(s) == 1 for variants in spellings for s in variants):
            logits = self._last_logits()
            first = [_logsumexp([logits[s[0]] for s in variants]) for variants in spellings]
            return first, len(tokens), reused
        return [self._sequence_logprob(tokens, v) for v in spellings], len(tokens), reused

    def _spellings(self, label: str) -> list[list[int]]:
        """Token sequences of a label's spellings (as written, lower case, capitalised; each
        also after a space, as a base model's ``A:`` is followed)."""
        cased = [label, label.lower(), label[:1].upper() + label[1:]]
        variants = dict.fromkeys(cased + [" " + c for c in cased])
        return [tokenize(self._model, v, special=False) or [0] for v in variants]

    def _sequence_logprob(self, prompt: list[int], variants: list[list[int]]) -> float:
        """log of the summed probability of the variants' token sequences after ``prompt``."""
        import numpy as np

        llama = self._model.llama
        n_vocab = llama.n_vocab()

        def logprobs() -> Any:
            row = np.ctypeslib.as_array(self._last_logits(), shape=(n_vocab,)).astype(np.float64)
            row -= row.max()
            return row - math.log(float(np.exp(row).sum()))

        after_prompt = logprobs()
        totals = []
        for seq in variants:
            total = float(after_prompt[seq[0]])
            for i in range(1, len(seq)):
                llama.n_tokens = len(prompt) + i - 1
                llama.eval([seq[i - 1]])
                total += float(logprobs()[seq[i]])
            totals.append(total)
        llama.n_tokens = len(prompt)  # later rows see the prompt's cache, not a label's
        return _logsumexp(totals)

    # -- the shared prefix -----------------------------------------------------------------

    def _shared_for(
        self, request: LLMRequest, row: str, tokens: list[int], *, examples: bool
    ) -> list[int]:
        """The longest cached prefix these tokens start with: instruction and template lead."""
        lead = request.template.lead if request.template is not None else ""
        if lead and row.startswith(lead):
            shared = self._shared_tokens(request.prefix, lead, examples)
            if tokens[: len(shared)] == shared and len(shared) < len(tokens):
                return shared
        return self._shared_tokens(request.prefix, "", examples)

    def _shared_tokens(self, prefix: str, lead: str, examples: bool) -> list[int]:
        key = (prefix, lead, examples)
        if key not in self._shared:
            if len(self._shared) >= _MAX_CALIBRATIONS:
                self._shared.pop(next(iter(self._shared)))
            self._shared[key] = shared_tokens(self._model, prefix, lead, examples=examples)
        return self._shared[key]

    def _eval_after_prefix(self, shared: list[int], tokens: list[int]) -> int:
        """Evaluate ``tokens``, reusing the KV cache of ``shared`` when it is already there."""
        if tokens[: len(shared)] != shared:
            shared = []  # the row was truncated into the prefix: no reuse, still deterministic
        return self._eval_segments(tokens, len(shared))

    def _pair_cut(self, request: LLMRequest, row: str, tokens: list[int]) -> list[int]:
        """For a pair (a join), the end of its first side's segment in ``tokens``, else none.

        The segment is instruction + template lead + the first field's value + the template
        text after it (:meth:`LLMRequest.first_side`): every pair sharing that value starts with it,
        so pairs of one left row evaluate it once (complete() puts them next to each other).
        """
        segment = request.first_side(row)
        if segment is None:
            return []
        key = (request.prefix, segment)
        if self._last_segment[0] != key:
            self._last_segment = (key, shared_tokens(self._model, request.prefix, segment))
        seg = self._last_segment[1]
        return [len(seg)] if tokens[: len(seg)] == seg else []

    def _eval_segments(self, tokens: list[int], lead: int, cuts: Sequence[int] = ()) -> int:
        """Evaluate ``tokens`` in segments (:func:`.llama_segments.eval_segments`); how many
        of them came from the KV cache."""
        reused = eval_segments(self._model, tokens, lead, cuts)
        self.tokens_evaluated += len(tokens) - reused
        self.tokens_prompted += len(tokens)
        return reused

    # -- generation ----------------------------------------------------------------------

    def _generate_with_retries(self, request: LLMRequest) -> Completion:
        def attempt(_: Sequence[int], tries: int) -> list[Completion]:
            return [self._generate(request, tries)]

        return answer_with_retries(1, attempt, what=self.spec)[0][0]

    def _generate(self, request: LLMRequest, attempt: int) -> Completion:
        """One try (:func:`.output_retry.answer_with_retries` retries it): a parsed value, or
        ``error`` set."""
        spec = parse_type(request.output.sql_type)
        messages = [
            {"role": "system", "content": request.prefix},
            {"role": "user", "content": request.row},
        ]
        max_tokens = max(1, request.params.max_tokens)
        prompt = fit_prompt(self._model, messages, reserve=max_tokens, n_ctx=self.n_ctx)
        grammar = None if spec.is_text else self._grammar(spec)
        params = retry_params(request.params, attempt, RETRY_POLICY)
        self._model.llama.set_seed(params.seed)
        self._model.kv_lead[0] = -1  # generate() reuses and cuts the cache by its own rules
        if request.guard is not None and grammar is None and attempt == 0:
            text, produced = self._sample_guarded(prompt, max_tokens, GuardCheck(request.guard))
        else:
            text, produced = self._sample(prompt, params.temperature, max_tokens, grammar)
        if grammar is not None and produced >= max_tokens and spec.is_json:
            # cut off at max_tokens: the grammar kept it a JSON prefix, so it can be closed
            text = close_json(text)
        try:
            value = spec.parse(text)
        except OutputParseError as err:
            log.debug("unparsable %s output (attempt %d): %s", spec.sql, attempt + 1, err)
            error = f"{spec.sql} output did not parse: {err}"
            return Completion(None, text, len(prompt), produced, error=error)
        return Completion(value, text, len(prompt), produced)

    def _sample(
        self, prompt: list[int], temperature: float, max_tokens: int, grammar: Any
    ) -> tuple[str, int]:
        llama = self._model.llama
        out: list[int] = []
        for token in llama.generate(prompt, temp=temperature, repeat_penalty=1.0, grammar=grammar):
            if token in self._model.stop_ids:
                break
            out.append(token)
            if len(out) >= max_tokens:
                break
        text: str = llama.detokenize(out).decode("utf-8", "replace")
        return text.strip(), max(1, len(out))

    def _sample_guarded(
        self, prompt: list[int], max_tokens: int, check: GuardCheck
    ) -> tuple[str, int]:
        """Greedy decoding that never copies a record or repeats a line (:mod:`.llama_guarded`)."""
        llama = self._model.llama
        out = sample_guarded(llama, prompt, max_tokens=max_tokens, stop_ids=self._model.stop_ids,
                             check=check, logits=self._last_logits)  # fmt: skip
        text: str = llama.detokenize(out).decode("utf-8", "replace")
        return text.strip(), max(1, len(out))

    def _grammar(self, spec: TypeSpec) -> Any:
        if spec.sql not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            schema = json.dumps(grammar_schema(spec))
            self._grammars[spec.sql] = LlamaGrammar.from_json_schema(schema, verbose=False)
        return self._grammars[spec.sql]


def _cache_key(request: LLMRequest) -> tuple[object, ...]:
    """What a request's calibration and shared prefix depend on."""
    template = request.template
    pieces = template.pieces if template is not None else None
    task = request.output.task.value
    return (task, request.operator.value, request.prefix, pieces, request.output.labels)


def _content_free_rows(request: LLMRequest) -> tuple[str, ...]:
    return request.calibration_rows()


def _is_scale(request: LLMRequest) -> bool:
    """An integer range of at least three values, asked for as a number or in words
    (``closed_answers`` of a template's scale)."""
    if request.output.sql_type not in ("INTEGER", "BIGINT", "VARCHAR"):
        return False
    return is_scale(request.output.labels)


def _scale_decision(request: LLMRequest) -> LLMRequest:
    """The decision "is the answer in the upper half of the scale?" about ``request``'s row."""
    template = request.template
    if template is not None:
        pieces = (*template.pieces[:-1], template.pieces[-1] + SCALE_QUESTION)
        template = RowTemplate(pieces, template.fields)
    return dataclasses.replace(
        request,
        prefix=DECIDE_PREFIX,
        row=request.row + SCALE_QUESTION,
        output=OutputSpec.decision(),
        params=DecodingParams(max_tokens=1),
        template=template,
    )


def _softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def from_spec(spec: BackendSpec) -> LlamaBackend:
    path = Path(spec.target).expanduser() if spec.target else default_model_path()
    n_ctx = spec.int_option("n_ctx", 2048)
    threads = spec.int_option("threads", default_threads())
    if n_ctx < 256 or threads < 1:
        raise ConfigError(f"backend {spec.raw!r}: need n_ctx >= 256 and threads >= 1")
    share_cpu = spec.on_off_option("share_cpu", default=True)
    return LlamaBackend(
        path=path,
        spec=spec.raw,
        n_ctx=n_ctx,
        threads=threads,
        share_cpu=share_cpu,
        layout=layout_option(spec),
    )


def layout_option(spec: BackendSpec) -> str:
    """The spec's ``layout=`` (see :data:`LAYOUTS`), ``canonical`` when absent."""
    layout = spec.option("layout", "canonical") or "canonical"
    if layout not in LAYOUTS:
        raise ConfigError(
            f"backend {spec.raw!r}: layout={layout!r} is not one of {', '.join(LAYOUTS)}"
        )
    return layout
