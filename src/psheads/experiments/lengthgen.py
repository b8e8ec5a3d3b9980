"""Length generalization: accuracy of a model on a multi-hop task as its prompts grow.

Paper B tests its trained models far beyond their 17 training tokens by inserting extra
target-window tokens before the effective target window (the tasks' ``extra_target``): the
query, the pre-target window and the eight target tokens the path can reach stay as in
training, and only the distance to the start of the prompt grows. The generator keeps every
long prompt valid: no extra token creates a second match on the letter path, and no relative
hop of the number path moves.

``length_generalization`` runs a model on such prompts at any total lengths and returns the
accuracy per length and hop count, in batches sized by a token budget so that memory stays
bounded at thousands of tokens.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Literal, get_args

import pandas as pd
import torch

from psheads.interface import validation
from psheads.measure.evaluation import accuracy_request, accuracy_runs
from psheads.results import schema
from psheads.rope.backends.facts import context_length
from psheads.tasks import Task, TaskBatch, answer_ids, at_length, task_options

logger = logging.getLogger(__name__)

COLUMNS = tuple(schema.LENGTH_GENERALIZATION.names)
"""The columns of ``length_generalization``'s frame."""

Answers = Literal["task", "vocabulary"]
"""Where the prediction is chosen: the task's answer tokens, or the model's whole vocabulary."""

DEFAULT_TOKEN_BUDGET = 8192
"""Tokens per forward pass by default: ``8192 // length`` prompts (at least one) run at once."""


