"""Keys hidden inside a model's own forward, the attention shape of a model, and the logits at chosen positions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from psheads.rope.backends import attention_shape, masked_keys
from psheads.rope.backends.facts import logits_at
from psheads.rope.backends.key_masks import narrowed_mask
from tests import helpers


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> dict:
    directory: Path = tmp_path_factory.mktemp("keys")
    helpers.save_tiny("llama", directory)
    load = transformers.AutoModelForCausalLM.from_pretrained
    return {"sdpa": load(directory, attn_implementation="sdpa").eval(), "bridge": helpers.boot_bridge(directory),
            "directory": directory}


def test_the_shape_is_read_off_both_kinds_of_model_alike(llama: dict) -> None:
    hf, bridge = attention_shape(llama["sdpa"]), attention_shape(llama["bridge"])
    assert hf == bridge
    assert (hf.layers, hf.n_heads, hf.n_kv_heads, hf.kv_head_of) == ((0, 1), 4, 2, (0, 0, 1, 1))
    assert hf.name == llama["directory"].name


def test_a_mask_hiding_every_key_but_the_query_itself_makes_attention_local(llama: dict) -> None:
    """The first position sees only itself anyway: it matches the model run on the first token alone."""
    x = torch.randint(1, helpers.VOCAB, (1, 12), generator=torch.Generator().manual_seed(0))

    def only_self(layer: int, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return (queries[:, None] == keys[None, :])[None]

    with torch.no_grad():
        plain = llama["sdpa"](x).logits
        with masked_keys(llama["sdpa"], only_self):
            local = llama["sdpa"](x).logits
        single = llama["sdpa"](x[:, :1]).logits
    torch.testing.assert_close(local[:, :1], plain[:, :1])
    torch.testing.assert_close(local[:, :1], single)
    assert not torch.allclose(local[:, 1:], plain[:, 1:], atol=1e-4)


def test_narrowed_masks_keep_the_model_s_kind_of_mask() -> None:
    queries, keys = torch.arange(2, 4), torch.arange(4)
    keep = torch.tensor([[True, False, True, True], [False, False, True, True]])[None]
    boolean = narrowed_mask(None, keep, queries, keys, True, torch.float32)
    assert boolean.dtype == torch.bool and boolean[0, 0].tolist() == [[True, False, True, False],
                                                                        [False, False, True, True]]
    additive = narrowed_mask(None, keep, queries, keys, False, torch.float32)
    assert additive.dtype == torch.float32 and (additive[0, 0] == 0).tolist() == boolean[0, 0].tolist()
    given = torch.zeros(1, 1, 2, 4)
    assert (narrowed_mask(given, keep, queries, keys, True, torch.float32)[0, 0] == 0).tolist() == keep[0].tolist()


def test_flash_or_flex_attention_is_refused_with_what_to_do(llama: dict) -> None:
    model = llama["sdpa"]
    model.set_attn_implementation("eager")
    try:
        model.config._attn_implementation = "flex_attention"
        with pytest.raises(ValueError, match="attn_implementation='sdpa'"), masked_keys(model, lambda *a: None):
            pass
    finally:
        model.set_attn_implementation("sdpa")


@pytest.mark.parametrize("kind", ["sdpa", "bridge"])
def test_logits_at_chosen_positions_are_the_full_logits_there(llama: dict, kind: str) -> None:
    model = llama[kind]
    x = torch.randint(1, helpers.VOCAB, (3, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(x)
        full = full.logits if hasattr(full, "logits") else full
        for positions in (torch.tensor([[3, 9, 15]] * 3), torch.tensor([[0, 1, 2], [5, 6, 7], [13, 14, 15]])):
            picked = logits_at(model, x, positions)
            expected = full.gather(1, positions[..., None].expand(-1, -1, full.shape[-1]))
            torch.testing.assert_close(picked, expected, rtol=1e-5, atol=1e-5)
