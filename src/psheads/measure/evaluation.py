"""Next-token accuracy of a model on a task, by target window, prompt length and hop count.

``evaluate`` runs a TransformerLens model (``TransformerBridge`` or ``HookedTransformer``) or a
plain Hugging Face causal LM on fresh task prompts and scores its prediction after the last input
token: the argmax over the batch's ``candidates`` when the task supplies them (the LLM tasks), else
over the whole vocabulary (the multi-hop task models; ``psheads.models.training.checkpoint_accuracy`` is this with
its three columns). Nothing is trained: gradients are off, the model runs in eval mode and every
module's training flag is restored afterwards.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from psheads.interface import validation
from psheads.interface.distributed import fingerprint, ordered_map
from psheads.interface.progress import progress_bar
from psheads.results import schema
from psheads.rope.backends import facts
from psheads.tasks import (
    Task,
    TaskBatch,
    check_fits,
    checked_batch,
    task_for_model,
    window_of,
    with_window,
)

LOGITS_BYTES = 1 << 28
"""Bytes the fp32 logits of one batch may take. Within it the full logits are computed and the last
position read (the task models); beyond it (an LLM's vocabulary) only the last position's logits are
computed, by ``logits_to_keep=1`` or, on a ``HookedTransformer``, by cutting the residual stream
to the last position before the unembedding; a model that allows neither runs fewer prompts at once."""

COLUMNS = ("task", "window", "length", "hops", "accuracy", "n", "chance")
"""The columns of ``evaluate``'s frame."""


def last_logits(model: Any, tokens: Tensor) -> Tensor:
    """``[batch, vocab]`` logits after the last token of each row, memory bounded by ``LOGITS_BYTES``
    (``psheads.rope.backends.facts.last_logits``)."""
    return facts.last_logits(model, tokens, LOGITS_BYTES)


def _candidates(batch: TaskBatch, vocab: int | None, name: str) -> Tensor | None:
    """The batch's candidates as ``[n, c]``, checked; None for the whole vocabulary."""
    candidates = batch.candidates
    if candidates is None:
        return None
    n = len(batch)
    if not isinstance(candidates, Tensor) or candidates.dtype != torch.long or candidates.ndim not in (1, 2) \
            or candidates.shape[-1] < 1 or (candidates.ndim == 2 and candidates.shape[0] != n):
        raise ValueError(f"Task {name!r}: TaskBatch.candidates must be a LongTensor [c] or [n, c] with c ≥ 1, got "
                         f"{getattr(candidates, 'dtype', type(candidates).__name__)} "
                         f"{tuple(getattr(candidates, 'shape', ()))}.")
    candidates = candidates.expand(n, -1) if candidates.ndim == 1 else candidates
    if int(candidates.min()) < 0 or (vocab is not None and int(candidates.max()) >= vocab):
        raise ValueError(f"Task {name!r}: candidate token ids must lie in 0…{vocab - 1 if vocab else '?'} (the model's "
                         "vocabulary); was the task built for another tokenizer?")
    if not bool((candidates == batch.answers[:, None]).any(1).all()):
        raise ValueError(f"Task {name!r}: an answer is missing from its prompt's candidates.")
    return candidates


def _hits(model: Any, batch: TaskBatch, candidates: Tensor | None, batch_size: int, bar: Any) -> Tensor:
    """Whether the model's next-token prediction is the answer, per prompt (batches spread over the
    ranks of a ``torch.distributed`` job)."""
    device = facts.input_device(model)

    def correct(start: int) -> Tensor:
        logits = last_logits(model, batch.tokens[start:start + batch_size].to(device))
        if candidates is None:
            predicted = logits.argmax(-1)
        else:
            options = candidates[start:start + batch_size].to(device)
            predicted = options.gather(1, logits.gather(1, options).argmax(-1, keepdim=True)).squeeze(1)
        return predicted.cpu() == batch.answers[start:start + batch_size]

    return torch.cat(list(ordered_map(correct, range(0, len(batch), batch_size), bar=bar,
                                      agree=lambda: fingerprint(batch.tokens, answers=batch.answers.tolist(),
                                                                batch_size=batch_size, model=_module(model)))))


def _module(model: Any) -> torch.nn.Module | None:
    """The module holding ``model``'s weights, for the ranks of a job to compare (None: not a module)."""
    return model if isinstance(model, torch.nn.Module) else None


def batch_accuracy(model: Any, task: Task, batch: TaskBatch, batch_size: int, bar: Any = None,
                   allow_task_mismatch: bool = False) -> tuple[pd.DataFrame, int | None]:
    """Next-token accuracy of ``model`` on ``batch``, per hop count.

    The prediction is the argmax of the logits after the last token over ``batch.candidates``,
    or over the whole vocabulary when it has none. The batch is first checked against the model
    (``psheads.tasks.check_fits``): its ids lie in the vocabulary and, where the model has a
    tokenizer, name the same tokens to the task and to the model.

    Args:
        model: a ``TransformerBridge``, a ``HookedTransformer`` or a Hugging Face causal LM (gradients
            and training mode are the caller's business: see ``evaluate``).
        task: the task that generated ``batch``.
        batch: the prompts (``checked_batch``).
        batch_size: prompts per forward pass.
        bar: a tqdm bar advanced once per forward pass, or None.
        allow_task_mismatch: run a batch whose ids mean other tokens to the model's tokenizer.

    Returns:
        ``hops, accuracy, n``: one row per hop count ("1", "2", …), then "all"; and the number of
        candidates per prompt (None for the whole vocabulary).
    """
    vocab = facts.vocab_size(model)
    candidates = _candidates(batch, vocab, task.name)
    check_fits(task, batch, vocab, facts.tokenizer_of(model), allow_task_mismatch)
    hits = _hits(model, batch, candidates, batch_size, bar)
    frame = pd.DataFrame({"hops": [str(h) for h in batch.hops.tolist()], "correct": hits.tolist()})
    out = frame.groupby("hops")["correct"].agg(accuracy="mean", n="size").reset_index()
    total = pd.DataFrame({"hops": ["all"], "accuracy": [float(hits.float().mean())], "n": [len(batch)]})
    return pd.concat([out, total], ignore_index=True), None if candidates is None else int(candidates.shape[1])


def check_model(model: Any) -> None:
    """Raise ``TypeError`` unless ``model`` is a torch module (a TransformerLens model or an HF causal LM)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch module (a TransformerLens model or a Hugging Face causal LM), got "
                        f"{type(model).__name__}.")


@dataclass(frozen=True)
class AccuracyRequest:
    """The checked arguments every accuracy front-end shares (``accuracy_request``)."""

    task: Task
    n: int
    seed: int
    progress: bool | None
    model_name: str | None
    allow_task_mismatch: bool


def accuracy_request(model: Any, task: Any, n: Any, seed: Any, progress: Any, model_name: Any,
                     allow_task_mismatch: Any) -> AccuracyRequest:
    """Check the arguments ``evaluate``, ``length_generalization`` and the like share; the task is the
    model's own (``psheads.tasks.task_for_model``, whose settings warning points at the line that
    called the front-end)."""
    check_model(model)
    n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
    progress = validation.optional_boolean(progress, "progress")
    allow_task_mismatch = validation.boolean(allow_task_mismatch, "allow_task_mismatch")
    model_name = schema.model_name(model_name)
    return AccuracyRequest(task_for_model(task, model, stacklevel=3), n, seed, progress, model_name,
                           allow_task_mismatch)


@dataclass(frozen=True)
class Accuracy:
    """One condition's result (``accuracy_runs``): its task and prompts, ``batch_accuracy``'s rows and
    candidate count, and the seconds it took."""

    task: Task
    batch: TaskBatch
    rows: pd.DataFrame
    n_candidates: int | None
    seconds: float


def accuracy_runs(model: Any, request: AccuracyRequest, conditions: Sequence[tuple[Task, int]], desc: str,
                  prepare: Callable[[Task, TaskBatch], TaskBatch] | None = None) -> Iterator[Accuracy]:
    """Each condition's accuracy, in order: ``request.n`` prompts of each ``(task, batch_size)`` from
    ``request.seed`` (``checked_batch``, then ``prepare(task, batch)``, which may check or change the
    batch), scored by ``batch_accuracy``. One progress bar counts every forward pass; gradients are
    off and the model's training flags are restored afterwards."""
    total = sum(-(-request.n // batch_size) for _, batch_size in conditions)
    with progress_bar(total=total, desc=desc, progress=request.progress) as bar, torch.no_grad(), \
            facts.preserved_state(model):
        for task, batch_size in conditions:
            start = time.perf_counter()
            batch = checked_batch(task, request.n, seed=request.seed)
            if prepare is not None:
                batch = prepare(task, batch)
            rows, n_candidates = batch_accuracy(model, task, batch, batch_size, bar, request.allow_task_mismatch)
            yield Accuracy(task, batch, rows, n_candidates, time.perf_counter() - start)


def evaluate(model: torch.nn.Module, task: Task | str, n: int = 256, seed: int = 0,
             windows: Iterable[int] | None = None, batch_size: int = 32,
             progress: bool | None = None, model_name: str | None = None,
             allow_task_mismatch: bool = False) -> pd.DataFrame:
    """Next-token accuracy on ``n`` fresh prompts of ``task``, per target window and hop count.

    The prediction after a prompt's last token is the argmax of the model's logits over the
    batch's ``candidates`` when it has them (the LLM tasks: chance is 1 / number of candidates),
    else over the whole vocabulary. A prompt is correct when the prediction is its answer.

    Args:
        model: a ``TransformerBridge``, a ``HookedTransformer`` or a Hugging Face causal LM.
        task: a task, or the name of a registered task (the model's own task when it records one
            of that name: ``task_for_model``). An LLM task without a tokenizer is built for
            ``model.tokenizer``.
        n: prompts per window.
        seed: seed of every window's prompts (``task.generate(n, seed)``).
        windows: target-window lengths, each evaluated with the task's other options unchanged
            (``psheads.tasks.base.with_window``: an LLM task's ``window``; a multi-hop task's
            ``n_target + extra_target``). None: the task as given.
        batch_size: prompts per forward pass (memory is bounded by one batch).
        progress: progress bar (default: in a notebook or on a terminal).
        model_name: if given, the frame starts with a ``model`` column holding it (and
            ``attrs["model_name"]``), so that frames of several models concatenate.
        allow_task_mismatch: evaluate on a task whose ids mean other tokens to the model's
            tokenizer (a model trained on another task); by default that raises. A model that
            gets the task it was trained on with other generator settings (the letter task's
            ``sampling``, say) warns instead (``psheads.tasks.TaskSettingsWarning``), naming them.

    Returns:
        One row per window and hop count ("1", "2", …, then "all"): [``model``,] ``task`` (name),
        ``window`` (target-window length; None for a task without one), ``length`` (prompt length
        in tokens, BOS included where the task adds it), ``hops``, ``accuracy``, ``n`` (prompts)
        and ``chance`` (1 / candidates; NaN for whole-vocabulary argmax).

    Raises:
        TypeError: ``model`` is not a torch module, ``task`` is not a task or a registered name,
            or ``windows`` is given for a task without a window option.
        ValueError: a bad ``n``, ``seed``, ``batch_size`` or window; an LLM task and a model
            without a tokenizer; ids outside the model's vocabulary, or meaning other tokens to its
            tokenizer; candidates without the answer; prompts beyond a hard context limit.
    """
    request = accuracy_request(model, task, n, seed, progress, model_name, allow_task_mismatch)
    batch_size = validation.integer(batch_size, "batch_size", minimum=1)
    sizes = [None] if windows is None else list(validation.integers(windows, "windows", minimum=1, unique=True))
    if not sizes:
        raise ValueError("windows must list at least one window (or be None for the task as given).")
    tasks = [request.task if size is None else with_window(request.task, size, otherwise="pass windows=None")
             for size in sizes]
    context, limit = facts.context_length(model), facts.input_limit(model)

    def fits(each: Task, batch: TaskBatch) -> TaskBatch:
        length = int(batch.tokens.shape[1])
        if limit is not None and length > limit:
            raise ValueError(f"Task {each.name!r} makes prompts of {length} tokens, beyond the {limit} positions this "
                             "model has rotation tables for: pass windows whose prompts fit.")
        if context is not None and length > context:
            warnings.warn(f"Task {each.name!r}: prompts of {length} tokens exceed the model's context of {context} "
                          "tokens.", stacklevel=4)  # fits ← accuracy_runs ← evaluate ← its caller
        return batch

    frames = []
    for run in accuracy_runs(model, request, [(each, batch_size) for each in tasks], "evaluate", fits):
        rows = run.rows
        rows.insert(0, "task", run.task.name)
        rows.insert(1, "window", window_of(run.task))
        rows.insert(2, "length", int(run.batch.tokens.shape[1]))
        rows["chance"] = float("nan") if run.n_candidates is None else 1.0 / run.n_candidates
        frames.append(rows)
    return schema.tag_model(pd.concat(frames, ignore_index=True), request.model_name)
