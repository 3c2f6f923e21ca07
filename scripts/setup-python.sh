#!/usr/bin/env bash
# Create .venv with clawloop and its dependencies. torch is installed first, pinned to the release
# these machines hold as a CPU build on local disk, so no other package pulls a multi-GB CUDA
# wheel. Elsewhere install the torch you want into .venv first (CPU: PyTorch's cpu wheel index;
# GPU hosts: the CUDA build); this script keeps any torch that is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check "torch==2.13.0"
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
