"""The task protocol, the batch a task generates, its optional capabilities, word-level tokenizers
and the task registry."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
import transformers
from jaxtyping import Int
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import Tensor

from psheads.interface import validation
from psheads.interface.registry import Registry

logger = logging.getLogger(__name__)

UNKNOWN = "<unk>"
BOS = "<bos>"
TRAINING_RECORD = "training_config.json"
"""The file beside a model psheads trained or ships (a checkpoint, a shipped model) that records its
task (``task``, ``task_options``) and training settings."""


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
    """What psheads needs from a task: a name, a vocabulary and a seeded generator.

    Optional capabilities, asked for through ``with_window``, ``at_length``, ``with_hops``,
    ``answer_ids`` and ``generator_settings`` in this module: a method ``with_window(window)``
    (evaluation at other windows), ``at_length(length)`` (length generalization, discrepancy at a
    length), ``with_hops(hops)`` (1-hop prompts for the discrepancy), and properties ``window``
    (the target window's size, reported by ``evaluate``), ``answer_ids`` (the answer vocabulary)
    and ``generator_settings`` (the options a model trained on the task expects again:
    ``check_settings``).
    """

    @property
    def name(self) -> str:
        """The task's registered name."""
        ...

    @property
    def vocabulary(self) -> Sequence[str]:
        """Every word the task uses; a word's index is its token id."""
        ...

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts, deterministic in ``seed``."""
        ...


# --- optional capabilities ----------------------------------------------------------------------
# A task may also know how to change itself. The front-ends ask through these functions, which
# call the task's own method and otherwise raise a TypeError that says what to add.

def _capability(task: Task, method: str, what: str, otherwise: str) -> Callable[..., Any]:
    found = getattr(task, method, None)
    if not callable(found):
        name = getattr(task, "name", type(task).__name__)
        raise TypeError(f"Task {name!r} ({type(task).__name__}) cannot {what}: it has no `{method}` method. "
                        f"Give it one (see the custom-task section of the tasks docs), or {otherwise}.")
    return found


def window_of(task: Task) -> int | None:
    """Items in ``task``'s target window (its ``window`` attribute), or None when it declares none."""
    window = getattr(task, "window", None)
    return int(window) if isinstance(window, int) and not isinstance(window, bool) else None


def with_window(task: Task, window: int, otherwise: str = "leave the window as it is") -> Task:
    """``task.with_window(window)``: the task with a target window of ``window`` items.

    The LLM tasks set their ``window``; the multi-hop tasks keep their effective window
    ``n_target`` and add ``window − n_target`` extra target items before it (paper B's length
    generalization).

    Raises:
        TypeError: the task has no ``with_window`` method (``otherwise`` says what to do instead).
        ValueError: the task refuses ``window``.
    """
    window = validation.integer(window, "window", minimum=1)
    return _checked_task(_capability(task, "with_window", "change its target window", otherwise)(window), "with_window")


def at_length(task: Task, length: int, otherwise: str = "leave the length as it is") -> Task:
    """``task.at_length(length)``: the task whose prompts have ``length`` tokens in all.

    Raises:
        TypeError: the task has no ``at_length`` method (``otherwise`` says what to do instead).
        ValueError: the task cannot make prompts of ``length`` tokens (too short).
    """
    length = validation.integer(length, "length", minimum=1)
    at = _capability(task, "at_length", "make prompts of a given length", otherwise)
    return _checked_task(at(length), "at_length")


def with_hops(task: Task, hops: int, otherwise: str = "use the task as it is") -> Task:
    """``task.with_hops(hops)``: the task whose every prompt takes ``hops`` hops (multi-hop tasks).

    Raises:
        TypeError: the task has no ``with_hops`` method.
        ValueError: the task cannot take ``hops`` hops.
    """
    hops = validation.integer(hops, "hops", minimum=1)
    return _checked_task(_capability(task, "with_hops", "fix its hop count", otherwise)(hops), "with_hops")


def answer_ids(task: Task, otherwise: str = "choose predictions over the whole vocabulary") -> Int[Tensor, " c"]:
    """``task.answer_ids``: the token ids an answer can take, ``[c]`` distinct ids.

    Raises:
        TypeError: the task declares no ``answer_ids``.
        ValueError: they are not a 1-D LongTensor of distinct non-negative ids.
    """
    name = getattr(task, "name", type(task).__name__)
    ids = getattr(task, "answer_ids", None)
    if ids is None:
        raise TypeError(f"Task {name!r} ({type(task).__name__}) has no known answer vocabulary: it has no "
                        f"`answer_ids` property. Give it one (see the custom-task section of the tasks docs), "
                        f"or {otherwise}.")
    if not isinstance(ids, Tensor) or ids.dtype != torch.long or ids.ndim != 1 or len(ids) == 0 \
            or int(ids.min()) < 0 or len(ids.unique()) != len(ids):
        raise ValueError(f"Task {name!r}: answer_ids must be a 1-D LongTensor of distinct non-negative token ids.")
    return ids


def generator_settings(task: Task) -> dict[str, Any] | None:
    """``task.generator_settings``: the options that decide how its prompts are drawn, those a model
    trained on it expects again (not those the front-ends vary on purpose, such as the length or
    the hop count); None when the task declares none.

    Raises:
        TypeError: they are not a dict.
    """
    settings = getattr(task, "generator_settings", None)
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"Task {getattr(task, 'name', type(task).__name__)!r}: generator_settings must be a dict of "
                        f"options, got {type(settings).__name__}.")
    return settings


