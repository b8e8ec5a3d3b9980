#!/usr/bin/env bash
# The GPU checks in one run, for a machine with one CUDA device: the gpu-marked tests, the launch
# counts, then the paper-B shape and the long-context benchmarks on the device, under the default
# precision policy (auto: float64 on a full-rate float64 GPU such as an H100/H200) and with float32
# forced (what a consumer GPU, a T4/L4 or Apple's MPS gets). Each step is bounded by a timeout and
# its output is kept in OUT_DIR (default benchmarks/results/gpu).
# Usage: bash benchmarks/gpu.sh [OUT_DIR]     (PYTHON=... to pick the interpreter; STEPS="tests launches ..."
#        to run some steps only; PRECISIONS="float32" to run the benchmarks under one policy only)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results/gpu}
py=${PYTHON:-python3}
steps=${STEPS:-device tests launches score_speed gemma qwen}
precisions=${PRECISIONS:-auto float32}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: run, keep the log, report a failure or timeout and go on
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | grep -v '^USDT:' | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || echo "== $name ended with rc=$rc (124: past its ${limit} s)"
}

wanted() { [[ " $steps " == *" $1 "* ]]; }

wanted device && step device 30 "$py" -c "import datetime, torch; from importlib.metadata import version as v
print(datetime.date.today(), torch.cuda.get_device_name(), 'capability', torch.cuda.get_device_capability(),
*(f'{name} {v(name)}' for name in ('torch', 'transformers', 'transformer-lens', 'accelerate')))"
wanted tests && step tests 90 "$py" -m pytest -q -p no:cacheprovider -m gpu tests/measure/test_cuda.py
wanted launches && step launches 90 "$py" benchmarks/launches.py --device cuda
# shellcheck disable=SC2086  # one word per policy
wanted score_speed && step score_speed 60 "$py" benchmarks/score_speed.py --device cuda --precisions $precisions
for precision in $precisions; do
  wanted gemma && step "long_context_gemma_$precision" 120 "$py" benchmarks/long_context.py --weights random \
    --lengths 2048 8192 32768 --device cuda --calls sdpa anova swap --precision "$precision"
  wanted qwen && step "long_context_qwen_$precision" 120 "$py" benchmarks/long_context.py \
    --weights qwen2.5-0.5b-random --dtype bfloat16 --lengths 2048 8192 32768 --device cuda --calls sdpa anova swap \
    --precision "$precision"
done
