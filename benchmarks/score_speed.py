"""score_heads vs a plain forward pass and vs the brute-force swap-and-rerun oracle.

Paper B's model shape (random GPT-J: 12 layers x 1 head, hidden 128), 17-token prompts. All
timings are taken side by side in one run, interleaved, best of 5: the call users write,
``score_heads(model, prompts)`` (its checked lens is reused across calls on an unchanged model),
the same with a ``RopeLens`` and with ``method="anova"``, against a plain forward of the same
batches. The oracle (tests/oracle.py, which re-runs the model once per swap) is timed on a
subset and compared per prompt. Peak memory is measured in fresh subprocesses (peak RSS above the
RSS just before the call, sampled every 2 ms) for two prompt counts. With ``--device cuda`` the
model runs on the GPU, every timing ends with a device synchronisation, and the oracle and the
memory measurement (CPU only) are left out.

Usage: python benchmarks/score_speed.py [--prompts 128] [--oracle-prompts 8] [--memory 256 2048] [--device cuda]
       [--precisions auto float32]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rss import peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)

from psheads import RopeLens, score_heads  # noqa: E402
from psheads.models import zoo  # noqa: E402

LENGTH = 17


def prompts(n: int, vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (n, LENGTH), generator=torch.Generator().manual_seed(seed))


def timed(fn) -> float:
    """Seconds ``fn`` takes, its device work included."""
    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else (lambda: None)
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def peak_rss_mb(n_prompts: int, batch_size: int) -> float:
    """Run in a child: peak RSS growth (MB) while score_heads runs over n_prompts (sampled)."""
    out = subprocess.run([sys.executable, __file__, "--memory-child", str(n_prompts), "--batch-size", str(batch_size)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def memory_child(n_prompts: int, batch_size: int) -> None:
    model = zoo.random_gptj(seed=0)
    lens = RopeLens(model)
    score_heads(lens, prompts(8, int(model.cfg.d_vocab)), batch_size=batch_size, progress=False)  # warm-up
    tokens = prompts(n_prompts, int(model.cfg.d_vocab))
    print(peak_rss_growth_mb(lambda: score_heads(lens, tokens, batch_size=batch_size, progress=False)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--oracle-prompts", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--memory", type=int, nargs=2, default=[256, 2048])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precisions", nargs="+", default=["auto"], choices=["auto", "float64", "float32"],
                        help="score_heads' precision policies (the analysis dtype), timed side by side")
    parser.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        memory_child(args.memory_child, args.batch_size)
        return
    from tests.oracle import (
        brute_force_swap_attention,
        make_blocks,
        swap_scores_from_attention,
    )

    model = zoo.random_gptj(seed=0).to(args.device)
    lens = RopeLens(model)
    tokens = prompts(args.prompts, int(model.cfg.d_vocab))
    score_heads(model, tokens[:8], progress=False)  # warm-up (and the model's checked lens)

    on_device = tokens.to(args.device)

    def plain() -> None:
        with torch.no_grad():
            for start in range(0, len(tokens), args.batch_size):
                model(on_device[start : start + args.batch_size])

    runs = {}
    for precision in args.precisions:
        options = {"batch_size": args.batch_size, "precision": precision, "progress": False}
        named = "" if args.precisions == ["auto"] else f", precision='{precision}'"
        runs.update({
            f"score_heads(model, prompts{named})": lambda o=options: score_heads(model, tokens, **o),
            f"score_heads(lens, prompts{named})": lambda o=options: score_heads(lens, tokens, **o),
            f"score_heads(model, prompts, method='anova'{named})": lambda o=options: score_heads(
                model, tokens, method="anova", **o),
        })
    blocks = make_blocks(range(LENGTH - 1), 1)

    def oracle() -> None:
        for prompt in tokens[: args.oracle_prompts]:
            for layer in range(lens.n_layers):
                truth = brute_force_swap_attention(model, prompt, layer, LENGTH - 1, blocks)
                swap_scores_from_attention(truth["d_base"], truth["d_swapped"], truth["pairs"])

    plains: list[float] = []
    fasts: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(5):  # interleaved, best of 5 each: all see the same machine noise
        plains.append(timed(plain))
        for name, run in runs.items():
            fasts[name].append(timed(run))
    t_plain = min(plains)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"torch threads {torch.get_num_threads()}"
    print(f"paper-B GPT-J (12 layers x 1 head, hidden 128), {args.prompts} prompts of {LENGTH} tokens, "
          f"batch {args.batch_size}, {where}")
    width = max(45, *map(len, fasts))
    print(f"{'plain forward (best of 5)':{width}s} {t_plain * 1e3:8.1f} ms")
    for name, times in fasts.items():
        print(f"{name:{width}s} {min(times) * 1e3:8.1f} ms   {min(times) / t_plain:5.2f}x the plain forward")
    if args.device != "cpu":
        return
    t_oracle = timed(oracle)
    per_fast = min(next(iter(fasts.values()))) / args.prompts
    per_oracle = t_oracle / args.oracle_prompts
    print(f"per prompt: score_heads {per_fast * 1e3:.2f} ms, oracle (swap and re-run) {per_oracle * 1e3:.1f} ms "
          f"-> score_heads is {per_oracle / per_fast:.0f}x faster")
    small, large = args.memory
    mem_small, mem_large = peak_rss_mb(small, args.batch_size), peak_rss_mb(large, args.batch_size)
    print(f"peak RSS growth: {small} prompts {mem_small:.1f} MB, {large} prompts {mem_large:.1f} MB")


if __name__ == "__main__":
    main()