def task_options(task: Task) -> dict[str, Any]:
    """The options that rebuild ``task`` from its registered name: ``get_task(task.name, **options)``.

    A task declares them with an ``options`` property (a dict); a dataclass task needs none: its
    ``__init__`` fields are its options. This is the task's provenance in training records and in the
    ``attrs`` of the frames that run it.

    Raises:
        TypeError: the task declares no options and is not a dataclass, or its options are not a dict.
    """
    name = getattr(task, "name", type(task).__name__)
    declared = getattr(task, "options", None)
    if declared is not None:
        if not isinstance(declared, dict) or not all(isinstance(key, str) for key in declared):
            raise TypeError(f"Task {name!r}: options must be a dict of option names to values, got "
                            f"{type(declared).__name__}.")
        return dict(declared)
    if dataclasses.is_dataclass(task):
        return {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.init}
    raise TypeError(f"Task {name!r} ({type(task).__name__}) cannot record how to rebuild it: give it an `options` "
                    f"property (a dict such that get_task({name!r}, **task.options) builds it again), or make it a "
                    "dataclass (its fields are its options).")


def _checked_task(task: Any, method: str) -> Task:
    if not isinstance(task, Task):
        raise TypeError(f"{method} returned {type(task).__name__}, not a task.")
    return task


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
    length = int(batch.tokens.shape[1])
    if length == 0:
        raise ValueError(f"Task {name!r}: generate({n}) returned empty prompts.")
    if int(batch.tokens.min()) < 0 or int(batch.answers.min()) < 0:
        raise ValueError(f"Task {name!r}: token ids must be non-negative.")
    if int(batch.hops.min()) < 1:
        raise ValueError(f"Task {name!r}: hops must be ≥ 1 (a 1-hop prompt has hops 1), got {int(batch.hops.min())}.")
    positions = batch.answer_positions
    if int(positions.min()) < 0 or int(positions.max()) >= length:
        raise ValueError(f"Task {name!r}: answer_positions must be positions of the prompt (0…{length - 1}), got "
                         f"{int(positions.min())}…{int(positions.max())}.")
    return batch


def _batch_ids(batch: TaskBatch) -> Int[Tensor, " ids"]:
    """The distinct token ids ``batch`` holds: its prompts, answers and candidates."""
    parts = [batch.tokens.flatten(), batch.answers]
    if isinstance(batch.candidates, Tensor):
        parts.append(batch.candidates.flatten())
    return torch.cat(parts).unique()


