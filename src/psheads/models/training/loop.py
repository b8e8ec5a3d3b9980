"""The training loop: ``train(task, config)`` trains paper B's GPT-J from scratch on task prompts,
with the loss on the last position only, and resumes an interrupted run exactly.

Every ``checkpoint_every`` steps it writes a checkpoint directory (``recording.save_checkpoint``:
the Hugging Face model in safetensors, the tokenizer, ``training_config.json``, the trainer state
(optimizer tensors and RNG state in safetensors, the rest in JSON), the run's accuracy per hop
count (``evaluation.csv``) and head scores (``dynamics.csv``) up to and including that checkpoint,
and last a ``manifest.json`` with the SHA-256 of every file), through the checkpoint store
(``psheads.models.checkpoints``: complete or absent, verified on resume, nothing unpickled). The
run-level CSV files are copies of the newest checkpoint's. Resuming falls back to the previous
good checkpoint when one is damaged. A loss or a checkpoint's output that is not finite stops the
run (it diverged), keeping the checkpoints before it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from psheads.interface import validation
from psheads.interface.distributed import world
from psheads.interface.progress import progress_bar
from psheads.models import checkpoints, zoo
from psheads.models.checkpoints import CheckpointError
from psheads.models.training.config import TrainConfig
from psheads.models.training.data import TrainingData
from psheads.models.training.model import build_model, query_keep_mask, query_weights
from psheads.models.training.recording import best_step, load_checkpoint, save_checkpoint, validation_history
from psheads.tasks import Task, checked_batch, get_task, task_options

logger = logging.getLogger(__name__)


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


def _longest_prompt(task: Task) -> int | None:
    """The token length of ``task``'s prompts (one seeded prompt), or None if the task cannot say."""
    try:
        return int(checked_batch(task, 1, seed=0).tokens.shape[1])
    except (ValueError, TypeError):
        return None


def parameter_groups(model: torch.nn.Module, config: TrainConfig) -> list[dict]:
    """AdamW parameter groups: one, or (``decay_norms_and_biases=False``) the biases and LayerNorm
    weights apart with no weight decay (Hugging Face ``Trainer``'s rule)."""
    if config.decay_norms_and_biases:
        return [{"params": list(model.parameters())}]
    norms = {id(p) for module in model.modules() if isinstance(module, torch.nn.LayerNorm)
             for p in module.parameters(recurse=False)}
    decayed: list[torch.nn.Parameter] = []
    spared: list[torch.nn.Parameter] = []
    for name, p in model.named_parameters():
        (spared if id(p) in norms or name.endswith("bias") else decayed).append(p)
    return [{"params": decayed}, {"params": spared, "weight_decay": 0.0}]


def _schedule(config: TrainConfig) -> Any:
    def factor(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup_steps))

    return factor


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
                              "Lower lr or keep gradient clipping; the checkpoints before it are kept in "
                              f"{output_dir}.")


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
    task_options(task)  # a run records how to rebuild its task: refuse one that cannot say, before any work
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}.")
    if not isinstance(output_dir, (str, Path)) or not str(output_dir).strip():
        raise TypeError(f"output_dir must name the run folder (a non-empty str or Path), got {output_dir!r}.")
    longest = _longest_prompt(task)
    if longest is not None and longest > config.model.get("n_positions", zoo.PAPER_B_GPTJ["n_positions"]):
        raise ValueError(f"model['n_positions'] ({config.model['n_positions']}) is below the task's prompts of "
                         f"{longest} tokens: GPT-J precomputes its rotation table up to n_positions.")
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
            model, state, history = load_checkpoint(checkpoint, task, config)
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
    # built or loaded on the CPU: the same initial weights on every device
    model.to(device)  # type: ignore[arg-type]  # transformers wraps Module.to: its type takes device as self
    optimizer = torch.optim.AdamW(parameter_groups(model, config), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(config))
    if final is not None and state is not None:  # resuming: both come from the checkpoint that loaded
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
    gated = query_weights(model) if mask is not None else []
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
                for weight in gated:
                    weight.mul_(mask[:, None])
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
