"""Named hardware/model profiles of the SIMULATED GPU server.

A profile holds the handful of numbers the vLLM-like cost model needs. Where a number was
published it is cited in ``docs/backends.md``; the rest are derived from hardware specs and
marked there as assumptions. The numbers are deliberately round: the simulator is for relative
comparisons (schedulers, plans) at GPU scale, not for predicting a real deployment.

Example:
    >>> PROFILES["default"].model
    'Qwen3-32B'
"""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.errors import ConfigError

__all__ = ["PROFILES", "SimProfile", "get_profile"]


@dataclass(frozen=True, slots=True)
class SimProfile:
    """The cost-model parameters of one simulated deployment (one vLLM instance).

    ``itl_single_s`` is the time per output token of a lone sequence (memory-bound: the weights
    are read once per step); ``decode_tokens_per_s_max`` is the aggregate decode throughput with
    ``max_num_seqs`` sequences decoding together; ``prefill_tokens_per_s`` is the compute-bound
    prompt throughput. A step takes ``max(memory time, compute time)`` (a roofline).
    """

    name: str
    model: str
    hardware: str
    prefill_tokens_per_s: float
    itl_single_s: float
    decode_tokens_per_s_max: float
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 4096
    kv_cache_tokens: int = 1_000_000
    chunked_prefill: bool = True
    prefix_caching: bool = True
    block_size: int = 16
    # chat-template tokens around the prefix and the row (system/user headers, assistant turn)
    template_tokens: int = 12
    #: the fields measured on the profile's hardware by ``scripts/measure_gpu_profile.py``
    #: (figures in ``benchmarks/results/gpu_profile_<name>.md``); every other number comes
    #: from published benchmarks or is derived from hardware specs (cited in docs/backends.md)
    measured: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if min(self.prefill_tokens_per_s, self.itl_single_s, self.decode_tokens_per_s_max) <= 0:
            raise ConfigError(f"sim profile {self.name!r}: rates and times must be positive")
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < self.max_num_seqs:
            raise ConfigError(
                f"sim profile {self.name!r}: need max_num_seqs >= 1 and "
                "max_num_batched_tokens >= max_num_seqs (every decode needs one token)"
            )
        # The aggregate decode rate must be reachable from the single-sequence step time and
        # must not exceed max_num_seqs / itl (that would make a full batch faster than one seq).
        if self.max_num_seqs > 1 and self.max_num_seqs / self.decode_tokens_per_s_max < (
            self.itl_single_s
        ):
            raise ConfigError(
                f"sim profile {self.name!r}: decode_tokens_per_s_max is above "
                "max_num_seqs / itl_single_s; lower it or raise itl_single_s"
            )

    @property
    def per_seq_decode_s(self) -> float:
        """Extra memory time per decoding sequence (its KV cache read), from the two rates."""
        if self.max_num_seqs == 1:
            return 0.0
        full = self.max_num_seqs / self.decode_tokens_per_s_max
        return (full - self.itl_single_s) / (self.max_num_seqs - 1)

    @property
    def base_step_s(self) -> float:
        """Memory time of a step with no sequence attached (weights read, launch overhead)."""
        return self.itl_single_s - self.per_seq_decode_s

    def summary(self) -> str:
        return (
            f"SIMULATED {self.model} on {self.hardware}: prefill {self.prefill_tokens_per_s:,.0f} "
            f"tok/s, decode {1 / self.itl_single_s:,.0f} tok/s single / "
            f"{self.decode_tokens_per_s_max:,.0f} tok/s at {self.max_num_seqs} seqs, "
            f"budget {self.max_num_batched_tokens} tok/step"
        )


_QWEN3_32B_TP8 = SimProfile(
    name="qwen3-32b-a100x8-tp8",
    model="Qwen3-32B",
    hardware="8x A100-80GB SXM, TP=8 (SeqoFlow's setup)",
    prefill_tokens_per_s=17_000.0,
    itl_single_s=0.012,
    decode_tokens_per_s_max=6_000.0,
    max_num_seqs=256,
    max_num_batched_tokens=4096,
    kv_cache_tokens=1_800_000,
)

