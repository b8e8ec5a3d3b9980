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
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import transformers

from psheads.interface import validation
from psheads.interface.config import from_known_fields
from psheads.interface.distributed import world
from psheads.interface.progress import progress_bar
from psheads.measure.evaluation import evaluate as _evaluate
from psheads.models import checkpoints, zoo
from psheads.models.checkpoints import CheckpointError
from psheads.results import schema
from psheads.rope import geometry
from psheads.tasks import Task, checked_batch, get_task, task_tokenizer

logger = logging.getLogger(__name__)

TEST_SEED_OFFSET = 1 << 40  # test prompts never share a seed with training batches
VALIDATION_SEED_OFFSET = 1 << 41  # nor do validation prompts (keep_best)
TRAIN_SET_SEED_OFFSET = 3 << 40  # a fixed training set's chunks
EPOCH_SEED_OFFSET = 5 << 40  # its order in each epoch
TRAIN_SET_CHUNK = 4096
"""Prompts of a fixed training set generated from one seed (hop counts, answers balanced within it)."""


@functools.cache
def gptj_fields() -> frozenset[str]:
    """The ``transformers.GPTJConfig`` fields that ``TrainConfig.model`` may override."""
    init = {name for name in inspect.signature(transformers.GPTJConfig.__init__).parameters
            if name not in ("self", "kwargs")}
    return frozenset(init | set(transformers.GPTJConfig().to_dict())) - {"_name_or_path", "model_type",
                                                                        "transformers_version"}


def _plain(value: Any) -> Any:
    """numpy and 0-d torch scalars as Python values (for JSON); containers recursively."""
    if isinstance(value, np.generic) or (isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 0):
        return value.item()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True)
