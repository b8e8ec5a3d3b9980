"""RopeLens against the models themselves, for every family and both backends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import psheads
from psheads.rope import geometry
from psheads.rope.layer import Layers
from psheads.rope.lens import SelfCheckError
from tests.conftest import FAMILIES, HOOKED_FAMILIES, model_state

CASES = [(family, "bridge") for family in FAMILIES] + [(family, "hooked") for family in HOOKED_FAMILIES]


def model_patterns(model, tokens: torch.Tensor) -> dict[int, torch.Tensor]:
    """The model's own attention patterns ``[batch, head, q, k]`` per layer (test oracle)."""
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("attn.hook_pattern"))
    return {layer: cache[f"blocks.{layer}.attn.hook_pattern"].double() for layer in range(len(model.blocks))}


def rebuilt_pattern(lens: psheads.RopeLens, planes: torch.Tensor, layer: int, query: int) -> torch.Tensor:
    geo = lens.layers[layer]
    logits = geometry.soft_cap(planes.sum(dim=2), geo.softcap)
    visible = geometry.visible_keys(torch.tensor([query]), planes.shape[-1], geo.window)[0]
    return torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)


@pytest.mark.parametrize(("family", "backend"), CASES)
@pytest.mark.parametrize("n_pos", [16, 520])
def test_planes_rebuild_the_models_pattern(model_factory, family: str, backend: str, n_pos: int) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, n_pos))
    patterns = model_patterns(model, tokens)
    for layer in range(lens.n_layers):
        for query in (n_pos - 1, n_pos // 2):
            planes = lens.frequency_logits(tokens, layer, query=query)
            geo = lens.layers[layer]
            assert planes.shape == (2, geo.n_heads, geo.n_planes + 1, query + 1)
            assert planes.dtype == torch.float64
            expected = patterns[layer][:, :, query, : query + 1]
            torch.testing.assert_close(rebuilt_pattern(lens, planes, layer, query), expected, atol=1e-5, rtol=0)
            if geo.rotary_dim == geo.d_head:
                assert torch.count_nonzero(planes[:, :, -1]) == 0


def hf_inv_freq(model) -> torch.Tensor | None:
    hf = getattr(model, "original_model", None)
    if hf is None:
        return None
    for module in hf.modules():
        inv_freq = getattr(module, "inv_freq", None)
        if isinstance(inv_freq, torch.Tensor):
            return inv_freq.double()
    return None


@pytest.mark.parametrize("family", FAMILIES)
def test_geometry_matches_the_models_tables(model_factory, family: str) -> None:
    model = model_factory(family)
    lens = psheads.RopeLens(model)
    hf_config = model.original_model.config
    for geo in lens.layers:
        assert geo.theta.shape == (geo.n_planes,)
        assert torch.all(geo.theta[:-1] >= geo.theta[1:]), "frequency IDs must run fastest first"
        assert geo.n_heads == hf_config.num_attention_heads
        if family == "gptj":
            expected = 1.0 / 10000 ** (torch.arange(0, geo.rotary_dim, 2, dtype=torch.float64) / geo.rotary_dim)
            assert geo.pairing == "adjacent"
        else:
            expected = hf_inv_freq(model)
            assert geo.pairing == "halves"
        if family == "gemma3":  # per-layer bases: checked in test_rope_variants
            continue
        torch.testing.assert_close(geo.theta, torch.sort(expected, descending=True).values, atol=1e-6, rtol=0)
        torch.testing.assert_close(geo.magnitude, torch.ones_like(geo.magnitude), atol=1e-6, rtol=0)


def test_layer_facts(model_factory) -> None:
    gemma2 = psheads.RopeLens(model_factory("gemma2"))
    assert [g.window for g in gemma2.layers] == [5, None]
    assert all(g.softcap == 2.0 for g in gemma2.layers)
    assert gemma2.layers[0].scale == pytest.approx(12**-0.5)
    assert gemma2.layers[0].n_kv_heads == 2
    neox = psheads.RopeLens(model_factory("neox"))
    assert (neox.layers[0].rotary_dim, neox.layers[0].d_head) == (4, 8)
    frame = neox.geometry_frame()
    assert set(frame["plane"]) == {0, 1, 2}
    assert frame.loc[frame["plane"] == 0, "dims"].iloc[0] == (4, 5, 6, 7)
    gptj = psheads.RopeLens(model_factory("gptj"))
    assert gptj.layers[0].plane_dims.tolist() == [[0, 1], [2, 3]]


@pytest.mark.parametrize(("family", "backend"), [("llama", "bridge"), ("gemma2", "bridge"), ("gptj", "hooked")])
@pytest.mark.parametrize("by_frequency", [False, True])
def test_position_token_logits_diagonal_is_the_models_row(model_factory, family, backend, by_frequency) -> None:
    lens = psheads.RopeLens(model_factory(family, backend))
    tokens = torch.randint(0, 64, (3, 12))
    planes = lens.frequency_logits(tokens, 1, query=9)
    M = lens.position_token_logits(tokens, 1, query=9, by_frequency=by_frequency)
    geo = lens.layers[1]
    if by_frequency:
        assert M.shape == (3, geo.n_heads, geo.n_planes + 1, 10, 10)
        torch.testing.assert_close(torch.diagonal(M, dim1=-2, dim2=-1), planes, atol=1e-10, rtol=0)
    else:
        assert M.shape == (3, geo.n_heads, 10, 10)
        torch.testing.assert_close(torch.diagonal(M, dim1=-2, dim2=-1), planes.sum(2), atol=1e-10, rtol=0)


def test_swapping_two_tokens_moves_their_columns(model_factory) -> None:
    """M predicts a swap at layer 0 exactly: the swapped input's logits are M[p, π(p)]."""
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (1, 10))
    M = lens.position_token_logits(tokens, 0, query=-1)
    swapped = tokens.clone()
    swapped[0, [2, 6]] = tokens[0, [6, 2]]
    permutation = torch.arange(10)
    permutation[[2, 6]] = torch.tensor([6, 2])
    predicted = M[0][:, torch.arange(10), permutation]
    actual = lens.frequency_logits(swapped, 0, query=-1)[0].sum(1)
    torch.testing.assert_close(predicted, actual, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("family", "backend"), [("llama", "bridge"), ("gptj", "bridge"), ("neox", "hooked")])
