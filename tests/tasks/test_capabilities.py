"""The task protocol's optional capabilities: each built-in task answers what it can, and a task
without a capability gets a TypeError naming the method to add."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from psheads import tasks
from psheads.tasks import IndexTask, LetterTask, NumberTask, RetrievalTask, get_task


def test_multi_hop_tasks_change_window_length_and_hops() -> None:
    number = NumberTask(extra_target=3)
    assert tasks.window_of(number) == 11 and number.min_length == 17
    assert tasks.with_window(number, 20).extra_target == 12
    assert tasks.at_length(number, 40).generate(3).tokens.shape == (3, 40)
    one_hop = tasks.with_hops(LetterTask(), 1)
    assert (one_hop.min_hops, one_hop.max_hops) == (1, 1) and set(one_hop.generate(8).hops.tolist()) == {1}
    assert torch.equal(tasks.answer_ids(number), torch.arange(120))
    with pytest.raises(ValueError, match="at least the task's n_target=8"):
        tasks.with_window(number, 5)
    with pytest.raises(ValueError, match="below its shortest prompt of 17 tokens"):
        tasks.at_length(number, 16)


def test_canonical_and_llm_tasks_have_what_they_can_do() -> None:
    assert tasks.at_length(RetrievalTask(length=5), 9) == dataclasses.replace(RetrievalTask(length=5), length=9)
    assert tasks.window_of(IndexTask()) is None
    with pytest.raises(TypeError, match=r"\(IndexTask\) cannot change its target window: it has no `with_window`"):
        tasks.with_window(IndexTask(), 4)
    with pytest.raises(TypeError, match=r"no `answer_ids` property.*or choose predictions over the whole vocabulary"):
        tasks.answer_ids(IndexTask())
    llm = get_task("llm-letter")
    assert tasks.with_window(llm, 40).window == 40 == tasks.window_of(tasks.with_window(llm, 40))
    with pytest.raises(TypeError, match="no `at_length` method.*or pass lengths=None"):
        tasks.at_length(llm, 40, otherwise="pass lengths=None")


def test_a_capability_that_returns_something_else_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Broken(IndexTask):
        def at_length(self, length: int) -> object:
            return {"length": length}

    with pytest.raises(TypeError, match="at_length returned dict, not a task"):
        tasks.at_length(Broken(), 9)

    @dataclasses.dataclass(frozen=True)
    class BadAnswers(IndexTask):
        @property
        def answer_ids(self) -> torch.Tensor:
            return torch.tensor([1, 1])

    with pytest.raises(ValueError, match="distinct non-negative token ids"):
        tasks.answer_ids(BadAnswers())
    with pytest.raises(ValueError, match="window must be at least 1"):
        tasks.with_window(NumberTask(), 0)


def test_generator_settings_leave_out_what_the_front_ends_vary() -> None:
    """A multi-hop task's settings are what a model trained on it expects again: not the length
    (``extra_target``) nor the hop range, which evaluation varies on purpose."""
    letter = LetterTask()
    assert tasks.generator_settings(letter) == {"n_target": 8, "n_pre": 8, "n_letters": 8, "n_ints": 8,
                                                "sampling": "psheads"}
    assert tasks.generator_settings(NumberTask()) == {"n_target": 8, "n_pre": 8, "n_symbols": 120, "max_int": 16}
    for varied in (tasks.at_length(letter, 145), tasks.with_window(letter, 40), tasks.with_hops(letter, 2)):
        assert varied != letter and tasks.generator_settings(varied) == tasks.generator_settings(letter)
    assert tasks.generator_settings(LetterTask(sampling="paper-b"))["sampling"] == "paper-b"
    assert tasks.generator_settings(IndexTask()) is None  # declares none: never compared

    @dataclasses.dataclass(frozen=True)
    class BadSettings(IndexTask):
        generator_settings: tuple = ("length",)

    with pytest.raises(TypeError, match="generator_settings must be a dict of options, got tuple"):
        tasks.generator_settings(BadSettings())
