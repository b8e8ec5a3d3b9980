"""The canonical Index, Retrieval and partial-induction tasks against reference solvers, balance, determinism and
validation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from psheads import tasks
from psheads.tasks import IndexTask, PartialInductionTask, RetrievalTask, TaskBatch, checked_batch


def solve_index(words: list[str]) -> int:
    """The position the integer query points to, checked to hold a letter."""
    *context, query = words
    assert query.isdigit() and all(len(word) == 1 and word.isalpha() for word in context)
    position = len(words) - 1 - int(query)
    assert 0 <= position < len(context)
    return position


def solve_retrieval(words: list[str]) -> int:
    """The one earlier pair starting with the query's second letter; the query is never doubled."""
    *context, query = words
    assert all(len(word) == 2 and word.isalpha() for word in words)
    assert query[0] != query[1], f"doubled query {query}"
    matches = [j for j, word in enumerate(context) if word[0] == query[1]]
    assert len(matches) == 1, f"{query} matches {matches}"
    return matches[0]


def validate(task: IndexTask | RetrievalTask, batch: TaskBatch) -> None:
    """Every prompt solves to its answer, and every part of the batch agrees with the text."""
    solve = solve_index if isinstance(task, IndexTask) else solve_retrieval
    assert batch.tokens.shape == (len(batch), task.length)
    vocabulary = task.vocabulary
    for row, (text, answer, position) in enumerate(zip(batch.text, batch.answer_text, batch.answer_positions.tolist(),
                                                       strict=True)):
        words = text.split()
        assert words == [vocabulary[i] for i in batch.tokens[row].tolist()]
        assert solve(words) == position
        assert words[position] == answer == vocabulary[int(batch.answers[row])]
    assert batch.hops.tolist() == [1] * len(batch)
    assert set(batch.answers.tolist()) <= set(batch.candidates.tolist())


@pytest.mark.parametrize("task", [IndexTask(), IndexTask(length=5, n_letters=2), IndexTask(length=40, max_offset=12),
                                  IndexTask(length=9, n_letters=26, max_offset=30),
                                  RetrievalTask(), RetrievalTask(length=2, n_letters=2),
                                  RetrievalTask(length=60, n_letters=3), RetrievalTask(length=7, n_letters=26)])
def test_every_prompt_solves_to_its_answer(task) -> None:
    validate(task, checked_batch(task, 300, seed=5))


def test_index_offsets_answers_and_positions_are_balanced() -> None:
    task = IndexTask(length=9, n_letters=4)  # offsets 1…8
    batch = task.generate(8 * 4 * 10, seed=1)
    offsets = task.length - 1 - batch.answer_positions
    assert torch.bincount(offsets, minlength=9)[1:].tolist() == [40] * 8
    assert torch.bincount(batch.answer_positions, minlength=8).tolist() == [40] * 8
    assert torch.bincount(batch.answers, minlength=4).tolist() == [80] * 4
    queries = [task.vocabulary[i] for i in batch.tokens[:, -1].tolist()]
    assert [int(q) for q in queries] == offsets.tolist()


def test_index_offsets_stop_at_max_offset_and_at_the_prompt() -> None:
    assert set((39 - IndexTask(length=40, max_offset=12).generate(200).answer_positions).tolist()) == set(range(1, 13))
    assert set((4 - IndexTask(length=5, max_offset=30).generate(200).answer_positions).tolist()) == {1, 2, 3, 4}


def test_retrieval_answers_and_positions_are_balanced() -> None:
    task = RetrievalTask(length=6, n_letters=3)
    batch = task.generate(9 * 5 * 8, seed=2)
    assert torch.bincount(batch.answer_positions, minlength=5).tolist() == [72] * 5
    counts = torch.bincount(batch.answers, minlength=len(task.vocabulary))[batch.candidates]
    assert counts.tolist() == [40] * 9
    words = [text.split() for text in batch.text]
    assert all(w[-1][0] != w[-1][1] for w in words)
    # doubled answers occur
    assert any(w[p][0] == w[p][1] for w, p in zip(words, batch.answer_positions.tolist(), strict=True))


def test_both_tasks_share_one_vocabulary() -> None:
    index = IndexTask(length=12, n_letters=5, max_offset=20)
    retrieval = RetrievalTask(length=3, n_letters=5, max_offset=20)
    assert index.vocabulary == retrieval.vocabulary
    vocabulary = index.vocabulary
    assert vocabulary[:5] == list("abcde") and vocabulary[5:25] == [str(k) for k in range(1, 21)]
    assert vocabulary[25:] == [x + y for x in "abcde" for y in "abcde"] and len(set(vocabulary)) == 50
    assert vocabulary[index.integer_id(7)] == "7" and vocabulary[index.pair_id(2, 4)] == "ce"
    assert index.generate(4).candidates.tolist() == [0, 1, 2, 3, 4]
    assert [vocabulary[i] for i in retrieval.generate(4).candidates.tolist()] == vocabulary[25:]
    assert IndexTask(length=9).max_offset == RetrievalTask(length=9).max_offset == 8


