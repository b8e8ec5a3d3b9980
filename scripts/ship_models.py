"""Maintainer script: ship trained runs inside the package (src/psheads/pretrained/<task>).

For each task it exports the run's final checkpoint in fp16 (no optimizer state), copies the
learning-dynamics table, re-measures accuracy per hop count *after the cast* on a fresh test set
with the model booted as users boot it (TransformerBridge, fp32 compute), and prints the sizes.

Usage: python scripts/ship_models.py runs/ [--test-prompts 8192]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from psheads.models import checkpoints, training, zoo
from psheads.tasks import get_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", type=Path, help="directory holding one run directory per task")
    parser.add_argument("--test-prompts", type=int, default=8192)
    parser.add_argument("--tasks", nargs="+", default=list(zoo.PRETRAINED), choices=zoo.PRETRAINED)
    args = parser.parse_args()
    total = 0
    for name in args.tasks:
        checkpoint = checkpoints.latest_checkpoint(args.runs / name)
        if checkpoint is None:
            raise SystemExit(f"no checkpoint in {args.runs / name}")
        destination = zoo.PRETRAINED_DIR / name
        if destination.exists():
            shutil.rmtree(destination)
        zoo.export_checkpoint(checkpoint, destination)
        shutil.copy2(args.runs / name / "dynamics.csv", destination / "dynamics.csv")
        model = zoo.boot_local(destination)
        evaluation = training.evaluate(model, get_task(name), args.test_prompts, seed=(1 << 41) + 7)
        evaluation.to_csv(destination / "evaluation.csv", index=False)
        size = sum(p.stat().st_size for p in destination.iterdir())
        total += size
        print(f"{name}: {checkpoint.name} -> {destination} ({size / 1e6:.1f} MB)")
        print(evaluation.to_string(index=False))
    print(f"shipped now: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
