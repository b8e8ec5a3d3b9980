"""Maintainer script: ship trained runs inside the package (src/psheads/models/pretrained/<name>).

Each ``NAME=RUN`` ships one run folder under a shipped name (``zoo.PRETRAINED``). The checkpoint
shipped is the best-validation one when the run recorded validation accuracy (paper B's
``load_best_model_at_end``; ties go to the earliest) and the last one otherwise, or whichever
``--checkpoint`` names. Its weights are checked against the checkpoint's manifest, exported in fp16
(no optimizer state), and shipped with the run's whole learning-dynamics table. Accuracy per hop count
is re-measured *after the cast* on a fresh test set with the model booted as users boot it
(TransformerBridge, fp32 compute). ``training_config.json`` records the shipped and final steps, and
the run's ``run.json`` (written by scripts/train_paper_b.py: cell, device, versions) when the run
folder holds one.

Usage:
    python scripts/ship_models.py number=runs/paper_b/number_paper-b_seed0 letter=runs/paper_b/letter_paper-b_seed0
    python scripts/ship_models.py number-psheads=runs/number letter-psheads=runs/letter   # psheads' recipe
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd

from psheads.models import checkpoints, training, zoo
from psheads.tasks import get_task

WEIGHTS = "model.safetensors"


def chosen_checkpoint(run: Path, which: str) -> Path:
    """The run's best-validation checkpoint (the last one without validation records) or its last one."""
    found = checkpoints.list_checkpoints(run)
    if not found:
        raise SystemExit(f"no checkpoint in {run}")
    step = training.best_step(training.validation_history(run)) if which == "best" else None
    return found[-1] if step is None else run / f"{checkpoints.CHECKPOINT_PREFIX}{step:06d}"


def check_weights(checkpoint: Path) -> None:
    """Stop unless the checkpoint's weights match the SHA-256 its manifest recorded."""
    manifest = json.loads((checkpoint / checkpoints.MANIFEST).read_text())
    recorded = manifest["files"][WEIGHTS]["sha256"]
    if checkpoints.sha256(checkpoint / WEIGHTS) != recorded:
        raise SystemExit(f"{checkpoint / WEIGHTS} does not match its manifest: the checkpoint is damaged")


def ship(name: str, run: Path, which: str, test_prompts: int) -> int:
    """Export one run under ``name``; returns the shipped folder's size in bytes."""
    checkpoint = chosen_checkpoint(run, which)
    check_weights(checkpoint)
    destination = zoo.PRETRAINED_DIR / name
    if destination.exists():
        shutil.rmtree(destination)
    zoo.export_checkpoint(checkpoint, destination)
    shutil.copy2(run / checkpoints.DYNAMICS_CSV, destination / checkpoints.DYNAMICS_CSV)
    record = checkpoints.read_training_record(checkpoint)
    final = int(pd.read_csv(run / checkpoints.DYNAMICS_CSV)["step"].max())  # the run's last checkpoint
    record["shipped"] = {"checkpoint": "best-validation" if which == "best" and "validation" in record else "last",
                         "step": record["step"], "final_step": final}
    if (run / "run.json").is_file():
        provenance = json.loads((run / "run.json").read_text())
        record["shipped"]["run"] = {key: provenance[key] for key in ("cell", "variant", "machine", "versions")
                                    if key in provenance}
    (destination / checkpoints.TRAINING_CONFIG).write_text(json.dumps(record, indent=2) + "\n")
    model = zoo.boot_local(destination)
    task = get_task(record["task"], **record.get("task_options", {}))
    evaluation = training.checkpoint_accuracy(model, task, test_prompts, seed=(1 << 41) + 7)
    evaluation.to_csv(destination / checkpoints.EVALUATION_CSV, index=False)
    size = sum(p.stat().st_size for p in destination.iterdir())
    print(f"{name}: {checkpoint} (step {record['step']} of {final}) -> {destination} ({size / 1e6:.1f} MB)")
    print(evaluation.to_string(index=False))
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", metavar="NAME=RUN", help=f"a shipped name ({', '.join(zoo.PRETRAINED)}) "
                        "and the run folder to ship under it")
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best",
                        help="the best-validation checkpoint (the last one if the run has no validation) or the last")
    parser.add_argument("--test-prompts", type=int, default=8192)
    args = parser.parse_args()
    pairs = [spec.split("=", 1) for spec in args.runs]
    for pair in pairs:
        if len(pair) != 2 or pair[0] not in zoo.PRETRAINED:
            parser.error(f"{'='.join(pair)}: expected NAME=RUN with NAME one of {', '.join(zoo.PRETRAINED)}")
    total = sum(ship(name, Path(run), args.checkpoint, args.test_prompts) for name, run in pairs)
    print(f"shipped now: {total / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