def test_model_left_unchanged_even_after_errors(model_factory, family, backend, monkeypatch) -> None:
    model = model_factory(family, backend)
    model.train()
    before = model_state(model)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, 8))
    lens.frequency_logits(tokens, 0)
    lens.position_token_logits(tokens, 1)
    assert model_state(model) == before
    calls = {"n": 0}
    real_upcast = psheads.backends.base.upcast

    def failing_upcast(x, source=None):
        calls["n"] += 1
        if calls["n"] == 2:  # inside the forward pass, after hooks were added
            raise RuntimeError("boom")
        return real_upcast(x, source)

    monkeypatch.setattr(psheads.backends.base, "upcast", failing_upcast)
    with pytest.raises(RuntimeError, match="boom"):
        lens.frequency_logits(tokens, 1)
    assert model_state(model) == before
    model.eval()


def test_self_check_names_the_layer(model_factory, monkeypatch) -> None:
    model = model_factory("qwen2")
    real = psheads.backends.BridgeBackend.layer_spec

    def wrong_scale(self, layer):
        spec = real(self, layer)
        if layer == 1:
            return type(spec)(**{**spec.__dict__, "scale": spec.scale * 1.5})
        return spec

    monkeypatch.setattr(psheads.backends.BridgeBackend, "layer_spec", wrong_scale)
    with pytest.raises(SelfCheckError, match=r"Layer 1: .*max \|Δ\| = "):
        psheads.RopeLens(model)
    lens = psheads.RopeLens(model, self_check=False)
    assert lens.layers[1].scale != lens.layers[0].scale