class TrainConfig:
    """Training options (paper B's recipe by default; recorded in every checkpoint).

    Numbers may be Python, numpy or 0-d torch scalars; they are stored as plain ``int``/``float``.
    Bad values raise ``TypeError`` (wrong kind: a bool or a float where an int belongs, a string)
    or ``ValueError`` (out of range, NaN or infinite), with the field's name in the message.

    Attributes:
        steps: optimizer steps (≥ 1).
        batch_size: prompts per step (fresh samples every step; ≥ 1).
        lr: peak learning rate of AdamW (finite, > 0).
        betas: AdamW betas (two numbers in [0, 1)).
        weight_decay: AdamW weight decay (finite, ≥ 0).
        warmup_steps: linear warm-up steps, then linear decay to 0 at ``steps``; in ``[0, steps)``.
        checkpoint_every: steps between checkpoints (the last step is always saved; ≥ 1).
        eval_prompts: size of the fixed test set used at every checkpoint (≥ 1).
        dynamics_prompts: test prompts scored with ``score_heads`` at every checkpoint (0: off).
        seed: seed of the initialisation, the data and dropout, in ``[0, 2**64)`` (torch's range).
        model: overrides of the GPT-J config (``psheads.zoo.PAPER_B_GPTJ``); keys must be
            ``transformers.GPTJConfig`` fields other than ``TASK_FIELDS`` and values plain JSON;
            the shape is checked (positive sizes, ``n_embd`` a multiple of ``n_head``, an even
            ``rotary_dim`` within a head, a known activation).
        keep_planes: frequency gating: if set, every head may only use these frequency IDs
            (1 = fastest; 0 = unrotated dims; distinct ints); the other planes of q are held at
            exactly zero.
        max_grad_norm: clip the gradient's global norm to this value before each step (finite,
            > 0; None: no clipping).
        decay_norms_and_biases: apply weight decay to biases and LayerNorm weights too (False:
            only to the other weights, as Hugging Face's ``Trainer`` does).
        train_set: None: fresh prompts every step (each step's batch seeded by the step). An int:
            a fixed training set of that many prompts (prompt ``i`` deterministic in ``seed``),
            visited in a new seeded order every epoch (the last batch of an epoch may be short).
        keep_best: also score a validation set at every checkpoint and name the checkpoint with
            the highest validation accuracy, the earliest on ties (``TrainResult.best_checkpoint``).
        validation_prompts: size of that validation set (≥ 1; drawn apart from the training and
            test prompts).

    ``TrainConfig.paper_b()`` gives paper B's own recipe (its Hugging Face ``Trainer`` defaults).
    """

    steps: int = 6000
    batch_size: int = 64
    lr: float = 1e-4
    betas: tuple[float, float] = (0.95, 0.999)
    weight_decay: float = 1e-4
    warmup_steps: int = 750
    checkpoint_every: int = 500
    eval_prompts: int = 2048
    dynamics_prompts: int = 256
    seed: int = 0
    model: dict = field(default_factory=dict)
    keep_planes: tuple[int, ...] | None = None
    max_grad_norm: float | None = None
    decay_norms_and_biases: bool = True
    train_set: int | None = None
    keep_best: bool = False
    validation_prompts: int = 2400

    @classmethod
    def paper_b(cls, **changes: Any) -> TrainConfig:
        """Paper B's recipe as its code ran it (Hugging Face ``Trainer``; each part switchable by
        ``changes``): gradient clipping at norm 1.0, no weight decay on biases and LayerNorm
        weights, a fixed set of 432,000 training prompts visited for one epoch (6,750 steps of 64),
        the best-validation checkpoint kept (2,400 validation prompts), and the exact ``gelu``
        activation (``changes["model"]`` is merged into it). The rest (AdamW, lr, betas, weight
        decay, warm-up, dropout, shape) is the default ``TrainConfig``. Paper B trained in fp16 mixed precision on GPUs; psheads trains
        in fp32 (see the Training page). Pair it with ``LetterTask(sampling="paper-b")`` for
        paper B's letter prompts."""
        recipe = dict(steps=6750, max_grad_norm=1.0, decay_norms_and_biases=False, train_set=432_000,
                      keep_best=True, validation_prompts=2400)
        model = {**PAPER_B_CODE_MODEL, **changes.pop("model", {})}
        return cls(**{**recipe, **changes, "model": model})

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("steps", "batch_size", "checkpoint_every", "eval_prompts"):
            put(name, validation.integer(getattr(self, name), name, minimum=1))
        put("warmup_steps", validation.integer(self.warmup_steps, "warmup_steps", minimum=0))
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps must lie in [0, steps), got {self.warmup_steps} with steps={self.steps}.")
        put("lr", validation.number(self.lr, "lr", above=0))
        put("weight_decay", validation.number(self.weight_decay, "weight_decay", minimum=0))
        put("betas", _betas(self.betas))
        put("dynamics_prompts", validation.integer(self.dynamics_prompts, "dynamics_prompts", minimum=0))
        put("seed", validation.seed(self.seed))
        put("model", _model_overrides(self.model))
        if self.keep_planes is not None:
            put("keep_planes", validation.integers(self.keep_planes, "keep_planes", minimum=0, unique=True))
        if self.max_grad_norm is not None:
            put("max_grad_norm", validation.number(self.max_grad_norm, "max_grad_norm", above=0))
        put("decay_norms_and_biases", validation.boolean(self.decay_norms_and_biases, "decay_norms_and_biases"))
        if self.train_set is not None:
            put("train_set", validation.integer(self.train_set, "train_set", minimum=1))
        put("keep_best", validation.boolean(self.keep_best, "keep_best"))
        put("validation_prompts", validation.integer(self.validation_prompts, "validation_prompts", minimum=1))

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = asdict(self)
        out["betas"] = list(self.betas)
        out["keep_planes"] = list(self.keep_planes) if self.keep_planes is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored (a non-dict raises ``TypeError``)."""
        return from_known_fields(cls, data)


def _betas(value: Any) -> tuple[float, float]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"betas must be two numbers in [0, 1), e.g. (0.9, 0.999), got {value!r}.")
    items = tuple(value)
    if len(items) != 2:
        raise ValueError(f"betas must be two numbers in [0, 1), got {len(items)}: {items!r}.")
    first, second = (validation.number(item, f"betas[{i}]", minimum=0, below=1) for i, item in enumerate(items))
    return first, second


def _model_overrides(value: Any) -> dict:
    if not isinstance(value, Mapping):
        raise TypeError(f"model must be a dict of GPTJConfig overrides, got {type(value).__name__} ({value!r}).")
    keys = list(value)
    not_str = [key for key in keys if not isinstance(key, str)]
    if not_str:
        raise TypeError(f"model keys must be GPTJConfig field names (strings), got {not_str!r}.")
    unknown = sorted(set(keys) - gptj_fields())
    if unknown:
        raise ValueError(f"model has unknown GPTJConfig fields {unknown}; known fields: {sorted(gptj_fields())}.")
    owned = sorted(set(keys) & TASK_FIELDS)
    if owned:
        raise ValueError(f"model sets {owned}, which the task decides (its vocabulary, <unk> and <bos>): leave them out.")
    overrides = {key: _plain(item) for key, item in value.items()}
    for key, item in overrides.items():
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(f"model[{key!r}] must be a plain JSON value (number, string, bool, list, dict "
                            f"or None), got {type(value[key]).__name__} ({value[key]!r}).") from None
    _check_shape({**zoo.PAPER_B_GPTJ, **overrides})
    return overrides


PAPER_B_CODE_MODEL = {"activation_function": "gelu"}
"""Where paper B's code builds its GPT-J differently from ``zoo.PAPER_B_GPTJ``: the exact GELU."""

