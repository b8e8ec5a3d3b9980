"""Causal tests: mean ablation of whole heads, plane gating, the frame, head selection, and a model left unchanged."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import psheads
from psheads.experiments.ablation import (
    COLUMNS,
    Intervention,
    ablate,
    applied,
    head_means,
    heads_by_label,
    random_heads,
)
from psheads.measure import evaluation
from psheads.rope.lens import as_lens
from tests.conftest import model_state

BACKENDS = ["bridge", "hooked"]


def _gptj(model_factory, backend: str = "bridge"):
    """Tiny GPT-J (2 layers × 4 heads, d_head 8: planes 1, 2 and the unrotated dims) over the number task's
    vocabulary."""
    return model_factory("gptj", backend=backend, vocab_size=136, n_positions=200)


def _z_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_z"


def _hand_means(model, tokens: torch.Tensor, layers: list[int]) -> dict[int, torch.Tensor]:
    """Per-position mean of hook_z over the prompts, from a plain cache."""
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in {_z_name(layer) for layer in layers})
    return {layer: cache[_z_name(layer)].double().mean(0) for layer in layers}


def _hand_replace(means: dict[int, torch.Tensor], heads: list[tuple[int, int]]) -> list:
    def replace(layer: int, chosen: list[int]):
        def hook(z, hook):
            z = z.clone()
            z[:, :, chosen] = means[layer][:, chosen].to(z.dtype)
            return z

        return hook

    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    return [(_z_name(layer), replace(layer, chosen)) for layer, chosen in by_layer.items()]


def _rows(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    return frame[frame["intervention"] == name][["hops", "accuracy", "n"]].reset_index(drop=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_row_is_evaluate_under_the_hand_written_intervention(model_factory, backend) -> None:
    model = _gptj(model_factory, backend)
    heads = [(0, 1), (1, 0), (1, 3)]
    chosen = [Intervention("mean", heads), Intervention("gate", heads, planes=[1, 2])]
    frame = ablate(model, "number", chosen, n=40, seed=3, batch_size=16, progress=False)
    assert list(frame.columns) == list(COLUMNS)
    assert frame["intervention"].unique().tolist() == ["none", "mean", "gate"]
    assert frame.groupby("intervention", sort=False)["hops"].apply(list).tolist() == [["1", "2", "3", "4", "all"]] * 3

    def reference() -> pd.DataFrame:
        return evaluation.evaluate(model, "number", n=40, seed=3, progress=False)[["hops", "accuracy", "n"]]

    pd.testing.assert_frame_equal(_rows(frame, "none"), reference())
    tokens = psheads.tasks.get_task("number").generate(40, seed=3).tokens
    with torch.no_grad():
        means = _hand_means(model, tokens, [0, 1])
    with model.hooks(fwd_hooks=_hand_replace(means, heads)):
        pd.testing.assert_frame_equal(_rows(frame, "mean"), reference())
    lens = as_lens(model)
    with lens.gate([1, 2], layers=[0], heads=[1]), lens.gate([1, 2], layers=[1], heads=[0, 3]):
        pd.testing.assert_frame_equal(_rows(frame, "gate"), reference())
    assert frame.attrs["interventions"] == [
        {"name": "mean", "heads": [[0, 1], [1, 0], [1, 3]], "planes": None},
        {"name": "gate", "heads": [[0, 1], [1, 0], [1, 3]], "planes": [1, 2]},
    ]
    assert frame.attrs["head_ablation"] == "mean" and frame.attrs["n"] == 40 and frame.attrs["seed"] == 3
    assert frame.attrs["task"] == "number" and frame.attrs["task_options"]["n_symbols"] == 120


@pytest.mark.parametrize("backend", BACKENDS)
def test_mean_ablation_writes_the_mean_into_the_chosen_heads_only(model_factory, backend) -> None:
    model = _gptj(model_factory, backend)
    lens = as_lens(model)
    tokens = torch.randint(0, 136, (12, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        means = head_means(lens, tokens, [0, 1], batch_size=5)
        hand = _hand_means(model, tokens, [0, 1])
        torch.testing.assert_close(means[0], hand[0], atol=1e-6, rtol=0)
        assert means[0].shape == (9, 4, 8)
        _, clean = model.run_with_cache(tokens, names_filter=_z_name(0))
        with applied(lens, Intervention("x", [(0, 2)]), means):
            _, cache = model.run_with_cache(tokens, names_filter=_z_name(0))
            logits = model(tokens)
        with model.hooks(fwd_hooks=_hand_replace(means, [(0, 2)])):
            expected = model(tokens)
    z, z_clean = cache[_z_name(0)], clean[_z_name(0)]
    torch.testing.assert_close(z[:, :, 2], means[0][:, 2].float().expand(12, -1, -1), atol=0, rtol=0)
    torch.testing.assert_close(z[:, :, [0, 1, 3]], z_clean[:, :, [0, 1, 3]], atol=0, rtol=0)
    assert float((z_clean[:, :, 2] - z[:, :, 2]).abs().max()) > 0.05  # the head did carry prompt information
    torch.testing.assert_close(logits, expected, atol=0, rtol=0)


def test_removing_every_head_leaves_a_prediction_that_depends_on_the_last_token_only(model_factory) -> None:
    model = _gptj(model_factory)
    lens = as_lens(model)
    every = Intervention("every head", [(layer, head) for layer in range(2) for head in range(4)])
    generator = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 136, (16, 7), generator=generator)
    tokens[:, -1] = torch.tensor([5, 9]).repeat(8)  # two query tokens, eight prompts each
    with torch.no_grad():
        means = head_means(lens, tokens, [0, 1], batch_size=16)
        with applied(lens, every, means):
            last = model(tokens)[:, -1]
        plain = model(tokens)[:, -1]
    for query in (0, 1):
        rows = last[query::2]
        assert float((rows - rows[0]).abs().max()) < 1e-4  # mean writes erase what the context was
        assert float((plain[query::2] - plain[query]).abs().max()) > 0.1  # while the intact model reads it


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fail_at", [1, 4, 6, 8])  # means pass, baseline, mean ablation, gating
def test_the_model_is_unchanged_after_an_error_inside_a_measurement(model_factory, backend, fail_at) -> None:
    model = _gptj(model_factory, backend)
    tokens = torch.randint(0, 136, (3, 10), generator=torch.Generator().manual_seed(4))
    chosen = [Intervention("mean", [(0, 0), (1, 2)]), Intervention("gate", [(1, 1)], planes=[0, 1])]
    with torch.no_grad():
        before_logits = model(tokens)
    model.train()  # a training flag that must come back
    try:
        before = model_state(model)
        calls = []

        def fail(resid, hook):
            calls.append(1)
            if len(calls) == fail_at:
                raise RuntimeError("injected failure")

        with (model.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", fail)]),
              pytest.raises(RuntimeError, match="injected failure")):
            ablate(model, "number", chosen, n=8, seed=0, batch_size=4, progress=False)
        assert len(calls) == fail_at
        assert model_state(model) == before
    finally:
        model.eval()
    with torch.no_grad():
        assert torch.equal(model(tokens), before_logits)
    assert model_state(model)["hook_names"] == before["hook_names"]


def test_heads_by_label_reads_a_reduced_score_frame() -> None:
    scores = pd.DataFrame({"layer": [0, 0, 1, 2, 3], "head": [1, 0, 0, 0, 0],
                           "label": ["positional", "symbolic", "positional", "mixed", "positional"]})
    assert heads_by_label(scores) == ((0, 1), (1, 0), (3, 0))
    assert heads_by_label(scores, "symbolic") == ((0, 0),)
    assert heads_by_label(scores, ["symbolic", "mixed"]) == ((0, 0), (2, 0))
    assert heads_by_label(scores, "uniform") == ()
    with pytest.raises(ValueError, match="one row per head"):
        heads_by_label(scores.assign(plane=1))
    with pytest.raises(ValueError, match=r"needs the columns \['label'\]"):
        heads_by_label(scores.drop(columns="label"))


def test_random_heads_are_seeded_distinct_and_avoid_the_excluded(model_factory) -> None:
    model = _gptj(model_factory)
    first = random_heads(model, 3, seed=5, exclude=[(0, 0), (1, 1)])
    assert first == random_heads(model, 3, seed=5, exclude=[(0, 0), (1, 1)])
    assert len(set(first)) == 3 and not {(0, 0), (1, 1)} & set(first)
    assert {random_heads(model, 3, seed=s) for s in range(6)} != {first}  # other seeds, other draws
    assert sorted(random_heads(model, 6, seed=0, exclude=[(0, 0), (1, 1)])) == sorted(
        {(layer, head) for layer in range(2) for head in range(4)} - {(0, 0), (1, 1)})
    with pytest.raises(ValueError, match="only 6 are left"):
        random_heads(model, 7, exclude=[(0, 0), (1, 1)])


def test_intervention_is_validated_and_round_trips() -> None:
    gate = Intervention("fast", [[2, 0], (1, 0)], planes=range(4, 0, -1))
    assert gate.heads == ((1, 0), (2, 0)) and gate.planes == (1, 2, 3, 4) and gate.layers == (1, 2)
    assert Intervention.from_dict(gate.to_dict()) == gate
    assert Intervention.from_dict({**gate.to_dict(), "colour": "red"}) == gate
    for options, error, message in [
        ({"name": "none", "heads": [(0, 0)]}, ValueError, "other than 'none'"),
        ({"name": "", "heads": [(0, 0)]}, ValueError, "non-empty string"),
        ({"name": "x", "heads": []}, ValueError, "at least one"),
        ({"name": "x", "heads": [(0, 0, 1)]}, ValueError, r"\(layer, head\) pair"),
        ({"name": "x", "heads": [(0, 0), (0, 0)]}, ValueError, "must not repeat"),
        ({"name": "x", "heads": [(0, -1)]}, ValueError, "at least 0"),
        ({"name": "x", "heads": "L0H0"}, TypeError, "list of"),
        ({"name": "x", "heads": [(0, 0)], "planes": []}, ValueError, "at least one frequency"),
        ({"name": "x", "heads": [(0, 0)], "planes": [1, 1]}, ValueError, "must not repeat"),
    ]:
        with pytest.raises(error, match=message):
            Intervention(**options)


def test_ablate_refuses_bad_interventions_before_running_anything(model_factory) -> None:
    model = _gptj(model_factory)
    for chosen, message in [
        ([Intervention("x", [(2, 0)])], "layer 2 is out of range"),
        ([Intervention("x", [(1, 4)])], "head 4 is out of range"),
        ([Intervention("x", [(1, 0)], planes=[3])], "plane 3 is out of range; layer 1 has planes 1…2"),
        ([Intervention("x", [(1, 0)]), Intervention("x", [(0, 0)])], "distinct"),
    ]:
        with pytest.raises(ValueError, match=message):
            ablate(model, "number", chosen, n=4, progress=False)
    with pytest.raises(TypeError, match="Intervention objects"):
        ablate(model, "number", [((0, 0),)], n=4, progress=False)
    with (pytest.raises(ValueError, match="no head means for layers"),
          applied(as_lens(model), Intervention("x", [(0, 0)]))):
        pass  # pragma: no cover
    frame = ablate(model, "number", Intervention("one", [(0, 0)]), n=4, progress=False)
    assert frame["intervention"].unique().tolist() == ["none", "one"]
