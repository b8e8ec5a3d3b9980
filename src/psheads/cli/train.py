"""``psheads train``: train paper B's GPT-J on a task (``train``); its options are ``TrainConfig``'s fields."""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from psheads.cli import common
from psheads.cli.fields import add_option, config_fields, config_values
from psheads.cli.options import command, positive_int, seed

CONFIG = config_fields("psheads.models.training.config", "TrainConfig")
"""``TrainConfig``'s fields: the source of every option but the task, ``--out``, ``--recipe`` and
``--no-resume``."""

OPTIONS: dict[str, dict[str, Any]] = {
    "steps": {"type": positive_int, "default": None, "help": "optimizer steps (default: the recipe's, 6000 or 6750)"},
    "train_set": {"type": positive_int, "help": "a fixed training set of this many prompts (default: the recipe's, "
                                                "fresh prompts or 432,000)"},
    "batch_size": {"type": positive_int},
    "lr": {},
    "warmup_steps": {"flag": "--warmup"},
    "checkpoint_every": {"type": positive_int},
    "seed": {"type": seed},
    "eval_prompts": {"type": positive_int},
    "dynamics_prompts": {},
    "keep_planes": {"metavar": "PLANE"},
}
"""The ``TrainConfig`` fields the command sets, in the order ``--help`` lists them, with what the
command line reads differently (a stricter type, another flag; the recipe decides ``steps`` and
``train_set`` unless they are given); the config checks every value when it is built."""


def add(sub: Any) -> None:
    """Add ``train`` to the sub-commands."""
    train = command(sub, "train", "train paper B's GPT-J on a task (resumes by default)", run)
    train.add_argument("task", help="a registered task (number, letter, …)")
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--recipe", choices=("psheads", "paper-b"), default="psheads",
                       help="psheads' recipe (fresh prompts every step, the final checkpoint) or paper B's own "
                            "(TrainConfig.paper_b: clipping, no decay on biases/LayerNorm, a fixed set of 432,000 "
                            "prompts, the best-validation checkpoint, exact GELU; the letter task's own sampling)")
    for name, overrides in OPTIONS.items():
        add_option(train, CONFIG[name], **overrides)
    train.add_argument("--no-resume", action="store_true", help="refuse a directory that already has checkpoints")


def run(args: argparse.Namespace) -> int:
    """Train (or resume) the run in ``--out``; print its final (and best) checkpoint's accuracy."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise common.CommandError("training runs in one process: launch `psheads train` without torchrun (to train "
                                  "many runs side by side, spread them over ranks with psheads.sweep or "
                                  "scripts/train_paper_b.py)")
    common.check_writable(args.out, "--out")  # a run folder, created or resumed
    from psheads.models.training import TrainConfig, train
    from psheads.tasks import LetterTask, get_task

    with common.as_usage():
        task = get_task(args.task)
        recipe = TrainConfig.paper_b if args.recipe == "paper-b" else TrainConfig
        if args.recipe == "paper-b" and isinstance(task, LetterTask):
            task = dataclasses.replace(task, sampling="paper-b")
        values = config_values(args, CONFIG, *OPTIONS)
        chosen = {name: value for name, value in values.items()  # None: the recipe's (all planes for keep_planes)
                  if value is not None or name == "keep_planes"}
        config = recipe(**chosen)
    with common.loader_output(args.quiet):  # checkpoints are written and read back by transformers
        result = train(task, config, args.out, resume=not args.no_resume, progress=common.progress(args))
    final = result.evaluation[result.evaluation["step"] == result.evaluation["step"].max()]
    print(f"final checkpoint: {result.final_checkpoint} ({result.seconds:.0f} s of training in this call)")
    if config.keep_best:
        best = result.validation.set_index("step")["accuracy"]
        print(f"best checkpoint: {result.best_checkpoint} (validation accuracy {best.max():.4f})")
    print(final.to_string(index=False))
    return 0
