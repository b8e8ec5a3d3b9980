"""Tasks: paper B's multi-hop number and letter tasks, their few-shot versions for pretrained LLMs
with paper A's Binding task, the canonical Index, Retrieval and partial-induction tasks, and a
registry for your own.

A task has a ``name``, a ``vocabulary`` (word i is token id i) and ``generate(n, seed)``
returning a ``TaskBatch``. ``register_task(name, factory)`` adds one (``replace=True`` replaces
it); ``get_task(name)`` builds it; ``available_tasks()`` lists them. A task may
also change itself (``with_window``, ``at_length``, ``with_hops``), declare its answer vocabulary
(``answer_ids``), the settings its prompts are drawn with (``generator_settings``) and the options
that rebuild it (``task_options``): the functions of those names ask it. A model psheads trained or ships
records its task (``recorded_task``); ``check_settings``
warns (``TaskSettingsWarning``) when it runs on that task drawn with other settings, and
``task_for_model`` turns a task or its name into the task object a model gets.
"""

from psheads.tasks.base import (
    Task,
    TaskBatch,
    answer_ids,
    at_length,
    available_tasks,
    check_fits,
    checked_batch,
    generator_settings,
    get_task,
    register_task,
    task_options,
    task_tokenizer,
    window_of,
    with_hops,
    with_window,
    word_tokenizer,
)
from psheads.tasks.canonical import IndexTask, PartialInductionTask, RetrievalTask
from psheads.tasks.llm import BindingTask, LLMLetterTask, LLMNumberTask
from psheads.tasks.multihop import LetterTask, NumberTask
from psheads.tasks.records import TaskSettingsWarning, check_settings, recorded_task, task_for_model, task_from_record

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
    "TaskSettingsWarning",
    "answer_ids",
    "at_length",
    "available_tasks",
    "check_fits",
    "check_settings",
    "checked_batch",
    "generator_settings",
    "get_task",
    "recorded_task",
    "register_task",
    "task_for_model",
    "task_from_record",
    "task_options",
    "task_tokenizer",
    "window_of",
    "with_hops",
    "with_window",
    "word_tokenizer",
]
