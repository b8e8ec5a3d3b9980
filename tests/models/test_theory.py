"""Theorem 3.1 as real models: exact answers on every input up to n0, pure labels, chance on the
other task, the lens self-check on both backends, and the closed forms of Theorem 3.2."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

import psheads
from psheads.models import theory
from psheads.tasks import IndexTask, RetrievalTask, TaskBatch
from psheads.tasks.base import to_text
from tests import helpers
from tests.tasks.test_canonical import validate

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

BACKENDS = ["bridge", "hooked"]


# --- every valid input of one length, as a task --------------------------------------------------
def every_index_prompt(task: IndexTask) -> TaskBatch:
    """All letter strings of ``length − 1`` letters with every offset the task allows."""
    rows, positions = [], []
    for sigma in range(1, min(task.max_offset, task.length - 1) + 1):
        for letters in itertools.product(range(task.n_letters), repeat=task.length - 1):
            rows.append([*letters, task.integer_id(sigma)])
            positions.append(task.length - 1 - sigma)
    return _batch(task, torch.tensor(rows), torch.tensor(positions), torch.arange(task.n_letters))


def every_retrieval_prompt(task: RetrievalTask) -> TaskBatch:
    """Every query xy (x ≠ y), answer position and answer pair, and every filler not starting with y."""
    letters = range(task.n_letters)
    rows, positions = [], []
    for x, y in itertools.permutations(letters, 2):
        fillers = [(a, b) for a in letters for b in letters if a != y]
        for position in range(task.length - 1):
            for second in letters:
                for rest in itertools.product(fillers, repeat=task.length - 2):
                    pairs = [*rest[:position], (y, second), *rest[position:], (x, y)]
                    rows.append([task.pair_id(a, b) for a, b in pairs])
                    positions.append(position)
    candidates = torch.tensor([task.pair_id(a, b) for a in letters for b in letters])
    return _batch(task, torch.tensor(rows), torch.tensor(positions), candidates)


def _batch(task: Any, tokens: torch.Tensor, positions: torch.Tensor, candidates: torch.Tensor) -> TaskBatch:
    answers = tokens[torch.arange(len(tokens)), positions]
    return TaskBatch(tokens, answers, torch.ones(len(tokens), dtype=torch.long), positions,
                     to_text(task.vocabulary, tokens), [task.vocabulary[i] for i in answers.tolist()], candidates)


@dataclass(frozen=True, eq=False)
class Listed:
    """A fixed list of prompts as a task: ``generate(n)`` returns the first ``n`` (the Task protocol)."""

    batch: TaskBatch
    words: tuple[str, ...]
    name: str = "listed"

    @property
    def vocabulary(self) -> list[str]:
        return list(self.words)

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        b = self.batch
        return TaskBatch(b.tokens[:n], b.answers[:n], b.hops[:n], b.answer_positions[:n], b.text[:n],
                         b.answer_text[:n], b.candidates)


def every_prompt(task: IndexTask | RetrievalTask) -> Listed:
    """Every valid input of the task at its length, with a reference-solver check on each."""
    batch = every_index_prompt(task) if isinstance(task, IndexTask) else every_retrieval_prompt(task)
    validate(task, batch)
    return Listed(batch, tuple(task.vocabulary))


@pytest.fixture(scope="module")
def build() -> Callable[..., theory.Construction]:
    """``build(kind, backend="bridge", **options)`` → a booted construction (cached per module)."""
    cache: dict[tuple, theory.Construction] = {}

    def make(kind: str, backend: str = "bridge", **options: Any) -> theory.Construction:
        key = (kind, backend, tuple(sorted(options.items())))
        if key not in cache:
            if backend == "hooked" and not helpers.has_hooked_transformer():
                pytest.skip("this TransformerLens has no HookedTransformer (4.x)")
            cache[key] = theory.construct(kind, backend=backend, **options)
        return cache[key]

    return make


# --- exactness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("kind", "options"), [("index", {"n0": 6, "n_letters": 2}),
                                               ("retrieval", {"n0": 5, "n_letters": 3})])
def test_exact_on_every_input_up_to_n0(build, kind, options, backend) -> None:
    construction = build(kind, backend, **options)
    for length in range(2, construction.n0 + 1):
        listed = every_prompt(construction.config.task(length))
        frame = psheads.evaluate(construction.model, listed, n=len(listed.batch), batch_size=4096)
        assert frame["accuracy"].tolist() == [1.0, 1.0], (kind, length)
        assert int(frame["n"].iloc[-1]) == len(listed.batch) > 0


@pytest.mark.parametrize("kind", ["index", "retrieval"])
def test_exact_on_sampled_inputs_up_to_n0(build, kind) -> None:
    construction = build(kind, n0=16)
    assert construction.task == construction.config.task(16) and construction.task.length == 16
    for length in (2, 7, 16):
        frame = psheads.evaluate(construction.model, construction.config.task(length), n=384, seed=length,
                                 batch_size=384)
        assert frame["accuracy"].iloc[-1] == 1.0, length


def test_index_fails_beyond_n0_and_retrieval_lasts_longer(build) -> None:
    index, retrieval = build("index", n0=16), build("retrieval", n0=16)

    def accuracy(construction: theory.Construction, length: int) -> float:
        task = construction.config.task(length)
        return float(psheads.evaluate(construction.model, task, n=256, seed=1, batch_size=256)["accuracy"].iloc[-1])

    # at n0 + 1 the tie (Δ = 0) is with the query's own key, whose value is 0: still right
    assert index.margin(17) == 0.0 and accuracy(index, 17) == 1.0
    assert accuracy(index, 18) < 1.0 and accuracy(index, 32) < 0.7
    # Retrieval's θ is half the theorem's limit: exact well beyond n0, wrong once Δ < 0
    assert retrieval.margin(24) > 0 and accuracy(retrieval, 24) == 1.0
    assert retrieval.margin(40) < 0 and accuracy(retrieval, 40) < 0.8


# --- labels and the other task ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_score_heads_labels_the_constructions(build, backend) -> None:
    for kind, expected in (("index", "positional"), ("retrieval", "symbolic")):
        construction = build(kind, backend, n0=16)
        frame = psheads.score_heads(construction.model, construction.task.generate(48, seed=3).tokens)
        row = frame.iloc[0]
        assert len(frame) == 1 and row["label"] == expected
        own, other = ("positional", "symbolic") if kind == "index" else ("symbolic", "positional")
        assert row[own] > 0.999 and row[other] < 1e-3


def test_each_construction_is_at_chance_on_the_other_task(build) -> None:
    index, retrieval = build("index", n0=16), build("retrieval", n0=16)
    n = 1024
    on_retrieval = RetrievalTask(length=16, n_letters=8, max_offset=16)
    on_index = IndexTask(length=16, n_letters=8, max_offset=16)
    assert on_retrieval.vocabulary == on_index.vocabulary == index.task.vocabulary == retrieval.task.vocabulary
    for construction, task in ((index, on_retrieval), (retrieval, on_index)):
        row = psheads.evaluate(construction.model, task, n=n, seed=11, batch_size=n).iloc[-1]
        chance = float(row["chance"])
        tolerance = 4 * math.sqrt(chance * (1 - chance) / n)
        assert row["accuracy"] <= chance + tolerance, (construction.kind, row["accuracy"], chance)
    # what they do instead: Index at a pair attends itself and copies nothing (Reflexive: it
    # predicts the query pair, never the answer); Retrieval at an integer has no query and copies
    # nothing, so every letter ties and the prediction does not depend on the prompt
    assert psheads.evaluate(index.model, on_retrieval, n=n, seed=11, batch_size=n)["accuracy"].iloc[-1] == 0.0
    row = psheads.evaluate(retrieval.model, on_index, n=n, seed=11, batch_size=n).iloc[-1]
    assert abs(row["accuracy"] - row["chance"]) <= 4 * math.sqrt(row["chance"] * (1 - row["chance"]) / n)


# --- the model computes the construction ------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["index", "retrieval"])
def test_lens_self_checks_and_rebuilds_the_construction_logits(build, kind, backend) -> None:
    construction = build(kind, backend, n0=16)
    lens = psheads.RopeLens(construction.model)  # the self-check rebuilds the model's pattern
    geometry = lens.layer(0)
    assert geometry.n_heads == 1 and geometry.d_head % 2 == 0
    assert geometry.theta[-1].item() == pytest.approx(construction.theta, rel=1e-6)
    batch = construction.task.generate(16, seed=4)
    planes = lens.frequency_logits(batch.tokens, 0)  # [batch, head, F + 1, key]
    assert planes[:, :, :-2].abs().max() == 0.0 and planes[:, :, -1].abs().max() == 0.0  # one active plane
    t = batch.tokens.shape[1] - 1
    j = torch.arange(t + 1)
    task = construction.task
    if kind == "index":
        sigma = batch.tokens[:, -1] - task.integer_id(0)
        expected = torch.cos((t - j - sigma[:, None]) * construction.theta)
    else:
        first = (batch.tokens - task.pair_id(0, 0)) // task.n_letters
        second = (batch.tokens[:, -1] - task.pair_id(0, 0)) % task.n_letters
        expected = torch.cos((first - second[:, None]) * construction.omega + (t - j) * construction.theta)
    torch.testing.assert_close(planes[:, 0, -2], construction.beta * expected.double(), atol=2e-4 * construction.beta,
                               rtol=0)


# --- Theorem 3.2's closed forms (no model) -----------------------------------------------------------
def test_index_margin_is_one_minus_cos_theta_up_to_n0_then_a_tie() -> None:
    config = theory.ConstructionConfig("index", n0=16)
    assert config.theta == pytest.approx(2 * math.pi / 16) and config.max_offset == 16
    for length in range(2, 17):
        assert config.margin(length) == pytest.approx(1 - math.cos(config.theta), abs=1e-15)
        assert config.margin(length) <= config.bound(length).upper + 1e-15
    assert config.bound(16).upper == pytest.approx(1 - math.cos(config.theta))  # the bound is attained
    for length in (17, 18, 30, 64):
        assert config.margin(length) == pytest.approx(0.0, abs=1e-12)
        assert config.bound(length).lower is None and config.bound(length).upper > 0
    assert config.bound(40).upper == pytest.approx(2 * math.pi**2 / 39**2)


def test_retrieval_margin_closed_form_and_bounds() -> None:
    config = theory.ConstructionConfig("retrieval", n0=16, n_letters=8)
    theta, omega = config.theta, config.omega
    assert omega == pytest.approx(math.pi / 4) and theta == pytest.approx(omega / 64)
    assert config.margin(2) == pytest.approx(math.cos(theta) - math.cos(omega))
    for length in range(3, 34):  # worst case: answer at distance L − 2, letter y − 1 at distance L − 1
        assert config.margin(length) == pytest.approx(math.cos((length - 2) * theta)
                                                      - math.cos(omega - (length - 1) * theta), abs=1e-14)
    for length in range(3, 17):
        bound = config.bound(length)
        assert 0 < bound.lower <= config.margin(length) <= bound.upper
    # at L = 2 the only other key is the query itself: no distractor at distance n = 1, and the
    # upper bound (which assumes one) does not hold there
    assert config.bound(2).lower <= config.margin(2) and config.margin(2) > config.bound(2).upper
    assert config.bound(16).lower == pytest.approx(math.cos(15 * theta) - math.cos(omega - 15 * theta))
    # read with n = L instead of L − 1, the upper bound would fail at short prompts
    assert config.margin(3) > 1 - math.cos(omega - 3 * theta)
    assert config.margin(34) < 0  # (2L − 3)θ ≥ ω: the construction breaks


def test_beta_rule_makes_the_target_share_exceed_the_readout_threshold() -> None:
    for kind, p_min in (("index", 0.5), ("retrieval", 0.75)):
        for n0 in (2, 5, 16, 50):
            config = theory.ConstructionConfig(kind, n0=n0)
            worst = min(config.margin(length) for length in range(2, n0 + 1))
            share = 1 / (1 + (n0 - 1) * math.exp(-config.beta * worst))
            assert share > p_min and share == pytest.approx(2 * p_min / (1 + p_min))
    assert theory.ConstructionConfig("index", beta=3.5).beta == 3.5


def test_bounds_frame() -> None:
    frame = theory.ConstructionConfig("index", n0=8).bounds([2, 8, 9, 20])
    assert list(frame.columns) == ["length", "margin", "lower", "upper"] and frame["lower"].isna().all()
    assert frame["margin"].tolist()[2:] == [0.0, 0.0]
    retrieval = theory.ConstructionConfig("retrieval", n0=8).bounds(range(3, 9))
    assert (retrieval["lower"] <= retrieval["margin"]).all() and (retrieval["margin"] <= retrieval["upper"]).all()


@pytest.mark.parametrize(("options", "message"), [
    ({"kind": "induction"}, "Unknown construction 'induction'"),
    ({"kind": "index", "n0": 1}, "n0 must be at least 2"),
    ({"kind": "index", "n0": 16, "theta": 2 * math.pi / 15}, r"theta must lie in \(0, 2π/\(n0 − 1\)\)"),
    ({"kind": "retrieval", "n0": 16, "theta": math.pi / 128}, "Theorem 3.1's interval"),
    ({"kind": "retrieval", "n_letters": 1}, "at least 2 for retrieval"),
    ({"kind": "index", "beta": 0.0}, "beta must be greater than 0"),
    ({"kind": "index", "n0": 16, "n_ctx": 8}, "n_ctx must be at least 16"),
])
def test_bad_configs_are_refused(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        theory.ConstructionConfig(**options)


def test_config_round_trips_through_a_dict() -> None:
    config = theory.ConstructionConfig("retrieval", n0=12, n_letters=5)
    data = config.to_dict()
    assert data["theta"] == config.theta and data["max_offset"] == 12
    assert theory.ConstructionConfig.from_dict({**data, "unknown": 1}) == config


def test_construct_refuses_a_bad_backend() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        theory.construct("index", backend="onnx")
    assert sorted(theory.CONSTRUCTIONS) == ["index", "retrieval"]
