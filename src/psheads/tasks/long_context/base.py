"""What a long-context task is and returns: teacher-forced prompts (``TeacherForced``), the
``LongContextTask`` protocol and the registry of tasks by name.

A task is any object with a ``name`` and ``generate(tokenizer, length, n, seed)``;
``register_long_context_task`` adds one and ``long_context_task(name, **options)`` builds one.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from jaxtyping import Int
from torch import Tensor

from psheads.interface.registry import Registry

UNITS: tuple[str, ...] = ("answer", "token")
"""How ``TeacherForced.score`` counts: one measurement per answer, or per answer token."""


@dataclass(frozen=True)
class TeacherForced:
    """Prompts whose answers are scored teacher-forced, in one forward per prompt.

    For an answer span ``[start, stop)`` the model's logits at positions ``start − 1 … stop − 2``
    must argmax to ``tokens[start] … tokens[stop − 1]``.

    Attributes:
        task: the task's registered name.
        length: tokens per prompt, answers included.
        tokens: ``[n, length]`` token ids (``torch.long``, CPU); each row starts with the
            tokenizer's BOS (its EOS where it has no BOS, as Qwen2.5).
        spans: per prompt, each answer's token span ``(start, stop)`` in ``tokens`` (``start ≥ 1``).
        labels: per prompt, one short label per answer (``"hops=3"``, ``"depth=0.40"``).
        unit: ``"answer"`` (an answer is one measurement, correct when every token of its span is
            predicted) or ``"token"`` (each token of each span is its own measurement).
        text: each prompt decoded, for inspection.
    """

    task: str
    length: int
    tokens: Int[Tensor, "n pos"]
    spans: tuple[tuple[tuple[int, int], ...], ...]
    labels: tuple[tuple[str, ...], ...]
    unit: str
    text: tuple[str, ...]

    def __post_init__(self) -> None:
        tokens = self.tokens
        if not isinstance(tokens, Tensor) or tokens.dtype != torch.long or tokens.ndim != 2:
            raise ValueError(f"TeacherForced.tokens must be a 2-D LongTensor [n, length], got "
                             f"{getattr(tokens, 'dtype', type(tokens).__name__)} of shape "
                             f"{tuple(getattr(tokens, 'shape', ()))}.")
        n, length = tokens.shape
        if length != self.length:
            raise ValueError(f"TeacherForced.tokens has {length} positions, but length says {self.length}.")
        if self.unit not in UNITS:
            raise ValueError(f"TeacherForced.unit must be one of {UNITS}, got {self.unit!r}.")
        if len(self.spans) != n or len(self.labels) != n or len(self.text) != n:
            raise ValueError(f"TeacherForced: {n} prompts but {len(self.spans)} span lists, {len(self.labels)} label "
                             f"lists and {len(self.text)} texts; give one of each per prompt.")
        for row, (spans, labels) in enumerate(zip(self.spans, self.labels, strict=True)):
            if not spans or len(spans) != len(labels):
                raise ValueError(f"TeacherForced: prompt {row} has {len(spans)} answers and {len(labels)} labels; give "
                                 "each prompt at least one answer and one label per answer.")
            for start, stop in spans:
                if not 1 <= start < stop <= length:
                    raise ValueError(f"TeacherForced: prompt {row} has the answer span ({start}, {stop}); a span "
                                     f"(start, stop) needs 1 ≤ start < stop ≤ {length}.")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def _positions(self, row: int) -> list[int]:
        return sorted({position for start, stop in self.spans[row] for position in range(start - 1, stop - 1)})

    def logit_positions(self) -> Int[Tensor, "n k"]:
        """Per prompt, the positions whose next-token logits the scoring needs.

        Returns:
            ``[n, k]`` positions ``start − 1 … stop − 2`` of every span, sorted, without duplicates;
            a prompt that needs fewer than ``k`` repeats its last one.
        """
        rows = [self._positions(row) for row in range(len(self))]
        width = max(len(row) for row in rows)
        return torch.tensor([row + row[-1:] * (width - len(row)) for row in rows], dtype=torch.long)

    def _token_hits(self, predictions: Tensor) -> list[list[Tensor]]:
        """Per prompt, per answer, ``[stop − start]`` bools: each answer token predicted or not."""
        positions = self.logit_positions()
        if not isinstance(predictions, Tensor) or predictions.is_floating_point() or predictions.is_complex() \
                or predictions.dtype == torch.bool:
            raise TypeError("predictions must be an integer tensor of argmax token ids (logits.argmax(-1) gathered at "
                            f"logit_positions()), got {getattr(predictions, 'dtype', type(predictions).__name__)}.")
        if tuple(predictions.shape) != tuple(positions.shape):
            raise ValueError(f"predictions must have the shape of logit_positions(), {tuple(positions.shape)}, got "
                             f"{tuple(predictions.shape)}: gather the argmax at those positions.")
        hits = predictions.detach().to("cpu", torch.long) == self.tokens.gather(1, positions + 1)
        found = []
        for row in range(len(self)):
            columns = torch.searchsorted(positions[row], torch.arange(self.length))
            found.append([hits[row, columns[start - 1: stop - 1]] for start, stop in self.spans[row]])
        return found

    def correct_by_answer(self, predictions: Int[Tensor, "n k"]) -> list[list[bool]]:
        """Per prompt, per answer: whether every token of its span is predicted.

        Args:
            predictions: ``[n, k]`` argmax token ids at ``logit_positions()``.
        """
        return [[bool(answer.all()) for answer in row] for row in self._token_hits(predictions)]

    def score(self, predictions: Int[Tensor, "n k"]) -> tuple[int, int]:
        """``(correct, total)`` measurements (answers or answer tokens, as ``unit`` says).

        Args:
            predictions: ``[n, k]`` argmax token ids at ``logit_positions()`` (same shape).

        Raises:
            TypeError: ``predictions`` is not an integer tensor.
            ValueError: its shape is not that of ``logit_positions()``.
        """
        hits = self._token_hits(predictions)
        if self.unit == "answer":
            return sum(bool(a.all()) for row in hits for a in row), sum(len(row) for row in hits)
        return sum(int(a.sum()) for row in hits for a in row), sum(len(a) for row in hits for a in row)


@runtime_checkable
class LongContextTask(Protocol):
    """What a long-context task provides: a name and a seeded generator of teacher-forced prompts."""

    @property
    def name(self) -> str:
        """The task's registered name (a read-only property, so frozen dataclasses qualify)."""
        ...

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        """``n`` prompts of exactly ``length`` tokens for ``tokenizer``, deterministic in ``seed``."""
        ...


