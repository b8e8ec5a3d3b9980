"""score_heads at a zoo LLM's long context: time and peak memory against the model's own forwards.

One prompt of natural text (the prose that ships in ``psheads.data``, repeated to the length)
per call, each call in a fresh subprocess: the bridge's forward (eager attention: every layer's
[head, query, key] scores), the Hugging Face model's own SDPA forward, and ``score_heads`` with
each method (above ``SCORES_BYTES`` its capture runs SDPA, see docs/scale.md). Peak memory is the
RSS growth above the RSS after loading and warming up the model, sampled every 2 ms.

Usage: python benchmarks/long_context.py --weights smollm2-135m --length 8192 [--calls forward sdpa anova swap]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rss import peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)

import psheads  # noqa: E402
from psheads import data  # noqa: E402
from psheads.models import zoo  # noqa: E402

CALLS = ("forward", "sdpa", "anova", "swap")


def prompt(model, length: int) -> torch.Tensor:
    """``[1, length]`` tokens of the shipped prose, repeated as often as needed."""
    ids = model.to_tokens(data.path("prose.txt").read_text(encoding="utf-8"))[0]
    return ids.repeat(length // len(ids) + 1)[:length][None]


def child(weights: str, call: str, length: int) -> None:
    """One call in this process; prints ``{"seconds": …, "peak_mb": …}``."""
    directory = zoo.load_pretrained(weights).info["directory"]
    model = zoo.boot_local(directory)
    tokens = prompt(model, length)
    if call == "sdpa":
        import transformers

        hf = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="sdpa").eval()

        def run() -> None:
            with torch.no_grad():
                hf(tokens, logits_to_keep=1)
    elif call == "forward":
        def run() -> None:
            with torch.no_grad():
                model(tokens)
    else:
        lens = psheads.RopeLens(model)
        psheads.score_heads(lens, tokens[:, :64], method=call, progress=False)  # warm-up (and the self-check)

        def run() -> None:
            psheads.score_heads(lens, tokens, method=call, batch_size=1, progress=False)
    if call in ("forward", "sdpa"):
        with torch.no_grad():
            (hf if call == "sdpa" else model)(tokens[:, :64])  # warm-up
    start = time.perf_counter()
    peak = peak_rss_growth_mb(run)
    print(json.dumps({"seconds": time.perf_counter() - start, "peak_mb": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=list(zoo.LLMS), default="smollm2-135m")
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--calls", nargs="+", choices=CALLS, default=list(CALLS))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one call may take")
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print(f"{args.weights}, one prompt of {args.length} tokens, torch threads {torch.get_num_threads()}")
    print(f"{'call':>8} {'seconds':>9} {'peak MB':>9}")
    for call in args.calls:
        try:
            out = subprocess.run([sys.executable, __file__, "--child", args.weights, call, str(args.length)],
                                 capture_output=True, text=True, check=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{call:>8} {'> ' + str(int(args.timeout)):>9} {'—':>9}", flush=True)
            continue
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{call:>8} {result['seconds']:>9.1f} {result['peak_mb']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
