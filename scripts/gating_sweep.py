"""Gated training sweep (paper A's causal claim): which RoPE frequency bands each canonical task needs.

Trains a small GPT-J (psheads.sweep.SWEEP_MODEL: 2 layers x 1 head, d_head 64, 28 rotated planes
and 8 unrotated dims) on index, retrieval and partial induction with every head's query restricted
to one frequency band (psheads.sweep.DEFAULT_BANDS), for several seeds, and writes

- ``<out>.csv``: one row per task, band, seed, layer and head (schema psheads.schema.GATING_SWEEP):
  the run's test accuracy and the head's swap scores on the task's prompts;
- ``<out>.json``: the settings, the planes, θ and period of every band, per-cell and total timings,
  the machine and the versions.

    python scripts/gating_sweep.py                 # the shipped sweep (src/psheads/data/tables/gating_sweep.*)
    python scripts/gating_sweep.py --quick         # smoke run in seconds (runs/gating_sweep_quick.*)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psheads
from psheads import plotting
from psheads.data import TABLES
from psheads.experiments.gating_sweep import CANONICAL_TASKS, DEFAULT_BANDS, SweepConfig, band_geometry, gating_sweep

QUICK = dict(bands=("all", "fast+zero"), seeds=(0,), steps=10, warmup_steps=2, eval_prompts=64,
             score_prompts=8)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 bands, 1 seed, 10 steps")
    parser.add_argument("--out", type=Path, default=None,
                        help="output path without suffix (default src/psheads/data/tables/gating_sweep, or "
                             "runs/gating_sweep_quick with --quick)")
    parser.add_argument("--tasks", nargs="+", default=list(CANONICAL_TASKS))
    parser.add_argument("--bands", nargs="+", default=None, help=f"default {' '.join(DEFAULT_BANDS)}")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default 0 1 2")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run (default 1500)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes training side by side, one torch thread each (default: min(2, cores))")
    parser.add_argument("--figure", type=Path, default=None, help="also write the heatmap as HTML here")
    return parser.parse_args(argv)


def write_record(path: Path, argv: list[str] | None, config: SweepConfig, frames: list[pd.DataFrame],
                 geometry: pd.DataFrame, wall: float) -> None:
    """The sweep's settings, bands, timings, machine and versions as JSON."""
    bands = {band: [{"plane": int(row.plane), "theta": row.theta,
                     "period": row.period if math.isfinite(row.period) else "inf"} for row in part.itertuples()]
             for band, part in geometry.groupby("band", sort=False)}
    cells = [cell for frame in frames for cell in frame.attrs["cells"]]
    record = {
        "command": "python scripts/gating_sweep.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": config.to_dict(),
        "seeds_done": [seed for frame in frames for seed in frame.attrs["config"]["seeds"]],
        "bands": bands, "wall_seconds": wall, "train_seconds": sum(cell["train_seconds"] for cell in cells),
        "cells": cells, "workers": frames[0].attrs["workers"], "threads_per_worker": frames[0].attrs["threads"],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"psheads": psheads.__version__, **frames[0].attrs["versions"]},
        "scores": "score_heads on score_prompts test prompts of the run's task (TrainConfig.dynamics_prompts), "
                  "one row per layer (one head each)",
    }
    path.write_text(json.dumps(record, indent=1))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    options = dict(QUICK) if args.quick else {}
    options["tasks"] = tuple(args.tasks)
    for name in ("bands", "seeds"):
        if getattr(args, name) is not None:
            options[name] = tuple(getattr(args, name))
    if args.steps is not None:
        options["steps"] = args.steps
        options["warmup_steps"] = min(SweepConfig.warmup_steps, args.steps // 10)
    config = SweepConfig(**options)
    out = args.out or (Path("runs/gating_sweep_quick") if args.quick else TABLES / "gating_sweep")
    out.parent.mkdir(parents=True, exist_ok=True)
    cells = len(config.tasks) * len(config.bands) * len(config.seeds)
    print(f"{cells} runs of {config.steps} steps on {args.workers} worker(s)", file=sys.stderr)

    began = time.perf_counter()
    geometry = band_geometry(config)
    order = {name: index for index, name in enumerate(config.tasks + config.bands)}
    frames: list[pd.DataFrame] = []
    for seed in config.seeds:  # one seed at a time: the files always hold a complete sweep of the seeds so far
        frames.append(gating_sweep(dataclasses.replace(config, seeds=(seed,)), workers=args.workers))
        frame = pd.concat(frames, ignore_index=True).sort_values(
            ["task", "band", "seed", "layer", "head"], kind="stable", ignore_index=True,
            key=lambda column: column.map(order) if column.name in ("task", "band") else column)
        wall = time.perf_counter() - began
        frame.to_csv(out.with_suffix(".csv"), index=False)
        write_record(out.with_suffix(".json"), argv, config, frames, geometry, wall)
        print(f"seed {seed} done after {wall:.0f} s", file=sys.stderr)
    if args.figure is not None:
        plotting.accuracy_by_band(frame).write_html(args.figure)

    runs = frame.drop_duplicates(["task", "band", "seed"])
    table = runs.groupby(["task", "band"], sort=False)["accuracy"].agg(["mean", "min", "max"]).unstack("band")
    print(table["mean"].round(3).reindex(columns=list(config.bands)).to_string())
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.json')} in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
