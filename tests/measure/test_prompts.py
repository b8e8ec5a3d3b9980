"""Prompt options: validation, JSON round trips, and prepared prompt sets."""

from __future__ import annotations

import dataclasses

import pandas as pd
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


def _texts() -> list[str]:
    return ["t5 t9 t3 t7 t2 t8 t4", "t6 t1 t9 t4", "t3 t3 t8 t2 t9 t1"]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("tensors", [True, False], ids=["tensors", "lists"])
def test_a_tokenizer_s_padded_output_scores_each_prompt_as_if_alone(model_factory, side: str, tensors: bool) -> None:
    """What users pass: tokenizer(texts, padding=True). Each prompt must score as it does alone,
    whether the batch is padded on the right or the left, as tensors or as lists."""
    model = model_factory("llama")
    tokenizer = model.tokenizer
    tokenizer.padding_side = side
    try:
        encoding = tokenizer(_texts(), padding=True, return_tensors="pt" if tensors else None)
    finally:
        tokenizer.padding_side = "right"
    alone = [torch.tensor(tokenizer(text)["input_ids"]) for text in _texts()]
    expected = psheads.score_heads(model, alone, progress=False)
    for prompts in (encoding, dict(encoding)):
        frame = psheads.score_heads(model, prompts, progress=False)
        for column in ("positional", "symbolic", "entropy"):
            assert frame[column].to_numpy() == pytest.approx(expected[column].to_numpy(), abs=1e-6)
    profile = psheads.frequency_profile(model, encoding, progress=False).heads
    reference = psheads.frequency_profile(model, alone, progress=False).heads
    assert profile["mean_frequency_id"].to_numpy() == pytest.approx(reference["mean_frequency_id"].to_numpy(),
                                                                     abs=1e-6)


