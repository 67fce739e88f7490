"""The prepared GPU measurement runs end to end (a tiny shape on the CPU) and writes its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_profile_script_measures_a_tiny_shape_on_the_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "measure_gpu_profile.py"), "--tiny",
         "--device", "cpu", "--batches", "1", "2", "--steps", "2", "--prompt", "32",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "gpu_profile_qwen3-32b-h200-tiny.json").read_text())
    assert [r["batch"] for r in result["rows"]] == [1, 2]
    for row in result["rows"]:
        assert row["prefill_tokens_per_s"] > 0 and row["decode_tokens_per_s"] > 0
    assert result["profile_claims"]["prefill_tokens_per_s"] == 6000.0
    assert (
        "| prefill_tokens_per_s | 6,000 |"
        in (tmp_path / "gpu_profile_qwen3-32b-h200-tiny.md").read_text()
    )
