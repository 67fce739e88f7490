#!/usr/bin/env python
"""Measure prefill and decode throughput of a simulated profile's model shape on a real GPU.

For a lent GPU machine (issue 29, item 5): torch and transformers only (no vLLM there), under
10 minutes. It builds the profile's model shape (``--profile h200``: Qwen3-32B) with random
BF16 weights straight on the GPU (no download: throughput depends on the shape, not the
weights), then measures, for batch 1 to 256:

- prefill: one forward pass over ``batch`` prompts of ``--prompt`` tokens (the ~300-token
  filter prompt of the SeqoFlow workload), last-token logits only; tokens/s;
- decode: ``--steps`` decode steps after that prefill, one token per sequence per step, with
  the KV cache; tokens/s over all sequences, and the time of one step at batch 1 (the
  profile's ``itl_single_s``).

It writes ``benchmarks/results/gpu_profile_<profile>.json`` and ``.md`` with the figures next
to the profile's own numbers. transformers' eager implementation has no CUDA graphs, no
paged attention and no fused kernels, so these are floors of what vLLM reaches on the same
GPU; the profile's docstring says which of its numbers were measured this way
(``SimProfile.measured``).

    python scripts/measure_gpu_profile.py --profile h200        # on the GPU machine
    python scripts/measure_gpu_profile.py --tiny --device cpu   # a smoke test anywhere (seconds)
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: the architecture of each profile's model (from the models' published configs)
SHAPES: dict[str, dict[str, Any]] = {
    "Qwen3-32B": dict(arch="qwen3", hidden_size=5120, num_hidden_layers=64,
                      num_attention_heads=64, num_key_value_heads=8, head_dim=128,
                      intermediate_size=25600, vocab_size=151936),
    "Qwen3-4B": dict(arch="qwen3", hidden_size=2560, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     intermediate_size=9728, vocab_size=151936),
    "Llama-3.1-8B-Instruct": dict(arch="llama", hidden_size=4096, num_hidden_layers=32,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                                  intermediate_size=14336, vocab_size=128256),
    "tiny": dict(arch="qwen3", hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, intermediate_size=256, vocab_size=1024),
}  # fmt: skip


def build(model_name: str, device: str, dtype: Any) -> Any:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen3Config

    shape = dict(SHAPES[model_name])
    config_class = Qwen3Config if shape.pop("arch") == "qwen3" else LlamaConfig
    config = config_class(**shape, max_position_embeddings=4096, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(
    model: Any, device: str, batches: list[int], prompt: int, steps: int
) -> list[dict[str, float]]:
    import torch
    from transformers import DynamicCache

    vocab = model.config.vocab_size
    # transformers 5 names the KV cache argument ``cache``; 4.x ``past_key_values``
    kv = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    rows = []
    with torch.inference_mode():
        warm = torch.randint(0, vocab, (1, prompt), device=device)
        model(warm, logits_to_keep=1)  # kernels, allocator
        for batch in batches:
            ids = torch.randint(0, vocab, (batch, prompt), device=device)
            cache = DynamicCache()
            sync(device)
            start = time.perf_counter()
            out = model(ids, **{kv: cache}, use_cache=True, logits_to_keep=1)
            sync(device)
            prefill_s = time.perf_counter() - start
            token = out.logits[:, -1:].argmax(-1)
            sync(device)
            start = time.perf_counter()
            for _ in range(steps):
                out = model(token, **{kv: cache}, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
            sync(device)
            decode_s = time.perf_counter() - start
            row = {
                "batch": batch,
                "prefill_tokens_per_s": batch * prompt / prefill_s,
                "decode_tokens_per_s": batch * steps / decode_s,
                "step_s": decode_s / steps,
            }
            print(json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
            rows.append(row)
            del cache, out
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--profile", default="h200", help="a sim profile (duckdb_sem/backends/sim/profiles.py)"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny shape: a smoke test of this script"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompt", type=int, default=300)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument(
        "--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256]
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    import torch

    from duckdb_sem.backends.sim.profiles import get_profile

    profile = get_profile(args.profile)
    model_name = "tiny" if args.tiny else profile.model
    dtype = torch.float32 if args.device == "cpu" else torch.bfloat16
    device_name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    started = time.perf_counter()
    model = build(model_name, args.device, dtype)
    built_s = time.perf_counter() - started
    rows = measure(model, args.device, args.batches, args.prompt, args.steps)
    tag = f"{profile.name}{'-tiny' if args.tiny else ''}"
    result = {
        "profile": profile.name, "model_shape": model_name, "device": device_name,
        "dtype": str(dtype), "prompt_tokens": args.prompt, "decode_steps": args.steps,
        "build_s": built_s, "rows": rows,
        "profile_claims": {"prefill_tokens_per_s": profile.prefill_tokens_per_s,
                           "itl_single_s": profile.itl_single_s,
                           "decode_tokens_per_s_max": profile.decode_tokens_per_s_max,
                           "max_num_seqs": profile.max_num_seqs},
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"gpu_profile_{tag}.json").write_text(json.dumps(result, indent=1) + "\n")
    best_prefill = max(r["prefill_tokens_per_s"] for r in rows)
    best_decode = max(r["decode_tokens_per_s"] for r in rows)
    single = next((r["step_s"] for r in rows if r["batch"] == 1), float("nan"))
    lines = [
        f"# Measured on {device_name}: the `{profile.name}` profile's model shape ({model_name})",
        "",
        f"transformers eager (sdpa attention), {dtype}, random weights, {args.prompt}-token "
        f"prompts, {args.steps} decode steps; built in {built_s:.0f} s. A floor of vLLM on the "
        "same GPU (no CUDA graphs, paged attention or fused kernels).",
        "",
        "| batch | prefill tok/s | decode tok/s | decode step s |",
        "|---|---|---|---|",
        *(
            f"| {r['batch']} | {r['prefill_tokens_per_s']:,.0f} | {r['decode_tokens_per_s']:,.0f} | "
            f"{r['step_s']:.4f} |"
            for r in rows
        ),
        "",
        "| number | profile | measured here |",
        "|---|---|---|",
        f"| prefill_tokens_per_s | {profile.prefill_tokens_per_s:,.0f} | {best_prefill:,.0f} |",
        f"| itl_single_s | {profile.itl_single_s} | {single:.4f} |",
        f"| decode_tokens_per_s_max | {profile.decode_tokens_per_s_max:,.0f} | {best_decode:,.0f} |",
        "",
        f"Reproduce: `python scripts/measure_gpu_profile.py --profile {args.profile}"
        f"{' --tiny' if args.tiny else ''} --device {args.device}`",
        "",
    ]
    (args.out / f"gpu_profile_{tag}.md").write_text("\n".join(lines))
    print(f"wrote {args.out / f'gpu_profile_{tag}.md'} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