def prompts_per_forward(length: int, token_budget: int) -> int:
    """Prompts of ``length`` tokens one forward pass takes: ``token_budget // length``, at least 1."""
    return max(1, token_budget // length)


def length_generalization(model: torch.nn.Module, task: Task | str, lengths: Iterable[int], n: int = 512,
                          seed: int = 0, token_budget: int = DEFAULT_TOKEN_BUDGET, answers: Answers = "task",
                          progress: bool | None = None, model_name: str | None = None,
                          allow_task_mismatch: bool = False) -> pd.DataFrame:
    """Next-token accuracy of ``model`` on ``task`` at each total prompt length in ``lengths``.

    A prompt of length L has ``extra_target = L − (n_target + n_pre + 1)`` extra target-window
    tokens before the effective window (paper B's length generalization; see the task classes
    for why such prompts still obey the task's rules). Every length gets ``n`` fresh prompts
    from ``seed``, hop counts in equal shares.

    The prediction is the argmax of the logits after the last token over the task's answer
    vocabulary (``answers="task"``, the default: the task's ``answer_ids``, the target-window
    alphabet of the multi-hop tasks), or over the whole vocabulary (``answers="vocabulary"``, as
    ``psheads.evaluate`` does for these tasks). The restricted argmax measures whether the model
    retrieves the right target token, not whether it still emits a target token at all: at
    lengths far beyond training a model may drift to an integer or a letter·letter pair, which
    is a failure of the output format rather than of the hop mechanism. On in-distribution
    lengths both agree for a trained model.

    Memory: ``prompts_per_forward(L, token_budget)`` prompts run at once, so one batch holds
    about ``token_budget`` tokens (one prompt when ``L > token_budget``). The largest tensors
    are a layer's attention scores, ``prompts × n_heads × L × L`` fp32, i.e. at most
    ``max(token_budget, L) × L × n_heads × 4`` bytes, of which eager attention keeps a few
    copies (scores, masked scores, pattern) for one layer at a time. On the shipped models
    (12 layers × 1 head, n_positions 8192) with the default budget, L = 4113 runs one prompt per
    forward (68 MB per copy), and the whole process (Python, torch and the booted model, 0.47 GB
    alone, included) peaked at 1.5 to 1.7 GB RSS (TransformerBridge, fp32, CPU, TransformerLens 4.3);
    ``scripts/length_generalization.py`` records the peak per length. The logits are bounded
    separately (``psheads.measure.evaluation.LOGITS_BYTES``). Time grows with L²: on a 2-core CPU about
    1.6 s per prompt at L = 2065 and 5 s at L = 4113.

    Args:
        model: a ``TransformerBridge``, a ``HookedTransformer`` or a Hugging Face causal LM.
        task: a task that can lengthen its prompts (an ``at_length(length)`` method:
            ``NumberTask``, ``LetterTask`` or your own), or its registered name. Its own
            ``extra_target`` is ignored: ``lengths`` are total lengths.
        lengths: total prompt lengths in tokens, each at least the task's shortest prompt
            (``n_target + n_pre + 1`` for the multi-hop tasks) and at most the model's context.
        n: prompts per length.
        seed: seed of every length's prompts.
        token_budget: tokens per forward pass (see Memory).
        answers: ``"task"`` (argmax over the answer vocabulary) or ``"vocabulary"``.
        progress: progress bar, one step per forward pass (default: in a notebook or on a terminal).
        model_name: if given, the frame starts with a ``model`` column holding it (and
            ``attrs["model_name"]``), so that curves of several models concatenate.
        allow_task_mismatch: run a task whose ids mean other tokens to the model's tokenizer (a
            model trained on another task); by default that raises. The task the model was
            trained on with other generator settings (the letter task's ``sampling``, say) warns
            instead, naming them (``psheads.tasks.TaskSettingsWarning``).

    Returns:
        One row per length and hop count ("1", "2", …, then "all"), in the order of ``lengths``:
        ``length``, ``hops`` (str), ``accuracy`` and ``n`` (prompts). ``attrs`` records the task
        (name and options, ``extra_target`` left out), ``n``, ``seed``, ``token_budget``,
        ``answers``, ``n_candidates`` (None for the whole vocabulary), ``prompts_per_forward``
        and ``seconds`` per length, the model's ``context`` and ``versions`` (psheads and its
        dependencies).

    Raises:
        TypeError: ``model`` is not a torch module; the task cannot be lengthened; ``answers="task"``
            for a task without ``answer_ids``.
        ValueError: a bad ``n``, ``seed``, ``token_budget`` or ``answers``; no lengths; a length
            below the task's shortest prompt or beyond the model's context; ids outside the model's
            vocabulary, or meaning other tokens to its tokenizer.
    """
    request = accuracy_request(model, task, n, seed, progress, model_name, allow_task_mismatch)
    task, n = request.task, request.n
    token_budget = validation.integer(token_budget, "token_budget", minimum=1)
    if answers not in get_args(Answers):
        raise ValueError(f"answers must be one of {get_args(Answers)}, got {answers!r}.")
    options = {key: value for key, value in task_options(task).items() if key != "extra_target"}
    sizes = list(validation.integers(lengths, "lengths", minimum=1, unique=True))
    if not sizes:
        raise ValueError("lengths must list at least one prompt length.")
    context = context_length(model)
    long = [length for length in sizes if context is not None and length > context]
    if long:
        raise ValueError(f"lengths {long} exceed the model's context of {context} tokens (n_ctx / n_positions).")
    try:
        lengthened = [at_length(task, length, otherwise="pick a task that can lengthen its prompts (NumberTask, "
                                "LetterTask)") for length in sizes]
    except ValueError as err:
        room = f"the model's context is {context} tokens" if context is not None else "the model declares no context"
        raise ValueError(f"{err} Possible lengths run from there; {room}.") from None
    candidates = answer_ids(task, otherwise="pass answers='vocabulary' for the whole-vocabulary argmax") \
        if answers == "task" else None
    per_forward = [prompts_per_forward(length, token_budget) for length in sizes]

    expected = iter(sizes)

    def at_its_length(each: Task, batch: TaskBatch) -> TaskBatch:
        length = next(expected)
        if batch.tokens.shape[1] != length:
            raise ValueError(f"Task {task.name!r}: at_length({length}) gave prompts of {batch.tokens.shape[1]} "
                             f"tokens, not {length}.")
        return batch if candidates is None else dataclasses.replace(batch, candidates=candidates)

    frames, seconds, n_candidates = [], [], None
    for length, run in zip(sizes, accuracy_runs(model, request, list(zip(lengthened, per_forward, strict=True)),
                                                 "length generalization", at_its_length), strict=True):
        run.rows.insert(0, "length", length)
        frames.append(run.rows)
        seconds.append(run.seconds)
        n_candidates = run.n_candidates
        logger.info("length %d: accuracy %.4f on %d prompts in %.1f s", length,
                    float(run.rows["accuracy"].iloc[-1]), n, seconds[-1])
    frame = pd.concat(frames, ignore_index=True)[list(COLUMNS)]
    frame.attrs = {"task": task.name, "task_options": options, "lengths": sizes, "n": n, "seed": request.seed,
                   "token_budget": token_budget, "answers": answers, "n_candidates": n_candidates,
                   "prompts_per_forward": per_forward, "seconds": seconds, "context": context,
                   "versions": schema.versions()}
    return schema.tag_model(frame, request.model_name)
