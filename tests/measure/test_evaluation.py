"""evaluate, length_generalization and discrepancy check a task against the model before running it:
ids inside the vocabulary, the task a model records (and the settings it was drawn with), prompts
inside a fixed context, and what a custom task returns (the behaviour without these checks: numbers
from mis-mapped ids, or from prompts drawn unlike the model's training prompts)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field

import pytest
import torch

from psheads.experiments.ablation import Intervention, ablate
from psheads.experiments.lengthgen import length_generalization
from psheads.measure.discrepancy import discrepancy
from psheads.measure.evaluation import evaluate
from psheads.tasks import LetterTask, NumberTask, TaskBatch, TaskSettingsWarning
from tests import helpers

NUMBER = NumberTask(n_target=4, n_pre=4, n_symbols=30, max_int=8)
LETTER = LetterTask(n_target=4, n_pre=4, n_letters=5, n_ints=2)
LENGTH = 11
"""A prompt length both tasks make (their shortest prompts have 9 tokens)."""


@pytest.fixture(scope="module")
def number_model(tmp_path_factory: pytest.TempPathFactory):
    """A tiny GPT-J that records the number task (its word tokenizer), with 64 positions."""
    directory = helpers.save_task_model(NUMBER, tmp_path_factory.mktemp("number"), n_positions=64)
    return helpers.boot_bridge(directory)


def test_the_letter_ids_fit_the_number_vocabulary_so_only_the_tokenizer_can_tell() -> None:
    assert len(LETTER.vocabulary) <= len(NUMBER.vocabulary) + 2


RUNS = {
    "evaluate": lambda model, task, **kw: evaluate(model, task, n=8, progress=False, **kw),
    "length_generalization": lambda model, task, **kw: length_generalization(model, task, [LENGTH], n=8,
                                                                             progress=False, **kw),
    "discrepancy": lambda model, task, **kw: discrepancy(model, task, n=8, progress=False, **kw),
}


@pytest.mark.parametrize("run", list(RUNS), ids=str)
def test_a_model_that_records_its_task_refuses_another_unless_asked(run, number_model) -> None:
    with pytest.raises(ValueError, match=r"Task 'letter' does not match this model's tokenizer: token id \d+ is "
                                         r"'\w+' to the task and '\w+' to the model.*allow_task_mismatch=True"):
        RUNS[run](number_model, LETTER)
    assert len(RUNS[run](number_model, LETTER, allow_task_mismatch=True)) > 0  # the user means it
    assert len(RUNS[run](number_model, NUMBER)) > 0  # its own task runs
    with pytest.raises(TypeError, match="allow_task_mismatch must be"):
        RUNS[run](number_model, NUMBER, allow_task_mismatch="yes")


PAPER_B = dataclasses.replace(LETTER, sampling="paper-b")
WITH_ABLATE = {**RUNS, "ablate": lambda model, task: ablate(model, task, [Intervention("mean", [(0, 0)])], n=8,
                                                             batch_size=8, progress=False)}


@pytest.fixture(scope="module")
def letter_models(tmp_path_factory: pytest.TempPathFactory):
    """Two tiny GPT-Js with the letter task's words: one whose training record says paper B's
    sampling (as the shipped ``letter`` model's does), one without a record."""
    def boot(name: str, record: bool):
        return helpers.boot_bridge(helpers.save_task_model(PAPER_B, tmp_path_factory.mktemp(name), record=record,
                                                           n_positions=64))

    return boot("recorded", True), boot("unrecorded", False)


@pytest.mark.parametrize("run", list(WITH_ABLATE), ids=str)
def test_the_task_a_model_was_trained_on_drawn_otherwise_warns_naming_the_setting(run, letter_models) -> None:
    """The shipped letter model scored 0.74 at 145 tokens on LetterTask() instead of 0.96 on its own task."""
    recorded, unrecorded = letter_models
    with pytest.warns(TaskSettingsWarning) as caught:
        assert len(WITH_ABLATE[run](recorded, LETTER)) > 0
    ours = [w for w in caught if w.category is TaskSettingsWarning]
    assert len(ours) == 1 and ours[0].filename == __file__  # once per call, at the line that called it
    assert "sampling is 'psheads' here and 'paper-b' in training" in str(ours[0].message)
    assert "get_task('letter', sampling='paper-b')" in str(ours[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TaskSettingsWarning)
        WITH_ABLATE[run](recorded, PAPER_B)  # its own task
        WITH_ABLATE[run](recorded, "letter")  # its own task by name
        WITH_ABLATE[run](unrecorded, LETTER)  # no record: nothing to compare with


def test_a_task_name_is_the_model_s_own_task_with_its_recorded_options(letter_models) -> None:
    recorded, unrecorded = letter_models
    assert length_generalization(recorded, "letter", [LENGTH], n=8, progress=False).attrs["task_options"]["sampling"] \
        == "paper-b"
    with pytest.raises(ValueError, match="Unknown task"):  # the name must still be a registered one
        evaluate(recorded, "letters", n=8, progress=False)
    # a name the model does not record is built with its defaults (here the whole default letter task)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        evaluate(unrecorded, "letter", n=8, progress=False)


@pytest.mark.parametrize("run", list(RUNS), ids=str)
def test_ids_outside_the_vocabulary_are_refused_by_name(run, number_model) -> None:
    # ids up to 47 on a model of 40 tokens (8 prompts reach 46 or 47)
    wide = NumberTask(n_target=4, n_pre=4, n_symbols=40, max_int=8)
    with pytest.raises(ValueError,
                       match=r"Task 'number' emits token id 4\d, outside the model's vocabulary of 40 tokens \(0…39\)"):
        RUNS[run](number_model, wide, allow_task_mismatch=True)


def test_prompts_beyond_a_fixed_context_are_refused(number_model) -> None:
    """GPT-J's rotation table ends at n_positions: beyond it transformers raised an IndexError."""
    with pytest.raises(ValueError, match="makes prompts of 65 tokens, beyond the 64 positions"):
        evaluate(number_model, NUMBER, n=4, windows=[60])


@dataclass(frozen=True)
class Custom:
    """A task whose batches can be broken one part at a time."""

    answers: int = 1
    hops: int = 1
    position: int = 0
    name: str = field(default="custom", init=False)

    @property
    def vocabulary(self) -> list[str]:
        return [f"t{i}" for i in range(64)]

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        tokens = torch.full((n, 5), 3, dtype=torch.long)
        return TaskBatch(tokens, torch.full((n,), self.answers), torch.full((n,), self.hops),
                         torch.full((n,), self.position), ["t3"] * n, ["t1"] * n)


@pytest.mark.parametrize(("task", "message"), [
    (Custom(answers=10**6), r"emits token id 1000000, outside the model's vocabulary of 64 tokens"),
    (Custom(answers=-2), "token ids must be non-negative"),
    (Custom(hops=-3), r"hops must be ≥ 1 .*got -3"),
    (Custom(position=99), r"answer_positions must be positions of the prompt \(0…4\), got 99…99"),
], ids=["answer-outside", "negative-answer", "negative-hops", "position-outside"])
def test_evaluate_checks_what_a_custom_task_returns(task, message, model_factory) -> None:
    model = model_factory("llama")
    with pytest.raises(ValueError, match=message):
        evaluate(model, task, n=4, progress=False)
    assert evaluate(model, Custom(), n=4, progress=False)["hops"].tolist() == ["1", "all"]
