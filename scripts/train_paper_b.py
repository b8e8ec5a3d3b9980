"""Paper B's own recipe, its ablations, and the length generalization of every model they give.

Each cell of the plan is (variant, task, seed). A variant is paper B's recipe
(``TrainConfig.paper_b()`` with ``LetterTask(sampling="paper-b")``) with at most one part switched
back to psheads' recipe:

* ``paper-b``: the whole recipe;
* ``psheads-sampling``: the letter task's own sampling instead of paper B's generator (ablation a);
* ``no-clip-all-decay``: no gradient clipping, weight decay on biases and LayerNorm weights (c);
* ``fresh-prompts``: fresh prompts every step instead of a fixed set of 432,000 (d);
* ``gelu-new``: the ``gelu_new`` activation instead of the exact GELU.

Ablation (b), the best-validation vs the final checkpoint, needs no run of its own: every cell
measures both checkpoints of its run. A cell trains (resuming what its run folder holds), then
runs ``length_generalization`` on each checkpoint at ``LENGTHS`` plus five lengths inside the
first interval where accuracy falls below 90% (128 prompts per length, hop counts 1–4 in equal
shares, the argmax over the target-window alphabet), and writes into ``--out``:

``<task>_<variant>_seed<S>_{evaluation,dynamics,validation,lengthgen}.csv`` and ``..._run.json``
(the recipe, the task options, the best and final steps, timings, versions). The length table is
written last: a cell whose length table exists is done and is skipped. The run folders (every
checkpoint's weights, about 10 MB each) stay in ``--runs``. A whole run takes about 35 minutes on a
2-core CPU, and each model's length curve about 5 more; on one NVIDIA H200, eight cells run side by
side (eight processes) took about 9 minutes together.

    HF_HUB_OFFLINE=1 python scripts/train_paper_b.py                         # the plan, in order
    HF_HUB_OFFLINE=1 python scripts/train_paper_b.py --only paper-b:letter:0  # one cell
    HF_HUB_OFFLINE=1 python scripts/train_paper_b.py --device cuda --only ...  # on a GPU
    HF_HUB_OFFLINE=1 torchrun --nproc-per-node 4 scripts/train_paper_b.py --device cuda  # 4 cells at a time
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch
import transformers

import psheads
from psheads.data import TABLES
from psheads.experiments.lengthgen import length_generalization
from psheads.interface.distributed import ordered_map
from psheads.models import checkpoints
from psheads.models.training import TrainConfig, train
from psheads.tasks import LetterTask, NumberTask, Task

ROOT = Path(__file__).resolve().parents[1]
VARIANTS: dict[str, dict] = {
    "paper-b": {},
    "psheads-sampling": {"sampling": "psheads"},
    "no-clip-all-decay": {"max_grad_norm": None, "decay_norms_and_biases": True},
    "fresh-prompts": {"train_set": None},
    "gelu-new": {"model": {"activation_function": "gelu_new"}},
}
"""Paper B's recipe and the parts switched back one at a time (``sampling`` is the letter task's)."""
PLAN = ("paper-b:letter:0", "paper-b:number:0", "fresh-prompts:letter:0", "psheads-sampling:letter:0",
        "no-clip-all-decay:letter:0", "gelu-new:letter:0", "paper-b:letter:1", "paper-b:number:1",
        "paper-b:letter:2", "paper-b:number:2", "fresh-prompts:number:0", "no-clip-all-decay:number:0")
"""Cells in order of what they tell: the recipe on both tasks, the letter ablations, more seeds."""
LENGTHS = (17, 33, 65, 145, 200, 289, 529, 850, 1000, 1041, 2065, 4113)
"""psheads' length grid plus the lengths paper B's figure 5B is read at (200, 850 and 1,000)."""
N_PROMPTS, FINE_POINTS, THRESHOLD = 128, 5, 0.9


def cell_task_and_config(variant: str, task_name: str, seed: int) -> tuple[Task, TrainConfig]:
    """The task and recipe of one cell."""
    changes = dict(VARIANTS[variant])
    sampling = changes.pop("sampling", "paper-b")
    task: Task = LetterTask(sampling=sampling) if task_name == "letter" else NumberTask()
    return task, TrainConfig.paper_b(seed=seed, **changes)


def fine_lengths(curve: pd.DataFrame) -> list[int]:
    """``FINE_POINTS`` lengths evenly inside the first interval of the grid where accuracy falls below
    ``THRESHOLD`` (none if it never does, or already does at the shortest length)."""
    overall = curve[curve["hops"] == "all"].sort_values("length")
    lengths, accuracy = overall["length"].tolist(), overall["accuracy"].tolist()
    for (short, above), (long, below) in itertools.pairwise(zip(lengths, accuracy, strict=True)):
        if above >= THRESHOLD > below:
            step = (long - short) / (FINE_POINTS + 1)
            return sorted({round(short + step * i) for i in range(1, FINE_POINTS + 1)} - set(lengths))
    return []


def curve_of(checkpoint: Path, task: Task, device: str) -> pd.DataFrame:
    """Accuracy against prompt length of one checkpoint (Hugging Face's forward, no hooks needed)."""
    model = transformers.GPTJForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, use_safetensors=True)
    model.to(device).eval()
    coarse = length_generalization(model, task, LENGTHS, n=N_PROMPTS, seed=0, progress=True)
    fine = fine_lengths(coarse)
    if not fine:
        return coarse
    extra = length_generalization(model, task, fine, n=N_PROMPTS, seed=0, progress=True)
    return pd.concat([coarse, extra]).sort_values(["length", "hops"], kind="stable").reset_index(drop=True)