def test_bad_inputs(model_factory, tmp_path) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (1, 6))
    with pytest.raises(ValueError, match="query 6 is out of range"):
        lens.frequency_logits(tokens, 0, query=6)
    with pytest.raises(ValueError, match="empty"):
        lens.frequency_logits(torch.zeros(1, 0, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="empty"):
        lens.frequency_logits([], 0)
    with pytest.raises(TypeError, match="integer token ids"):
        lens.frequency_logits(torch.rand(1, 4), 0)
    with pytest.raises(TypeError, match="LongTensor"):
        lens.frequency_logits("hello", 0)
    # GPT-J's sinusoid table ends at n_positions; Llama computes its tables per input
    with pytest.raises(ValueError, match="exceeds the model's context of 1024 tokens"):
        psheads.RopeLens(model_factory("gptj")).frequency_logits(torch.zeros(1, 1025, dtype=torch.long), 0)
    assert lens.backend.max_positions is None
    with pytest.raises(ValueError, match=r"Token ids must lie in \[0, 64\)"):
        lens.frequency_logits(torch.tensor([[1, 99]]), 0)
    with pytest.raises(ValueError, match="layer 5 is out of range"):
        lens.frequency_logits(tokens, 5)
    with pytest.raises(TypeError, match="already a RopeLens"):
        psheads.RopeLens(lens)
    # 1-D tokens and lists are one batch
    assert lens.frequency_logits(tokens[0], 0).shape[0] == 1
    assert lens.frequency_logits(tokens.tolist(), 0, query=-2).shape[-1] == 5


def test_rejects_non_rope_and_non_transformerlens_models(model_factory) -> None:
    with pytest.raises(ValueError, match="does not use rotary position embeddings"):
        psheads.RopeLens(model_factory("gpt2"))
    hf_model = model_factory("llama").original_model
    with pytest.raises(TypeError, match="already wrapped by a TransformerBridge"):
        psheads.RopeLens(hf_model)
    with pytest.raises(TypeError, match="TransformerLens model"):
        psheads.RopeLens(object())


def test_hooked_tables_grow_during_the_forward_and_stay_trainable(model_factory) -> None:
    """TL 3.9 starts its rotary cache at 2048 rows and grows it mid-forward; read it afterwards."""
    model = model_factory("llama", "hooked", max_position_embeddings=4096)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (1, 2100))
    planes = lens.frequency_logits(tokens, 1)
    expected = model_patterns(model, tokens)[1][:, :, -1]
    torch.testing.assert_close(rebuilt_pattern(lens, planes, 1, 2099), expected, atol=1e-5, rtol=0)
    model(tokens[:, :20]).sum().backward()  # no inference tensors left behind
    model.zero_grad(set_to_none=True)


def test_ungrouped_gqa_on_hooked_transformer(model_factory) -> None:
    model = model_factory("llama", "hooked")
    try:
        model.cfg.ungroup_grouped_query_attention = True
        lens = psheads.RopeLens(model)  # hook_k now carries every query head
        assert lens.layers[0].n_kv_heads == lens.layers[0].n_heads
        tokens = torch.randint(0, 64, (1, 9))
        expected = model_patterns(model, tokens)[0][:, :, -1]
        torch.testing.assert_close(rebuilt_pattern(lens, lens.frequency_logits(tokens, 0), 0, 8), expected,
                                   atol=1e-5, rtol=0)
    finally:
        model.cfg.ungroup_grouped_query_attention = False
    with pytest.raises(RuntimeError, match="configuration changed after wrapping"):
        lens.frequency_logits(tokens, 0)


