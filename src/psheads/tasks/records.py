"""Which task a model runs on: the task a trained model records, the settings it expects again, and
``task_for_model``, which the front-ends (``evaluate``, ``length_generalization``, ``discrepancy``,
``ablate``) call to turn a task or a task's name into the task object a model gets."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

from psheads.rope.backends import facts
from psheads.tasks.base import (
    TRAINING_RECORD,
    Task,
    generator_settings,
    get_task,
    is_task_tokenizer,
)

logger = logging.getLogger(__name__)


class TaskSettingsWarning(UserWarning):
    """A model runs on the task it was trained on, but drawn with other generator settings."""


def task_from_record(record: Any) -> Task:
    """The task a training record (``TRAINING_RECORD``'s contents) names: ``get_task(record["task"],
    **record["task_options"])``. Options an older psheads did not record take their defaults.

    Raises:
        ValueError: ``record`` is not a training record (no task name, or options that are not a dict),
            or the registry refuses the task or its options.
        TypeError: the task's factory refuses the options.
    """
    if not isinstance(record, dict) or not isinstance(record.get("task"), str) \
            or not isinstance(record.get("task_options", {}), dict):
        raise ValueError("a training record needs a task name under \"task\" (and a dict under \"task_options\")")
    return get_task(record["task"], **record.get("task_options", {}))


def _recorded(tokenizer: Any) -> tuple[Task, Path] | None:
    """The task and the training record of the model whose tokenizer this is (``recorded_task``)."""
    source = str(getattr(tokenizer, "name_or_path", "") or "") if tokenizer is not None else ""
    path = Path(source) / TRAINING_RECORD if source else None
    if path is None or not is_task_tokenizer(tokenizer) or not path.is_file():
        return None
    try:
        task = task_from_record(json.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as err:
        logger.debug("%s is no training record psheads can read (%s): the model's task is unknown", path, err)
        return None
    words = tokenizer.convert_ids_to_tokens(list(range(len(task.vocabulary))))
    return (task, path) if list(words) == list(task.vocabulary) else None


def recorded_task(tokenizer: Any) -> Task | None:
    """The task a model was trained on, as the training record in the folder it was loaded from says.

    A model psheads trained or ships is booted from a folder that holds its task's tokenizer
    (``task_tokenizer``) and ``TRAINING_RECORD``, and its tokenizer remembers the folder
    (``name_or_path``). The record counts only while it names the task whose words the tokenizer
    holds. None for a model without one (a random model, an LLM, a plain Hugging Face model,
    which carries no tokenizer) or with a record that cannot be read.

    Args:
        tokenizer: the model's tokenizer (``model.tokenizer``), or None.
    """
    found = _recorded(tokenizer)
    return None if found is None else found[0]


def check_settings(task: Task, tokenizer: Any, stacklevel: int = 2) -> None:
    """Warn (``TaskSettingsWarning``) when a model runs on the task it was trained on, drawn otherwise.

    The model's training record (``recorded_task``) names its task. When that task has
    ``task``'s name and both declare ``generator_settings``, each setting that differs is named
    with both values, and the warning says which task to pass instead. Nothing happens for a model
    that records no task, for another task (``check_fits`` compares the words), or when the
    settings agree. The options the front-ends vary on purpose (a multi-hop task's length and hop
    range) are no generator settings.

    Args:
        task: the task about to generate the model's prompts.
        tokenizer: the model's tokenizer (``model.tokenizer``), or None.
        stacklevel: as ``warnings.warn``'s, counted from the caller (1: the caller's line; 2: the
            line that called the caller).
    """
    found = _recorded(tokenizer)
    if found is None or found[0].name != getattr(task, "name", None):
        return
    (recorded, path), absent = found, "<absent>"
    ours, theirs = generator_settings(task), generator_settings(recorded)
    if ours is None or theirs is None:
        return
    differing = {key: (ours.get(key, absent), theirs.get(key, absent))
                 for key in sorted(set(ours) | set(theirs), key=str)
                 if ours.get(key, absent) != theirs.get(key, absent)}
    if not differing:
        return
    named = "; ".join(f"{key} is {here!r} here and {there!r} in training" for key, (here, there) in differing.items())
    options = "".join(f", {key}={there!r}" for key, (_, there) in differing.items() if there != absent)
    warnings.warn(f"Task {recorded.name!r} is drawn with other settings than this model was trained with ({path}): "
                  f"{named}, so the model meets prompts unlike those it learned. Pass the task it was trained on "
                  f"(its name, load_pretrained(name).task or get_task({recorded.name!r}{options})), or filter "
                  "psheads.tasks.TaskSettingsWarning if you mean it.", TaskSettingsWarning, stacklevel=stacklevel + 1)


def task_for_model(task: Any, model: Any, *, stacklevel: int = 2) -> Task:
    """A task object for ``model``.

    A registered name is the model's own task when the model records a task of that name
    (``recorded_task``: the shipped ``letter`` model's letter task has ``sampling="paper-b"``),
    else the task built with its defaults. An LLM task gets the model's tokenizer. A task object
    the model was trained on with other generator settings warns, naming each (``check_settings``;
    ``stacklevel`` as ``check_settings``'s: 2, the default, points the warning at the line that called
    the caller of this function).
    """
    tokenizer = facts.tokenizer_of(model)
    if isinstance(task, str):
        own = recorded_task(tokenizer)
        task = own if own is not None and own.name == task else get_task(task)
    if not isinstance(task, Task):
        raise TypeError(f"task must be a psheads task or the name of a registered one, got {type(task).__name__}.")
    if hasattr(task, "for_tokenizer") and getattr(task, "tokenizer", False) is None:
        if tokenizer is None:
            raise ValueError(f"Task {task.name!r} is written for a tokenizer and this model has none (a plain Hugging "
                             "Face model?): pass task.for_tokenizer(tokenizer).")
        task = task.for_tokenizer(tokenizer)
    check_settings(task, tokenizer, stacklevel=stacklevel + 1)
    return task
