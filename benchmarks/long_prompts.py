"""score_heads at real-LLM prompt lengths vs a plain forward, on Gemma-3 270M's configuration.

Random weights with Gemma-3 270M's real configuration (18 layers x 4 heads, 1 KV head, d_head 256,
hidden 640, vocabulary 262144, sliding window 512 on 5 of every 6 layers, RoPE bases 1e4 local /
1e6 global, QK-norm), booted offline as a TransformerBridge. For each length the plain forward
and score_heads (both methods) run side by side on the same batch, interleaved, best of
``--repeats``. Peak memory is measured in fresh subprocesses (RSS sampled every 2 ms while
score_heads runs, above the RSS just before it) for two prompt counts, by_frequency included, to
show it does not grow with the number of prompts.

Usage: python benchmarks/long_prompts.py [--lengths 512 2048] [--batch 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import transformers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rss import peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)

import psheads  # noqa: E402
from psheads import zoo  # noqa: E402
from psheads.tasks import word_tokenizer  # noqa: E402

GEMMA3_270M = dict(
    vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
    num_key_value_heads=1, head_dim=256, sliding_window=512, query_pre_attn_scalar=256,
    max_position_embeddings=32768, layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3,
    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}},
)


def build(directory: Path) -> None:
    """Save a seeded random Gemma-3 270M look-alike (with a small word tokenizer) to ``directory``."""
    if (directory / "config.json").exists():
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**GEMMA3_270M)).eval()
    model.save_pretrained(directory)
    word_tokenizer([f"w{i}" for i in range(64)]).save_pretrained(directory)


def tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, GEMMA3_270M["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(seed))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def memory_child(directory: str, n_prompts: int, length: int, batch: int, by_frequency: bool) -> None:
    model = zoo.boot_local(directory)
    lens = psheads.RopeLens(model)
    layers = [5] if by_frequency else None  # one global layer: per-plane scores cost |S|² per plane
    psheads.score_heads(lens, tokens(batch, 64), batch_size=batch, layers=layers, by_frequency=by_frequency)
    prompts = tokens(n_prompts, length)
    print(peak_rss_growth_mb(lambda: psheads.score_heads(lens, prompts, batch_size=batch, layers=layers,
                                                         by_frequency=by_frequency)))


def peak_rss_mb(directory: Path, n_prompts: int, length: int, batch: int, by_frequency: bool) -> float:
    command = [sys.executable, __file__, "--memory-child", str(directory), str(n_prompts), str(length), str(batch),
               str(int(by_frequency))]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--batch", type=int, default=2, help="prompts per forward pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", type=int, nargs=2, default=[2, 8], help="prompt counts for peak memory")
    parser.add_argument("--skip-timing", action="store_true", help="only the memory measurement")
    parser.add_argument("--memory-length", type=int, default=2048, help="prompt length for peak memory")
    parser.add_argument("--frequency-length", type=int, default=512,
                        help="prompt length for peak memory with by_frequency (every plane of layer 5)")
    parser.add_argument("--memory-child", nargs=5, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        directory, n_prompts, length, batch, by_frequency = args.memory_child
        memory_child(directory, int(n_prompts), int(length), int(batch), bool(int(by_frequency)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "gemma3-270m-random"
        build(directory)
        model = zoo.boot_local(directory)
        lens = psheads.RopeLens(model)
        print(f"{lens}; torch threads {torch.get_num_threads()}; batch {args.batch}; best of {args.repeats}")
        print(f"{'tokens':>6} {'forward':>9} {'swap':>9} {'ratio':>6} {'anova':>9} {'ratio':>6}")
        for length in [] if args.skip_timing else args.lengths:
            batch = tokens(args.batch, length)

            def plain() -> None:
                with torch.no_grad():
                    model(batch)

            def score(method: str):
                return lambda: psheads.score_heads(model, batch, method=method, batch_size=args.batch)

            plain()
            times: dict[str, list[float]] = {"forward": [], "swap": [], "anova": []}
            for _ in range(args.repeats):
                times["forward"].append(timed(plain))
                times["swap"].append(timed(score("swap")))
                times["anova"].append(timed(score("anova")))
            best = {name: min(values) for name, values in times.items()}
            print(f"{length:>6} {best['forward']:>8.2f}s {best['swap']:>8.2f}s {best['swap'] / best['forward']:>5.2f}x "
                  f"{best['anova']:>8.2f}s {best['anova'] / best['forward']:>5.2f}x")
        small, large = args.memory
        for by_frequency, length in ((False, args.memory_length), (True, args.frequency_length)):
            peaks = [peak_rss_mb(directory, n, length, args.batch, by_frequency) for n in (small, large)]
            what = "by_frequency (layer 5)" if by_frequency else "all layers"
            print(f"peak RSS growth at {length} tokens, {what}: {small} prompts {peaks[0]:.0f} MB, "
                  f"{large} prompts {peaks[1]:.0f} MB")


if __name__ == "__main__":
    main()
