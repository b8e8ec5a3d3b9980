"""Cost of a forward under a KV-cache policy vs the plain SDPA forward of the same batch, side by side.

Usage: python benchmarks/policy_forward.py [--model smollm2-135m] [--lengths 2048 4096] [--budget 0.5] [--repeats 3]

The model runs as a plain Hugging Face model with SDPA attention (``load_pretrained(name,
backend="transformers")``; a zoo LLM needs its extra). The policy is a random map of the model (the
cost does not depend on which heads are streamed, only on how many layers have one). Prints the
median time of each, interleaved so that both see the same machine load, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from psheads.models import zoo
from psheads.policy import HeadPolicy, attention_shape, windowed


def forward(model: torch.nn.Module, tokens: torch.Tensor) -> None:
    """One forward computing only the last position's logits."""
    with torch.no_grad():
        model(input_ids=tokens, logits_to_keep=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = zoo.load_pretrained(args.model, backend="transformers").model
    shape = attention_shape(model)
    grid = np.random.default_rng(0).random((len(shape.layers), shape.n_kv_heads))
    policy = HeadPolicy.from_kv_scores(grid, n_heads=shape.n_heads, layers=shape.layers).for_shape(shape)
    print(f"{args.model}, {torch.get_num_threads()} threads, {args.budget:.0%} of KV heads streamed "
          f"(sink {policy.sink}, recent {policy.recent}), median of {args.repeats}")
    for length in args.lengths:
        tokens = torch.randint(100, 1000, (1, length), generator=torch.Generator().manual_seed(0))
        plain, masked = [], []

        forward(model, tokens)  # warm-up
        for _ in range(args.repeats):
            start = time.perf_counter()
            forward(model, tokens)
            plain.append(time.perf_counter() - start)
            with windowed(model, policy, budget=args.budget):
                start = time.perf_counter()
                forward(model, tokens)
                masked.append(time.perf_counter() - start)
        t_plain, t_masked = statistics.median(plain), statistics.median(masked)
        print(f"{length:>6} tokens   plain SDPA {t_plain:7.2f} s   under the policy {t_masked:7.2f} s   "
              f"{t_masked / t_plain:.2f}x")


if __name__ == "__main__":
    main()
