"""What the report reads: its configuration, the trained runs (shipped models, ``retrain``'s runs,
stored seeds) and the stored tables of the long experiments."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from torch import Tensor

import psheads.data as stored_tables
from psheads.interface import validation
from psheads.models.zoo import Pretrained, load_pretrained
from psheads.reproduction.report.claims import Section
from psheads.results import schema

TASKS = ("number", "letter")
RECIPE_FOLDER = "paper_b"
"""Where ``scripts/train_paper_b.py`` stores its cells' tables, under the data folder."""
RECIPE = "paper-b"
"""The cell variant that is paper B's whole recipe (the shipped models'); the others switch one part back."""


@dataclass(frozen=True)
class ReportConfig:
    """What the report measures live and where it reads the stored tables.

    Attributes:
        data: folder of the stored experiment tables (default: the tables shipped in the package,
            ``psheads.data.TABLES``; sections whose tables are missing say so).
        prompts: task prompts for the live scores and frequency profiles of each model.
        check_lengths: prompt lengths at which the stored length-generalization curves are re-measured.
        check_prompts: prompts per length for that check.
        theory_prompts: prompts per length for the theory constructions.
        seed: seed of every live measurement's prompts.
        retrain: a folder to retrain both models in first, with paper B's recipe as the shipped
            ``number`` and ``letter`` were (about 40 minutes per model on a 2-core CPU; resumes what
            is already there); the report then reads their best-validation checkpoints instead of
            the shipped models. None: the shipped models.
    """

    data: Path | None = None
    retrain: Path | None = None
    prompts: int = 512
    check_lengths: tuple[int, ...] = (17, 65, 145)
    check_prompts: int = 256
    theory_prompts: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("data", "retrain"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        for name in ("prompts", "check_prompts", "theory_prompts"):
            object.__setattr__(self, name, validation.integer(getattr(self, name), name, minimum=1))
        object.__setattr__(self, "check_lengths", validation.integers(self.check_lengths, "check_lengths", minimum=1))
        object.__setattr__(self, "seed", validation.seed(self.seed))

    @property
    def data_folder(self) -> Path:
        """The stored tables' folder."""
        return self.data if self.data is not None else stored_tables.TABLES




@dataclass(frozen=True)
class Run:
    """One trained model as the report reads it: shipped (with weights) or a stored seed (tables)."""

    task: str
    seed: int
    dynamics: pd.DataFrame
    final_accuracy: pd.DataFrame  # hops, accuracy, n
    shipped: Pretrained | None = None




def _final(evaluation: pd.DataFrame) -> pd.DataFrame:
    return evaluation[evaluation["step"] == evaluation["step"].max()][["hops", "accuracy", "n"]].reset_index(drop=True)


def retrained(folder: Path, task: str, progress: bool | None, recipe: Any = None) -> Pretrained:
    """Train ``task`` in ``folder/task`` (resuming what is there) and boot the checkpoint it keeps
    (the best-validation one with paper B's recipe, as the shipped ``number`` and ``letter`` models).

    Args:
        folder: the runs' folder.
        task: ``"number"`` or ``"letter"`` (the letter task with paper B's sampling).
        progress: training progress bar.
        recipe: a ``psheads.TrainConfig`` (default: ``TrainConfig.paper_b()``).
    """
    from psheads.models import checkpoints, training, zoo
    from psheads.tasks import get_task

    made = get_task(task, sampling="paper-b") if task == "letter" else get_task(task)
    result = training.train(made, recipe or training.TrainConfig.paper_b(), folder / task, progress=progress)
    info = json.loads((result.best_checkpoint / checkpoints.TRAINING_CONFIG).read_text())
    evaluation = result.evaluation
    kept = evaluation[evaluation["step"] == info["step"]][["hops", "accuracy", "n"]].reset_index(drop=True)
    return Pretrained(zoo.boot_local(result.best_checkpoint), made, kept, result.dynamics, info)


def _with_weights(task: str, model: Pretrained) -> Run:
    """A run with weights: its seed, whole dynamics and the accuracy of the shipped checkpoint."""
    if model.dynamics is None or model.evaluation is None:
        raise ValueError(f"{task}: a run needs a task model with its training tables (dynamics and evaluation); "
                         "an LLM has none.")
    return Run(task, int(model.info["training"]["seed"]), model.dynamics, model.evaluation[["hops", "accuracy", "n"]],
               model)


def recipe_seeds(folder: Path, variant: str = "paper-b") -> list[Run]:
    """The stored cells of ``scripts/train_paper_b.py`` for one recipe variant, as runs without
    weights: the whole run's dynamics and the test accuracy of the checkpoint it kept (best-validation)."""
    runs = []
    for path in sorted(folder.glob(f"*_{variant}_seed*_run.json")):
        record = json.loads(path.read_text())
        stem = path.name.removesuffix("_run.json")
        evaluation = pd.read_csv(folder / f"{stem}_evaluation.csv")
        kept = evaluation[evaluation["step"] == record["best_step"]][["hops", "accuracy", "n"]].reset_index(drop=True)
        runs.append(Run(record["task"], int(record["training"]["seed"]),
                        schema.ordered_labels(pd.read_csv(folder / f"{stem}_dynamics.csv")), kept))
    return runs


def psheads_recipe_runs(config: ReportConfig) -> list[Run]:
    """psheads' own recipe: the shipped ``number-psheads`` and ``letter-psheads`` models (seed 0) and
    the stored seeds under ``data_folder/seeds`` (tables only)."""
    runs = [_with_weights(task, load_pretrained(f"{task}-psheads")) for task in TASKS]
    for path in sorted((config.data_folder / "seeds").glob("*_seed*_dynamics.csv")):
        task, seed = path.name.removesuffix("_dynamics.csv").split("_seed")
        evaluation = pd.read_csv(path.with_name(f"{task}_seed{seed}_evaluation.csv"))
        runs.append(Run(task, int(seed), schema.ordered_labels(pd.read_csv(path)), _final(evaluation)))
    return sorted(runs, key=lambda run: (TASKS.index(run.task), run.seed))


def load_runs(config: ReportConfig, progress: bool | None = None) -> list[Run]:
    """Paper B's recipe: seed 0 with weights (the shipped ``number`` and ``letter`` models, or
    ``config.retrain``'s runs) and the recipe's other seeds stored under ``data_folder/paper_b``
    (tables only)."""
    runs = [_with_weights(task, load_pretrained(task) if config.retrain is None
                          else retrained(config.retrain, task, progress)) for task in TASKS]
    with_weights = {(run.task, run.seed) for run in runs}
    runs += [run for run in recipe_seeds(config.data_folder / RECIPE_FOLDER, RECIPE)
             if (run.task, run.seed) not in with_weights]
    return sorted(runs, key=lambda run: (TASKS.index(run.task), run.seed))


def stored_table(folder: Path, name: str, section: Section) -> pd.DataFrame | None:
    """The stored table ``folder/name``; None, with a note in ``section``, where it is missing."""
    path = folder / name
    if not path.is_file():
        section.notes.append(f"Stored table {name} not found in {folder}; its claims are not measured here "
                             "(pass --data to a folder that holds it).")
        return None
    return pd.read_csv(path)


def shipped_number(runs: list[Run]) -> Pretrained | None:
    """The weights of the number run that has them (the shipped model or ``retrain``'s), if any."""
    return next((run.shipped for run in runs if run.task == "number" and run.shipped is not None), None)


def task_prompts(weights: Pretrained, config: ReportConfig) -> Tensor:
    """The live measurements' prompts of a run's weights: ``config.prompts`` at ``config.seed``."""
    from psheads.tasks import checked_batch

    return checked_batch(weights.task, config.prompts, seed=config.seed).tokens
