"""Scoped per-frequency hook points: reading is free of side effects, edits act exactly."""

from __future__ import annotations

import pytest
import torch

import psheads
from tests.conftest import FAMILIES, model_state
from tests.rope.test_lens import rebuilt_pattern

CASES = [(family, "bridge") for family in FAMILIES] + [("gptj", "hooked"), ("llama", "hooked")]


@pytest.mark.parametrize(("family", "backend"), CASES)
def test_reading_matches_frequency_logits_and_changes_nothing(model_factory, family, backend) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, 11))
    base = model(tokens)
    before = model_state(model)
    with lens.plane_hooks([0, 1]) as names:
        assert names == {0: "blocks.0.attn.hook_plane_logits", 1: "blocks.1.attn.hook_plane_logits"}
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_plane_logits"))
    torch.testing.assert_close(logits, base, atol=0, rtol=0)
    for layer, name in names.items():
        planes = cache[name]
        geo = lens.layers[layer]
        assert planes.shape == (2, geo.n_heads, geo.n_planes + 1, 11, 11)
        torch.testing.assert_close(planes[:, :, :, 7, :8], lens.frequency_logits(tokens, layer, query=7),
                                   atol=1e-10, rtol=0)
    assert model_state(model) == before
    assert not set(names.values()) & set(model.hook_dict)


@pytest.mark.parametrize(("family", "backend"), CASES)
def test_zeroing_a_plane_equals_gating_it(model_factory, family, backend) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, 13))
    with lens.gate([1, 2], layers=[1], heads=[0, 2]):
        gated = model(tokens)

    def zero(planes, hook):
        planes[:, [0, 2], :2] = 0.0  # in place: frequency IDs 1 and 2 of heads 0 and 2
        return planes

    with lens.plane_hooks([1]) as names:
        edited = model.run_with_hooks(tokens, fwd_hooks=[(names[1], zero)])
    torch.testing.assert_close(edited, gated, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("family", "backend"), [("gptj", "bridge"), ("gemma2", "bridge"), ("neox", "hooked")])
def test_arbitrary_edits_set_the_pattern(model_factory, family, backend) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (1, 9))
    expected = lens.frequency_logits(tokens, 0, query=8)
    expected[:, :, -2] *= 3.0  # amplify the slowest rotated plane

    def amplify(planes, hook):
        edited = planes.clone()
        edited[:, :, -2] *= 3.0
        return edited

    with lens.plane_hooks([0]) as names, model.hooks(fwd_hooks=[(names[0], amplify)]):
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.0.attn.hook_pattern")
    got = cache["blocks.0.attn.hook_pattern"][:, :, 8].double()
    torch.testing.assert_close(got, rebuilt_pattern(lens, expected, 0, 8), atol=1e-5, rtol=0)


def test_hook_points_are_removed_on_error_and_not_duplicated(model_factory) -> None:
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    before = model_state(model)
    with pytest.raises(RuntimeError, match="user"), lens.plane_hooks():
        raise RuntimeError("user code failed")
    assert model_state(model) == before
    assert not any("plane_logits" in name for name in model.hook_dict)
    with lens.plane_hooks([0]), pytest.raises(ValueError, match="already has a hook point"), lens.plane_hooks([0]):
        pass
    assert not any("plane_logits" in name for name in model.hook_dict)
