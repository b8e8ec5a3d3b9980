"""Sanity checks of the brute-force swap oracle itself (tests/oracle.py): it must be trustworthy."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch
import transformers

from tests import helpers
from tests.conftest import model_state
from tests.oracle import (
    brute_force_swap_attention,
    make_blocks,
    swap_scores_from_attention,
)

FAMILIES = ["llama", "gptj", "gemma2"]  # GQA; parallel attn+MLP; sliding window 5 on layer 0 + soft-cap


def _pattern_row(model, tokens: torch.Tensor, layer: int, query: int) -> torch.Tensor:
    """Plain run of ``tokens`` [batch, pos]: the layer's attention at the query, fp64 [batch, head, query+1]."""
    captured = {}

    def grab(pattern, hook):
        captured["p"] = pattern[:, :, query, : query + 1].detach().to(torch.float64).clone()

    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_pattern", grab)])
    return captured["p"]


def _swap_tokens(tokens: torch.Tensor, block_i: torch.Tensor, block_j: torch.Tensor) -> torch.Tensor:
    swapped = tokens.clone()
    swapped[block_i], swapped[block_j] = tokens[block_j], tokens[block_i]
    return swapped


# ---------------------------------------------------------------------------------------------
# make_blocks and the score arithmetic on hand-made inputs
# ---------------------------------------------------------------------------------------------

def test_make_blocks_examples() -> None:
    assert make_blocks([1, 2, 3, 4, 5, 6, 7], 2).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert make_blocks([1, 2, 3, 4, 5, 6], 3).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert make_blocks(torch.tensor([4, 9, 2]), 1).tolist() == [[4], [9], [2]]
    assert make_blocks(range(1, 6), 5).tolist() == [[1, 2, 3, 4, 5]]
    empty = make_blocks([1, 2, 3], 4)
    assert empty.shape == (0, 4) and empty.dtype == torch.long
    assert make_blocks([3, 5, 8, 13, 21], 2).dtype == torch.long
    with pytest.raises(ValueError):
        make_blocks([1, 2], 0)


def _pairs(n_blocks: int) -> torch.Tensor:
    return torch.tensor(list(itertools.combinations(range(n_blocks), 2)))


def test_scores_positional_head() -> None:
    d_base = torch.tensor([[0.5, 0.2, 0.1, 0.05], [0.1, 0.1, 0.3, 0.4]], dtype=torch.float64)
    pairs = _pairs(4)
    d_swapped = torch.stack([d_base[:, [i, j]] for i, j in pairs.tolist()])  # unchanged by every swap
    s_pos, s_sym = swap_scores_from_attention(d_base, d_swapped, pairs)
    assert s_pos.dtype == s_sym.dtype == torch.float64 and s_pos.shape == (2,)
    torch.testing.assert_close(s_pos, torch.ones(2, dtype=torch.float64), atol=1e-12, rtol=0)
    # α is essentially one-hot on the pair with the largest gap: (0, 3) for head 0, (0, 3)/(1, 3) tie for head 1
    a, b = 0.5, 0.05
    assert s_sym[0].item() == pytest.approx(2 * a * b / (a * a + b * b), abs=1e-12)
    expected_1 = 2 * 0.1 * 0.4 / (0.1 ** 2 + 0.4 ** 2)  # both tied pairs are (0.1, 0.4)
    assert s_sym[1].item() == pytest.approx(expected_1, abs=1e-12)


def test_scores_symbolic_head() -> None:
    d_base = torch.tensor([[0.6, 0.1, 0.2], [0.3, 0.3, 0.05]], dtype=torch.float64)
    pairs = _pairs(3)
    d_swapped = torch.stack([d_base[:, [j, i]] for i, j in pairs.tolist()])  # attention follows the content
    s_pos, s_sym = swap_scores_from_attention(d_base, d_swapped, pairs)
    torch.testing.assert_close(s_sym, torch.ones(2, dtype=torch.float64), atol=1e-12, rtol=0)
    assert s_pos[0].item() == pytest.approx(2 * 0.6 * 0.1 / (0.36 + 0.01), abs=1e-12)