def is_task_tokenizer(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is a task's word list (``word_tokenizer``: its last two tokens are ``<unk>``
    and ``<bos>``), as a model psheads trains or ships carries: such a model records its task."""
    vocabulary = tokenizer.get_vocab() if callable(getattr(tokenizer, "get_vocab", None)) else {}
    size = len(vocabulary)
    return size >= 2 and vocabulary.get(UNKNOWN) == size - 2 and vocabulary.get(BOS) == size - 1


def check_fits(task: Task, batch: TaskBatch, vocab_size: int | None, tokenizer: Any = None,
               allow_task_mismatch: bool = False) -> None:
    """Raise ``ValueError`` unless ``batch`` (from ``task``) means to a model what it means to the task.

    Every id the batch holds (prompts, answers, candidates) must lie in the model's vocabulary
    ``0 … vocab_size − 1``. Where the model records its task (its tokenizer is a task's word list,
    ``word_tokenizer``) or the task was built for a tokenizer (the LLM tasks), each id must also
    name the same token to the task (``task.vocabulary[id]``) and to the model's tokenizer, so that
    a model trained on one task is not run on another task's ids (the number model on letter
    prompts, say). A model whose tokenizer belongs to no task (a random model) gets the range check.

    Args:
        task: the task that generated ``batch``.
        batch: a checked batch (``checked_batch``).
        vocab_size: the model's vocabulary size, or None when it declares none.
        tokenizer: the model's tokenizer, or None.
        allow_task_mismatch: skip the tokenizer comparison (the id range is still checked), for a
            model deliberately run on another task's ids.
    """
    name = getattr(task, "name", type(task).__name__)
    ids = _batch_ids(batch)
    if vocab_size is not None and int(ids.max()) >= vocab_size:
        raise ValueError(f"Task {name!r} emits token id {int(ids.max())}, outside the model's vocabulary of "
                         f"{vocab_size} tokens (0…{vocab_size - 1}): build the task for this model (fewer symbols, "
                         f"its tokenizer), or pick the model the task was made for.")
    if tokenizer is None or allow_task_mismatch \
            or not (is_task_tokenizer(tokenizer) or getattr(task, "tokenizer", None) is not None):
        return
    vocabulary = task.vocabulary
    for token_id in ids.tolist():
        ours = vocabulary[token_id] if token_id < len(vocabulary) else None
        theirs = tokenizer.convert_ids_to_tokens(token_id)
        if ours != theirs:
            raise ValueError(f"Task {name!r} does not match this model's tokenizer: token id {token_id} is {ours!r} to "
                             f"the task and {theirs!r} to the model, so the model would read other words than the "
                             "task wrote (was it trained on another task?). Use the task the model was trained on "
                             "(load_pretrained(name).task), or pass allow_task_mismatch=True "
                             "(--allow-task-mismatch on the command line) if you mean it.")


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


_REGISTRY: Registry[Callable[..., Task]] = Registry(
    "task", "psheads.tasks.register_task", group="psheads.tasks",
    add=lambda name, factory: register_task(name, factory))
"""The tasks; installed packages add theirs as entry points of ``psheads.tasks``, ``name = "module:factory"``."""


def register_task(name: str, factory: Callable[..., Task], *, replace: bool = False) -> Callable[..., Task]:
    """Make ``get_task(name, **options)`` build a task with ``factory(**options)``; returns ``factory``.

    Raises:
        ValueError: ``name`` is empty, or already registered and ``replace`` is False.
        TypeError: ``factory`` is not callable.
    """
    if not callable(factory):
        raise TypeError("factory must be callable (a Task class or a function returning a Task).")
    return _REGISTRY.register(name, factory, replace=replace)


def get_task(name: str, **options: object) -> Task:
    """Build the registered task ``name`` with ``options``.

    Raises:
        ValueError: no task of that name is registered.
        TypeError: ``name`` is not a string, or the factory did not return a Task.
    """
    task = _REGISTRY.lookup(name)(**options)
    if not isinstance(task, Task):
        raise TypeError(f"The factory of {name!r} returned {type(task).__name__}, which is not a Task.")
    return task


def available_tasks() -> tuple[str, ...]:
    """Names of the registered tasks, sorted."""
    return _REGISTRY.names()
