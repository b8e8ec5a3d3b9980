"""Length generalization of the shipped models: the curves shipped beside ``evaluation.csv``.

Boots each shipped model as users do (``psheads.load_pretrained``), runs
``psheads.lengthgen.length_generalization`` one length at a time and writes, per model,
``<out-dir>/<model>/length_generalization.csv`` (the frame) and ``length_generalization.json``
(settings, per-length timings and peak memory, versions, machine). Both files are rewritten
after every length, so an interrupted run keeps what it finished.

    python scripts/length_generalization.py                         # the shipped curves (long on a CPU)
    python scripts/length_generalization.py --n 32 --lengths 17 65 --out-dir /tmp/lg   # a quick check
    python scripts/length_generalization.py --n-at 4113=64          # fewer prompts at one length
    python scripts/length_generalization.py --lengths 4113 --merge  # redo one length, keep the others
    python scripts/length_generalization.py --forward hf            # the same weights in HF's own forward (faster)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch
import transformers

import psheads
from psheads.experiments.lengthgen import DEFAULT_TOKEN_BUDGET, length_generalization
from psheads.models import zoo

LENGTHS = (17, 33, 65, 145, 289, 529, 1041, 2065, 4113)
"""17 tokens (training) and 16·2^k + 17 beyond it, up to 4113 (242× the training length)."""
CSV, RECORD = "length_generalization.csv", "length_generalization.json"


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def _n_at(items: list[str]) -> dict[int, int]:
    out = {}
    for item in items:
        length, _, n = item.partition("=")
        if not (length.isdigit() and n.isdigit() and int(n) > 0):
            raise SystemExit(f"--n-at takes LENGTH=N, got {item!r}")
        out[int(length)] = int(n)
    return out


def _kept(folder: Path, record: dict, lengths: list[int]) -> tuple[list[pd.DataFrame], list[dict]]:
    """The rows and record entries of an earlier run for the lengths not run again (``--merge``)."""
    if not (folder / CSV).is_file() or not (folder / RECORD).is_file():
        return [], []
    earlier = json.loads((folder / RECORD).read_text())
    for key in ("seed", "token_budget", "answers", "task"):
        if earlier.get(key) != record[key]:
            raise SystemExit(f"--merge: {folder / RECORD} has {key}={earlier.get(key)!r}, this run {record[key]!r}")
    frame = pd.read_csv(folder / CSV, dtype={"hops": str})
    kept = [entry for entry in earlier["lengths"] if entry["length"] not in lengths]
    return [frame[frame["length"] == entry["length"]].reset_index(drop=True) for entry in kept], kept


def run_model(name: str, args: argparse.Namespace, n_at: dict[int, int]) -> pd.DataFrame:
    """Every length for one shipped model, writing the CSV and the record after each."""
    folder = Path(args.out_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    shipped = psheads.load_pretrained(name)
    model = shipped.model
    if args.forward == "hf":  # the same shipped weights in Hugging Face's own forward (no hooks; about 4x faster)
        model = transformers.AutoModelForCausalLM.from_pretrained(zoo.PRETRAINED_DIR / name, dtype=torch.float32)
    record = {
        "model": name, "task": shipped.task.name, "seed": args.seed, "token_budget": args.token_budget,
        "answers": args.answers, "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "boot_seconds": round(time.perf_counter() - started, 2), "lengths": [],
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "backend": type(shipped.model).__name__, "dtype": "float32", "device": "cpu"},
    }
    frames = []
    if args.merge:
        frames, record["lengths"] = _kept(folder, record, args.lengths)
    for length in args.lengths:
        n = n_at.get(length, args.n)
        frame = length_generalization(model, shipped.task, [length], n=n, seed=args.seed,
                                      token_budget=args.token_budget, answers=args.answers,
                                      progress=not args.quiet)
        frames.append(frame)
        seconds = frame.attrs["seconds"][0]
        accuracy = frame.set_index("hops")["accuracy"]
        record["task_options"], record["versions"] = frame.attrs["task_options"], frame.attrs["versions"]
        record["n_candidates"] = frame.attrs["n_candidates"]
        record["lengths"].append({"length": length, "n": n, "forward": type(model).__name__,
                                  "prompts_per_forward": frame.attrs["prompts_per_forward"][0],
                                  "seconds": round(seconds, 2), "seconds_per_prompt": round(seconds / n, 4),
                                  "peak_rss_mb": round(_peak_rss_mb(), 1), "accuracy": float(accuracy["all"])})
        record["total_seconds"] = round(time.perf_counter() - started, 2)
        record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        frames.sort(key=lambda frame: int(frame["length"].iloc[0]))
        record["lengths"].sort(key=lambda entry: entry["length"])
        pd.concat(frames, ignore_index=True).to_csv(folder / CSV, index=False)
        (folder / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        print(f"{name} {length:>5} tokens: accuracy {accuracy['all']:.4f} ("
              + ", ".join(f"{hops} hops {acc:.3f}" for hops, acc in accuracy.items() if hops != "all")
              + f") on {n} prompts in {seconds:.1f} s; peak RSS {_peak_rss_mb():.0f} MB", flush=True)
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=zoo.PRETRAINED, default=list(zoo.PRETRAINED))
    parser.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--n", type=int, default=512, help="prompts per length")
    parser.add_argument("--n-at", nargs="*", default=[], metavar="LENGTH=N", help="prompts at particular lengths")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET)
    parser.add_argument("--answers", choices=("task", "vocabulary"), default="task")
    parser.add_argument("--out-dir", default=str(zoo.PRETRAINED_DIR), help="one folder per model inside it")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other lengths of an earlier run in --out-dir (same seed, budget, answers)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--forward", choices=("bridge", "hf"), default="bridge",
                        help="run the TransformerBridge that load_pretrained boots, or the same weights in Hugging "
                             "Face's own forward (identical predictions, about 4x faster at thousands of tokens)")
    args = parser.parse_args(argv)
    n_at = _n_at(args.n_at)
    for name in args.models:
        run_model(name, args, n_at)
    return 0


if __name__ == "__main__":
    sys.exit(main())
