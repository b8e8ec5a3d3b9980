"""Prompt options: validation, JSON round trips, and prepared prompt sets."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import psheads
from psheads.measure.prompts import PromptOptions, prepare_prompts


@pytest.mark.parametrize("options", [
    PromptOptions(),
    PromptOptions(query=-2, swappable=slice(1, None, 2), exclude_bos=True, prepend_bos=False),
    PromptOptions(query=[5, 6], swappable=[[1, 2, 3], [0, 4]]),
    PromptOptions(swappable=(2, 3, 4)),
])
def test_options_round_trip_through_json(options) -> None:
    import json

    assert PromptOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options


def test_options_normalise_and_validate() -> None:
    import numpy as np

    assert PromptOptions(query=np.int64(3)).query == 3
    assert PromptOptions(query=[torch.tensor(1), 2]).query == (1, 2)
    assert PromptOptions(swappable=[torch.tensor(1), 2]).swappable == (1, 2)
    assert PromptOptions(swappable=[[1], (2, 3)]).swappable == ((1,), (2, 3))
    with pytest.raises(TypeError, match="query must be an int"):
        PromptOptions(query=1.5)
    with pytest.raises(TypeError, match="swappable must be a slice"):
        PromptOptions(swappable="1:3")
    with pytest.raises(TypeError, match="exclude_bos must be True, False or None"):
        PromptOptions(exclude_bos=1)


def test_prompt_sets_batch_and_group(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("mistral"))  # window 5
    prompts = prepare_prompts(lens.backend, torch.randint(0, 64, (5, 9)))
    assert prompts.stacked is not None and len(prompts) == 5
    batches = list(prompts.batches(2))
    assert [indices for indices, _, _ in batches] == [[0, 1], [2, 3], [4]]
    assert all(tokens.data_ptr() == prompts.stacked[indices[0]].data_ptr() for indices, tokens, _ in batches)
    windowed, unwindowed = lens.layers[0], dataclasses.replace(lens.layers[1], window=None)
    assert windowed.window == 5
    (group,) = prompts.key_groups([0, 1], windowed, minimum=1, need="one key")
    assert group.swappable == (4, 5, 6, 7) and group.others == (8,)
    (unwindowed,) = prompts.key_groups([0, 1], unwindowed, minimum=1, need="one key")
    assert unwindowed.swappable == tuple(range(8))
    ragged = prepare_prompts(lens.backend, [[1, 2, 3, 4], [5, 6, 7, 8, 9, 10]])
    assert ragged.stacked is None
    ((_, tokens, query),) = ragged.batches(2)
    assert tokens.tolist() == [[1, 2, 3, 4, 0, 0], [5, 6, 7, 8, 9, 10]] and query.tolist() == [3, 5]
    open_layer = dataclasses.replace(lens.layers[0], window=None)
    groups = ragged.key_groups([0, 1], open_layer, minimum=2, need="two keys")
    assert [g.prompts for g in groups] == [[0], [1]]
    with pytest.raises(ValueError, match="Prompt 0 has 3 swappable keys at layer 0 .* fewer than five"):
        ragged.key_groups([0, 1], open_layer, minimum=5, need="five")


def test_text_longer_than_the_context_is_never_cut_silently(model_factory) -> None:
    """TransformerLens' to_tokens truncates to n_ctx; psheads tokenises in full and applies its own rule:
    beyond the context a warning (tables computed per input), beyond the position table an error."""
    text = " ".join(f"t{1 + i % 60}" for i in range(100))  # 100 words, no BOS in this tokenizer: 100 tokens
    llama = model_factory("llama", max_position_embeddings=48)
    with pytest.warns(UserWarning, match="exceeds the model's context of 48 tokens"):
        swaps = psheads.swap_attention(llama, text, layer=0, head=0)
    assert swaps.attrs["query"] == 99  # the last word, not position 47
    with pytest.warns(UserWarning, match="exceeds the model's context"):
        assert psheads.score_heads(llama, [text], layers=[0])["n_prompts"].eq(1).all()
    with pytest.raises(ValueError, match="Sequence length 100 exceeds the model's context of 48 tokens"):
        psheads.frequency_profile(model_factory("gptj", n_positions=48), [text])


def test_bytes_are_refused_not_read_as_token_ids(model_factory) -> None:
    model = model_factory("llama")
    for prompts in ([b"t1 t2 t3"], [bytearray(b"t1 t2 t3")], b"t1 t2 t3"):
        with pytest.raises(TypeError, match="bytes.*decode"):
            psheads.score_heads(model, prompts)