def test_int_like_arguments_and_empty_layer_lists(model_factory) -> None:
    import numpy as np

    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (1, 6))
    torch.testing.assert_close(lens.frequency_logits(tokens, np.int64(1), query=torch.tensor(4)),
                               lens.frequency_logits(tokens, 1, query=4))
    with lens.gate([1], heads=[np.int64(0)]):
        pass
    with pytest.raises(TypeError, match="layer must be an int"):
        lens.frequency_logits(tokens, 1.0)
    with pytest.raises(ValueError, match="No layers"):
        list(lens.frequency_logits_by_layer(tokens, layers=[]))
    with pytest.raises(TypeError, match="probe_length"):
        psheads.RopeLens(lens.model, probe_length=2.5)


def test_an_unchanged_model_reuses_its_checked_lens(model_factory, monkeypatch) -> None:

    from psheads.rope import lens as lens_module

    checks = _count_self_checks(monkeypatch)
    model = model_factory("qwen2")
    lens_module._CHECKED.pop(model, None)
    tokens = torch.randint(0, 64, (2, 7))
    first = psheads.score_heads(model, tokens)
    again = psheads.score_heads(model, tokens)
    assert checks["n"] == 1
    pd = pytest.importorskip("pandas")
    pd.testing.assert_frame_equal(first, again)
    weight = model.original_model.model.layers[0].self_attn.q_proj.weight
    try:
        with torch.no_grad():
            weight.mul_(2.0)  # in place: the version counter moves
        psheads.score_heads(model, tokens)
        assert checks["n"] == 2
        psheads.score_heads(model, tokens)
        assert checks["n"] == 2
    finally:
        with torch.no_grad():
            weight.div_(2.0)
    psheads.score_heads(model, tokens)
    assert checks["n"] == 3  # restored weights are new writes too
    model.to(torch.float64)
    try:
        psheads.score_heads(model, tokens)
        assert checks["n"] == 4
    finally:
        model.to(torch.float32)
    psheads.RopeLens(model)  # an explicit lens after a change refreshes the cache as well
    assert checks["n"] == 5
    psheads.frequency_profile(model, tokens)
    psheads.RopeLens(model)
    assert checks["n"] == 5


def _count_self_checks(monkeypatch) -> dict[str, int]:
    checks = {"n": 0}
    real = psheads.RopeLens._self_check

    def counting(self, captures, *args, **kwargs):
        checks["n"] += 1
        return real(self, captures, *args, **kwargs)

    monkeypatch.setattr(psheads.RopeLens, "_self_check", counting)
    return checks


def test_a_second_lens_on_an_unchanged_model_skips_the_self_check(model_factory, monkeypatch) -> None:
    """``RopeLens(model)`` reuses the checked geometry of an unchanged model: no probe, no check,
    and a lens that works like the first; a weight written in place, a new dtype, a new hook or
    another probe check again, and ``self_check=False`` neither reads nor fills the cache."""
    from psheads.rope import lens as lens_module

    checks = _count_self_checks(monkeypatch)
    model = model_factory("llama", num_key_value_heads=2)
    lens_module._CHECKED.pop(model, None)
    before = model_state(model)
    first = psheads.RopeLens(model)
    captures = {"n": 0}
    real_capture = type(first.backend).capture

    def counting_capture(self, *args, **kwargs):
        captures["n"] += 1
        return real_capture(self, *args, **kwargs)

    monkeypatch.setattr(type(first.backend), "capture", counting_capture)
    second = psheads.RopeLens(model)
    assert checks["n"] == 1 and captures["n"] == 0  # no probe forward either
    assert second is not first and second.layers is first.layers and second.model is first.model
    psheads.score_heads(model, torch.randint(0, 64, (2, 7)), progress=False)
    assert checks["n"] == 1
    tokens = torch.randint(0, 64, (2, 9))
    torch.testing.assert_close(second.frequency_logits(tokens, 1), first.frequency_logits(tokens, 1), rtol=0, atol=0)
    with second.gate([1], layers=[0]):
        assert second._active
    assert not second._active and model_state(model) == before  # hooks removed, flags as they were
    psheads.RopeLens(model, seed=1)  # another probe is checked
    assert checks["n"] == 2
    psheads.RopeLens(model, seed=1)
    assert checks["n"] == 2
    weight = model.original_model.model.layers[1].self_attn.k_proj.weight
    with torch.no_grad():
        weight.mul_(1.0)  # a write in place, even of the same values, is a new model
    psheads.RopeLens(model, seed=1)
    assert checks["n"] == 3
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_z", lambda tensor, hook: tensor)]):
        psheads.RopeLens(model, seed=1)  # the user's own hooks are theirs: the model is unchanged
        assert checks["n"] == 3
    model.to(torch.float64)
    try:
        psheads.RopeLens(model, seed=1)
        assert checks["n"] == 4
    finally:
        model.to(torch.float32)
    lens_module._CHECKED.pop(model, None)
    probes = captures["n"]
    unchecked = psheads.RopeLens(model, self_check=False)
    assert checks["n"] == 4 and model not in lens_module._CHECKED and captures["n"] == probes + 1
    assert unchecked.layers is not first.layers


