"""Paper B's GPT-J training recipe with checkpoints, resume and learning dynamics.

``train(task, config)`` trains a GPT-J from scratch on fresh task samples (each step's batch is
seeded by the step, so an interrupted run resumes on exactly the data it would have seen), with
the loss on the last position only. Every ``checkpoint_every`` steps it writes a checkpoint
directory: the Hugging Face model (safetensors), the tokenizer, ``training_config.json``, the
trainer state (optimizer tensors and RNG state in safetensors, the rest in JSON), the run's
accuracy per hop count (``evaluation.csv``) and head scores (``dynamics.csv``) up to and including
that checkpoint, and last a ``manifest.json`` with the SHA-256 of every file, through the checkpoint
store (``psheads.models.checkpoints``: complete or absent, verified on resume, nothing unpickled).
The run-level CSV files are copies of the newest checkpoint's. Resuming falls back to the previous
good checkpoint when one is damaged.

The modules, one role each: ``config`` (``TrainConfig``), ``model`` (the GPT-J and its frequency
gating), ``data`` (each step's batch, the seeds of the test and validation prompts),
``recording`` (what a checkpoint holds: evaluation, head scores, validation; saving and loading
one) and ``loop`` (``train``). Every name is importable from here.
"""

from __future__ import annotations

from psheads.models.training.config import PAPER_B_CODE_MODEL, TASK_FIELDS, TrainConfig, gptj_fields
from psheads.models.training.data import (
    EPOCH_SEED_OFFSET,
    TEST_SEED_OFFSET,
    TRAIN_SET_CHUNK,
    TRAIN_SET_SEED_OFFSET,
    VALIDATION_SEED_OFFSET,
    TrainingData,
    derived_seed,
    training_batch,
)
from psheads.models.training.loop import TrainResult, parameter_groups, train, training_device
from psheads.models.training.model import apply_gating, build_model, query_keep_mask, query_weights
from psheads.models.training.recording import (
    best_step,
    checkpoint_accuracy,
    checkpoint_dynamics,
    save_checkpoint,
    validation_history,
)

__all__ = [
    "EPOCH_SEED_OFFSET",
    "PAPER_B_CODE_MODEL",
    "TASK_FIELDS",
    "TEST_SEED_OFFSET",
    "TRAIN_SET_CHUNK",
    "TRAIN_SET_SEED_OFFSET",
    "VALIDATION_SEED_OFFSET",
    "TrainConfig",
    "TrainResult",
    "TrainingData",
    "apply_gating",
    "best_step",
    "build_model",
    "checkpoint_accuracy",
    "checkpoint_dynamics",
    "derived_seed",
    "gptj_fields",
    "parameter_groups",
    "query_keep_mask",
    "query_weights",
    "save_checkpoint",
    "train",
    "training_batch",
    "training_device",
    "validation_history",
]
