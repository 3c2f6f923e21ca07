#!/usr/bin/env bash
# Create .venv with clawloop and its dependencies. torch is pinned to the CPU build first so
# nothing pulls a multi-GB CUDA wheel on a CPU machine (GPU hosts: install torch for CUDA first).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "torch==2.13.0"
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
