"""Long-context retrieval tasks for pretrained LLMs, scored teacher-forced in one forward per prompt.

These tasks test KV-cache policies: a *streamed* head sees only the first ``sink`` and the last
``recent`` tokens, so a task must break when the heads that fetch far-away content are streamed.
Every prompt is built for a Hugging Face tokenizer at an exact token ``length`` (1K–8K tokens for
Gemma 3 270M, SmolLM2-135M or Qwen2.5-Coder-0.5B) and already holds its answers: an answer is
correct when the model's argmax at each position predicts the next answer token. Four tasks are
registered (``long_context_names()`` lists them with any you add):

- ``"needle"`` (``NeedleTask``): RULER's multi-key needle in a haystack. Sentences "One of the
  special magic numbers for {key} is: {value}." lie at random depths of natural text; a few of
  them are asked at the end ("… The special magic number for {key} is: {value}").
- ``"variable-tracking"`` (``VariableTrackingTask``): RULER's variable tracking. Chains
  "VAR ABCDE = 12345." … "VAR FGHIJ = VAR ABCDE." lie in order through the text; the value of each
  chain's last variable is asked at the end.
- ``"copy"`` (``CopyTask``): random word tokens, then the same tokens again (induction over the
  whole context).
- ``"passkey"`` (``PasskeyTask``): Mohtashami & Jaggi (2023)'s pass key hidden in repeated filler.

The haystack is ``"prose"`` (psheads' shipped English prose, ``psheads.data.path("prose.txt")``)
or ``"pydoc"`` (the text of Python's own ``pydoc_data.topics``), tokenized once per tokenizer;
each prompt reads a contiguous window of it from a seeded random offset. Prompts are lists of
token ids assembled from separately tokenized pieces, so every answer's span is known exactly.
``long_context_task(name, **options)`` builds a registered task and ``register_long_context_task``
adds your own (any object with a ``name`` and ``generate(tokenizer, length, n, seed)``).

The package's modules, by role: ``base`` (``TeacherForced``, the protocol and the registry),
``text`` (haystacks, filler and word pool per tokenizer), ``retrieval`` (the haystack tasks) and
``copying`` (``CopyTask`` and ``FromTask``). Their public names are importable from here.
"""

from psheads.tasks.long_context.base import (
    LONG_CONTEXT_TASKS,
    UNITS,
    LongContextTask,
    TeacherForced,
    long_context_names,
    long_context_task,
    register_long_context_task,
)
from psheads.tasks.long_context.copying import CopyTask, FromTask
from psheads.tasks.long_context.retrieval import MIN_HAYSTACK, NeedleTask, PasskeyTask, VariableTrackingTask
from psheads.tasks.long_context.text import HAYSTACKS, PASSKEY_FILLER, Haystack, haystack_text, word_pool

__all__ = [
    "HAYSTACKS",
    "LONG_CONTEXT_TASKS",
    "MIN_HAYSTACK",
    "PASSKEY_FILLER",
    "UNITS",
    "CopyTask",
    "FromTask",
    "Haystack",
    "LongContextTask",
    "NeedleTask",
    "PasskeyTask",
    "TeacherForced",
    "VariableTrackingTask",
    "haystack_text",
    "long_context_names",
    "long_context_task",
    "register_long_context_task",
    "word_pool",
]

for _task in (NeedleTask(), VariableTrackingTask(), CopyTask(), PasskeyTask()):
    register_long_context_task(_task)
