"""score_heads at a long context: time and peak memory against the model's own forwards.

One prompt per call: natural text for a zoo LLM (the prose that ships in ``psheads.data``,
repeated to the length), random tokens for a random-weight shape of ``long_prompts.py``
(``random``: Gemma 3 270M's configuration; ``qwen2.5-1.5b-random``). The calls: the bridge's
forward (eager attention: every layer's [head, query, key] scores), the Hugging Face model's own
SDPA forward, and ``score_heads`` with each method (above ``SCORES_BYTES`` its capture runs SDPA,
see docs/scale.md). ``score_heads`` is warmed up on a prompt of up to 2,048 tokens first, so the
fused pair kernel's compilation is not timed.

On the CPU each call runs in a fresh subprocess and its peak memory is the RSS growth above the
RSS after loading and warming up the model, sampled every 2 ms. The subprocesses run with glibc's
mmap threshold fixed at 128 KiB (``rss.LIVE_MEMORY_ENV``), so every tensor larger than that is
returned to the system when freed and the RSS follows the live tensors: without it, what the
warm-up left in malloc's free lists decided the peaks (the same SDPA forward of SmolLM2 at 8,192
tokens: 594 MB after a 64-token warm-up, 1011 MB after a 2,048-token one). With ``--device cuda``
all calls run in one process, each once at full length untimed (kernels compiled, caches warm) and then
timed between device synchronisations; the peak is the CUDA allocator's peak above what was
allocated before the call (the weights). ``--dtype`` sets the weights' dtype (bfloat16 lets SDPA
use its flash kernels on a GPU).

Usage: python benchmarks/long_context.py --weights smollm2-135m --lengths 8192 [--calls forward sdpa anova swap]
       [--precision float32]
       python benchmarks/long_context.py --weights random --lengths 2048 32768 --device cuda --calls sdpa anova swap
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from long_prompts import RANDOM, random_directory  # noqa: E402  (benchmarks/long_prompts.py)
from rss import LIVE_MEMORY_ENV, peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)

import psheads  # noqa: E402
from psheads import data  # noqa: E402
from psheads.models import zoo  # noqa: E402

CALLS = ("forward", "sdpa", "anova", "swap")


def prompt(model, weights: str, length: int) -> torch.Tensor:
    """``[1, length]`` tokens: random ids for a random shape, else the shipped prose repeated."""
    if weights in RANDOM:
        return torch.randint(0, RANDOM[weights][2]["vocab_size"], (1, length),
                             generator=torch.Generator().manual_seed(0))
    ids = model.to_tokens(data.path("prose.txt").read_text(encoding="utf-8"))[0]
    return ids.repeat(length // len(ids) + 1)[:length][None].cpu()


class Calls:
    """The calls on one model directory, booted once on ``device``."""

    def __init__(self, directory: str, weights: str, device: str, dtype: torch.dtype = torch.float32,
                 precision: str = "auto") -> None:
        self.directory, self.weights, self.device, self.dtype = directory, weights, device, dtype
        self.precision = precision
        self.model = zoo.boot_local(directory, dtype=dtype, device=device)
        self.hf: transformers.PreTrainedModel | None = None
        self.lens: psheads.RopeLens | None = None

    def runner(self, call: str, length: int) -> Callable[[], None]:
        """``call`` on one prompt of ``length`` tokens, warmed up."""
        tokens = prompt(self.model, self.weights, length)  # score_heads moves them to the model itself
        if call == "sdpa":
            if self.hf is None:
                self.hf = transformers.AutoModelForCausalLM.from_pretrained(
                    self.directory, attn_implementation="sdpa", dtype=self.dtype).to(self.device).eval()
            forward = self.hf

            def run() -> None:
                with torch.no_grad():
                    forward(tokens.to(self.device), logits_to_keep=1)
        elif call == "forward":
            forward = self.model

            def run() -> None:
                with torch.no_grad():
                    forward(tokens.to(self.device))
        else:
            if self.lens is None:
                self.lens = psheads.RopeLens(self.model)
            lens, precision = self.lens, self.precision
            # warm-up: the self-check, and the pair kernel's compilation past its threshold
            psheads.score_heads(lens, tokens[:, :2048], method=call, batch_size=1, precision=precision, progress=False)

            def run() -> None:
                psheads.score_heads(lens, tokens, method=call, batch_size=1, precision=precision, progress=False)
        if call in ("forward", "sdpa"):
            with torch.no_grad():
                forward(tokens[:, :64].to(self.device))  # warm-up
        return run

    def measure(self, call: str, length: int) -> dict[str, float]:
        """``{"seconds": …, "peak_mb": …}`` of one call."""
        run = self.runner(call, length)
        if self.device == "cpu":
            start = time.perf_counter()
            peak = peak_rss_growth_mb(run)
            return {"seconds": time.perf_counter() - start, "peak_mb": peak}
        run()  # warm: compiled kernels and allocator caches ready at this length
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        return {"seconds": time.perf_counter() - start, "peak_mb": (torch.cuda.max_memory_allocated() - base) / 2**20}


def child(directory: str, weights: str, call: str, length: int, dtype: str, precision: str) -> None:
    """One CPU call in this process; prints ``{"seconds": …, "peak_mb": …}``."""
    print(json.dumps(Calls(directory, weights, "cpu", getattr(torch, dtype), precision).measure(call, length)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=[*zoo.LLMS, *RANDOM], default="smollm2-135m")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8192])
    parser.add_argument("--calls", nargs="+", choices=CALLS, default=list(CALLS))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--precision", default="auto", choices=["auto", "float64", "float32"],
                        help="score_heads' precision policy (the analysis dtype)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one CPU call may take")
    parser.add_argument("--child", nargs=6, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child[0], args.child[1], args.child[2], int(args.child[3]), args.child[4], args.child[5])
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.weights in RANDOM:
            directory = str(random_directory(Path(scratch), args.weights))
        else:
            directory = zoo.load_pretrained(args.weights).info["directory"]
        where = (torch.cuda.get_device_name() if args.device == "cuda"
                 else f"CPU, torch threads {torch.get_num_threads()}")
        print(f"{args.weights} in {args.dtype}, one prompt per call, precision={args.precision}; {where}")
        print(f"{'tokens':>6} {'call':>8} {'seconds':>9} {'peak MB':>9}")
        calls = (Calls(directory, args.weights, "cuda", getattr(torch, args.dtype), args.precision)
                 if args.device == "cuda" else None)
        for length in args.lengths:
            for call in args.calls:
                if calls is not None:
                    result = calls.measure(call, length)
                else:
                    try:
                        out = subprocess.run([sys.executable, __file__, "--child", directory, args.weights, call,
                                              str(length), args.dtype, args.precision], capture_output=True,
                                             text=True, check=True,
                                             timeout=args.timeout, env={**os.environ, **LIVE_MEMORY_ENV})
                    except subprocess.TimeoutExpired:
                        print(f"{length:>6} {call:>8} {'> ' + str(int(args.timeout)):>9} {'—':>9}", flush=True)
                        continue
                    result = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"{length:>6} {call:>8} {result['seconds']:>9.2f} {result['peak_mb']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
