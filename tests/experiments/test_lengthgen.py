"""Length generalization: long prompts obey the task rules; accuracy per length and hop count."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import pytest
import torch

from psheads.experiments.lengthgen import (
    COLUMNS,
    length_generalization,
    prompts_per_forward,
)
from psheads.measure import evaluation
from psheads.models import zoo
from psheads.tasks import LetterTask, NumberTask, TaskBatch, answer_ids, at_length, get_task

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

LENGTHS = (17, 33, 65, 145, 289, 529, 1041, 2065, 4113)
"""The lengths the shipped curves use: every one is checked against the task rules."""
PER_HOP = 3
"""Seeded prompts per hop count and length (balanced hop counts: 4 × PER_HOP prompts)."""


def solve_number(task: NumberTask, tokens: list[int]) -> tuple[int, int]:
    """(answer position, hops) by the number rule on raw tokens: at an integer v at position p, go
    to p − v; stop on the first symbol (the target window). Every visited token is checked."""
    n_symbols, first_pre = task.n_symbols, len(tokens) - task.n_pre - 1
    position, hops = len(tokens) - 1, 0
    while tokens[position] >= n_symbols:  # an integer: token id n_symbols − 1 + v
        value = tokens[position] - (n_symbols - 1)
        assert 1 <= value <= task.max_int
        assert position >= first_pre, "an integer outside the pre-target window"
        position -= value
        assert position >= 0, "a hop leaves the prompt"
        hops += 1
    assert position < first_pre, "the path stopped outside the target window"
    return position, hops


def solve_letter(task: LetterTask, tokens: list[int]) -> tuple[int, int]:
    """(answer position, hops) by the letter rule on raw tokens: from pair (x, y) go to the one
    earlier token whose first letter is y, checking it is unique among ALL earlier positions
    (extra window included); stop on a letter·integer pair."""
    n_target_ids = task.n_letters * task.n_ints

    def first(token: int) -> int:
        return token // task.n_ints if token < n_target_ids else (token - n_target_ids) // task.n_letters

    position, hops = len(tokens) - 1, 0
    while tokens[position] >= n_target_ids:  # a letter·letter pair
        sought = (tokens[position] - n_target_ids) % task.n_letters
        matches = [p for p in range(position) if first(tokens[p]) == sought]
        assert len(matches) == 1, f"pair at {position} seeks letter {sought}: matches at {matches}"
        position = matches[0]
        hops += 1
    return position, hops


SOLVERS = {"number": solve_number, "letter": solve_letter}


@pytest.mark.parametrize("name", ["number", "letter"])
@pytest.mark.parametrize("length", LENGTHS)
def test_every_long_prompt_obeys_the_task_rules(name: str, length: int) -> None:
    task = get_task(name)
    base = task.min_length
    long_task = at_length(task, length)
    for seed in (0, 1):
        batch = long_task.generate(4 * PER_HOP, seed=seed)
        assert batch.tokens.shape == (4 * PER_HOP, length)
        assert sorted(batch.hops.tolist()) == sorted([1, 2, 3, 4] * PER_HOP)
        extra = length - base
        for row in range(len(batch)):
            tokens = batch.tokens[row].tolist()
            position, hops = SOLVERS[name](task, tokens)
            assert hops == int(batch.hops[row])
            assert position == int(batch.answer_positions[row])
            # the path ends in the effective window, never in the extra tokens before it
            assert extra <= position < extra + task.n_target
            assert tokens[position] == int(batch.answers[row])


def test_the_solvers_catch_broken_prompts() -> None:
    number, letter = NumberTask(), LetterTask(extra_target=40)
    tokens = number.generate(1, seed=3).tokens[0].tolist()
    tokens[-1] = number.n_symbols - 1 + 1  # the query points at the last pre-target integer...
    tokens[-2] = number.n_symbols - 1 + 16  # ...which points 16 back, out of the 17-token prompt
    with pytest.raises(AssertionError, match="leaves the prompt"):
        solve_number(number, tokens)
    batch = letter.generate(1, seed=3)
    tokens = batch.tokens[0].tolist()
    position = int(batch.answer_positions[0])
    tokens[0] = tokens[position]  # a second pair with the answer's first letter, in the extra window
    with pytest.raises(AssertionError, match="matches at"):
        solve_letter(letter, tokens)


def test_paper_examples_solve_by_the_rules() -> None:
    number = NumberTask()
    words = "n h n v h y r s 6 3 2 7 7 8 4 7 2".split()
    assert solve_number(number, [number.vocabulary.index(w) for w in words]) == (2, 4)
    letter = LetterTask(n_target=3, n_pre=5)
    words = "c2 b1 a3 fa ec de hf gd hg".split()
    assert solve_letter(letter, [letter.vocabulary.index(w) for w in words]) == (0, 4)


def test_answer_vocabulary_lengths_and_batching() -> None:
    assert answer_ids(NumberTask()).tolist() == list(range(120))
    assert answer_ids(LetterTask()).tolist() == list(range(64))
    assert [LetterTask().vocabulary[i] for i in answer_ids(LetterTask())][:3] == ["a1", "a2", "a3"]
    with pytest.raises(TypeError, match="no `answer_ids` property.*answers='vocabulary'"):
        answer_ids(get_task("index"), otherwise="pass answers='vocabulary'")
    assert NumberTask().min_length == NumberTask(extra_target=5).min_length == 17
    assert LetterTask(n_target=4, n_pre=6).min_length == 11
    for task in (NumberTask(extra_target=5), LetterTask(n_target=4, n_pre=6)):
        assert at_length(task, 40).generate(2).tokens.shape == (2, 40)
    assert [prompts_per_forward(length, 8192) for length in (17, 4113, 8192, 9000)] == [481, 1, 1, 1]


def _gptj(model_factory, **overrides):
    return model_factory("gptj", vocab_size=136, n_positions=200, **overrides)


def test_frame_rows_attrs_and_batching(model_factory, monkeypatch) -> None:
    model = _gptj(model_factory)
    forwards = []
    real = evaluation.last_logits

    def counting(model, tokens):
        forwards.append(tuple(tokens.shape))
        return real(model, tokens)

    monkeypatch.setattr(evaluation, "last_logits", counting)
    frame = length_generalization(model, "number", [17, 40], n=12, seed=3, token_budget=100, progress=False)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["length"].tolist() == [17] * 5 + [40] * 5
    assert frame["hops"].tolist() == ["1", "2", "3", "4", "all"] * 2
    assert frame["n"].tolist() == [3, 3, 3, 3, 12] * 2
    # 100 // 17 = 5 prompts per forward at 17 tokens, 2 at 40
    assert forwards == [(5, 17), (5, 17), (2, 17), *[(2, 40)] * 6]
    attrs = frame.attrs
    assert attrs["task"] == "number" and attrs["n"] == 12 and attrs["seed"] == 3 and attrs["token_budget"] == 100
    assert attrs["prompts_per_forward"] == [5, 2] and attrs["n_candidates"] == 120 and attrs["context"] == 200
    assert attrs["task_options"]["n_symbols"] == 120 and "extra_target" not in attrs["task_options"]
    assert attrs["versions"]["psheads"] and len(attrs["seconds"]) == 2
    # "all" is the mean of the per-hop rows (equal shares)
    for _, rows in frame.groupby("length"):
        assert rows["accuracy"].iloc[-1] == pytest.approx(rows["accuracy"].iloc[:4].mean())


def test_accuracy_is_the_argmax_over_the_answer_vocabulary(model_factory) -> None:
    """Recompute every prompt's prediction by hand, restricted and over the whole vocabulary."""
    model = _gptj(model_factory)
    task = NumberTask()
    frames = {answers: length_generalization(model, task, [30], n=16, seed=5, answers=answers, progress=False)
              for answers in ("task", "vocabulary")}
    batch = at_length(task, 30).generate(16, seed=5)
    with torch.no_grad():
        logits = model(batch.tokens)[:, -1]
    hits = {"task": logits[:, :120].argmax(-1) == batch.answers, "vocabulary": logits.argmax(-1) == batch.answers}
    for answers, frame in frames.items():
        expected = pd.DataFrame({"hops": [str(h) for h in batch.hops.tolist()], "hit": hits[answers].float().tolist()})
        per_hop = expected.groupby("hops")["hit"].mean()
        assert frame["accuracy"].iloc[:4].tolist() == pytest.approx(per_hop.tolist())
        assert frame["accuracy"].iloc[-1] == pytest.approx(float(hits[answers].float().mean()))
    assert frames["vocabulary"].attrs["n_candidates"] is None
    # a random model rarely emits a symbol over the whole vocabulary: the restriction matters
    assert frames["task"]["accuracy"].iloc[-1] >= frames["vocabulary"]["accuracy"].iloc[-1]


