"""Tasks: paper B's multi-hop number and letter tasks, their few-shot versions for pretrained LLMs
with paper A's Binding task, the canonical Index, Retrieval and partial-induction tasks, and a
registry for your own.

A task has a ``name``, a ``vocabulary`` (word i is token id i) and ``generate(n, seed)``
returning a ``TaskBatch``. ``register_task(name, factory)`` adds one; ``get_task(name)``
builds it. A task may also change itself (``with_window``, ``at_length``, ``with_hops``) and
declare its answer vocabulary (``answer_ids``): the functions of those names ask it.
"""

from psheads.tasks.base import (
    Task,
    TaskBatch,
    answer_ids,
    at_length,
    available_tasks,
    check_fits,
    checked_batch,
    get_task,
    register_task,
    task_tokenizer,
    window_of,
    with_hops,
    with_window,
    word_tokenizer,
)
from psheads.tasks.canonical import IndexTask, PartialInductionTask, RetrievalTask
from psheads.tasks.llm import BindingTask, LLMLetterTask, LLMNumberTask
from psheads.tasks.multihop import LetterTask, NumberTask

__all__ = [
    "BindingTask",
    "IndexTask",
    "LLMLetterTask",
    "LLMNumberTask",
    "LetterTask",
    "NumberTask",
    "PartialInductionTask",
    "RetrievalTask",
    "Task",
    "TaskBatch",
    "answer_ids",
    "at_length",
    "available_tasks",
    "check_fits",
    "checked_batch",
    "get_task",
    "register_task",
    "task_tokenizer",
    "window_of",
    "with_hops",
    "with_window",
    "word_tokenizer",
]
