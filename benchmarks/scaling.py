"""How score_heads scales: with the number of processes, and with the prompt length.

Random weights in SmolLM2-135M's shape (30 layers x 9 heads, 3 KV heads, d_head 64, every layer
global), random tokens, all in one run:

1. **Processes.** The same prompts scored by one process with ``--threads`` torch threads, then
   under ``torchrun`` by N processes with ``threads / N`` threads each (the total thread count
   fixed, as on one machine), for every N in ``--processes``. Rank 0 times the call between two
   barriers. The frames are checked equal to the one-process frame.
2. **Prompt length.** At each of ``--lengths``: the plain forward and ``score_heads`` (swap and
   anova) side by side on the same batch, and the peak RSS growth of each in a fresh subprocess.
3. **Model size.** For each of ``--sizes`` (random weights in the shapes of SmolLM2-135M,
   Qwen2.5-0.5B and Qwen2.5-1.5B): the plain forward and ``score_heads`` on one prompt of
   ``--size-length`` tokens, as seconds per head. For the shapes of ``--planned`` (up to
   Qwen2.5-72B), built on the meta device (no weights): the memory the engine plans at
   ``--planned-length`` tokens, from the parameter count and the engine's own bounds.

Prints the tables, writes them to ``--out`` (CSV) and, with ``--figures DIR``, writes
``scaling_processes.svg``, ``scaling_lengths.svg`` and ``scaling_sizes.svg`` there (plotly.js's
SVG export in headless Chromium, as ``scripts/docs_figures.py`` does).

Usage: python benchmarks/scaling.py [--processes 1 2] [--threads 2] [--lengths 256 512 1024 2048]
       [--sizes smollm2-135m qwen2.5-0.5b qwen2.5-1.5b] [--planned qwen2.5-7b qwen2.5-72b]
       [--out benchmarks/results/scaling] [--figures docs/figures]
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pandas as pd
import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rss import peak_rss_growth_mb  # noqa: E402  (benchmarks/rss.py)

import psheads  # noqa: E402
from psheads.models import zoo  # noqa: E402
from psheads.tasks import word_tokenizer  # noqa: E402

SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                    rope_theta=100_000.0, tie_word_embeddings=True)
"""SmolLM2-135M's configuration (Llama family)."""

_QWEN = dict(max_position_embeddings=32768, rope_theta=1_000_000.0)
SHAPES = {
    "smollm2-135m": (transformers.LlamaForCausalLM, transformers.LlamaConfig, SMOLLM2_135M),
    "qwen2.5-0.5b": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, dict(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, tie_word_embeddings=True, **_QWEN)),
    "qwen2.5-1.5b": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, dict(
        vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, tie_word_embeddings=True, **_QWEN)),
    "qwen2.5-7b": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, dict(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, tie_word_embeddings=False, **_QWEN)),
    "qwen2.5-32b": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, dict(
        vocab_size=152064, hidden_size=5120, intermediate_size=27648, num_hidden_layers=64, num_attention_heads=40,
        num_key_value_heads=8, tie_word_embeddings=False, **_QWEN)),
    "qwen2.5-72b": (transformers.Qwen2ForCausalLM, transformers.Qwen2Config, dict(
        vocab_size=152064, hidden_size=8192, intermediate_size=29568, num_hidden_layers=80, num_attention_heads=64,
        num_key_value_heads=8, tie_word_embeddings=False, **_QWEN)),
}
"""Model shapes by name: (model class, config class, configuration of the published model)."""


def save_model(directory: Path, shape: str = "smollm2-135m") -> Path:
    """Seeded random weights in ``shape`` (with a small word tokenizer), saved in ``directory``."""
    model_class, config_class, config = SHAPES[shape]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_class(config_class(**config)).eval()
    model.save_pretrained(directory)
    word_tokenizer([f"w{i}" for i in range(64)]).save_pretrained(directory)
    return directory


def tokens(n: int, length: int) -> torch.Tensor:
    return torch.randint(0, SMOLLM2_135M["vocab_size"], (n, length), generator=torch.Generator().manual_seed(0))


