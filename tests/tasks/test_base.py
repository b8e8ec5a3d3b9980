"""checked_batch refuses batches whose parts cannot be right; check_fits refuses ids a model would
misread (outside its vocabulary, or other words to the tokenizer of a model that records its task)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from psheads.tasks import LetterTask, NumberTask, TaskBatch, check_fits, checked_batch, get_task, task_tokenizer
from tests import helpers


@dataclasses.dataclass(frozen=True)
class Broken:
    """A 4-token task; ``part`` names the batch part to replace with ``value``."""

    part: str = ""
    value: int = 0
    name: str = "broken"

    @property
    def vocabulary(self) -> list[str]:
        return ["a", "b", "c"]

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        parts = {"tokens": torch.zeros(n, 4, dtype=torch.long), "answers": torch.ones(n, dtype=torch.long),
                 "hops": torch.ones(n, dtype=torch.long), "answer_positions": torch.full((n,), 2)}
        if self.part:
            parts[self.part] = torch.full_like(parts[self.part], self.value)
        return TaskBatch(**parts, text=["a a a a"] * n, answer_text=["b"] * n)


@pytest.mark.parametrize(("part", "value", "message"), [
    ("tokens", -1, "token ids must be non-negative"),
    ("answers", -5, "token ids must be non-negative"),
    ("hops", 0, r"hops must be ≥ 1 \(a 1-hop prompt has hops 1\), got 0"),
    ("hops", -3, "hops must be ≥ 1.*got -3"),
    ("answer_positions", 4, r"answer_positions must be positions of the prompt \(0…3\), got 4…4"),
    ("answer_positions", -1, "answer_positions must be positions.*got -1…-1"),
])
def test_checked_batch_refuses_parts_that_cannot_be_right(part, value, message) -> None:
    with pytest.raises(ValueError, match=rf"Task 'broken': {message}"):
        checked_batch(Broken(part, value), 3)
    assert len(checked_batch(Broken(), 3)) == 3


def test_check_fits_reads_the_tokenizer_only_of_a_model_that_records_its_task() -> None:
    number, letter = NumberTask(), LetterTask()
    batch = checked_batch(letter, 16)
    trained = task_tokenizer(number)  # a number model's tokenizer: the task's words, then <unk>, <bos>
    with pytest.raises(ValueError, match="Task 'letter' does not match this model's tokenizer: token id"):
        check_fits(letter, batch, len(trained), trained)
    check_fits(letter, batch, len(trained), trained, allow_task_mismatch=True)
    check_fits(number, checked_batch(number, 16), len(trained), trained)
    other = helpers.plain_tokenizer(200)  # t0 … t199, a random model's: the ids are all one can check
    check_fits(letter, batch, len(other), other)
    with pytest.raises(ValueError, match=r"emits token id 12\d, outside the model's vocabulary of 100 tokens"):
        check_fits(letter, batch, 100, other, allow_task_mismatch=True)
    candidates = dataclasses.replace(batch, candidates=torch.tensor([0, 150]))
    with pytest.raises(ValueError, match="emits token id 150"):
        check_fits(letter, candidates, 130, None)


def test_get_task_refuses_a_name_that_is_not_a_string() -> None:
    """A list used to fail inside the registry lookup (unhashable type)."""
    with pytest.raises(TypeError, match=r"name must be a task name \(a string: one of .*number"):
        get_task(["number"])
