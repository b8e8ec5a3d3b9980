"""The SDPA capture that long prompts take: no [query, key] scores formed, the same q, k̃ and
tables as the eager capture (bit for bit at layer 0, within fp32 rounding of the residual stream
after it), the same scores within that rounding, and the model left exactly as it was."""

from __future__ import annotations

from importlib.metadata import version

import pytest
import torch

import psheads
from psheads.rope import backends, families
from tests.conftest import FAMILIES, model_state

SDPA_FAMILIES = {family.name for family in families.FAMILIES if family.sdpa}
"""Bridge families whose Hugging Face attention runs as SDPA (``Family.sdpa``), checked against the
backend's own reading of each look-alike below."""

TL4 = int(version("transformer-lens").split(".")[0]) >= 4


def captures(lens: psheads.RopeLens, tokens: torch.Tensor, monkeypatch: pytest.MonkeyPatch, sdpa: bool) -> dict:
    monkeypatch.setattr(backends.base, "SCORES_BYTES", -1 if sdpa else 2**62)
    layers = list(range(lens.n_layers))
    query = torch.full((len(tokens),), tokens.shape[1] - 1)
    with lens.backend.analysis():
        return lens.backend.capture(tokens, layers, query_index=query)


@pytest.mark.parametrize("family", FAMILIES)
def test_sdpa_capture_matches_the_eager_one(model_factory, family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = model_factory(family)
    lens = psheads.RopeLens(model)
    ready = lens.backend.sdpa_ready(list(range(lens.n_layers)))
    if TL4:
        assert ready == (family in SDPA_FAMILIES)
    if not ready:
        pytest.skip(f"{family}: captured with the bridge's eager attention at every length")
    tokens = torch.randint(0, 64, (3, 40))
    eager, sdpa = captures(lens, tokens, monkeypatch, False), captures(lens, tokens, monkeypatch, True)
    for name in ("q", "k", "cos", "sin"):
        assert torch.equal(getattr(eager[0], name), getattr(sdpa[0], name)), name  # the same input, the same modules
        for layer in eager:
            torch.testing.assert_close(getattr(sdpa[layer], name), getattr(eager[layer], name), atol=1e-5, rtol=1e-5)
    monkeypatch.setattr(backends.base, "SCORES_BYTES", 2**62)
    reference = psheads.score_heads(lens, tokens, progress=False)
    monkeypatch.setattr(backends.base, "SCORES_BYTES", -1)
    scored = psheads.score_heads(lens, tokens, progress=False)
    for column in ("positional", "symbolic", "entropy"):
        torch.testing.assert_close(torch.tensor(scored[column].to_numpy()), torch.tensor(reference[column].to_numpy()),
                                   atol=1e-5, rtol=0)


def test_sdpa_capture_forms_no_pattern_and_leaves_the_model_as_it_was(model_factory,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    model = model_factory("gemma3")  # QK-norm, sliding-window layers, GQA
    lens = psheads.RopeLens(model)
    if not lens.backend.sdpa_ready(list(range(lens.n_layers))):
        pytest.skip("this TransformerLens bridge does not expose its Hugging Face attention")
    before = model_state(model)
    config = model.original_model.config
    implementation = config._attn_implementation
    fired = []
    counters = [(f"blocks.{layer}.attn.hook_attn_scores", lambda tensor, hook: fired.append(hook.name))
                for layer in range(lens.n_layers)]
    tokens = torch.randint(0, 64, (2, 33))
    with model.hooks(fwd_hooks=counters):
        captures(lens, tokens, monkeypatch, True)
    assert fired == []  # no layer formed its [query, key] scores
    with model.hooks(fwd_hooks=counters):
        captures(lens, tokens, monkeypatch, False)
    assert fired  # the eager capture does: the counter works
    assert model_state(model) == before
    assert config._attn_implementation == implementation
    blocks = [block.original_component for block in model.blocks]
    assert all(any(child is block_bridge.attn for child in block.children())
               for block, block_bridge in zip(blocks, model.blocks, strict=True))

    def broken(tokens: torch.Tensor) -> None:  # fails inside the swapped-in forward
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(lens.backend, "forward", broken)
    with pytest.raises(RuntimeError, match="broken on purpose"):
        captures(lens, torch.randint(0, 64, (1, 5)), monkeypatch, True)
    assert model_state(model) == before and config._attn_implementation == implementation
    assert all(any(child is block_bridge.attn for child in block.children())
               for block, block_bridge in zip(blocks, model.blocks, strict=True))


def test_inputs_whose_eager_scores_exceed_the_budget_take_sdpa(model_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (2, 24))
    size = lens.backend.scores_bytes(tokens.shape)
    assert size == 2 * int(lens.backend.cfg.n_heads) * 24 * 24 * 4  # [batch, head, query, key] fp32
    layers = list(range(lens.n_layers))
    for budget, eager in ((size, True), (size - 1, False)):  # at the budget: eager; one byte over: SDPA
        monkeypatch.setattr(backends.base, "SCORES_BYTES", budget)
        fired = []
        counters = [(f"blocks.{layer}.attn.hook_attn_scores", lambda tensor, hook, fired=fired: fired.append(1))
                    for layer in layers]
        with model.hooks(fwd_hooks=counters), lens.backend.analysis():
            lens.backend.capture(tokens, layers, query_index=torch.tensor([23, 23]))
        assert bool(fired) == eager


@pytest.mark.parametrize("sdpa", [True, False], ids=["sdpa", "eager"])
def test_streamed_capture_hands_over_each_layer_during_the_forward_and_keeps_none(model_factory, sdpa: bool,
                                                                                  monkeypatch) -> None:
    import weakref

    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    layers = list(range(lens.n_layers))
    assert len(layers) >= 2
    tokens = torch.randint(0, 64, (2, 17))
    query = torch.full((2,), 16)
    whole = captures(lens, tokens, monkeypatch, sdpa)
    ran = []  # the blocks whose forward has started
    handles = [model.blocks[layer].register_forward_pre_hook(lambda module, args, layer=layer: ran.append(layer))
               for layer in layers]
    seen, alive = [], []

    def on_layer(layer: int, capture) -> None:
        assert all(ref() is None for ref in alive)  # every earlier capture is gone: nothing keeps it
        seen.append((layer, max(ran)))
        for name in ("q", "k", "cos", "sin"):
            assert torch.equal(getattr(capture, name), getattr(whole[layer], name)), (layer, name)
        alive.append(weakref.ref(capture.k))

    try:
        with lens.backend.analysis():
            assert lens.backend.capture(tokens, layers, query_index=query, on_layer=on_layer) == {}
    finally:
        for handle in handles:
            handle.remove()
    assert [layer for layer, _ in seen] == layers
    # each layer but the last is handed over while the next one runs, before the forward goes on
    assert [block for _, block in seen[:-1]] == layers[1:]
    assert seen[-1][1] == layers[-1]


def test_a_failing_stream_leaves_the_model_as_it_was(model_factory, monkeypatch) -> None:
    model = model_factory("gemma3")
    lens = psheads.RopeLens(model)
    before = model_state(model)
    monkeypatch.setattr(backends.base, "SCORES_BYTES", -1)

    def broken(layer: int, capture) -> None:
        raise RuntimeError("broken on purpose")

    with pytest.raises(RuntimeError, match="broken on purpose"), lens.backend.analysis():
        lens.backend.capture(torch.randint(0, 64, (1, 9)), [0, 1], query_index=torch.tensor([8]), on_layer=broken)
    assert model_state(model) == before
    with pytest.raises(ValueError, match="not both"):
        lens.backend.capture(torch.randint(0, 64, (1, 9)), [0, 1], with_pattern=True, on_layer=broken)