TASK_FIELDS = frozenset({"vocab_size", "bos_token_id", "eos_token_id"})
"""GPT-J config fields ``build_model`` sets from the task."""


def _check_shape(fields: dict) -> None:
    """Refuse a GPT-J shape transformers would only fail on later (sizes, rotary width, activation)."""
    from transformers.activations import ACT2FN

    for name in ("n_embd", "n_layer", "n_head", "n_positions"):
        validation.integer(fields[name], f"model[{name!r}]", minimum=1)
    if fields["n_embd"] % fields["n_head"]:
        raise ValueError(f"model['n_embd'] ({fields['n_embd']}) must be a multiple of model['n_head'] "
                         f"({fields['n_head']}).")
    d_head = fields["n_embd"] // fields["n_head"]
    if fields.get("rotary_dim") is not None:
        rotary = validation.integer(fields["rotary_dim"], "model['rotary_dim']", minimum=2, maximum=d_head)
        if rotary % 2:
            raise ValueError(f"model['rotary_dim'] must be even (RoPE rotates pairs of dims), got {rotary}.")
    for name in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if name in fields:
            validation.number(fields[name], f"model[{name!r}]", minimum=0, maximum=1)
    if fields["activation_function"] not in ACT2FN:
        raise ValueError(f"model['activation_function'] {fields['activation_function']!r} is not an activation "
                         f"transformers knows; use one of {sorted(ACT2FN)}.")


@dataclass
class TrainResult:
    """What ``train`` produced.

    Attributes:
        output_dir: the run directory.
        final_checkpoint: the last checkpoint directory.
        evaluation: accuracy per checkpoint and hop count (``step, hops, accuracy, n``).
        dynamics: per checkpoint, layer and head: scores and labels (plus accuracy columns).
        seconds: wall-clock training time of this call (excluding evaluation and scoring).
        best_checkpoint: with ``keep_best``, the checkpoint of highest validation accuracy (the
            earliest on ties); otherwise the final one.
        validation: with ``keep_best``, validation accuracy per checkpoint (``step, accuracy, n``);
            otherwise empty.
    """

    output_dir: Path
    final_checkpoint: Path
    evaluation: pd.DataFrame
    dynamics: pd.DataFrame
    seconds: float
    best_checkpoint: Path
    validation: pd.DataFrame


# --- model -----------------------------------------------------------------------------------
def _longest_prompt(task: Task) -> int | None:
    """The token length of ``task``'s prompts (one seeded prompt), or None if the task cannot say."""
    try:
        return int(checked_batch(task, 1, seed=0).tokens.shape[1])
    except (ValueError, TypeError):
        return None


