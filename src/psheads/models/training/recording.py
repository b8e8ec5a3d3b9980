"""What a training run records at each checkpoint, and how a checkpoint is read back.

``save_checkpoint`` writes the model, the tokenizer, the run's training record and the trainer
state, then the run's accuracy per hop count (``checkpoint_accuracy``) and head scores (``checkpoint_dynamics``,
the learning dynamics) up to that step, sealed by the checkpoint store
(``psheads.models.checkpoints``: complete or absent). ``load_checkpoint`` verifies a checkpoint and
checks that it belongs to the run; ``validation_history`` and ``best_step`` read a ``keep_best``
run's validation accuracy.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transformers

from psheads.measure.evaluation import evaluate
from psheads.models import checkpoints, zoo
from psheads.models.checkpoints import CheckpointError
from psheads.models.training.config import TrainConfig, plain
from psheads.models.training.data import TEST_SEED_OFFSET, VALIDATION_SEED_OFFSET, derived_seed
from psheads.results import schema
from psheads.tasks import Task, checked_batch, task_options, task_tokenizer


def checkpoint_accuracy(model: torch.nn.Module, task: Task, n: int, seed: int, batch_size: int = 256) -> pd.DataFrame:
    """Last-token accuracy per hop count on ``n`` fresh prompts (``hops, accuracy, n``; hops
    is a string: "1", "2", …, and "all"). ``model``: a HF causal LM or a TransformerLens model.

    ``psheads.measure.evaluation.evaluate`` with its ``hops``, ``accuracy`` and ``n`` columns (the argmax
    runs over the whole vocabulary unless the task's batches carry candidates)."""
    frame = evaluate(model, task, n=n, seed=seed, batch_size=batch_size, progress=False)
    return frame[["hops", "accuracy", "n"]].copy()


def checkpoint_dynamics(directory: Path, task: Task, config: TrainConfig, step: int,
                        evaluation: pd.DataFrame) -> pd.DataFrame:
    """Scores of every head of a saved checkpoint, with the checkpoint's accuracy per hop."""
    from psheads.measure.scoring import score_heads

    if config.dynamics_prompts == 0:
        frame = pd.DataFrame({"step": [step]})
    else:
        model = zoo.boot_local(directory)
        prompts = checked_batch(task, config.dynamics_prompts,
                                seed=derived_seed(TEST_SEED_OFFSET + config.seed + 1)).tokens
        frame = score_heads(model, prompts, progress=False)[schema.DYNAMICS_SCORES]
        frame.insert(0, "step", step)
    for row in evaluation.itertuples():
        frame[f"accuracy_{row.hops}"] = row.accuracy
    return frame


def _write_files(path: Path, model: Any, task: Task, config: TrainConfig, step: int,
                 optimizer: torch.optim.Optimizer, scheduler: Any, validation: dict | None) -> None:
    """Model, tokenizer, training record (with ``validation``, if any) and trainer state of a
    checkpoint (no records, no manifest)."""
    checkpoints.save_model(model, path, safe_serialization=True)
    task_tokenizer(task).save_pretrained(path)
    info = {**_run_record(task, config), "step": step, **({"validation": validation} if validation else {})}
    (path / checkpoints.TRAINING_CONFIG).write_text(json.dumps(info, indent=2))
    checkpoints.write_trainer_state(path, optimizer, scheduler, step)


def save_checkpoint(directory: Path, model: Any, task: Task, config: TrainConfig, step: int,
                    optimizer: torch.optim.Optimizer, scheduler: Any,
                    history: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write, evaluate, score and seal one checkpoint: complete or absent (``checkpoints.sealed``).

    Into the partial folder go the model, tokenizer, training record and trainer state, then the
    run's records up to this step (``history`` plus this checkpoint's evaluation and head scores,
    the scores computed on the partial folder). Evaluation and scoring do not advance the
    training RNG (resume stays exact).

    Returns:
        The run's evaluation and dynamics frames up to this step, as read back from the files.
    """
    with checkpoints.sealed(directory, step) as partial:
        validation = None
        if config.keep_best:
            with torch.random.fork_rng(devices=[]):
                scored = checkpoint_accuracy(model, task, config.validation_prompts,
                                             seed=derived_seed(VALIDATION_SEED_OFFSET + config.seed))
            overall = scored[scored["hops"] == "all"].iloc[0]
            validation = {"accuracy": float(overall["accuracy"]), "n": int(overall["n"])}
        _write_files(partial, model, task, config, step, optimizer, scheduler, validation)
        with torch.random.fork_rng(devices=[]):
            scores = checkpoint_accuracy(model, task, config.eval_prompts,
                                         seed=derived_seed(TEST_SEED_OFFSET + config.seed))
            scores.insert(0, "step", step)
            checkpoints.write_history(history[0] if history else None, scores, partial / checkpoints.EVALUATION_CSV)
            step_dynamics = checkpoint_dynamics(partial, task, config, step, scores)
            checkpoints.write_history(history[1] if history else None, step_dynamics,
                                      partial / checkpoints.DYNAMICS_CSV)
        records = checkpoints.read_records(partial)
    return records


def _run_record(task: Task, config: TrainConfig) -> dict:
    """What a checkpoint records of its run, as JSON values: the task, its options, the settings."""
    return {"task": task.name, "task_options": plain(task_options(task)), "training": config.to_dict()}


def _with_defaults(info: dict, task: Task) -> dict:
    """``info`` with the training settings and task options an older psheads did not record set to
    their defaults (so such a run resumes when nothing else differs)."""
    info = dict(info)
    if isinstance(info.get("training"), dict):
        info["training"] = {**TrainConfig().to_dict(), **info["training"]}
    defaults: dict[str, Any] = {f.name: f.default for f in fields(task) if f.init and f.default is not MISSING} \
        if is_dataclass(task) else {}
    if isinstance(info.get("task_options"), dict) and info.get("task") == task.name:
        info["task_options"] = {**plain(defaults), **info["task_options"]}
    return info


def load_checkpoint(directory: Path, task: Task, config: TrainConfig) -> tuple[Any, dict, tuple]:
    """Verify, check and load a checkpoint: (model, trainer state, records).

    Raises:
        CheckpointError: the checkpoint is damaged or in the old format.
        ValueError: it belongs to another task or configuration.
    """
    checkpoints.verify_checkpoint(directory)
    info = checkpoints.read_training_record(directory)
    checkpoints.check_same_run(directory, _with_defaults(info, task), _run_record(task, config))
    state = checkpoints.read_trainer_state(directory)
    if state["step"] != checkpoints.checkpoint_step(directory) or info.get("step") != state["step"]:
        raise CheckpointError(f"{directory / checkpoints.TRAINER_JSON} holds step {state['step']} and "
                              f"{directory / checkpoints.TRAINING_CONFIG} step {info.get('step')!r}, but the "
                              f"directory's name says step {checkpoints.checkpoint_step(directory)}.")
    try:
        model = transformers.GPTJForCausalLM.from_pretrained(directory, dtype=torch.float32, use_safetensors=True)
    except Exception as error:  # transformers and safetensors raise many kinds
        raise CheckpointError(f"The model of {directory} ({directory / 'model.safetensors'}) does not load "
                              f"({type(error).__name__}: {error}).") from None
    return model, state, checkpoints.read_records(directory)


def validation_history(output_dir: str | Path) -> pd.DataFrame:
    """Validation accuracy recorded by each checkpoint of a ``keep_best`` run (``step, accuracy, n``;
    empty when none recorded any)."""
    rows = []
    for checkpoint in checkpoints.list_checkpoints(output_dir):
        record = checkpoints.read_training_record(checkpoint).get("validation")
        if isinstance(record, dict):
            rows.append({"step": checkpoints.checkpoint_step(checkpoint), **record})
    return pd.DataFrame(rows, columns=["step", "accuracy", "n"])


def best_step(validation: pd.DataFrame) -> int | None:
    """The step of highest validation accuracy, the earliest on ties (Hugging Face's rule:
    a later checkpoint must be strictly better); None for an empty history."""
    if validation.empty:
        return None
    return int(validation["step"].iloc[validation["accuracy"].argmax()])  # argmax: the first maximum