def test_a_padded_batch_without_its_mask_warns(model_factory) -> None:
    """The silent 0.69: a right-padded id tensor scored with the pad token as the query."""
    model = model_factory("llama")
    tokenizer = model.tokenizer
    encoding = tokenizer(_texts(), padding=True, return_tensors="pt")
    with pytest.warns(UserWarning, match=r"Prompts \[1, 2\] begin or end with the tokenizer's pad token .*attention"):
        psheads.score_heads(model, encoding["input_ids"], progress=False)
    with pytest.warns(UserWarning, match="pad token"):
        psheads.score_heads(model, encoding["input_ids"].tolist(), progress=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        psheads.score_heads(model, encoding, progress=False)  # the mask says what is padding
        psheads.score_heads(model, torch.tensor([[5, 9, 3, 7]]), progress=False)


def test_masks_and_odd_prompt_containers_get_one_clear_line(model_factory) -> None:
    model = model_factory("llama")
    ids = torch.tensor([[5, 9, 3, 7, 2]])
    with pytest.raises(ValueError, match="hides tokens between kept ones"):
        psheads.score_heads(model, {"input_ids": ids, "attention_mask": torch.tensor([[1, 1, 0, 1, 1]])})
    with pytest.raises(ValueError, match="keeps no token"):
        psheads.score_heads(model, {"input_ids": ids, "attention_mask": torch.zeros(1, 5, dtype=torch.long)})
    with pytest.raises(ValueError, match="does not match"):
        psheads.score_heads(model, {"input_ids": ids, "attention_mask": torch.ones(1, 4, dtype=torch.long)})
    with pytest.raises(TypeError, match="without 'input_ids'"):
        psheads.score_heads(model, {"ids": ids})
    with pytest.raises(ValueError, match="meta device"):
        psheads.score_heads(model, torch.zeros(2, 5, dtype=torch.long, device="meta"))
    with pytest.raises(TypeError, match="RopeLens methods take one LongTensor"):
        psheads.RopeLens(model).frequency_logits(model.tokenizer(_texts()[:1], return_tensors="pt"), 0)
    import numpy as np

    texts = np.array(_texts(), dtype=object)  # df["text"].values
    strings = psheads.score_heads(model, texts, progress=False)
    assert strings["positional"].to_numpy() == pytest.approx(
        psheads.score_heads(model, list(texts), progress=False)["positional"].to_numpy())
    assert psheads.score_heads(model, np.array(_texts()), progress=False)["n_prompts"].eq(3).all()


def test_unsigned_id_arrays_that_fit_score_as_int64(model_factory) -> None:
    """nanoGPT's token files are uint16: numpy and torch unsigned ids score as the same ids in int64."""
    import numpy as np

    model = model_factory("llama")
    tokens = torch.tensor([[5, 9, 3, 7, 2, 8], [6, 1, 9, 4, 4, 2]])
    expected = psheads.score_heads(model, tokens, progress=False)
    arrays = [tokens.numpy().astype(dtype) for dtype in (np.uint16, np.uint32, np.uint64)]
    arrays += [tokens.to(dtype) for dtype in (torch.uint16, torch.uint32, torch.uint64)]
    for prompts in [*arrays, list(arrays[0]), list(arrays[-1])]:
        frame = psheads.score_heads(model, prompts, progress=False)
        pd.testing.assert_frame_equal(frame, expected, check_exact=True)


def test_token_ids_that_cannot_be_ids_are_named_with_their_row(model_factory) -> None:
    import numpy as np

    model = model_factory("llama")
    vocab = model.cfg.d_vocab
    with pytest.raises(ValueError, match=r"Prompt 1 is empty"):
        psheads.score_heads(model, [[5, 6, 7], []])
    cases = {
        f"prompt 0 holds {2**70} at position 2": [[5, 6, 2**70]],
        f"prompt 1 holds {2**63} at position 0": [[5, 6], np.array([2**63, 1], dtype=np.uint64)],
        f"prompt 1 holds {2**64 - 1} at position 1": np.array([[5, 6], [3, 2**64 - 1]], dtype=np.uint64),
        f"prompt 1 holds {2**64 - 1} at position 1 ": torch.tensor([[5, 6], [3, -1]]).to(torch.uint64),
        f"prompt 1 holds {vocab} at position 2": torch.tensor([[5, 6, 7], [3, 4, vocab]]),
        "prompt 2 holds -1 at position 0": [[5, 6], [3], [-1, 4]],
        f"prompt 0 holds {2**40} at position 1": [[5, 2**40]],
    }
    for message, prompts in cases.items():
        with pytest.raises(ValueError, match=rf"Token ids must lie in \[0, {vocab}\): {message.strip()}"):
            psheads.score_heads(model, prompts)


def test_a_left_padded_batch_whose_pad_is_bos_warns_without_its_mask(model_factory) -> None:
    """Pythia's set-up: the pad id is the BOS id, so left padding is a run of BOS tokens (scored 0.64 away)."""
    import warnings

    model = model_factory("llama")
    tokenizer = model.tokenizer
    pad, side = tokenizer.pad_token, tokenizer.padding_side
    tokenizer.pad_token, tokenizer.padding_side = tokenizer.bos_token, "left"
    try:
        assert tokenizer.pad_token_id == tokenizer.bos_token_id
        encoding = tokenizer(_texts(), padding=True, return_tensors="pt")
        for ids in (encoding["input_ids"], encoding["input_ids"].tolist()):
            # prompt 1 has 3 pads; prompt 2 has one, which cannot be told from a BOS the prompt starts with
            with pytest.warns(UserWarning, match=r"Prompts \[1\] begin with a run of the tokenizer's pad token "
                                                 r".*its BOS token.*attention mask"):
                psheads.score_heads(model, ids, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            psheads.score_heads(model, encoding, progress=False)  # the mask says what is padding
            psheads.score_heads(model, encoding["input_ids"][:1], progress=False)  # one BOS: no padding
    finally:
        tokenizer.pad_token, tokenizer.padding_side = pad, side
