"""How fast the embedded model answers: measured as it runs, else a documented reference.

:class:`RateMeter` times every request the backend answers (under the model's lock, so one at
a time: the time is the model's alone). Decisions generate one token, so they give the prompt
rate; generated values, with their prompt time taken off at that rate, give the completion rate.
Until the backend has answered :data:`MIN_REQUESTS` of each kind in this process, the
reference rates below stand in for what is missing.

The reference is ``benchmarks/bench_throughput.py`` on the routed default (gemma-3-270m for the
decisions, SmolLM2-135M-Instruct for the generated values) with 2 threads, 24 rows, on a quiet
2-core machine (``benchmarks/results/throughput.md``, load average under 1): a loaded machine
is slower, so there an estimate from it errs on the short side until the backend has measured
itself. (The earlier reference, 54 / 2.1 tokens/s, was measured at load average 3-6 and made a
quiet machine's estimate about 20x too long.)
"""

from __future__ import annotations

import threading

from duckdb_sem.backends.throughput import Throughput

__all__ = ["MIN_REQUESTS", "REFERENCE", "RateMeter"]

#: prompt and completion tokens per second, 2 threads (benchmarks/results/throughput.md)
REFERENCE = (3190.0, 57.0)
MIN_REQUESTS = 4  # of each kind before the measured rate replaces the reference


class RateMeter:
    """Tokens and seconds of the requests answered so far, by kind (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # kind -> [requests, prompt tokens, completion tokens, seconds]
        self._sums = {"decide": [0.0, 0.0, 0.0, 0.0], "generate": [0.0, 0.0, 0.0, 0.0]}

    def add(self, kind: str, prompt: int, completion: int, seconds: float) -> None:
        with self._lock:
            s = self._sums[kind]
            s[0] += 1
            s[1] += prompt
            s[2] += completion
            s[3] += seconds

    def throughput(self, threads: int) -> Throughput:
        with self._lock:
            n_d, p_d, _, t_d = self._sums["decide"]
            n_g, p_g, c_g, t_g = self._sums["generate"]
        prompt_rate, completion_rate = REFERENCE
        measured = []
        if n_d >= MIN_REQUESTS and t_d > 0 and p_d > 0:
            prompt_rate = p_d / t_d
            measured.append(f"prompt rate from {n_d:.0f} decisions")
        if n_g >= MIN_REQUESTS and c_g > 0:
            decode_time = t_g - p_g / prompt_rate
            if decode_time > 0:
                completion_rate = c_g / decode_time
                measured.append(f"completion rate from {n_g:.0f} generated values")
        rates = f"{prompt_rate:,.0f} prompt / {completion_rate:,.1f} completion tok/s"
        if len(measured) == 2:
            source = f"measured in this process: {rates} ({'; '.join(measured)})"
        elif measured:
            source = f"{rates}: {measured[0]} in this process, the rest the 2-thread reference"
        else:
            source = (
                f"reference {rates} at 2 threads, this backend runs {threads} "
                "(benchmarks/results/throughput.md, a quiet 2-core machine)"
            )
        return Throughput(prompt_rate, completion_rate, source=source)
