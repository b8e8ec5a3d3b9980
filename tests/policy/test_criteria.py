"""The anchors' criteria, measured through the bridge's pattern hook, against Hugging Face's own eager
attention weights computed independently here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from psheads.policy import HeadPolicy
from psheads.policy.criteria import CRITERIA, REPEATS, _razor, anchor_scores, copy_positions, repeated_random
from psheads.tasks.long_context import long_context_task
from tests import helpers

LENGTH, SINK, RECENT = 400, 8, 32


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny random Llama (GQA) over a BPE tokenizer trained on the shipped prose."""
    tokenizer = helpers.prose_bpe_tokenizer(800)
    directory: Path = tmp_path_factory.mktemp("criteria")
    helpers.save_tiny("llama", directory, vocab_size=len(tokenizer))
    tokenizer.save_pretrained(directory)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()
    return {"model": model, "tokenizer": tokenizer}


def eager_patterns(model: Any, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's attention weights ``[head, query, key]`` from Hugging Face's eager attention."""
    with torch.no_grad():
        out = model(input_ids=tokens, output_attentions=True)
    return [layer[0].double() for layer in out.attentions]


def test_the_criteria_match_hugging_face_s_own_attention_weights(tiny: dict) -> None:
    model, tokenizer = tiny["model"], tiny["tokenizer"]
    frame = anchor_scores(model, tokenizer, LENGTH, n_prompts=1, seed=5, sink=SINK, recent=RECENT, progress=False)
    assert list(frame.columns) == ["layer", "head", "kv_head", *CRITERIA]
    needles = long_context_task("needle").generate(tokenizer, LENGTH, 1, seed=5)
    tokens = needles.tokens
    rows, copies = [], []
    for start, stop in needles.spans[0]:
        needle = copy_positions(tokens[0], start, stop)
        assert needle is not None and tokens[0, needle].tolist() == tokens[0, start:stop].tolist()
        rows += list(range(start - 1, stop - 1))
        copies += needle
    period = (LENGTH - 1) // REPEATS
    repeated = repeated_random(tokenizer, LENGTH, 5, int(tokens[0, 0]))
    positions = torch.arange(LENGTH)
    beyond = (positions[None] >= SINK) & (positions[:, None] - positions[None] >= RECENT)
    later = torch.arange(1 + period, LENGTH)
    for layer, (needle_pattern, repeat_pattern) in enumerate(zip(eager_patterns(model, tokens),
                                                                 eager_patterns(model, repeated), strict=True)):
        here = frame[frame["layer"] == layer].sort_values("head")
        hits = (needle_pattern[:, rows].argmax(-1) == torch.tensor(copies)).double().mean(1)
        np.testing.assert_allclose(here["retrieval"], hits.numpy())
        share = (needle_pattern * beyond).sum(-1)[:, beyond.any(1)].mean(1)
        np.testing.assert_allclose(here["beyond_window"], share.numpy(), rtol=1e-5, atol=1e-7)
        echo = repeat_pattern[:, later, later - period].mean(1)
        induction = repeat_pattern[:, later, later - period + 1].mean(1)
        np.testing.assert_allclose(here["echo"], echo.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(here["induction"], induction.numpy(), rtol=1e-5, atol=1e-7)
    policy = HeadPolicy.from_scores(frame, score="retrieval")
    assert policy.n_kv_heads == 2 and policy.provenance["score"] == "retrieval"


def test_razor_ranks_the_top_echo_heads_first_then_by_induction() -> None:
    echo = np.zeros((10, 20))
    induction = np.linspace(0, 1, 200).reshape(10, 20)
    echo[3, 4], echo[7, 1] = 0.9, 0.8  # the top 1 % of 200 heads: 2
    score = _razor(echo, induction)
    order = np.argsort(-score, axis=None)
    assert set(order[:2].tolist()) == {3 * 20 + 4, 7 * 20 + 1}
    assert order[2] == 199  # then the best induction head


def test_copy_positions_finds_the_last_earlier_occurrence() -> None:
    tokens = torch.tensor([1, 5, 6, 2, 5, 6, 3, 5, 6])
    assert copy_positions(tokens, 7, 9) == [4, 5]
    assert copy_positions(tokens, 1, 3) is None
