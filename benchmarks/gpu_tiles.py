"""The swap score on a GPU with several tile sizes of its compiled pair kernel.

Random weights in Qwen2.5-0.5B's shape (24 layers x 14 heads), bf16, one prompt of random tokens.
For each tile size: a first call (compilation included), then a warm call, timed between device
synchronisations, its CUDA peak above the weights, and the largest difference of its scores from
the first tile size's.

Usage: python benchmarks/gpu_tiles.py [LENGTH]   (default 8192; needs a CUDA device)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
from long_prompts import RANDOM, random_directory  # benchmarks/long_prompts.py

import psheads
from psheads.measure import methods
from psheads.models import zoo

SIZES = [(64, 512), (256, 2048), (1024, 4096), (2048, 8192)]
"""(heavier ranks per tile, lighter ranks per column chunk)."""


def timed_scores(lens: psheads.RopeLens, tokens: torch.Tensor):
    torch.cuda.synchronize()
    start = time.perf_counter()
    frame = psheads.score_heads(lens, tokens, method="swap", batch_size=1, progress=False)
    torch.cuda.synchronize()
    return time.perf_counter() - start, frame


def main() -> None:
    length = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    weights = "qwen2.5-0.5b-random"
    with tempfile.TemporaryDirectory() as scratch:
        model = zoo.boot_local(random_directory(Path(scratch), weights), dtype=torch.bfloat16, device="cuda")
        lens = psheads.RopeLens(model)
        tokens = torch.randint(0, RANDOM[weights][2]["vocab_size"], (1, length),
                               generator=torch.Generator().manual_seed(0))
        print(f"{weights} in bfloat16, one prompt of {length} tokens; {torch.cuda.get_device_name()}")
        reference = None
        for size in SIZES:
            methods.TILES["cuda"] = size
            torch._dynamo.reset()  # a new static shape: compile afresh
            first, _ = timed_scores(lens, tokens)
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            warm, frame = timed_scores(lens, tokens)
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            numeric = frame.select_dtypes("number").columns
            reference = frame if reference is None else reference
            diff = float((frame[numeric] - reference[numeric]).abs().max().max())
            print(f"tiles {size[0]:5d} x {size[1]:5d}: first {first:7.2f} s, warm {warm:7.2f} s, "
                  f"peak {peak:7.0f} MB, max diff {diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