def test_the_self_check_shows_progress(model_factory, capsys) -> None:
    """A bar over the probe's forward pass and each layer's check; none when quiet, or when reused."""
    from psheads.rope import lens as lens_module

    model = model_factory("qwen2")
    lens_module._CHECKED.pop(model, None)
    lens = psheads.RopeLens(model, progress=True)
    steps = len(lens.layers) + 1
    err = capsys.readouterr().err
    assert "RopeLens self-check" in err and f"{steps}/{steps}" in err
    psheads.RopeLens(model, progress=True)  # reused: nothing to show
    lens_module._CHECKED.pop(model, None)
    psheads.RopeLens(model, progress=False)
    psheads.RopeLens(model, self_check=False, progress=True)  # no check, no bar
    assert "self-check" not in capsys.readouterr().err
    with pytest.raises(TypeError, match="progress"):
        psheads.RopeLens(model, progress="yes")


def test_the_lens_cache_does_not_keep_models_alive(tmp_path) -> None:
    import gc
    import weakref

    from psheads.rope import lens as lens_module
    from tests import helpers

    model = helpers.boot_bridge(helpers.save_tiny("llama", tmp_path / "m"))
    psheads.score_heads(model, torch.randint(0, 64, (1, 6)))
    assert model in lens_module._CHECKED
    probe = weakref.ref(model)
    del model
    gc.collect()
    assert probe() is None
    model = helpers.boot_bridge(helpers.save_tiny("qwen2", tmp_path / "q"))
    lens = psheads.RopeLens(model)
    again = psheads.RopeLens(model)
    assert len(lens_module._CHECKED) >= 1 and model in lens_module._CHECKED
    probe, entries = weakref.ref(model), len(lens_module._CHECKED)
    del model, lens, again
    gc.collect()
    assert probe() is None and len(lens_module._CHECKED) == entries - 1  # the entry went with the model


def test_layers_are_looked_up_by_block() -> None:
    """``lens.layers`` indexes by block (negative from the last), iterates the attention layers, and
    names the attention layers when asked for a block without softmax attention (hybrid models)."""
    geometries = [SimpleNamespace(layer=1), SimpleNamespace(layer=3)]
    layers = Layers(geometries, n_blocks=4)
    assert list(layers) == geometries and len(layers) == 2 and layers.indices == (1, 3)
    assert layers[3] is geometries[1] and layers[-1] is geometries[1] and layers[-3] is geometries[0]
    assert 1 in layers and 0 not in layers
    with pytest.raises(ValueError, match=r"Layer 2 has no softmax attention .* layers are \[1, 3\] of its 4 blocks"):
        layers[2]