@pytest.mark.parametrize("make", [IndexTask, RetrievalTask])
def test_deterministic_in_the_seed(make) -> None:
    task = make(length=10, n_letters=4)
    first, again, other = task.generate(50, seed=7), task.generate(50, seed=7), task.generate(50, seed=8)
    assert torch.equal(first.tokens, again.tokens) and first.text == again.text
    assert not torch.equal(first.tokens, other.tokens)


def test_registered_and_rebuilt_by_replace() -> None:
    assert {"index", "retrieval"} <= set(tasks.available_tasks())
    assert tasks.get_task("index", length=7) == IndexTask(length=7)
    assert tasks.get_task("retrieval", n_letters=3).name == "retrieval"
    longer = dataclasses.replace(IndexTask(length=8), length=30)
    assert longer.max_offset == 7 and longer.vocabulary == IndexTask(length=8).vocabulary


@pytest.mark.parametrize(("make", "options", "message"), [
    (IndexTask, {"length": 1}, "length must be at least 2"),
    (IndexTask, {"n_letters": 0}, "n_letters must be at least 1"),
    (IndexTask, {"n_letters": 27}, "n_letters must be at most 26"),
    (IndexTask, {"max_offset": 0}, "max_offset must be at least 1"),
    (RetrievalTask, {"n_letters": 1}, "needs x ≠ y"),
    (IndexTask, {"length": 4.0}, "length must be an int"),
])
def test_bad_options_are_refused(make, options, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make(**options)


# --- partial induction ---------------------------------------------------------------------------
def solve_partial_induction(words: list[str]) -> int:
    """The position right after the query letter's one earlier occurrence (never the query itself)."""
    *context, query = words
    assert all(len(word) == 1 and word.isalpha() for word in words)
    matches = [j for j, word in enumerate(context) if word == query]
    assert len(matches) == 1, f"{query} occurs at {matches}"
    assert matches[0] + 1 < len(context), "the earlier occurrence is the last-but-one token"
    return matches[0] + 1


@pytest.mark.parametrize("task", [PartialInductionTask(), PartialInductionTask(length=3, n_letters=2),
                                  PartialInductionTask(length=40, n_letters=3),
                                  PartialInductionTask(length=9, n_letters=26, max_offset=30)])
def test_partial_induction_prompts_solve_to_their_answers(task) -> None:
    batch = checked_batch(task, 300, seed=5)
    assert batch.tokens.shape == (300, task.length)
    vocabulary = task.vocabulary
    for row, (text, answer, position) in enumerate(zip(batch.text, batch.answer_text, batch.answer_positions.tolist(),
                                                       strict=True)):
        words = text.split()
        assert words == [vocabulary[i] for i in batch.tokens[row].tolist()]
        assert solve_partial_induction(words) == position
        assert words[position] == answer == vocabulary[int(batch.answers[row])] != words[-1]
    assert batch.hops.tolist() == [1] * 300
    assert batch.candidates.tolist() == list(range(task.n_letters))


def test_partial_induction_answers_positions_and_queries_are_balanced() -> None:
    task = PartialInductionTask(length=7, n_letters=4)  # answer positions 1…5
    batch = task.generate(4 * 5 * 12, seed=3)
    assert torch.bincount(batch.answer_positions, minlength=6).tolist() == [0] + [48] * 5
    assert torch.bincount(batch.answers, minlength=4).tolist() == [60] * 4
    queries = batch.tokens[:, -1]
    assert torch.bincount(queries, minlength=4).min() > 40  # uniform over the other letters: 60 expected
    assert not bool((queries == batch.answers).any())
    # the earlier occurrence sits right before the answer
    assert torch.equal(batch.tokens[torch.arange(len(batch)), batch.answer_positions - 1], queries)
    # other letters repeat, the answer's letter included
    others = batch.tokens[:, :-1].clone()
    others[torch.arange(len(batch)), batch.answer_positions] = -1
    assert bool((others == batch.answers[:, None]).any(1).any())


def test_partial_induction_shares_the_vocabulary_and_registry() -> None:
    task = tasks.get_task("partial-induction", length=12, n_letters=5, max_offset=20)
    assert isinstance(task, PartialInductionTask) and task.name == "partial-induction"
    assert task.vocabulary == IndexTask(length=12, n_letters=5, max_offset=20).vocabulary
    first, again, other = task.generate(40, seed=7), task.generate(40, seed=7), task.generate(40, seed=8)
    assert torch.equal(first.tokens, again.tokens) and not torch.equal(first.tokens, other.tokens)
    assert dataclasses.replace(task, length=30).generate(3).tokens.shape == (3, 30)


@pytest.mark.parametrize(("options", "message"), [
    ({"length": 2}, "length must be at least 3"),
    ({"n_letters": 1}, "n_letters must be at least 2"),
    ({"n_letters": 27}, "n_letters must be at most 26"),
    ({"length": 5.0}, "length must be an int"),
])
def test_partial_induction_bad_options_are_refused(options, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        PartialInductionTask(**options)