def test_scores_weights_follow_the_definition() -> None:
    """Gaps of order τ: α is a genuine softmax, compared against a direct evaluation of §2.1."""
    tau = 1e-4
    d_base = torch.tensor([[0.40000, 0.40010, 0.40025]], dtype=torch.float64)
    pairs = _pairs(3)
    d_swapped = torch.tensor([[[0.3, 0.5]], [[0.45, 0.35]], [[0.2, 0.6]]], dtype=torch.float64)
    s_pos, s_sym = swap_scores_from_attention(d_base, d_swapped, pairs, tau=tau)
    gaps = [abs(d_base[0, i] - d_base[0, j]).item() / tau for i, j in pairs.tolist()]
    alpha = [math.exp(g) / sum(math.exp(x) for x in gaps) for g in gaps]

    def cos(u, v):
        return (u[0] * v[0] + u[1] * v[1]) / math.hypot(*u) / math.hypot(*v)

    want_pos = sum(alpha[p] * cos(d_swapped[p, 0].tolist(), d_base[0, [i, j]].tolist())
                   for p, (i, j) in enumerate(pairs.tolist()))
    want_sym = sum(alpha[p] * cos(d_swapped[p, 0].tolist(), d_base[0, [j, i]].tolist())
                   for p, (i, j) in enumerate(pairs.tolist()))
    assert s_pos.item() == pytest.approx(want_pos, abs=1e-12)
    assert s_sym.item() == pytest.approx(want_sym, abs=1e-12)
    assert min(alpha) > 0.1 and max(alpha) < 0.8  # the test really exercises a mix of swaps


