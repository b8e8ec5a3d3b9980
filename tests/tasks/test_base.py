"""checked_batch refuses batches whose parts cannot be right; check_fits refuses ids a model would
misread (outside its vocabulary, or other words to the tokenizer of a model that records its task);
check_settings warns when a model meets its own task drawn with other settings."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import torch
import transformers

from psheads.tasks import (
    LetterTask,
    NumberTask,
    TaskBatch,
    TaskSettingsWarning,
    check_fits,
    check_settings,
    checked_batch,
    get_task,
    recorded_task,
    task_from_record,
    task_tokenizer,
)
from psheads.tasks.base import TRAINING_RECORD
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


def _trained_on(task, folder: Path, record: object = None) -> transformers.PreTrainedTokenizerFast:
    """The tokenizer of a model booted from ``folder``, where ``task``'s tokenizer lies beside
    ``record`` (default: the record of a checkpoint trained on ``task``; None written: no record)."""
    folder.mkdir(parents=True, exist_ok=True)
    task_tokenizer(task).save_pretrained(folder)
    if record is None:
        record = {"task": task.name, "task_options": {f.name: getattr(task, f.name) for f in dataclasses.fields(task)
                                                      if f.init}, "step": 3}
    if record is not False:
        (folder / TRAINING_RECORD).write_text(record if isinstance(record, str) else json.dumps(record))
    return transformers.PreTrainedTokenizerFast.from_pretrained(folder)


def test_a_model_records_its_task_in_the_folder_its_tokenizer_came_from(tmp_path) -> None:
    paper_b = LetterTask(sampling="paper-b")
    tokenizer = _trained_on(paper_b, tmp_path / "letter")
    assert tokenizer.name_or_path == str(tmp_path / "letter")
    assert recorded_task(tokenizer) == paper_b
    assert recorded_task(_trained_on(paper_b, tmp_path / "no-record", record=False)) is None
    assert recorded_task(None) is None
    assert recorded_task(task_tokenizer(paper_b)) is None  # built in memory: no folder
    assert recorded_task(helpers.plain_tokenizer()) is None  # not a task's word list
    for broken in ('{"steps": 3}', "[1, 2]", "{not json", '{"task": "letter", "task_options": {"sampling": "x"}}'):
        assert recorded_task(_trained_on(paper_b, tmp_path / "broken", record=broken)) is None
    other = {"task": "number", "task_options": {}}  # a record that does not name the tokenizer's task
    assert recorded_task(_trained_on(paper_b, tmp_path / "stale", record=other)) is None


def test_a_record_from_before_an_option_existed_reads_it_as_its_default(tmp_path) -> None:
    """Records written before ``LetterTask.sampling`` existed (``letter-psheads``) lack it: the
    default, psheads' sampling, is what they were trained with, so it must stay the default."""
    old = {"task": "letter", "task_options": {"n_target": 8, "n_pre": 8, "n_letters": 8, "n_ints": 8}}
    assert task_from_record(old) == LetterTask() and LetterTask().sampling == "psheads"
    assert recorded_task(_trained_on(LetterTask(), tmp_path, record=old)) == LetterTask()
    for record in ({"steps": 3}, [1], {"task": 5}, {"task": "letter", "task_options": [1]}):
        with pytest.raises(ValueError, match="a training record needs a task name"):
            task_from_record(record)
    with pytest.raises(ValueError, match="Unknown task 'nope'"):
        task_from_record({"task": "nope"})


def test_check_settings_names_every_setting_that_differs_from_the_record(tmp_path) -> None:
    tokenizer = _trained_on(LetterTask(sampling="paper-b"), tmp_path)
    with pytest.warns(TaskSettingsWarning) as caught:
        check_settings(LetterTask(n_pre=6), tokenizer, stacklevel=1)
    assert len(caught) == 1 and caught[0].filename == __file__  # stacklevel 1: this line
    message = str(caught[0].message)
    assert message.startswith(f"Task 'letter' is drawn with other settings than this model was trained with "
                              f"({tmp_path / TRAINING_RECORD}): n_pre is 6 here and 8 in training; sampling is "
                              "'psheads' here and 'paper-b' in training")
    assert "get_task('letter', n_pre=8, sampling='paper-b')" in message and "load_pretrained(name).task" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_settings(LetterTask(sampling="paper-b"), tokenizer)  # its own task
        varied = LetterTask(sampling="paper-b", extra_target=128, min_hops=2, max_hops=2)  # varied on purpose
        check_settings(varied, tokenizer)
        check_settings(NumberTask(), tokenizer)  # another task: check_fits compares the words
        check_settings(LetterTask(), _trained_on(LetterTask(), tmp_path / "no-record", record=False))
        check_settings(LetterTask(), None)  # a plain Hugging Face model has no tokenizer
