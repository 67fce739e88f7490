"""The SIMULATED engine loop: one thread stepping the cost model on a virtual clock.

Sequences from every caller join one queue, so concurrent ``complete`` calls (or concurrent
HTTP requests to the sim server) are batched together the way vLLM's continuous batching
would. After planning a step the loop sleeps ``duration * time_scale`` real seconds; arrivals
during that sleep join the next step. With ``time_scale=0`` nothing sleeps and only the virtual
clock moves, which keeps sequential callers fully deterministic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from duckdb_sem.backends.sim.cost_model import CostModel, SeqBatch, SeqState, mark_done
from duckdb_sem.backends.sim.profiles import SimProfile
from duckdb_sem.errors import BackendError, BackendUnavailableError

__all__ = ["EngineStats", "VirtualEngine"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Totals since the engine started; virtual seconds are busy time on the simulated GPU."""

    virtual_seconds: float
    steps: int
    prefill_tokens: int
    decode_tokens: int
    cached_tokens: int
    finished: int
    aborted: int
    queried_tokens: int = 0  # prompt tokens of admitted sequences (vLLM's prefix_cache_queries)
    evicted_blocks: int = 0  # cached KV blocks evicted (least recently freed) to make room
    cached_block_tokens: int = 0  # KV tokens of the blocks a new request could hit right now

    @property
    def prefix_hit_rate(self) -> float:
        """Share of admitted prompt tokens served by the prefix cache (vLLM's definition)."""
        return self.cached_tokens / self.queried_tokens if self.queried_tokens else 0.0


class VirtualEngine:
    """Thread-safe front of :class:`CostModel`; see the module docstring."""

    def __init__(
        self,
        profile: SimProfile,
        *,
        time_scale: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        self.profile = profile
        self.time_scale = time_scale
        self._sleep = sleep
        self._model = CostModel(profile)
        self._cond = threading.Condition()
        self._waiting: deque[SeqState] = deque()
        self._running: list[SeqState] = []
        self._clock = 0.0
        self._next_id = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        # steps, prefill, decode, cached, finished, aborted, queried
        self._totals = [0, 0, 0, 0, 0, 0, 0]

    @property
    def virtual_seconds(self) -> float:
        with self._cond:
            return self._clock

    def stats(self) -> EngineStats:
        with self._cond:
            steps, prefill, decode, cached, finished, aborted, queried = self._totals
            return EngineStats(
                self._clock,
                steps,
                prefill,
                decode,
                cached,
                finished,
                aborted,
                queried,
                self._model.evictions,
                self._model.cached_block_tokens,
            )

    def load(self) -> tuple[int, int]:
        """(waiting, running) sequences right now."""
        with self._cond:
            return len(self._waiting), len(self._running)

    def submit(self, shapes: Iterable[tuple[int, int, tuple[int, ...]]]) -> list[SeqState]:
        """Queue sequences given as (prompt_tokens, output_tokens, prompt block hashes)."""
        with self._cond:
            if self._closed:
                raise BackendUnavailableError(
                    "the SIMULATED engine is closed; create a new backend"
                )
            shapes = list(shapes)
            batch = SeqBatch(len(shapes))
            seqs = []
            for prompt, output, hashes in shapes:
                seq = SeqState(
                    seq_id=self._next_id,
                    prompt_tokens=max(1, prompt),
                    output_tokens=max(1, output),
                    block_hashes=hashes,
                    arrival=self._clock,
                    batch=batch,
                )
                if not self._model.fits(seq):
                    raise BackendError(
                        f"a prompt of {seq.prompt_tokens} tokens with up to {seq.output_tokens} "
                        f"output tokens does not fit the SIMULATED KV cache of "
                        f"{self.profile.kv_cache_tokens} tokens (profile {self.profile.name}); "
                        "shorten the prompt or lower max_tokens, as vLLM would ask"
                    )
                self._next_id += 1
                seqs.append(seq)
            self._waiting.extend(seqs)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="duckdb-sem-sim-engine", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return seqs

    def wait(self, seqs: Iterable[SeqState]) -> None:
        """Until every one of ``seqs`` is done (finished or aborted)."""
        batches = {id(s.batch): s.batch for s in seqs if s.batch is not None}
        for batch in batches.values():
            batch.event.wait()

    def abort(self, seqs: Iterable[SeqState]) -> int:
        """Drop the given sequences wherever they are; returns how many were still live."""
        count = 0
        with self._cond:
            for seq in seqs:
                if seq.done:
                    continue
                if seq in self._waiting:
                    self._waiting.remove(seq)
                if seq in self._running:
                    self._running.remove(seq)
                    self._model.release(seq)
                seq.aborted = True
                mark_done(seq)
                count += 1
            self._totals[5] += count
        return count

    def close(self) -> None:
        with self._cond:
            self._closed = True
            pending = list(self._waiting) + self._running
            self._cond.notify_all()
        self.abort(pending)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not (self._waiting or self._running):
                    self._cond.wait()
                if self._closed:
                    return
                result = self._model.step(self._running, self._waiting, self._clock)
                if result is None:
                    # nothing schedulable (cannot happen with a sane profile): avoid spinning
                    logger.error("SIMULATED engine stalled with %d waiting", len(self._waiting))
                    self._cond.wait(0.1)
                    continue
            if self.time_scale > 0:
                self._sleep(result.duration * self.time_scale)
            with self._cond:
                self._clock += result.duration
                t = self._totals
                t[0] += 1
                t[1] += result.prefill_tokens
                t[2] += result.decode_tokens
                t[3] += result.cached_tokens
                t[4] += len(result.finished)
                t[6] += result.queried_tokens
                for seq in result.finished:
                    mark_done(seq)