def test_scores_are_stable_for_huge_gaps() -> None:
    """|Δd|/τ up to 1e4: no overflow, α is the argmax."""
    d_base = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    pairs = _pairs(3)
    d_swapped = torch.tensor([[[0.0, 1.0]], [[0.0, 1.0]], [[0.5, 0.5]]], dtype=torch.float64)
    s_pos, s_sym = swap_scores_from_attention(d_base, d_swapped, pairs)
    assert torch.isfinite(s_pos).all() and torch.isfinite(s_sym).all()
    assert s_pos.item() == pytest.approx(0.0, abs=1e-12)
    assert s_sym.item() == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# the oracle on tiny models
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_output_format(model_factory, family) -> None:
    model = model_factory(family)
    tokens = torch.randint(1, helpers.VOCAB, (12,))
    blocks = make_blocks(range(1, 11), 3)  # 3 blocks of 3, position 10 left out
    out = brute_force_swap_attention(model, tokens, layer=1, query=11, blocks=blocks)
    n_heads = model.cfg.n_heads
    assert out["pairs"].tolist() == [[0, 1], [0, 2], [1, 2]]
    assert out["base"].shape == (n_heads, 12) and out["base"].dtype == torch.float64
    assert out["swapped"].shape == (3, n_heads, 12) and out["swapped"].dtype == torch.float64
    assert out["d_base"].shape == (n_heads, 3) and out["d_swapped"].shape == (3, n_heads, 2)
    torch.testing.assert_close(out["base"].sum(-1), torch.ones(n_heads, dtype=torch.float64), atol=1e-5, rtol=0)
    torch.testing.assert_close(out["base"], _pattern_row(model, tokens[None], 1, 11)[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(out["d_base"][:, 1], out["base"][:, 4:7].sum(-1))
    torch.testing.assert_close(out["d_swapped"][1, :, 1], out["swapped"][1][:, 7:10].sum(-1))
    s_pos, s_sym = swap_scores_from_attention(out["d_base"], out["d_swapped"], out["pairs"])
    assert ((s_pos >= -1 - 1e-12) & (s_pos <= 1 + 1e-12)).all() and ((s_sym >= -1) & (s_sym <= 1 + 1e-12)).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_identical_blocks_swap_is_identity_at_layer_0(model_factory, family) -> None:
    """At layer 0 the hidden state is the token embedding: swapping equal tokens changes nothing."""
    model = model_factory(family)
    tokens = torch.tensor([1, 5, 9, 13, 5, 9, 17, 21, 25, 33, 40])
    query = 10
    blocks = torch.tensor([[1, 2], [3, 6], [4, 5]])  # blocks 0 and 2 both hold (5, 9)
    out = brute_force_swap_attention(model, tokens, layer=0, query=query, blocks=blocks)
    pairs = out["pairs"].tolist()
    same = pairs.index([0, 2])
    torch.testing.assert_close(out["swapped"][same], out["base"], atol=1e-6, rtol=0)
    # the other swaps exchange different tokens and must move the attention of some head
    for p in (pairs.index([0, 1]), pairs.index([1, 2])):
        assert (out["swapped"][p] - out["base"]).abs().max() > 1e-3


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("block_size", [1, 2])
def test_layer_0_swap_equals_token_swap(model_factory, family, block_size) -> None:
    """At layer 0 swapping hidden states == swapping the input tokens (RoPE embeds no position)."""
    model = model_factory(family)
    tokens = torch.randperm(helpers.VOCAB - 1)[:11] + 1
    query = 10
    blocks = make_blocks([1, 3, 5, 6, 7, 8, 9], block_size)  # gemma2 layer 0: window 5 → keys 6..10 visible
    out = brute_force_swap_attention(model, tokens, layer=0, query=query, blocks=blocks)
    swapped_prompts = torch.stack([_swap_tokens(tokens, blocks[i], blocks[j]) for i, j in out["pairs"].tolist()])
    expected = _pattern_row(model, swapped_prompts, 0, query)
    torch.testing.assert_close(out["swapped"], expected, atol=1e-6, rtol=0)
    assert (out["swapped"] - out["base"]).abs().max() > 1e-3
    if family == "gemma2":  # sliding window 5 on layer 0: keys 0..5 are masked for the query at 10
        assert out["base"][:, : query - 4].abs().max() == 0
        assert out["swapped"][:, :, : query - 4].abs().max() == 0


def _hf_swapped_pattern(directory: Path, tokens: torch.Tensor, layer: int, query: int,
                        perm: torch.Tensor) -> torch.Tensor:
    """TransformerLens-free reference: HF eager model, a pre-hook permuting the layer's input."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    layers = hf.transformer.h if hasattr(hf, "transformer") else hf.model.layers

    def permute(module, args, kwargs):
        if args:
            return (args[0][:, perm],) + args[1:], kwargs
        return args, {**kwargs, "hidden_states": kwargs["hidden_states"][:, perm]}

    handle = layers[layer].register_forward_pre_hook(permute, with_kwargs=True)
    try:
        with torch.no_grad():
            attentions = hf(tokens[None], output_attentions=True).attentions
    finally:
        handle.remove()
    return attentions[layer][0, :, query, : query + 1].to(torch.float64)


@pytest.fixture(scope="module")
def saved_dirs(tmp_path_factory) -> dict:
    return {family: helpers.save_tiny(family, tmp_path_factory.mktemp("o")) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_1_matches_a_huggingface_rerun(saved_dirs, family) -> None:
    """Above layer 0 (hidden states ≠ embeddings): same swapped attention as HF's own layer, re-run
    on the permuted hidden states (GPT-J: the permuted residual feeds attention, MLP and skip alike)."""
    directory = saved_dirs[family]
    model = helpers.boot_bridge(directory)
    tokens = torch.randint(1, helpers.VOCAB, (13,))
    query, layer = 11, 1
    blocks = make_blocks(range(1, 11), 2)
    out = brute_force_swap_attention(model, tokens, layer=layer, query=query, blocks=blocks)
    n_pos = tokens.shape[0]
    for p in (0, 4, len(out["pairs"]) - 1):
        i, j = out["pairs"][p].tolist()
        perm = torch.arange(n_pos)
        perm[blocks[i]], perm[blocks[j]] = blocks[j], blocks[i]
        expected = _hf_swapped_pattern(directory, tokens, layer, query, perm)
        torch.testing.assert_close(out["swapped"][p], expected, atol=1e-6, rtol=0)
    expected_base = _hf_swapped_pattern(directory, tokens, layer, query, torch.arange(n_pos))
    torch.testing.assert_close(out["base"], expected_base, atol=1e-6, rtol=0)


def test_model_is_left_unchanged(model_factory) -> None:
    model = model_factory("llama")
    tokens = torch.randint(1, helpers.VOCAB, (10,))
    blocks = make_blocks(range(1, 9), 2)
    model(tokens[None])  # the bridge wires its own capture hooks on the first forward
    model.train()
    model.blocks[1].eval()  # a mixed, user-chosen state
    before = model_state(model)
    logits = model(tokens[None])
    try:
        brute_force_swap_attention(model, tokens, layer=1, query=9, blocks=blocks)
        assert model_state(model) == before
        assert all(len(m._forward_hooks) == 0 for m in model.modules() if hasattr(m, "add_hook"))
        with pytest.raises(IndexError, match="out of range"):  # an error inside the hooked forward
            brute_force_swap_attention(model, torch.full((10,), 10_000), layer=1, query=9, blocks=blocks)
        assert model_state(model) == before
        torch.testing.assert_close(model(tokens[None]), logits, atol=0, rtol=0)
    finally:
        model.eval()


def test_rejects_bad_blocks(model_factory) -> None:
    model = model_factory("llama")
    tokens = torch.randint(1, helpers.VOCAB, (10,))
    for blocks in (torch.tensor([[1, 2]]), torch.tensor([[1, 2], [2, 3]]), torch.tensor([[1, 2], [8, 9]]),
                   torch.tensor([1, 2, 3])):
        with pytest.raises(ValueError):
            brute_force_swap_attention(model, tokens, layer=0, query=9, blocks=blocks)


def test_batching_does_not_change_the_result(model_factory) -> None:
    model = model_factory("gptj")
    tokens = torch.randint(1, helpers.VOCAB, (12,))
    blocks = make_blocks(range(1, 11), 2)
    one = brute_force_swap_attention(model, tokens, layer=1, query=11, blocks=blocks)
    many = brute_force_swap_attention(model, tokens, layer=1, query=11, blocks=blocks, max_batch=3)
    for key in ("base", "swapped", "d_base", "d_swapped"):
        torch.testing.assert_close(one[key], many[key], atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------------------------
# HookedTransformer (TransformerLens 3.x only)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["llama", "gptj"])
def test_hooked_backend_agrees_with_the_bridge(model_factory, family) -> None:
    hooked = model_factory(family, "hooked")  # skips on TransformerLens 4.x
    bridge = model_factory(family)  # same seed → same weights
    tokens = torch.randint(1, helpers.VOCAB, (12,))
    for layer, blocks in ((0, make_blocks([1, 3, 5, 7, 9], 1)), (1, make_blocks(range(1, 11), 2))):
        a = brute_force_swap_attention(hooked, tokens, layer=layer, query=11, blocks=blocks)
        b = brute_force_swap_attention(bridge, tokens, layer=layer, query=11, blocks=blocks)
        torch.testing.assert_close(a["base"], b["base"], atol=1e-5, rtol=0)
        torch.testing.assert_close(a["swapped"], b["swapped"], atol=1e-5, rtol=0)
    blocks = make_blocks([1, 3, 5, 7, 9], 1)
    layer0 = brute_force_swap_attention(hooked, tokens, layer=0, query=11, blocks=blocks)
    swapped_prompts = torch.stack([_swap_tokens(tokens, blocks[i], blocks[j]) for i, j in layer0["pairs"].tolist()])
    torch.testing.assert_close(layer0["swapped"], _pattern_row(hooked, swapped_prompts, 0, 11), atol=1e-6, rtol=0)