# --- 1. processes ----------------------------------------------------------------------------------
def worker(directory: str, n: int, length: int, batch: int, out: str) -> None:
    """Under torchrun (or alone): score, time between barriers, rank 0 pickles (seconds, frame)."""
    import torch.distributed as dist

    from psheads.interface.distributed import world

    model = zoo.boot_local(directory)
    lens = psheads.RopeLens(model)
    prompts = tokens(n, length)
    psheads.score_heads(lens, prompts[:batch], batch_size=batch, progress=False)  # warm-up, every rank
    here = world()
    if here.size > 1:
        dist.barrier()
    start = time.perf_counter()
    frame = psheads.score_heads(lens, prompts, batch_size=batch, progress=False)
    if here.size > 1:
        dist.barrier()
    seconds = time.perf_counter() - start
    if here.main:
        Path(out).write_bytes(pickle.dumps((seconds, frame)))


def processes(directory: Path, counts: list[int], threads: int, n: int, length: int, batch: int) -> pd.DataFrame:
    rows, first = [], None
    with tempfile.TemporaryDirectory() as scratch:
        for count in counts:
            if threads % count:
                raise SystemExit(f"--threads {threads} does not split over {count} processes")
            per = threads // count
            env = {**os.environ, "OMP_NUM_THREADS": str(per), "MKL_NUM_THREADS": str(per)}
            out = Path(scratch) / f"{count}.pkl"
            job = [__file__, "--worker", str(directory), str(n), str(length), str(batch), str(out)]
            launcher = ([sys.executable] if count == 1 else
                        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(count)])
            subprocess.run(launcher + job, env=env, check=True, capture_output=True)
            seconds, frame = pickle.loads(out.read_bytes())
            same = None
            if first is None:
                first = frame
            else:
                shared = ["positional", "symbolic"]
                same = float((frame[shared] - first[shared]).abs().to_numpy().max())
            rows.append({"processes": count, "threads_each": per, "prompts": n, "length": length, "seconds": seconds,
                         "prompts_per_s": n / seconds, "max_diff_vs_first": same})
    frame = pd.DataFrame(rows)
    frame["speedup"] = frame["prompts_per_s"] / frame["prompts_per_s"].iloc[0]
    return frame


# --- 2. prompt length ------------------------------------------------------------------------------
def memory_child(directory: str, what: str, length: int, batch: int) -> None:
    model = zoo.boot_local(directory)
    lens = psheads.RopeLens(model)
    prompts = tokens(batch, length)
    psheads.score_heads(lens, tokens(batch, 64), batch_size=batch, progress=False)  # warm-up
    if what == "forward":
        def call() -> None:
            with torch.no_grad():
                model(prompts)
    else:
        def call() -> None:
            psheads.score_heads(lens, prompts, method=what, batch_size=batch, progress=False)
    print(peak_rss_growth_mb(call))


def peak_mb(directory: Path, what: str, length: int, batch: int) -> float:
    command = [sys.executable, __file__, "--memory-child", str(directory), what, str(length), str(batch)]
    return float(subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])


def lengths(directory: Path, sizes: list[int], batch: int) -> pd.DataFrame:
    model = zoo.boot_local(str(directory))
    lens = psheads.RopeLens(model)
    rows = []
    for length in sizes:
        prompts = tokens(batch, length)
        timings = {}
        for what in ("forward", "swap", "anova"):
            start = time.perf_counter()
            if what == "forward":
                with torch.no_grad():
                    model(prompts)
            else:
                psheads.score_heads(lens, prompts, method=what, batch_size=batch, progress=False)
            timings[what] = time.perf_counter() - start
        for what, seconds in timings.items():
            rows.append({"length": length, "call": what, "seconds": seconds, "ratio": seconds / timings["forward"],
                         "peak_mb": peak_mb(directory, what, length, batch)})
        print(pd.DataFrame(rows[-3:]).to_string(index=False), flush=True)
    return pd.DataFrame(rows)


