"""The task protocol, the batch a task generates, word-level tokenizers and the task registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
import transformers
from jaxtyping import Int
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import Tensor

from psheads.interface import validation

UNKNOWN = "<unk>"
BOS = "<bos>"


@dataclass(frozen=True)
class TaskBatch:
    """Prompts of a task with their answers.

    Attributes:
        tokens: ``[n, pos]`` input token ids (the answer is not included).
        answers: ``[n]`` answer token ids (the token the model must predict after the last input).
        hops: ``[n]`` number of hops from the query to the answer.
        answer_positions: ``[n]`` position of the answer in the input.
        text: the inputs as space-separated words.
        answer_text: the answers as words.
        candidates: the answer tokens a prediction is chosen from: ``[n, c]`` per prompt or ``[c]``
            shared by every prompt; None (the default) means the whole vocabulary.
    """

    tokens: Int[Tensor, "n pos"]
    answers: Int[Tensor, " n"]
    hops: Int[Tensor, " n"]
    answer_positions: Int[Tensor, " n"]
    text: list[str]
    answer_text: list[str]
    candidates: Int[Tensor, "*n c"] | None = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@runtime_checkable
class Task(Protocol):
    """What psheads needs from a task: a name, a vocabulary and a seeded generator."""

    name: str

    @property
    def vocabulary(self) -> list[str]:
        """Every word the task uses; a word's index is its token id."""
        ...

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts, deterministic in ``seed``."""
        ...


def checked_batch(task: Task, n: int, seed: int = 0) -> TaskBatch:
    """``task.generate(n, seed)``, checked: a ``TaskBatch`` of ``n`` prompts whose parts agree.

    Raises:
        TypeError: ``n`` or ``seed`` is not an int, or the task returned something else.
        ValueError: ``n < 1``, a negative seed, or parts whose lengths or dtypes disagree.
    """
    n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
    batch = task.generate(n, seed=seed)
    name = getattr(task, "name", type(task).__name__)
    if not isinstance(batch, TaskBatch):
        raise TypeError(f"Task {name!r}: generate returned {type(batch).__name__}, not a psheads.tasks.TaskBatch.")
    tensors = {"tokens": batch.tokens, "answers": batch.answers, "hops": batch.hops,
               "answer_positions": batch.answer_positions}
    for part, value in tensors.items():
        if not isinstance(value, Tensor) or value.dtype != torch.long:
            raise ValueError(f"Task {name!r}: TaskBatch.{part} must be a LongTensor, got "
                             f"{getattr(value, 'dtype', type(value).__name__)}.")
    if batch.tokens.ndim != 2 or any(value.shape != (n,) for part, value in tensors.items() if part != "tokens") \
            or batch.tokens.shape[0] != n or len(batch.text) != n or len(batch.answer_text) != n:
        raise ValueError(f"Task {name!r}: generate({n}) returned parts of other sizes (tokens "
                         f"{tuple(batch.tokens.shape)}, answers {tuple(batch.answers.shape)}).")
    return batch


def word_tokenizer(words: list[str]) -> transformers.PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer over ``words`` that never adds special tokens itself.

    Word i gets token id i; two special words follow: ``<unk>`` (id ``len(words)``, for words
    outside the list) and ``<bos>`` (id ``len(words) + 1``; also EOS and padding). Declaring them
    lets TransformerLens boot the model and prepend ``<bos>`` to string prompts as one token
    (pass ``prepend_bos=False`` to leave it out). A model using this tokenizer needs
    ``len(words) + 2`` embeddings.
    """
    if len(set(words)) != len(words) or {UNKNOWN, BOS} & set(words):
        raise ValueError(f"Words must be unique and must not include {UNKNOWN} or {BOS}.")
    if any(not word or any(ch.isspace() for ch in word) for word in words):
        raise ValueError("Words must be non-empty and contain no whitespace.")
    vocab = {word: i for i, word in enumerate([*words, UNKNOWN])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=1 << 20,
                                                unk_token=UNKNOWN)
    fast.add_special_tokens({"bos_token": BOS, "eos_token": BOS, "pad_token": BOS})
    return fast


def task_tokenizer(task: Task) -> transformers.PreTrainedTokenizerFast:
    """The word-level tokenizer of ``task``."""
    return word_tokenizer(list(task.vocabulary))


def to_text(vocabulary: list[str], ids: Tensor) -> list[str]:
    """Rows of token ids as space-separated words."""
    return [" ".join(vocabulary[i] for i in row) for row in ids.tolist()]


def balanced(values: list[int], n: int, generator: torch.Generator) -> Tensor:
    """``n`` draws that use every value equally often (±1), in a seeded random order."""
    full, rest = divmod(n, len(values))
    table = torch.tensor(values, dtype=torch.long)
    extra = table[torch.randperm(len(values), generator=generator)[:rest]]
    pool = torch.cat([table.repeat(full), extra])
    return pool[torch.randperm(n, generator=generator)]


_REGISTRY: dict[str, Callable[..., Task]] = {}


def register_task(name: str, factory: Callable[..., Task]) -> None:
    """Make ``get_task(name, **options)`` build a task with ``factory(**options)``.

    Raises:
        ValueError: ``name`` is empty or already registered.
        TypeError: ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("A task name must be a non-empty string.")
    if name in _REGISTRY:
        raise ValueError(f"A task named {name!r} is already registered; pick another name.")
    if not callable(factory):
        raise TypeError("factory must be callable (a Task class or a function returning a Task).")
    _REGISTRY[name] = factory


def get_task(name: str, **options: object) -> Task:
    """Build the registered task ``name`` with ``options``.

    Raises:
        ValueError: no task of that name is registered.
        TypeError: the factory did not return a Task.
    """
    if name not in _REGISTRY:
        raise ValueError(f"Unknown task {name!r}; registered tasks: {', '.join(sorted(_REGISTRY))}.")
    task = _REGISTRY[name](**options)
    if not isinstance(task, Task):
        raise TypeError(f"The factory of {name!r} returned {type(task).__name__}, which is not a Task.")
    return task


def available_tasks() -> list[str]:
    """Names of the registered tasks."""
    return sorted(_REGISTRY)
