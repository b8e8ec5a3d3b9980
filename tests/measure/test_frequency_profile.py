"""Frequency usage shares (docs: scoring, frequency usage)."""

from __future__ import annotations

import pytest
import torch

import psheads

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")


def test_usage_matches_a_hand_computation(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("mistral"))  # window 5 masks early keys
    tokens = torch.randint(0, 64, (5, 12))
    profile = psheads.frequency_profile(lens, tokens, exclude_bos=True, batch_size=2)
    planes, heads = profile.planes, profile.heads
    assert len(planes) == lens.n_layers * 4 * (lens.layers[0].n_planes + 1)
    sums = planes.groupby(["layer", "head"])["usage"].sum()
    torch.testing.assert_close(torch.tensor(sums.values), torch.ones(len(sums), dtype=torch.float64))
    layer, head = 1, 2
    logits = lens.frequency_logits(tokens, layer)[:, head]  # [prompt, plane, key]
    keys = [j for j in range(1, 11) if 11 - j < 5]
    norms = logits[..., keys].norm(dim=-1)
    expected = (norms / norms.sum(-1, keepdim=True)).mean(0)
    got = planes.query("layer == @layer and head == @head")["usage"].to_numpy()
    torch.testing.assert_close(torch.tensor(got), expected)
    row = heads.query("layer == @layer and head == @head").iloc[0]
    ids = torch.arange(1, len(expected), dtype=torch.float64)
    assert row.mean_frequency_id == pytest.approx(float((expected[:-1] * ids).sum() / expected[:-1].sum()))
    assert row.dominant_plane == [1, 2, 3, 4, 0][int(expected.argmax())]
    assert planes.attrs["n_prompts"] == 5 and "L2 norm" in planes.attrs["usage_definition"]


def test_profile_is_deterministic_and_batch_invariant(model_factory) -> None:
    model = model_factory("gptj")
    tokens = torch.randint(0, 64, (6, 9))
    a = psheads.frequency_profile(model, tokens, layers=[1], batch_size=6).planes
    b = psheads.frequency_profile(model, tokens, layers=[1], batch_size=1).planes
    assert set(a["layer"]) == {1}
    # the model's own fp32 forward differs slightly between batch shapes; repeated runs are identical
    torch.testing.assert_close(torch.tensor(a["usage"].values), torch.tensor(b["usage"].values), atol=1e-6, rtol=0)
    again = psheads.frequency_profile(model, tokens, layers=[1], batch_size=6).planes
    assert again.equals(a)
    theta = a.query("head == 0 and plane > 0")["theta"].to_numpy()
    assert theta[0] > theta[-1]


def test_profile_validates(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (2, 6))
    with pytest.raises(ValueError, match="fewer than one key"):
        psheads.frequency_profile(lens, tokens, query=0)
    with pytest.raises(ValueError, match="No layers"):
        psheads.frequency_profile(lens, tokens, layers=[])
    assert len(psheads.frequency_profile(lens, tokens, layers=[1, -1]).heads) == 4  # duplicates merged
    with pytest.raises(ValueError, match="batch_size"):
        psheads.frequency_profile(lens, tokens, batch_size=0)


@pytest.mark.parametrize("scale", [True, False])
def test_softmax_frequency_id_matches_a_hand_computation(model_factory, scale: bool) -> None:
    """Paper B's table-1 ID: Σ_f f · softmax(v / T)_f, v_f the plane's max logit over the keys,
    averaged over prompts first, with or without the attention scale."""
    lens = psheads.RopeLens(model_factory("mistral"))  # window 5 masks early keys
    tokens = torch.randint(0, 64, (5, 12))
    profile = psheads.frequency_profile(lens, tokens, exclude_bos=True, weighting="softmax", temperature=0.5,
                                        scale=scale)
    layer, head = 1, 2
    logits = lens.frequency_logits(tokens, layer)[:, head]  # [prompt, plane, key]; planes 1 … F then 0
    keys = [j for j in range(1, 11) if 11 - j < 5]
    v = logits[..., keys].amax(dim=-1).mean(0)
    if not scale:
        v = v / lens.layers[layer].scale
    got = profile.planes.query("layer == @layer and head == @head")["max_logit"].to_numpy()
    torch.testing.assert_close(torch.tensor(got), v)
    weights = torch.softmax(v[:-1] / 0.5, 0)
    expected = float((weights * torch.arange(1, len(v), dtype=torch.float64)).sum())
    row = profile.heads.query("layer == @layer and head == @head").iloc[0]
    assert row.mean_frequency_id == pytest.approx(expected)
    usage = psheads.frequency_profile(lens, tokens, exclude_bos=True).heads
    assert usage.mean_frequency_id.to_numpy() != pytest.approx(profile.heads.mean_frequency_id.to_numpy())
    assert "softmax" in profile.heads.attrs["frequency_id_definition"]
    assert profile.heads.attrs["config"]["weighting"] == "softmax"
    assert "usage-weighted" in usage.attrs["frequency_id_definition"]


def test_softmax_options_validate(model_factory) -> None:
    with pytest.raises(ValueError, match="weighting must be one of"):
        psheads.ProfileConfig(weighting="max")
    with pytest.raises(ValueError, match="temperature must be greater than 0"):
        psheads.ProfileConfig(temperature=0)
    with pytest.raises(TypeError, match="scale"):
        psheads.ProfileConfig(scale="no")