def build_model(task: Task, config: TrainConfig) -> transformers.GPTJForCausalLM:
    """Paper B's GPT-J for ``task`` (vocabulary + ``<unk>``/``<bos>``), seeded, gating applied."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = transformers.GPTJForCausalLM(zoo.gptj_config(len(task.vocabulary) + 2, **config.model))
    apply_gating(model, config.keep_planes)
    return model


def query_keep_mask(model: transformers.GPTJForCausalLM, keep_planes: tuple[int, ...]) -> torch.Tensor:
    """``[n_embd]`` mask over q_proj outputs that keeps only ``keep_planes`` in every head."""
    cfg = model.config
    d_head = cfg.n_embd // cfg.n_head
    layout = geometry.plane_layout(d_head, cfg.rotary_dim or d_head, "adjacent")
    all_planes = list(range(1, layout.n_planes + 1)) + ([0] if layout.rotary_dim < d_head else [])
    unknown = sorted(set(keep_planes) - set(all_planes))
    if unknown:
        raise ValueError(f"keep_planes {unknown} do not exist: this model has frequency IDs 1…{layout.n_planes}"
                         + (" and 0 (unrotated dims)." if 0 in all_planes else "."))
    head_mask = geometry.plane_keep_mask(layout, [p for p in all_planes if p not in keep_planes])
    return head_mask.repeat(cfg.n_head)


def apply_gating(model: transformers.GPTJForCausalLM, keep_planes: tuple[int, ...] | None) -> None:
    """Zero the q_proj rows of the gated planes (exact: those planes' logits are then 0)."""
    if keep_planes is None:
        return
    mask = query_keep_mask(model, keep_planes)
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.q_proj.weight.mul_(mask.to(block.attn.q_proj.weight)[:, None])


# --- data and evaluation ---------------------------------------------------------------------
def derived_seed(value: int) -> int:
    """A data or test-set seed derived from ``TrainConfig.seed``, wrapped into the seed range so
    that every allowed seed trains (unchanged for every seed below about 2**44)."""
    return value % validation.SEED_LIMIT


def training_batch(task: Task, config: TrainConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fresh batch of ``step`` (deterministic in ``config.seed`` and ``step``)."""
    batch = checked_batch(task, config.batch_size, seed=derived_seed(config.seed * 1_000_003 + step))
    return batch.tokens, batch.answers


class TrainingData:
    """Where each step's batch comes from (``TrainConfig.train_set``).

    Without a fixed set, ``training_batch``. With one, the set is generated once, in chunks of
    ``TRAIN_SET_CHUNK`` prompts each seeded by ``config.seed`` and the chunk's index, and epoch
    ``e`` visits it in the order of a permutation seeded by ``config.seed`` and ``e``: a step's
    batch depends only on the seed and the step, so a resumed run sees the same data.
    """

    def __init__(self, task: Task, config: TrainConfig, progress: bool | None = None) -> None:
        self.task, self.config, self.progress = task, config, progress
        self._set: tuple[torch.Tensor, torch.Tensor] | None = None
        self._order: tuple[int, torch.Tensor] | None = None

    @property
    def steps_per_epoch(self) -> int | None:
        """Steps that visit the fixed set once (None: fresh prompts)."""
        if self.config.train_set is None:
            return None
        return -(-self.config.train_set // self.config.batch_size)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens ``[batch, seq]`` and answers ``[batch]`` of ``step``."""
        if self.config.train_set is None:
            return training_batch(self.task, self.config, step)
        tokens, answers = self.fixed_set()
        epoch, within = divmod(step, self.steps_per_epoch)
        rows = self._epoch_order(epoch)[within * self.config.batch_size:(within + 1) * self.config.batch_size]
        return tokens[rows], answers[rows]

    def fixed_set(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole fixed training set: tokens ``[train_set, seq]`` and answers ``[train_set]``."""
        if self._set is None:
            size, base = self.config.train_set, self.config.seed * 1_000_003
            chunks = progress_bar(range(0, size, TRAIN_SET_CHUNK), desc="training set", progress=self.progress)
            batches = [checked_batch(self.task, min(TRAIN_SET_CHUNK, size - start),
                                     seed=derived_seed(TRAIN_SET_SEED_OFFSET + base + start // TRAIN_SET_CHUNK))
                       for start in chunks]
            self._set = (torch.cat([b.tokens for b in batches]), torch.cat([b.answers for b in batches]))
        return self._set

    def _epoch_order(self, epoch: int) -> torch.Tensor:
        if self._order is None or self._order[0] != epoch:
            seed = derived_seed(EPOCH_SEED_OFFSET + self.config.seed * 1_000_003 + epoch)
            self._order = (epoch, torch.randperm(self.config.train_set, generator=torch.Generator().manual_seed(seed)))
        return self._order[1]


def parameter_groups(model: torch.nn.Module, config: TrainConfig) -> list[dict]:
    """AdamW parameter groups: one, or (``decay_norms_and_biases=False``) the biases and LayerNorm
    weights apart with no weight decay (Hugging Face ``Trainer``'s rule)."""
    if config.decay_norms_and_biases:
        return [{"params": list(model.parameters())}]
    norms = {id(p) for module in model.modules() if isinstance(module, torch.nn.LayerNorm)
             for p in module.parameters(recurse=False)}
    decayed, spared = [], []
    for name, p in model.named_parameters():
        (spared if id(p) in norms or name.endswith("bias") else decayed).append(p)
    return [{"params": decayed}, {"params": spared, "weight_decay": 0.0}]


def evaluate(model: torch.nn.Module, task: Task, n: int, seed: int, batch_size: int = 256) -> pd.DataFrame:
    """Last-token accuracy per hop count on ``n`` fresh prompts (``hops, accuracy, n``; hops
    is a string: "1", "2", …, and "all"). ``model``: a HF causal LM or a TransformerLens model.

    ``psheads.measure.evaluation.evaluate`` with its ``hops``, ``accuracy`` and ``n`` columns (the argmax
    runs over the whole vocabulary unless the task's batches carry candidates)."""
    frame = _evaluate(model, task, n=n, seed=seed, batch_size=batch_size, progress=False)
    return frame[["hops", "accuracy", "n"]].copy()


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
                scored = evaluate(model, task, config.validation_prompts,
                                  seed=derived_seed(VALIDATION_SEED_OFFSET + config.seed))
            overall = scored[scored["hops"] == "all"].iloc[0]
            validation = {"accuracy": float(overall["accuracy"]), "n": int(overall["n"])}
        _write_files(partial, model, task, config, step, optimizer, scheduler, validation)
        with torch.random.fork_rng(devices=[]):
            scores = evaluate(model, task, config.eval_prompts, seed=derived_seed(TEST_SEED_OFFSET + config.seed))
            scores.insert(0, "step", step)
            checkpoints.write_history(history[0] if history else None, scores, partial / checkpoints.EVALUATION_CSV)
            step_dynamics = checkpoint_dynamics(partial, task, config, step, scores)
            checkpoints.write_history(history[1] if history else None, step_dynamics,
                                      partial / checkpoints.DYNAMICS_CSV)
        records = checkpoints.read_records(partial)
    return records


def _task_options(task: Task) -> dict:
    return {f.name: getattr(task, f.name) for f in fields(task) if f.init} if hasattr(task, "__dataclass_fields__") else {}


def _run_record(task: Task, config: TrainConfig) -> dict:
    """What a checkpoint records of its run, as JSON values: the task, its options, the settings."""
    return {"task": task.name, "task_options": _plain(_task_options(task)), "training": config.to_dict()}


def _with_defaults(info: dict, task: Task) -> dict:
    """``info`` with the training settings and task options an older psheads did not record set to
    their defaults (so such a run resumes when nothing else differs)."""
    info = dict(info)
    if isinstance(info.get("training"), dict):
        info["training"] = {**TrainConfig().to_dict(), **info["training"]}
    defaults = {f.name: f.default for f in fields(task) if f.init and f.default is not MISSING} \
        if hasattr(task, "__dataclass_fields__") else {}
    if isinstance(info.get("task_options"), dict) and info.get("task") == task.name:
        info["task_options"] = {**_plain(defaults), **info["task_options"]}
    return info


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
    return int(validation.loc[validation["accuracy"].idxmax(), "step"])


def _load_checkpoint(directory: Path, task: Task, config: TrainConfig) -> tuple[Any, dict, tuple]:
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


def _schedule(config: TrainConfig) -> Any:
    def factor(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    return factor


# --- dynamics ----------------------------------------------------------------------------------
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


# --- the loop ------------------------------------------------------------------------------------
def training_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device``, checked to exist on this machine (``validation.device``).

    Raises:
        TypeError: not a string or ``torch.device``.
        ValueError: not a device name, ``"meta"``, or a device this machine does not have.
    """
    return torch.device(validation.device(device))


def _diverged(what: str, config: TrainConfig, output_dir: Path) -> FloatingPointError:
    """The error of a run that diverged: ``what`` happened; the checkpoints before it are kept."""
    return FloatingPointError(f"Training diverged: {what} (lr {config.lr:g}, max_grad_norm {config.max_grad_norm}). "
                              f"Lower lr or keep gradient clipping; the checkpoints before it are kept in {output_dir}.")


def train(task: Task | str, config: TrainConfig | None = None, output_dir: str | Path = "runs/psheads",
          resume: bool = True, progress: bool | None = None, device: str | torch.device = "cpu") -> TrainResult:
    """Train paper B's GPT-J on ``task`` (see the module docstring).

    Args:
        task: a ``Task`` or a registered task name.
        config: the recipe (default: paper B's).
        output_dir: run directory (checkpoints, ``evaluation.csv``, ``dynamics.csv``). If this
            call creates it and fails before writing anything, it is removed again. One training
            writes into it at a time (``checkpoints.run_lock``); nothing is written through a
            symbolic link inside it (a link is replaced, never followed).
        resume: continue from the newest good checkpoint in ``output_dir`` if there is one
            (with ``False``, a directory that already holds checkpoints is refused). Resuming
            verifies the checkpoint's manifest; a damaged checkpoint is skipped with a warning
            and the previous one is used, dropping the records after it.
        progress: progress bar (default: in a notebook or on a terminal).
        device: where the model, its batches and the optimizer state live (``"cpu"``,
            ``"cuda"``, ``"cuda:1"``, ``"mps"``, …). A run setting, not part of the recipe:
            checkpoints are stored device-independently (weights and optimizer tensors on the
            CPU), so a run may resume on another device. Resume is bit-exact on the CPU; a
            CUDA device's dropout generator is saved and restored as well (whether a GPU run
            then repeats bit for bit also depends on its kernels being deterministic).

    Returns:
        The run's ``TrainResult``.

    Raises:
        ValueError: the checkpoint belongs to another task or configuration (each differing
            field is named), ``resume=False`` and the directory holds checkpoints, ``device`` is
            not available on this machine, or the call is made by every rank of a ``torchrun``
            job (outside ``ordered_map``).
        CheckpointError: no checkpoint of the run is usable, or one is in the old pickled format.
        FloatingPointError: the loss, or the model's output at a checkpoint, is not finite (the
            run diverged); the step is named and the checkpoints before it are kept.
    """
    task = get_task(task) if isinstance(task, str) else task
    if not isinstance(task, Task):
        raise TypeError(f"task must be a psheads task or the name of a registered one, got {type(task).__name__}.")
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}.")
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise TypeError(f"output_dir must name the run folder (a non-empty str or Path), got {output_dir!r}.")
    longest = _longest_prompt(task)
    if longest is not None and longest > config.model.get("n_positions", zoo.PAPER_B_GPTJ["n_positions"]):
        raise ValueError(f"model['n_positions'] ({config.model['n_positions']}) is below the task's prompts of {longest} "
                         "tokens: GPT-J precomputes its rotation table up to n_positions.")
    resume = validation.boolean(resume, "resume")
    progress = validation.optional_boolean(progress, "progress")
    if world().size > 1:
        raise ValueError(f"train runs in one process, and this is rank {world().rank} of a torchrun job of "
                         f"{world().size}: call it outside the job, or spread whole runs over the ranks with "
                         "psheads.interface.distributed.ordered_map (as psheads.sweep does).")
    device = training_device(device)
    output_dir = Path(output_dir)
    created = [output_dir, *output_dir.parents]
    created = created[: next((i for i, p in enumerate(created) if p.exists()), len(created))]
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        with checkpoints.run_lock(output_dir):
            return _train(task, config, output_dir, resume, progress, device)
    except BaseException:
        for directory in created:  # deepest first; stops at the first one something was written into
            try:
                directory.rmdir()
            except OSError:
                break
        raise


def _train(task: Task, config: TrainConfig, output_dir: Path, resume: bool, progress: bool | None,
           device: torch.device) -> TrainResult:
    saved = checkpoints.list_checkpoints(output_dir)
    if saved and not resume:
        raise ValueError(f"{output_dir} already holds checkpoints ({saved[-1].name}); pass a new output_dir, "
                         "or resume=True to continue that run.")
    model = build_model(task, config)
    output_dir.mkdir(parents=True, exist_ok=True)
    start, final, state = 0, None, None
    history: tuple[pd.DataFrame, pd.DataFrame] | None = None
    problems = []
    for checkpoint in reversed(saved):
        try:
            model, state, history = _load_checkpoint(checkpoint, task, config)
        except CheckpointError as error:
            if not (checkpoint / checkpoints.MANIFEST).exists() and \
                    (checkpoint / checkpoints.LEGACY_TRAINER_STATE).exists():
                raise
            logger.warning("Checkpoint %s is damaged and is skipped: %s Falling back to the previous checkpoint.",
                           checkpoint, error)
            problems.append(str(error))
            continue
        final = checkpoint
        break
    if saved and final is None:
        raise CheckpointError(f"No usable checkpoint in {output_dir}: " + " ".join(problems))
    model.to(device)  # built or loaded on the CPU: the same initial weights on every device
    optimizer = torch.optim.AdamW(parameter_groups(model, config), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
    if final is not None:
        # after the scheduler's constructor, which would otherwise reset the learning rate
        optimizer.load_state_dict(state["optimizer"])  # moves the state to the parameters' device
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        if device.type == "cuda" and state["rng_cuda"] is not None:
            torch.cuda.set_rng_state(state["rng_cuda"], device)
        start = state["step"]
        checkpoints.publish_records(final, output_dir)  # the run-level CSVs, rebuilt from the checkpoint
        logger.info("Resuming from %s (step %d)", final, start)
    else:
        torch.manual_seed(config.seed)
    mask = query_keep_mask(model, config.keep_planes).to(device) if config.keep_planes is not None else None
    data = TrainingData(task, config, progress)
    model.train()
    seconds = 0.0
    bar = progress_bar(range(start, config.steps), initial=start, total=config.steps, desc=f"train {task.name}",
                       progress=progress)
    for step in bar:
        began = time.perf_counter()
        tokens, answers = (tensor.to(device) for tensor in data.batch(step))
        logits = model(tokens).logits[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, answers)
        if not bool(torch.isfinite(loss)):
            raise _diverged(f"the loss is not finite at step {step + 1}", config, output_dir)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        if mask is not None:
            with torch.no_grad():
                for block in model.transformer.h:
                    block.attn.q_proj.weight.mul_(mask[:, None])
        seconds += time.perf_counter() - began
        done = step + 1
        if done % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if done % config.checkpoint_every == 0 or done == config.steps:
            model.eval()  # no dropout: the check draws no random numbers, so runs stay what they were
            with torch.no_grad():  # the checkpoint's own output on this batch, before anything scores it
                finite = bool(torch.isfinite(model(tokens).logits[:, -1]).all())
            model.train()
            if not finite:
                raise _diverged(f"the model's output is not finite after step {done}", config, output_dir)
            final = output_dir / f"{checkpoints.CHECKPOINT_PREFIX}{done:06d}"
            history = save_checkpoint(final, model, task, config, done, optimizer, scheduler, history)
            checkpoints.publish_records(final, output_dir)
            evaluation = history[0]
            logger.info("step %d: loss %.4f, accuracy %.4f", done, loss.item(),
                        float(evaluation.loc[(evaluation["step"] == done) & (evaluation["hops"] == "all"),
                                             "accuracy"].iloc[0]))
    if final is None or history is None:
        raise ValueError("Nothing to do: the run is already complete and has no checkpoint.")
    validation = validation_history(output_dir) if config.keep_best else pd.DataFrame(columns=["step", "accuracy", "n"])
    best = best_step(validation)
    best_checkpoint = final if best is None else output_dir / f"{checkpoints.CHECKPOINT_PREFIX}{best:06d}"
    return TrainResult(output_dir, final, history[0], history[1], seconds, best_checkpoint, validation)