def _write(frame: pd.DataFrame, path: Path) -> None:
    partial = path.with_name(path.name + ".partial")
    frame.to_csv(partial, index=False)
    os.replace(partial, path)


def run_cell(cell: str, runs: Path, out: Path, device: str) -> None:
    variant, task_name, seed_text = cell.split(":")
    stem = f"{task_name}_{variant}_seed{seed_text}"
    if (out / f"{stem}_lengthgen.csv").exists():
        print(f"{cell}: done already ({out / (stem + '_lengthgen.csv')})")
        return
    task, config = cell_task_and_config(variant, task_name, int(seed_text))
    began = time.perf_counter()
    result = train(task, config, runs / stem, device=device)
    trained = time.perf_counter() - began
    for table, frame in (("evaluation", result.evaluation), ("dynamics", result.dynamics),
                         ("validation", result.validation)):
        _write(frame, out / f"{stem}_{table}.csv")
    best, final = (checkpoints.checkpoint_step(p) for p in (result.best_checkpoint, result.final_checkpoint))
    curves = []
    for label, checkpoint in (("best", result.best_checkpoint), ("final", result.final_checkpoint)):
        if label == "final" and best == final:
            curves.append(curves[0].assign(checkpoint="final"))
            continue
        curves.append(curve_of(checkpoint, task, device).assign(checkpoint=label,
                                                                step=checkpoints.checkpoint_step(checkpoint)))
    record = {
        "cell": cell, "variant": variant, "task": task.name, "task_options": dataclasses.asdict(task),
        "training": config.to_dict(), "best_step": best, "final_step": final,
        "lengthgen": {"lengths": list(LENGTHS), "fine_points": FINE_POINTS, "threshold": THRESHOLD,
                      "n": N_PROMPTS, "seed": 0, "hops": "1-4 in equal shares", "answers": "task"},
        "seconds": {"training_and_checkpoints": round(trained, 1), "total": round(time.perf_counter() - began, 1)},
        "versions": {"psheads": psheads.__version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "python": platform.python_version()},
        "machine": {"cpus": os.cpu_count(), "threads": torch.get_num_threads(), "platform": platform.platform(),
                    "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else device},
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    (out / f"{stem}_run.json").write_text(json.dumps(record, indent=2) + "\n")
    _write(pd.concat(curves, ignore_index=True), out / f"{stem}_lengthgen.csv")
    print(f"{cell}: best step {best}, final step {final}, {time.perf_counter() - began:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="VARIANT:TASK:SEED", help=f"cells to run (default: {PLAN})")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "paper_b", help="run folders (checkpoints)")
    parser.add_argument("--device", default="cpu", help="where to train and measure (cpu, cuda, cuda:1, ...)")
    parser.add_argument("--out", type=Path, default=TABLES / "paper_b", help="where the tables go")
    args = parser.parse_args(argv)
    cells = args.only or list(PLAN)
    for cell in cells:
        parts = cell.split(":")
        if len(parts) != 3 or parts[0] not in VARIANTS or parts[1] not in ("number", "letter") \
                or not parts[2].isdigit() or (parts[0] == "psheads-sampling" and parts[1] != "letter"):
            parser.error(f"{cell!r} is not VARIANT:TASK:SEED with VARIANT in {sorted(VARIANTS)}, TASK number or "
                         "letter (psheads-sampling: letter only)")
    args.out.mkdir(parents=True, exist_ok=True)
    # under torchrun the ranks take the cells in turn (each writes its own cells' files), one GPU per rank
    device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if args.device == "cuda" else args.device
    for _ in ordered_map(lambda cell: run_cell(cell, args.runs, args.out, device), cells):
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