# --- 3. model size ---------------------------------------------------------------------------------
def sizes(shapes: list[str], length: int, scratch: Path) -> pd.DataFrame:
    """Seconds per head of the forward and of ``score_heads`` on one random prompt, by model shape
    (after a warm-up call, best of 2, interleaved)."""
    rows = []
    for shape in shapes:
        model = zoo.boot_local(str(save_model(scratch / shape, shape)))
        lens = psheads.RopeLens(model)
        prompt = torch.randint(0, int(model.cfg.d_vocab), (1, length), generator=torch.Generator().manual_seed(0))
        n_heads = int(model.cfg.n_layers) * int(model.cfg.n_heads)
        n_params = sum(p.numel() for p in model.original_model.parameters())
        psheads.score_heads(lens, prompt[:, :32], batch_size=1, progress=False)  # warm-up
        timings: dict[str, float] = {}
        for _ in range(2):
            for what in ("forward", "swap", "anova"):
                start = time.perf_counter()
                if what == "forward":
                    with torch.no_grad():
                        model(prompt)
                else:
                    psheads.score_heads(lens, prompt, method=what, batch_size=1, progress=False)
                timings[what] = min(timings.get(what, math.inf), time.perf_counter() - start)
        for what, seconds in timings.items():
            rows.append({"shape": shape, "parameters": n_params, "heads": n_heads, "length": length, "call": what,
                         "seconds": seconds, "ms_per_head": 1e3 * seconds / n_heads,
                         "ratio": seconds / timings["forward"]})
        print(pd.DataFrame(rows[-3:]).to_string(index=False), flush=True)
        del model, lens
        shutil.rmtree(scratch / shape)
    return pd.DataFrame(rows)


def planned(shapes: list[str], length: int, batch: int) -> pd.DataFrame:
    """The memory ``score_heads`` plans for one batch, on meta-device shapes (no weights allocated).

    weights: the parameters in bf16. capture: k̃ in fp32 (the capture upcasts), ``[batch, length,
    kv head, d_head]``, plus q at the query, of every layer, or of one layer where the input is long
    (one layer's eager [batch, head, query, key] scores above ``SCORES_BYTES``: the engine streams
    the layers). attention: one layer's eager scores in fp32 where they fit ``SCORES_BYTES``; above
    it the SDPA capture forms none (0). analysis: the fp64 intermediates, each cut to ``CHUNK_BYTES``.
    """
    from psheads.measure.engine import CHUNK_BYTES
    from psheads.rope.backends.base import SCORES_BYTES

    rows = []
    for shape in shapes:
        model_class, config_class, config = SHAPES[shape]
        with torch.device("meta"):
            model = model_class(config_class(**config))
        cfg = model.config
        d_head = cfg.hidden_size // cfg.num_attention_heads
        n_layers, n_heads, n_kv = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
        scores = batch * n_heads * length**2 * 4
        held = 1 if scores > SCORES_BYTES else n_layers  # layers whose capture is held at once
        rows.append({
            "shape": shape, "parameters": sum(p.numel() for p in model.parameters()), "heads": n_layers * n_heads,
            "length": length, "batch": batch, "weights_gb": sum(p.numel() for p in model.parameters()) * 2 / 1e9,
            "capture_layers": held, "capture_gb": held * batch * (length * n_kv + n_heads) * d_head * 4 / 1e9,
            "attention_gb": (scores if scores <= SCORES_BYTES else 0) / 1e9,
            "analysis_chunk_gb": CHUNK_BYTES / 1e9,
        })
    return pd.DataFrame(rows)


