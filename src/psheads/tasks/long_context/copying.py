"""Copying (``"copy"``: random word tokens, then the same tokens again) and ``FromTask``, a psheads
task with single-token answers turned into a long-context task."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from psheads.interface import validation
from psheads.tasks.long_context.base import TeacherForced, prompt_rng
from psheads.tasks.long_context.text import checked_tokenizer, word_pool


@dataclass(frozen=True)
class CopyTask:
    """Copying (``"copy"``): random word tokens, then the same tokens again.

    After BOS come ``m = (length − 1) // 2`` tokens drawn from ``word_pool(tokenizer)`` (distinct
    where the pool is large enough, so every next token is determined by its previous one), then the
    same ``m`` tokens again; an even ``length`` adds one more token, the first of the sequence again
    (the prompt continues periodically). The answer is the second copy but its first token (which
    no copy rule predicts), one span scored per token (``unit="token"``), labelled with the copying
    distance (``"distance=m"``).
    """

    name: str = field(default="copy", init=False)

    MINIMUM = 5
    """The shortest prompt: BOS, two tokens, their copy."""

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        """``n`` prompts of exactly ``length`` tokens for ``tokenizer``, deterministic in ``seed``.

        Prompt ``i`` is the same for every ``n > i``.

        Raises:
            TypeError: ``tokenizer`` is not a Hugging Face tokenizer.
            ValueError: ``length`` is below ``MINIMUM``.
        """
        length = validation.integer(length, "length", minimum=1)
        n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
        if length < self.MINIMUM:
            raise ValueError(f"{self.name!r}: length {length} is too short; its prompts need at least {self.MINIMUM} "
                             "tokens (BOS, two tokens and their copy).")
        bos = checked_tokenizer(tokenizer, self.name)
        pool = word_pool(tokenizer).tolist()
        half = (length - 1) // 2
        rows = []
        for row in range(n):
            rng = prompt_rng(seed, row)
            sequence = rng.sample(pool, half) if len(pool) >= half else rng.choices(pool, k=half)
            rows.append([bos, *(sequence * 3)[: length - 1]])
        tokens = torch.tensor(rows, dtype=torch.long)
        text = tuple(tokenizer.batch_decode(rows, skip_special_tokens=False))
        spans = (((half + 2, length),),) * n
        return TeacherForced(self.name, length, tokens, spans, ((f"distance={half}",),) * n, "token", text)


@dataclass(frozen=True)
class FromTask:
    """A psheads task with single-token answers (``psheads.tasks``: paper B's number and letter tasks,
    say) as a long-context task: its prompts at ``length − 1`` tokens (``at_length``), each followed by
    its answer, scored teacher-forced at the last position. The tokenizer is the task's own (ignored).

    ``register_long_context_task(FromTask(get_task("letter")))`` makes it one more task of a
    policy evaluation, under the task's name.
    """

    task: Any

    @property
    def name(self) -> str:
        return str(self.task.name)

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        from psheads.tasks.base import at_length, checked_batch

        length = validation.integer(length, "length", minimum=3)
        batch = checked_batch(at_length(self.task, length - 1), validation.integer(n, "n", minimum=1), seed=seed)
        tokens = torch.cat([batch.tokens, batch.answers[:, None]], dim=1)
        width = int(tokens.shape[1])
        return TeacherForced(task=self.name, length=width, tokens=tokens,
                             spans=tuple(((width - 1, width),) for _ in range(len(batch))),
                             labels=tuple((f"hops={int(h)}",) for h in batch.hops), unit="answer",
                             text=tuple(f"{text} {answer}" for text, answer in zip(batch.text, batch.answer_text,
                                                                                   strict=True)))

