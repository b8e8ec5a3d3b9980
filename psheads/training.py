"""Paper B's GPT-J training recipe with checkpoints, resume and learning dynamics.

``train(task, config)`` trains a GPT-J from scratch on fresh task samples (each step's batch is
seeded by the step, so an interrupted run resumes on exactly the data it would have seen), with
the loss on the last position only. Every ``checkpoint_every`` steps it writes a Hugging Face
directory (safetensors, tokenizer, ``training_config.json``, optimizer state) atomically,
evaluates accuracy per hop count on a fixed fresh test set and scores every head with
``psheads.score_heads``; the rows accumulate in ``dynamics.csv``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transformers
from tqdm.auto import tqdm

from psheads import geometry, schema, zoo
from psheads.config import from_known_fields
from psheads.tasks import Task, get_task, task_tokenizer

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"
TEST_SEED_OFFSET = 1 << 40  # test prompts never share a seed with training batches


@dataclass(frozen=True)
class TrainConfig:
    """Training options (paper B's recipe by default; recorded in every checkpoint).

    Attributes:
        steps: optimizer steps.
        batch_size: prompts per step (fresh samples every step).
        lr: peak learning rate of AdamW.
        betas: AdamW betas.
        weight_decay: AdamW weight decay.
        warmup_steps: linear warm-up steps, then linear decay to 0 at ``steps``.
        checkpoint_every: steps between checkpoints (the last step is always saved).
        eval_prompts: size of the fixed test set used at every checkpoint.
        dynamics_prompts: test prompts scored with ``score_heads`` at every checkpoint (0: off).
        seed: seed of the initialisation, the data and dropout.
        model: overrides of the GPT-J config (``psheads.zoo.PAPER_B_GPTJ``).
        keep_planes: frequency gating: if set, every head may only use these frequency IDs
            (1 = fastest; 0 = unrotated dims); the other planes of q are held at exactly zero.
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

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "checkpoint_every", "eval_prompts"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if not (isinstance(self.warmup_steps, int) and 0 <= self.warmup_steps < self.steps):
            raise ValueError(f"warmup_steps must lie in [0, steps), got {self.warmup_steps!r}.")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("lr must be positive and weight_decay non-negative.")
        if self.dynamics_prompts < 0:
            raise ValueError("dynamics_prompts must be ≥ 0.")
        object.__setattr__(self, "betas", tuple(self.betas))
        if self.keep_planes is not None:
            object.__setattr__(self, "keep_planes", tuple(int(p) for p in self.keep_planes))

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = asdict(self)
        out["betas"] = list(self.betas)
        out["keep_planes"] = list(self.keep_planes) if self.keep_planes is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored."""
        return from_known_fields(cls, data)


@dataclass
class TrainResult:
    """What ``train`` produced.

    Attributes:
        output_dir: the run directory.
        final_checkpoint: the last checkpoint directory.
        evaluation: accuracy per checkpoint and hop count (``step, hops, accuracy, n``).
        dynamics: per checkpoint, layer and head: scores and labels (plus accuracy columns).
        seconds: wall-clock training time of this call (excluding evaluation and scoring).
    """

    output_dir: Path
    final_checkpoint: Path
    evaluation: pd.DataFrame
    dynamics: pd.DataFrame
    seconds: float


# --- model -----------------------------------------------------------------------------------
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
def training_batch(task: Task, config: TrainConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of ``step`` (deterministic in ``config.seed`` and ``step``)."""
    batch = task.generate(config.batch_size, seed=config.seed * 1_000_003 + step)
    return batch.tokens, batch.answers


def evaluate(model: torch.nn.Module, task: Task, n: int, seed: int, batch_size: int = 256) -> pd.DataFrame:
    """Last-token accuracy per hop count on ``n`` fresh prompts (``hops, accuracy, n``; hops
    is a string: "1", "2", …, and "all"). ``model``: a HF causal LM or a TransformerLens model."""
    batch = task.generate(n, seed=seed)
    was_training = model.training
    model.eval()
    correct = []
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                out = model(batch.tokens[start : start + batch_size])
                logits = (out.logits if hasattr(out, "logits") else out)[:, -1]  # HF or TransformerLens
                correct.append(logits.argmax(-1) == batch.answers[start : start + batch_size])
    finally:
        model.train(was_training)
    hits = torch.cat(correct)
    frame = pd.DataFrame({"hops": [str(h) for h in batch.hops.tolist()], "correct": hits.tolist()})
    out = frame.groupby("hops")["correct"].agg(accuracy="mean", n="size").reset_index()
    total = pd.DataFrame({"hops": ["all"], "accuracy": [float(hits.float().mean())], "n": [n]})
    return pd.concat([out, total], ignore_index=True)


# --- checkpoints -----------------------------------------------------------------------------
def _write_atomically(directory: Path, write: Any) -> None:
    partial = directory.with_name(directory.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    write(partial)
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(partial, directory)


def save_checkpoint(directory: Path, model: Any, task: Task, config: TrainConfig, step: int,
                    optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
    """A complete HF directory plus the trainer state, written atomically."""
    def write(path: Path) -> None:
        model.save_pretrained(path, safe_serialization=True)
        task_tokenizer(task).save_pretrained(path)
        info = {"task": task.name, "task_options": _task_options(task), "step": step,
                "training": config.to_dict()}
        (path / "training_config.json").write_text(json.dumps(info, indent=2))
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "rng": torch.get_rng_state(), "step": step}, path / "trainer_state.pt")

    _write_atomically(directory, write)


def _task_options(task: Task) -> dict:
    return {f.name: getattr(task, f.name) for f in fields(task) if f.init} if hasattr(task, "__dataclass_fields__") else {}


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The newest complete checkpoint in ``output_dir`` (partial writes are ignored)."""
    found = sorted(p for p in Path(output_dir).glob(CHECKPOINT_PREFIX + "*")
                   if p.is_dir() and not p.name.endswith(".partial") and (p / "trainer_state.pt").exists())
    return found[-1] if found else None


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
    from psheads.scoring import score_heads

    if config.dynamics_prompts == 0:
        frame = pd.DataFrame({"step": [step]})
    else:
        model = zoo.boot_local(directory)
        prompts = task.generate(config.dynamics_prompts, seed=TEST_SEED_OFFSET + config.seed + 1).tokens
        frame = score_heads(model, prompts, progress=False)[schema.DYNAMICS_SCORES]
        frame.insert(0, "step", step)
    for row in evaluation.itertuples():
        frame[f"accuracy_{row.hops}"] = row.accuracy
    return frame


# --- the loop ------------------------------------------------------------------------------------
def train(task: Task | str, config: TrainConfig | None = None, output_dir: str | Path = "runs/psheads",
          resume: bool = True, progress: bool | None = None) -> TrainResult:
    """Train paper B's GPT-J on ``task`` (see the module docstring).

    Args:
        task: a ``Task`` or a registered task name.
        config: the recipe (default: paper B's).
        output_dir: run directory (checkpoints, ``evaluation.csv``, ``dynamics.csv``).
        resume: continue from the newest complete checkpoint in ``output_dir`` if there is one
            (with ``False``, a directory that already holds checkpoints is refused).
        progress: progress bar (default: only on a TTY).

    Returns:
        The run's ``TrainResult``.
    """
    task = get_task(task) if isinstance(task, str) else task
    config = config or TrainConfig()
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(task, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
    start = 0
    evaluation = _read_csv(output_dir / "evaluation.csv")
    dynamics = _read_csv(output_dir / "dynamics.csv")
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is not None and not resume:
        raise ValueError(f"{output_dir} already holds checkpoints ({checkpoint.name}); pass a new output_dir, "
                         "or resume=True to continue that run.")
    if checkpoint is not None:
        saved = json.loads((checkpoint / "training_config.json").read_text())
        if saved["training"] != config.to_dict() or saved["task"] != task.name:
            raise ValueError(f"{checkpoint} was trained with another task or configuration; use a new "
                             "output_dir or resume=False.")
        model = transformers.GPTJForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
        state = torch.load(checkpoint / "trainer_state.pt", weights_only=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas,
                                      weight_decay=config.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
        # after the scheduler's constructor, which would otherwise reset the learning rate
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        start = state["step"]
        evaluation = evaluation[evaluation["step"] <= start] if len(evaluation) else evaluation
        dynamics = dynamics[dynamics["step"] <= start] if len(dynamics) else dynamics
        logger.info("Resuming from %s (step %d)", checkpoint, start)
    else:
        torch.manual_seed(config.seed)
    mask = query_keep_mask(model, config.keep_planes) if config.keep_planes is not None else None
    model.train()
    seconds = 0.0
    disable = (not sys.stderr.isatty()) if progress is None else not progress
    bar = tqdm(range(start, config.steps), initial=start, total=config.steps, desc=f"train {task.name}",
               disable=disable)
    final = checkpoint
    for step in bar:
        began = time.perf_counter()
        tokens, answers = training_batch(task, config, step)
        logits = model(tokens).logits[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, answers)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
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
            final = output_dir / f"{CHECKPOINT_PREFIX}{done:06d}"
            save_checkpoint(final, model, task, config, done, optimizer, scheduler)
            # evaluation and scoring must not advance the training RNG (resume is exact)
            with torch.random.fork_rng(devices=[]):
                scores = evaluate(model, task, config.eval_prompts, seed=TEST_SEED_OFFSET + config.seed)
                scores.insert(0, "step", done)
                step_dynamics = checkpoint_dynamics(final, task, config, done, scores)
            evaluation = pd.concat([evaluation, scores], ignore_index=True)
            dynamics = pd.concat([dynamics, step_dynamics], ignore_index=True)
            _write_csv(evaluation, output_dir / "evaluation.csv")
            _write_csv(dynamics, output_dir / "dynamics.csv")
            logger.info("step %d: loss %.4f, accuracy %.4f", done, loss.item(),
                        float(scores.loc[scores["hops"] == "all", "accuracy"].iloc[0]))
    if final is None:
        raise ValueError("Nothing to do: the run is already complete and has no checkpoint.")
    return TrainResult(output_dir, final, evaluation, dynamics, seconds)


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype={"hops": str}) if path.exists() else pd.DataFrame()


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    partial = path.with_name(path.name + ".partial")
    frame.to_csv(partial, index=False)
    os.replace(partial, path)
