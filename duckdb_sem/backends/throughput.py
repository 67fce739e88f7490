"""How fast a backend answers, so ``EXPLAIN SEMANTIC`` can turn estimated tokens into time.

A :class:`Throughput` is two token rates (prompt tokens read, completion tokens generated, per
second, for the whole backend at a full batch) and a fixed time per request, with ``source``
saying where the figures come from. Each backend reports its own
(:meth:`~duckdb_sem.backends.base.Backend.throughput`):

- ``sim:``: its profile's prefill rate and its decode rate at ``max_num_seqs`` sequences
  (``backends/sim/profiles.py``), SIMULATED;
- ``test:``: ``latency_ms`` per batch of ``max_batch`` requests (tokens cost nothing);
- ``llama:``: the embedded model's rates measured by ``benchmarks/bench_throughput.py``
  (``benchmarks/results/throughput.md``), scaled by the threads the backend runs with;
- ``openai:`` and ``vllm:``: none (a remote server's speed is not known before it runs).

Example:
    >>> Throughput(1000.0, 50.0, source="doc").seconds(calls=10, prompt_tokens=2000,
    ...     completion_tokens=100)
    4.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from duckdb_sem.errors import ConfigError

__all__ = ["Throughput"]


@dataclass(frozen=True, slots=True)
class Throughput:
    """A backend's speed: tokens per second read and generated, seconds per request."""

    prompt_tokens_per_s: float
    completion_tokens_per_s: float
    seconds_per_call: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        if self.prompt_tokens_per_s <= 0 or self.completion_tokens_per_s <= 0:
            raise ConfigError(
                f"throughput rates must be positive, got {self.prompt_tokens_per_s} and "
                f"{self.completion_tokens_per_s} tokens/s"
            )
        if self.seconds_per_call < 0:
            raise ConfigError(f"seconds per call must be >= 0, got {self.seconds_per_call}")

    def seconds(self, *, calls: float, prompt_tokens: float, completion_tokens: float) -> float:
        """Seconds the backend needs for this much work (a rate of ``inf`` costs nothing)."""
        time = calls * self.seconds_per_call
        if not math.isinf(self.prompt_tokens_per_s):
            time += prompt_tokens / self.prompt_tokens_per_s
        if not math.isinf(self.completion_tokens_per_s):
            time += completion_tokens / self.completion_tokens_per_s
        return time