def figures(by_processes: pd.DataFrame, by_length: pd.DataFrame, folder: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    sys.path.insert(0, str(ROOT / "scripts"))
    from docs_figures import export_svg  # plotly.js's own SVG export, in headless Chromium

    figure = go.Figure(go.Bar(x=by_processes["processes"].astype(str), y=by_processes["prompts_per_s"],
                              text=[f"{s:.2f}×" for s in by_processes["speedup"]], textposition="outside"))
    figure.update_layout(title="score_heads throughput vs processes (fixed total threads)", width=560, height=380,
                         xaxis_title="processes (torchrun)", yaxis_title="prompts per second", template="plotly_white")
    export_svg(figure, folder / "scaling_processes.svg")
    figure = make_subplots(rows=1, cols=2, subplot_titles=("time", "peak RSS growth"))
    for call, rows in by_length.groupby("call", sort=False):
        figure.add_trace(go.Scatter(x=rows["length"], y=rows["seconds"], name=call, mode="lines+markers",
                                    legendgroup=call), row=1, col=1)
        figure.add_trace(go.Scatter(x=rows["length"], y=rows["peak_mb"], name=call, mode="lines+markers",
                                    legendgroup=call, showlegend=False), row=1, col=2)
    figure.update_xaxes(type="log", title="prompt length (tokens)")
    figure.update_yaxes(type="log", title="seconds", row=1, col=1)
    figure.update_yaxes(title="MB", row=1, col=2)
    figure.update_layout(title="score_heads vs a plain forward, by prompt length", width=900, height=380,
                         template="plotly_white")
    export_svg(figure, folder / "scaling_lengths.svg")


def size_figure(by_size: pd.DataFrame, plan: pd.DataFrame, folder: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    sys.path.insert(0, str(ROOT / "scripts"))
    from docs_figures import export_svg

    length, planned_length = int(by_size["length"].iloc[0]), int(plan["length"].iloc[0])
    figure = make_subplots(rows=1, cols=2, subplot_titles=(
        f"time per head, {length} tokens (random weights)", f"planned memory at {planned_length:,} tokens (meta)"))
    for call, rows in by_size.groupby("call", sort=False):
        figure.add_trace(go.Scatter(x=rows["parameters"] / 1e9, y=rows["ms_per_head"], name=call,
                                    mode="lines+markers", text=rows["shape"]), row=1, col=1)
    for column, name in (("weights_gb", "weights (bf16)"), ("capture_gb", "captured k̃ held (fp32)")):
        figure.add_trace(go.Bar(x=plan["shape"], y=plan[column], name=name), row=1, col=2)
    figure.update_xaxes(type="log", title="parameters (billions)", row=1, col=1)
    figure.update_yaxes(title="ms per head", row=1, col=1)
    figure.update_yaxes(type="log", title="GB", row=1, col=2)
    figure.update_layout(title="score_heads by model size", width=900, height=380, template="plotly_white")
    export_svg(figure, folder / "scaling_sizes.svg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--threads", type=int, default=2, help="total torch threads, split over the processes")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--length", type=int, default=256, help="prompt length of the processes part")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="*", default=[256, 512, 1024, 2048])
    parser.add_argument("--sizes", nargs="*", default=["smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b"],
                        choices=list(SHAPES), help="shapes timed with random weights")
    parser.add_argument("--size-length", type=int, default=256, help="prompt length of the model-size part")
    parser.add_argument("--planned", nargs="*", default=list(SHAPES), choices=list(SHAPES),
                        help="shapes whose memory plan is computed on the meta device")
    parser.add_argument("--planned-length", type=int, default=32768)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scaling")
    parser.add_argument("--figures", type=Path, default=None, help="folder for the SVG figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        directory = save_model(Path(scratch) / "smollm2-135m-random")
        by_processes = (processes(directory, args.processes, args.threads, args.prompts, args.length, args.batch)
                        if args.processes else pd.DataFrame())
        if len(by_processes):
            print(by_processes.to_string(index=False), flush=True)
        torch.set_num_threads(args.threads)
        by_length = lengths(directory, args.lengths, 1) if args.lengths else pd.DataFrame()
        by_size = sizes(args.sizes, args.size_length, Path(scratch)) if args.sizes else pd.DataFrame()
    plan = planned(args.planned, args.planned_length, 1)
    print(plan.to_string(index=False), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in (("processes", by_processes), ("lengths", by_length), ("sizes", by_size), ("planned", plan)):
        if len(table):
            table.to_csv(args.out / f"{name}.csv", index=False)
    if args.figures is not None and len(by_length) and len(by_processes):
        figures(by_processes, by_length, args.figures)
    if args.figures is not None and len(by_size) and len(plan):
        size_figure(by_size, plan, args.figures)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) > 1 and sys.argv[1] == "--memory-child":
        memory_child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
