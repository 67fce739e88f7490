"""GPU-scale profiles of the SIMULATED backend used by the benchmarks (sources in
docs/benchmarks.md, "Backend profiles").

- target: Qwen3-32B on 8x A100-80GB, TP=8 (the package's ``default`` profile, SeqoFlow's
  setup), two replicas in the multi-query experiments as in the paper;
- ``QWEN3_32B_H200``: Qwen3-32B BF16 on one H200-141GB (``--profile h200``);
- estimator: Qwen3-4B on one A100-80GB (the paper's small model).
"""

from __future__ import annotations

from duckdb_sem.backends.sim.profiles import SimProfile, get_profile

__all__ = ["ESTIMATOR_PROFILE", "PROFILES", "QWEN3_32B_H200", "TARGET_PROFILE", "profile"]

TARGET_PROFILE = get_profile("default")

# GPUStack's vLLM baseline for Qwen3-32B on one H100 (same compute as an H200, 3.35 against
# 4.8 TB/s): 4,006 total tok/s on short prompts, 2,353 on ShareGPT. Prefill is compute-bound
# (the H100 figure, rounded up for longer batches); decode scales with bandwidth (x1.43).
QWEN3_32B_H200 = SimProfile(
    name="qwen3-32b-h200",
    model="Qwen3-32B",
    hardware="1x H200-141GB",
    prefill_tokens_per_s=6_000.0,
    itl_single_s=0.016,  # 65.5 GB / 4.8 TB/s = 13.6 ms, plus launch overhead
    decode_tokens_per_s_max=2_500.0,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    kv_cache_tokens=230_000,  # (141 GB x 0.9 - 65.5 GB) / 262 KB per token
)

# Qwen3-4B BF16 on one A100-80GB: 8 GB of weights at 2.0 TB/s = 4 ms a step plus overhead;
# 2 x 4 B = 8 GFLOP a token at 45% of 312 TFLOPS = 17.5k tok/s prefill; decode ~8k tok/s
# (assumption, about 10x what two RTX 3090s gave in a published vLLM run: 749 output tok/s).
ESTIMATOR_PROFILE = SimProfile(
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

PROFILES = {"a100x8": TARGET_PROFILE, "h200": QWEN3_32B_H200}


def profile(name: str) -> SimProfile:
    return PROFILES[name] if name in PROFILES else get_profile(name)
