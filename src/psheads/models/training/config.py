"""The training recipe: ``TrainConfig`` (paper B's by default; checked when built, recorded in every
checkpoint) and the GPT-J config overrides it may carry.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import transformers

from psheads.interface import validation
from psheads.interface.config import from_known_fields
from psheads.models import zoo


@functools.cache
def gptj_fields() -> frozenset[str]:
    """The ``transformers.GPTJConfig`` fields that ``TrainConfig.model`` may override."""
    init = {name for name in inspect.signature(transformers.GPTJConfig.__init__).parameters
            if name not in ("self", "kwargs")}
    return frozenset(init | set(transformers.GPTJConfig().to_dict())) - {"_name_or_path", "model_type",
                                                                        "transformers_version"}


def plain(value: Any) -> Any:
    """numpy and 0-d torch scalars as Python values (for JSON); containers recursively."""
    if isinstance(value, np.generic) or (isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim == 0):
        return value.item()
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
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
        decay, warm-up, dropout, shape) is the default ``TrainConfig``. Paper B trained in fp16
        mixed precision on GPUs; psheads trains in fp32 (see the Training page). Pair it with
        ``LetterTask(sampling="paper-b")`` for paper B's letter prompts."""
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
        raise ValueError(f"model sets {owned}, which the task decides (its vocabulary, <unk> and <bos>): "
                         "leave them out.")
    overrides = {key: plain(item) for key, item in value.items()}
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
