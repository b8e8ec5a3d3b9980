#!/usr/bin/env bash
# The README's CPU numbers in one run: the machine, the first-hour commands timed end to end (the
# demo, the reproduction report, a 20-step training run), score_heads against a plain forward at
# paper B's shape and on the real Gemma 3 270M at 512 and 2,048 tokens. Each step's output is kept
# in OUT_DIR (default benchmarks/results/cpu); run it with nothing else on the machine.
# Usage: bash benchmarks/cpu.sh [OUT_DIR]   (PYTHON=... picks the interpreter, default .venv/bin/python;
#        STEPS="machine demo ..." runs some steps only)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-benchmarks/results/cpu}
py=${PYTHON:-.venv/bin/python}
steps=${STEPS:-machine demo reproduce train score_speed gemma}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

step() {  # step NAME COMMAND...: run, keep the log with its wall time, report a failure and go on
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS
  "$@" 2>&1 | grep -v '^USDT:' | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "wall: $((SECONDS - start)) s (rc=$rc)" | tee -a "$out/$name.txt"
}

wanted() { [[ " $steps " == *" $1 "* ]]; }

wanted machine && step machine "$py" -c "import datetime, os, platform, torch; from importlib.metadata import version as v
print(datetime.date.today(), platform.machine(), platform.processor() or '', os.cpu_count(), 'cores;',
      'torch threads', torch.get_num_threads(), *(f'{n} {v(n)}' for n in ('torch', 'transformers', 'transformer-lens')))"
wanted demo && step demo "$py" -m psheads demo --quiet
wanted reproduce && step reproduce "$py" -m psheads reproduce --quiet --out "$scratch/report.html"
wanted train && step train "$py" -m psheads train letter --quiet --out "$scratch/letter" --steps 20 --warmup 2 \
  --eval-prompts 256 --dynamics-prompts 32
wanted score_speed && step score_speed "$py" benchmarks/score_speed.py
wanted gemma && step gemma "$py" benchmarks/long_prompts.py --weights gemma-3-270m --lengths 512 2048 --repeats 2