_QWEN3_32B_A100 = SimProfile(
    name="qwen3-32b-a100",
    model="Qwen3-32B",
    hardware="1x A100-80GB SXM",
    prefill_tokens_per_s=2_600.0,
    itl_single_s=0.040,
    decode_tokens_per_s_max=1_500.0,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_tokens=24_000,
)

_LLAMA31_8B_A100 = SimProfile(
    name="llama3.1-8b-a100",
    model="Llama-3.1-8B-Instruct",
    hardware="1x A100-40GB",
    prefill_tokens_per_s=9_500.0,
    itl_single_s=1 / 75,
    decode_tokens_per_s_max=2_500.0,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_tokens=150_000,
)

# Qwen3-32B BF16 on one H200-141GB. GPUStack's vLLM baseline for Qwen3-32B on one H100 (same
# compute, 3.35 against 4.8 TB/s): 4,006 total tok/s on short prompts, 2,353 on ShareGPT.
# Prefill is compute-bound (the H100 figure, rounded up for longer batches); decode scales with
# bandwidth (x1.43). Single-sequence step: 65.5 GB / 4.8 TB/s = 13.6 ms plus launch overhead.
_QWEN3_32B_H200 = SimProfile(
    name="qwen3-32b-h200",
    model="Qwen3-32B",
    hardware="1x H200-141GB",
    prefill_tokens_per_s=6_000.0,
    itl_single_s=0.016,
    decode_tokens_per_s_max=2_500.0,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_tokens=230_000,  # (141 GB x 0.9 - 65.5 GB) / 262 KB per token
)

# Qwen3-4B BF16 on one A100-80GB, the paper's small estimator model: 8 GB of weights at
# 2.0 TB/s = 4 ms a step plus overhead; 2 x 4 B = 8 GFLOP a token at 45% of 312 TFLOPS =
# 17.5k tok/s prefill; decode ~8k tok/s (an assumption, about 10x a published two-RTX-3090
# vLLM run at 749 output tok/s).
_QWEN3_4B_A100 = SimProfile(
    name="qwen3-4b-a100",
    model="Qwen3-4B",
    hardware="1x A100-80GB",
    prefill_tokens_per_s=17_500.0,
    itl_single_s=0.007,
    decode_tokens_per_s_max=8_000.0,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_tokens=450_000,  # (72 GB - 8 GB) / 144 KB per token (36 layers, 8 KV heads)
)

# Round numbers for unit tests: every step time is easy to compute by hand.
_TINY = SimProfile(
    name="tiny",
    model="tiny-test-model",
    hardware="none (round numbers for tests)",
    prefill_tokens_per_s=10_000.0,
    itl_single_s=0.010,
    decode_tokens_per_s_max=800.0,
    max_num_seqs=16,
    max_num_batched_tokens=512,
    kv_cache_tokens=65_536,
)

PROFILES: dict[str, SimProfile] = {
    "default": _QWEN3_32B_TP8,
    _QWEN3_32B_TP8.name: _QWEN3_32B_TP8,
    _QWEN3_32B_A100.name: _QWEN3_32B_A100,
    _LLAMA31_8B_A100.name: _LLAMA31_8B_A100,
    _QWEN3_32B_H200.name: _QWEN3_32B_H200,
    "h200": _QWEN3_32B_H200,
    _QWEN3_4B_A100.name: _QWEN3_4B_A100,
    _TINY.name: _TINY,
}


def get_profile(name: str) -> SimProfile:
    try:
        return PROFILES[name or "default"]
    except KeyError:
        raise ConfigError(
            f"unknown sim profile {name!r}; use one of {', '.join(PROFILES)}"
        ) from None
