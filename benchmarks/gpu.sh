#!/usr/bin/env bash
# The GPU checks in one run, for a machine with one CUDA device: the gpu-marked tests, then the
# paper-B shape and the long-context benchmarks on the device. Each step is bounded by a timeout
# and its output is kept in OUT_DIR (default benchmarks/results/gpu).
# Usage: bash benchmarks/gpu.sh [OUT_DIR]     (PYTHON=... to pick the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results/gpu}
py=${PYTHON:-python3}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: run, keep the log, report a failure or timeout and go on
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || echo "== $name ended with rc=$rc (124: past its ${limit} s)"
}

step device 30 "$py" -c "import torch; from importlib.metadata import version as v; print(torch.cuda.get_device_name(),
*(f'{name} {v(name)}' for name in ('torch', 'transformers', 'transformer-lens', 'accelerate')))"
step tests 90 "$py" -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_cuda.py
step score_speed 45 "$py" benchmarks/score_speed.py --device cuda
step long_context_gemma 110 "$py" benchmarks/long_context.py --weights random --lengths 2048 8192 32768 \
  --device cuda --calls sdpa anova swap
step long_context_qwen 90 "$py" benchmarks/long_context.py --weights qwen2.5-0.5b-random --dtype bfloat16 \
  --lengths 8192 32768 --device cuda --calls sdpa anova
step long_context_qwen_swap 60 "$py" benchmarks/long_context.py --weights qwen2.5-0.5b-random --dtype bfloat16 \
  --lengths 8192 --device cuda --calls sdpa swap
