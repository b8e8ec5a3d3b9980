"""Tasks: paper B's multi-hop number and letter tasks, and a registry for your own.

A task has a ``name``, a ``vocabulary`` (word i is token id i) and ``generate(n, seed)``
returning a ``TaskBatch``. ``register_task(name, factory)`` adds one; ``get_task(name)``
builds it.
"""

from psheads.tasks.base import (
    Task,
    TaskBatch,
    available_tasks,
    checked_batch,
    get_task,
    register_task,
    task_tokenizer,
    word_tokenizer,
)
from psheads.tasks.multihop import LetterTask, NumberTask

__all__ = [
    "LetterTask",
    "NumberTask",
    "Task",
    "TaskBatch",
    "available_tasks",
    "checked_batch",
    "get_task",
    "register_task",
    "task_tokenizer",
    "word_tokenizer",
]
