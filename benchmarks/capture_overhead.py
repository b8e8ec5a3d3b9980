"""Cost of one psheads capture vs a plain forward pass, measured side by side.

Usage: python benchmarks/capture_overhead.py [--prompts 256] [--length 17] [--repeats 5]
Prints the median time of each and their ratio on paper B's GPT-J shape (random weights).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from psheads import RopeLens
from psheads.models import zoo


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--length", type=int, default=17)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    model = zoo.random_gptj(seed=0)
    lens = RopeLens(model)
    tokens = torch.randint(0, int(model.cfg.d_vocab), (args.prompts, args.length),
                           generator=torch.Generator().manual_seed(0))
    query = torch.full((args.prompts,), args.length - 1)
    layers = range(lens.n_layers)

    def plain() -> None:
        with torch.inference_mode():
            model(tokens)

    def capture() -> None:
        lens.backend.capture(tokens, layers, query_index=query)

    def planes() -> None:
        for _ in lens.frequency_logits_by_layer(tokens):
            pass

    t_plain = median_seconds(plain, args.repeats)
    t_capture = median_seconds(capture, args.repeats)
    t_planes = median_seconds(planes, args.repeats)
    print(f"paper-B GPT-J, {args.prompts} prompts x {args.length} tokens, median of {args.repeats}")
    print(f"plain forward                      {t_plain * 1e3:8.1f} ms   1.00x")
    print(f"capture q/k/tables, all 12 layers  {t_capture * 1e3:8.1f} ms   {t_capture / t_plain:.2f}x")
    print(f"+ per-plane logits, all layers     {t_planes * 1e3:8.1f} ms   {t_planes / t_plain:.2f}x")


if __name__ == "__main__":
    main()