@pytest.mark.parametrize("backend", ["bridge", "hooked", "hf"])
def test_same_numbers_on_every_model_kind(backend, model_factory, tmp_path) -> None:
    from tests import helpers

    reference = length_generalization(_gptj(model_factory), "letter", [17, 25], n=8, progress=False)
    if backend == "hf":
        helpers.save_tiny("gptj", tmp_path, vocab_size=136, n_positions=200)
        import transformers

        model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    else:
        model = _gptj(model_factory, backend=backend) if backend == "hooked" else _gptj(model_factory)
    frame = length_generalization(model, "letter", [17, 25], n=8, progress=False)
    # accuracies are counts of argmax hits: equal exactly when no prediction is within rounding of a tie
    task = LetterTask()
    for length in (17, 25):
        batch = at_length(task, length).generate(8, seed=0)
        with torch.no_grad():
            logits = {name: evaluation.last_logits(m, batch.tokens) for name, m in (("reference", _gptj(model_factory)),
                                                                                    (backend, model))}
        helpers.assert_same_predictions(logits, torch.arange(task.n_answers))
    pd.testing.assert_frame_equal(frame, reference, check_exact=True)


@dataclass(frozen=True)
class FixedTask:
    """A task whose prompts cannot be lengthened."""

    name: str = "fixed"

    @property
    def vocabulary(self) -> list[str]:
        return ["a", "b"]

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        tokens = torch.zeros(n, 3, dtype=torch.long)
        return TaskBatch(tokens, tokens[:, 0], tokens[:, 0] + 1, tokens[:, 0], ["a a a"] * n, ["a"] * n)


