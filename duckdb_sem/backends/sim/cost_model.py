"""The vLLM-like step model behind the SIMULATED GPU server.

The engine advances in *steps*, like vLLM v1's scheduler: each step first gives every running
sequence what it needs (one token for a decoding sequence, a prompt chunk for one still in
prefill), then admits waiting sequences in arrival order while the step's token budget
(``max_num_batched_tokens``), the sequence limit (``max_num_seqs``) and the KV cache allow.
With chunked prefill a long prompt is split across steps; without it a prompt is admitted only
when it fits in one step (or when it runs alone).

A step's duration is a roofline: ``max(memory, compute)`` where
``memory = base_step_s + decoding_seqs * per_seq_decode_s`` (weights read once per step plus
each sequence's KV cache) and ``compute = tokens_in_step / prefill_tokens_per_s``. So one lone
decoding sequence runs at ``1 / itl_single_s`` tokens/s, a full decode batch at
``decode_tokens_per_s_max``, and large prefills at ``prefill_tokens_per_s``.

Prefix caching: once a sequence has computed its shared prefix, later sequences with the same
prefix start with the prefix's full blocks already computed (as vLLM's automatic prefix cache),
but only while those blocks are still cached. Cached prefixes live in the same KV budget
(``kv_cache_tokens``) as the running sequences; when a new prefix or a new sequence needs room,
the least recently used prefix that no running sequence shares is evicted (vLLM frees blocks
whose reference count dropped to zero in LRU order). So on several replicas a prefix hit
depends on where a request is placed: that is what makes routing measurable.
Simplifications: the KV cache is reserved for prompt plus all output tokens at admission (no
preemption), and a running sequence's own KV is counted apart from the cached prefix it shares.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

from duckdb_sem.backends.sim.profiles import SimProfile

__all__ = ["CostModel", "SeqBatch", "SeqState", "StepResult", "mark_done"]


@dataclass(slots=True, eq=False)
class SeqState:
    """One simulated sequence (mutable engine state, owned by the engine's lock)."""

    seq_id: int
    prompt_tokens: int
    output_tokens: int
    prefix_key: str
    prefix_tokens: int
    arrival: float = 0.0
    computed: int = 0  # prompt tokens whose KV exists (cached or computed)
    cached: int = 0  # prompt tokens served by the prefix cache
    generated: int = 0
    admitted_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    done: bool = False  # finished or aborted (set under the engine's lock)
    #: the submitted batch it belongs to, woken once when its last sequence is done
    batch: SeqBatch | None = None

    @property
    def in_prefill(self) -> bool:
        return self.computed < self.prompt_tokens

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


class SeqBatch:
    """The sequences of one ``submit``: one event for all of them, set when the last is done
    (an event per sequence cost its caller a wake-up per row)."""

    __slots__ = ("event", "left")

    def __init__(self, size: int) -> None:
        self.left = size
        self.event = threading.Event()
        if size <= 0:
            self.event.set()

    def finish_one(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.event.set()


def mark_done(seq: SeqState) -> bool:
    """Mark ``seq`` done (once); False when it already was. Called under the engine's lock."""
    if seq.done:
        return False
    seq.done = True
    if seq.batch is not None:
        seq.batch.finish_one()
    return True


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one step did: the sequences it touched and how long it took (virtual seconds)."""

    duration: float
    prefill_tokens: int
    decode_tokens: int
    cached_tokens: int
    finished: tuple[SeqState, ...]
    queried_tokens: int = 0  # prompt tokens of the admitted sequences (the hit rate's base)


class CostModel:
    """Plans and times steps over a ``running`` list and a ``waiting`` queue (not thread-safe)."""

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        # prefix key -> cached tokens (whole blocks), least recently used first
        self._prefix_cache: OrderedDict[str, int] = OrderedDict()
        self.evictions = 0  # prefixes evicted to make room, since the model was built

    @property
    def cached_prefix_tokens(self) -> int:
        """KV tokens held by cached prefixes right now."""
        return sum(self._prefix_cache.values())

    def cached_prefixes(self) -> list[str]:
        """Keys of the cached prefixes, least recently used first (for tests and metrics)."""
        return list(self._prefix_cache)

    def step_seconds(self, *, tokens: int, decoding: int) -> float:
        """Duration of a step computing ``tokens`` tokens, ``decoding`` of them decodes."""
        p = self.profile
        memory = p.base_step_s + decoding * p.per_seq_decode_s
        compute = tokens / p.prefill_tokens_per_s
        return max(memory, compute)

    def step(
        self, running: list[SeqState], waiting: deque[SeqState], now: float
    ) -> StepResult | None:
        """Schedule and run one step starting at virtual time ``now``; None when idle."""
        p = self.profile
        budget = p.max_num_batched_tokens
        work: list[tuple[SeqState, int]] = []
        for seq in running:
            if budget <= 0:
                break
            need = seq.prompt_tokens - seq.computed if seq.in_prefill else 1
            take = min(need, budget) if p.chunked_prefill else need
            if take > budget and work:
                continue
            work.append((seq, take))
            budget -= take
        kv_used = sum(s.kv_tokens for s in running)
        cached_now = queried = 0
        while waiting and budget > 0 and len(running) < p.max_num_seqs:
            seq = waiting[0]
            if kv_used + seq.kv_tokens > p.kv_cache_tokens and running:
                break
            cached = self._cached_tokens(seq)
            self._make_room(kv_used + seq.kv_tokens, running, keep=seq.prefix_key)
            need = seq.prompt_tokens - cached
            if not p.chunked_prefill and need > budget and work:
                break
            waiting.popleft()
            seq.computed = seq.cached = cached
            seq.admitted_at = now
            cached_now += cached
            queried += seq.prompt_tokens
            running.append(seq)
            kv_used += seq.kv_tokens
            take = min(need, budget) if p.chunked_prefill else need
            work.append((seq, take))
            budget -= take
        if not work:
            return None
        decoding = sum(1 for seq, _ in work if not seq.in_prefill)
        tokens = sum(take for _, take in work)
        duration = self.step_seconds(tokens=tokens, decoding=decoding)
        end = now + duration
        finished = []
        for seq, take in work:
            if seq.in_prefill:
                seq.computed += take
                if seq.computed >= seq.prefix_tokens and p.prefix_caching:
                    self._insert(seq, running)
                if seq.in_prefill:
                    continue  # a chunk of a longer prompt: no token sampled yet
            seq.generated += 1
            if seq.first_token_at is None:
                seq.first_token_at = end
            if seq.generated >= seq.output_tokens:
                seq.finished_at = end
                finished.append(seq)
        for seq in finished:
            running.remove(seq)
        return StepResult(
            duration, tokens - decoding, decoding, cached_now, tuple(finished), queried
        )

    def _cached_tokens(self, seq: SeqState) -> int:
        if not self.profile.prefix_caching or seq.prefix_key not in self._prefix_cache:
            return 0
        self._prefix_cache.move_to_end(seq.prefix_key)  # a hit makes it most recently used
        # vLLM reuses whole blocks only, and always recomputes at least the last prompt token.
        return min(self._prefix_cache[seq.prefix_key], seq.prompt_tokens - 1)

    def _insert(self, seq: SeqState, running: list[SeqState]) -> None:
        """Cache ``seq``'s prefix (its whole blocks) if it fits beside the running sequences."""
        block = self.profile.block_size
        size = (seq.prefix_tokens // block) * block
        if seq.prefix_key in self._prefix_cache:
            self._prefix_cache.move_to_end(seq.prefix_key)
            return
        if size <= 0:
            return
        kv_used = sum(s.kv_tokens for s in running)
        if self._make_room(kv_used + size, running, keep=seq.prefix_key):
            self._prefix_cache[seq.prefix_key] = size

    def _make_room(self, needed: int, running: list[SeqState], *, keep: str) -> bool:
        """Evict LRU prefixes no running sequence shares until ``needed`` more KV tokens fit
        beside the cache; False when even evicting all of those would not make room."""
        limit = self.profile.kv_cache_tokens
        held = self.cached_prefix_tokens
        if needed + held <= limit:
            return True
        shared = {s.prefix_key for s in running}
        shared.add(keep)
        for key in list(self._prefix_cache):
            if needed + held <= limit:
                break
            if key in shared:
                continue
            held -= self._prefix_cache.pop(key)
            self.evictions += 1
        return needed + held <= limit