def prompt_rng(seed: int, row: int) -> random.Random:
    """Prompt ``row``'s own generator: a prompt is the same whatever ``n`` (string seeds hash with SHA-512,
    independently of ``PYTHONHASHSEED``)."""
    return random.Random(f"psheads.long_context:{seed}:{row}")


# --- the registry ---------------------------------------------------------------------------------

LONG_CONTEXT_TASKS: Registry[LongContextTask] = Registry(
    "long-context task", "psheads.tasks.long_context.register_long_context_task")
"""The long-context tasks by name (``long_context_names()``)."""


def register_long_context_task(task: LongContextTask, replace: bool = False) -> LongContextTask:
    """Register ``task`` (an instance) under ``task.name``; returns it.

    ``long_context_task(task.name, **options)`` then builds it with other options
    (``dataclasses.replace``, for a dataclass task).

    Raises:
        TypeError: ``task`` has no ``name`` or ``generate`` (or is a class, not an instance).
        ValueError: its name is already registered and ``replace`` is False.
    """
    if isinstance(task, type) or not isinstance(task, LongContextTask):
        raise TypeError(f"register_long_context_task takes a task instance with a `name` and a "
                        f"`generate(tokenizer, length, n, seed)` method (e.g. NeedleTask()), got {task!r}.")
    return LONG_CONTEXT_TASKS.register(task.name, task, replace=replace)


def long_context_task(name: str, **options: Any) -> LongContextTask:
    """The registered long-context task ``name``, with ``options`` changed (its dataclass fields).

    Raises:
        TypeError: ``name`` is not a string, or an option the task does not take.
        ValueError: no task of that name (the message lists them), or an option's value is refused.
    """
    task = LONG_CONTEXT_TASKS.lookup(name)
    if not options:
        return task
    fields: list[str] = sorted(f.name for f in dataclasses.fields(task) if f.init) \
        if dataclasses.is_dataclass(task) and not isinstance(task, type) else []
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise TypeError(f"The long-context task {name!r} takes no option {', '.join(map(repr, unknown))}; its options "
                        f"are: {', '.join(fields) or 'none'}.")
    return dataclasses.replace(task, **options)  # type: ignore[type-var]


def long_context_names() -> tuple[str, ...]:
    """The registered long-context tasks' names, sorted."""
    return LONG_CONTEXT_TASKS.names()

