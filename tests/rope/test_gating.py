"""Frequency gating changes the model exactly as recomputing the logits predicts."""

from __future__ import annotations

import pytest
import torch

import psheads
from tests.conftest import model_state
from tests.rope.test_lens import model_patterns, rebuilt_pattern


@pytest.mark.parametrize(("family", "backend"), [("llama", "bridge"), ("gptj", "bridge"), ("gemma3", "bridge"),
                                                 ("neox", "bridge"), ("qwen2", "hooked")])
def test_gating_queries_matches_the_hand_computation(model_factory, family, backend) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, 14))
    layer, heads = 1, [0, 3]
    geo = lens.layers[layer]
    planes_off = [1, geo.n_planes] + ([0] if geo.rotary_dim < geo.d_head else [])
    ungated = lens.frequency_logits(tokens, layer)  # layer 0 is untouched, so layer 1's inputs are too
    expected = ungated.clone()
    for head in heads:
        for plane in planes_off:
            expected[:, head, plane - 1 if plane else -1] = 0.0
    expected_pattern = rebuilt_pattern(lens, expected, layer, 13)
    before_logits = model(tokens)
    before = model_state(model)
    with lens.gate(planes_off, layers=[layer], heads=heads):
        gated_pattern = model_patterns(model, tokens)[layer][:, :, 13]
        gated_logits = model(tokens)
    torch.testing.assert_close(gated_pattern, expected_pattern, atol=1e-5, rtol=0)
    untouched = [h for h in range(lens.layers[layer].n_heads) if h not in heads]
    torch.testing.assert_close(gated_pattern[:, untouched], model_patterns(model, tokens)[layer][:, untouched, 13])
    assert not torch.allclose(gated_logits, before_logits)
    assert model_state(model) == before
    torch.testing.assert_close(model(tokens), before_logits, atol=0, rtol=0)


def test_gating_keys_acts_on_the_whole_group(model_factory) -> None:
    model = model_factory("llama")  # 4 query heads share 2 KV heads
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (1, 10))
    expected = lens.frequency_logits(tokens, 0)
    expected[:, [2, 3], 1] = 0.0  # KV head 1 serves query heads 2 and 3
    with lens.gate([2], layers=[0], heads=[1], keys=True):
        gated = model_patterns(model, tokens)[0][:, :, 9]
    torch.testing.assert_close(gated, rebuilt_pattern(lens, expected, 0, 9), atol=1e-5, rtol=0)


def test_gating_removes_hooks_on_error(model_factory) -> None:
    model = model_factory("gemma2")
    lens = psheads.RopeLens(model)
    before = model_state(model)
    with pytest.raises(KeyError), lens.gate([1]):
        raise KeyError("user code failed")
    assert model_state(model) == before


def test_gating_validates(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    with pytest.raises(ValueError, match="planes: frequency ID 9 is out of range"), lens.gate([9]):
        pass
    with pytest.raises(ValueError, match="head 4 is out of range"), lens.gate([1], heads=[4]):
        pass
    with pytest.raises(ValueError, match="2 KV heads"), lens.gate([1], heads=[2], keys=True):
        pass
