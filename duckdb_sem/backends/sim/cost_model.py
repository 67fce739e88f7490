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

Prefix caching and the KV budget are vLLM's block pool (:mod:`.blocks`): a sequence reuses the
longest run of its prompt's leading 16-token blocks still cached on this replica (chained block
hashes of the whole prompt, as vLLM's automatic prefix caching); running sequences share the
blocks they have in common; a block is findable from the step that schedules its computation,
as in vLLM, so the rows of one batch compute their prefix once; finished sequences' blocks stay
cached until the least recently freed ones are evicted to make room (``kv_cache_tokens`` from
the profile). So on several replicas a prefix hit depends on where a request is placed: that is
what makes routing measurable. Simplification: the KV cache is reserved for prompt plus all
output tokens at admission (no preemption).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from duckdb_sem.backends.sim.blocks import Block, BlockPool
from duckdb_sem.backends.sim.profiles import SimProfile

__all__ = ["CostModel", "SeqBatch", "SeqState", "StepResult", "mark_done"]


@dataclass(slots=True, eq=False)
class SeqState:
    """One simulated sequence (mutable engine state, owned by the engine's lock).

    ``block_hashes`` name its prompt's full KV blocks (:func:`.blocks.prompt_block_hashes`);
    without them nothing of it is ever a prefix hit.
    """

    seq_id: int
    prompt_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
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
    blocks: list[Block] = field(default_factory=list)  # its KV blocks while it runs
    hashed: int = 0  # leading blocks already findable in the cache

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
        self.pool = BlockPool(max(1, profile.kv_cache_tokens // profile.block_size))

    @property
    def evictions(self) -> int:
        """Cached blocks evicted to make room, since the model was built."""
        return self.pool.evictions

    @property
    def cached_block_tokens(self) -> int:
        """KV tokens of the blocks that can be hit right now."""
        return self.pool.cached_blocks * self.profile.block_size

    def fits(self, seq: SeqState) -> bool:
        """Whether ``seq`` fits an empty KV cache at all (vLLM refuses a longer request)."""
        return self._blocks_for(seq) <= self.pool.num_blocks

    def release(self, seq: SeqState) -> None:
        """Free the blocks of a sequence leaving ``running`` other than by finishing (abort)."""
        self.pool.free(seq.blocks)
        seq.blocks = []

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
            self._cache_scheduled(seq, take)
        cached_now = queried = 0
        while waiting and budget > 0 and len(running) < p.max_num_seqs:
            seq = waiting[0]
            hit = self._hit_blocks(seq)
            cached = hit * p.block_size
            need = seq.prompt_tokens - cached
            if not p.chunked_prefill and need > budget and work:
                break
            blocks = self.pool.allocate(seq.block_hashes[:hit], total=self._blocks_for(seq))
            if blocks is None:
                if running or work:
                    break  # waits for running sequences to free their blocks
                raise ValueError(
                    f"a {seq.kv_tokens}-token sequence does not fit the SIMULATED KV cache of "
                    f"{p.kv_cache_tokens} tokens (profile {p.name})"
                )
            waiting.popleft()
            seq.blocks, seq.hashed = blocks, hit
            seq.computed = seq.cached = cached
            seq.admitted_at = now
            cached_now += cached
            queried += seq.prompt_tokens
            running.append(seq)
            take = min(need, budget) if p.chunked_prefill else need
            work.append((seq, take))
            budget -= take
            self._cache_scheduled(seq, take)
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
            self.release(seq)
        return StepResult(
            duration, tokens - decoding, decoding, cached_now, tuple(finished), queried
        )

    def _blocks_for(self, seq: SeqState) -> int:
        return -(-seq.kv_tokens // self.profile.block_size)

    def _hit_blocks(self, seq: SeqState) -> int:
        if not self.profile.prefix_caching:
            return 0
        # vLLM always recomputes at least the last prompt token, so a fully cached prompt
        # gives up its last block.
        usable = (seq.prompt_tokens - 1) // self.profile.block_size
        return self.pool.hits(seq.block_hashes[:usable])

    def _cache_scheduled(self, seq: SeqState, take: int) -> None:
        """Make the full prompt blocks ``seq`` computes up to this step's end findable now, as
        vLLM's ``allocate_slots`` does when it schedules them (hashes come from token ids, not
        from the KV): a sequence admitted later in the same step already hits them."""
        if not self.profile.prefix_caching or not seq.in_prefill:
            return
        done = min(len(seq.block_hashes), (seq.computed + take) // self.profile.block_size)
        for j in range(seq.hashed, done):
            self.pool.cache(seq.blocks[j], seq.block_hashes[j])
        seq.hashed = max(seq.hashed, done)