def test_errors_name_the_possible_lengths_and_the_context(model_factory) -> None:
    model = _gptj(model_factory)
    with pytest.raises(ValueError, match=r"a length of 16 is below its shortest prompt of 17 tokens"):
        length_generalization(model, "number", [16, 30], n=4)
    with pytest.raises(ValueError, match=r"\[201\] exceed the model's context of 200 tokens"):
        length_generalization(model, "letter", [201], n=4)
    with pytest.raises(ValueError, match="at least one"):
        length_generalization(model, "letter", [], n=4)
    with pytest.raises(ValueError, match="answers must be one of"):
        length_generalization(model, "letter", [17], n=4, answers="all")
    with pytest.raises(TypeError, match=r"\(FixedTask\) cannot make prompts of a given length: it has no `at_length`"):
        length_generalization(model, FixedTask(), [17], n=4)
    with pytest.raises(ValueError, match="token_budget"):
        length_generalization(model, "letter", [17], n=4, token_budget=0)


def test_the_model_is_left_as_it_was(model_factory) -> None:
    from tests.conftest import model_state

    model = _gptj(model_factory)
    model.train()
    before = model_state(model)
    length_generalization(model, "number", [17], n=4, progress=False)
    assert model_state(model) == before
    model.eval()


SHIPPED = all((zoo.PRETRAINED_DIR / name / "length_generalization.csv").exists() for name in zoo.PRETRAINED)


@pytest.mark.skipif(not SHIPPED, reason="the length-generalization curves are not shipped in this checkout")
def test_shipped_curves_are_exposed_and_reproduce_at_17_tokens() -> None:
    shipped = zoo.load_pretrained("letter")
    curve = shipped.length_generalization
    assert list(curve.columns) == list(COLUMNS) and curve["hops"].tolist()[:5] == ["1", "2", "3", "4", "all"]
    assert curve["length"].iloc[0] == 17 and curve["length"].is_monotonic_increasing
    first = curve[curve["length"] == 17].reset_index(drop=True)
    frame = length_generalization(shipped.model, shipped.task, [17], n=int(first["n"].iloc[-1]), progress=False)
    pd.testing.assert_frame_equal(frame, first, check_exact=False, atol=1e-12)
    assert frame["accuracy"].iloc[-1] > 0.99
