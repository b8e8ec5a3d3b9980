"""The anchors' criteria, measured through the bridge's pattern hook, against Hugging Face's own eager
attention weights computed independently here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from psheads.policy import HeadPolicy, criteria
from psheads.policy.criteria import CRITERIA, REPEATS, _razor, anchor_scores, copy_positions, repeated_random
from psheads.tasks.long_context import long_context_task
from tests import helpers

LENGTH, SINK, RECENT = 400, 8, 32
VOCAB = 800
"""Tokens of the BPE tokenizer the tiny model reads."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny random Llama (GQA) over a BPE tokenizer trained on the shipped prose."""
    tokenizer = helpers.prose_bpe_tokenizer(VOCAB)
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


def answering(batch_tokens: torch.Tensor, wrong: set[int] = frozenset()) -> object:
    """A stand-in for ``logits_at`` under which the model writes every answer token right (but the answer
    tokens at the positions ``wrong``)."""

    def logits_at(model: object, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        following = tokens.gather(1, positions + 1)
        following = torch.where(torch.isin(positions + 1, torch.tensor(sorted(wrong), dtype=torch.long)),
                                (following + 1) % VOCAB, following)
        return torch.nn.functional.one_hot(following, VOCAB).float()

    return logits_at


@pytest.mark.parametrize("wrong_answer", [False, True])
def test_the_criteria_match_hugging_face_s_own_attention_weights(tiny: dict, monkeypatch: pytest.MonkeyPatch,
                                                                  wrong_answer: bool) -> None:
    """Wu et al.'s retrieval score (a hit: the most attended key lies in the needle and holds the token being
    written, on the answers the model gets right), echo, induction and the share beyond the window, against
    Hugging Face's eager attention weights."""
    model, tokenizer = tiny["model"], tiny["tokenizer"]
    needles = long_context_task("needle").generate(tokenizer, LENGTH, 1, seed=5)
    spans = needles.spans[0]
    wrong = set(range(*spans[0])) if wrong_answer else set()  # the first answer written wrong: left out
    monkeypatch.setattr(criteria, "logits_at", answering(needles.tokens, wrong))
    frame = anchor_scores(model, tokenizer, LENGTH, n_prompts=1, seed=5, sink=SINK, recent=RECENT, progress=False)
    assert list(frame.columns) == ["layer", "head", "kv_head", *CRITERIA]
    tokens = needles.tokens
    rows, needle_of = [], []
    for index, (start, stop) in enumerate(spans):
        needle = copy_positions(tokens[0], start, stop)
        assert needle is not None and tokens[0, needle].tolist() == tokens[0, start:stop].tolist()
        if wrong_answer and index == 0:
            continue
        rows += list(range(start - 1, stop - 1))
        needle_of += [needle] * (stop - start)
    period = (LENGTH - 1) // REPEATS
    repeated = repeated_random(tokenizer, LENGTH, 5, int(tokens[0, 0]))
    positions = torch.arange(LENGTH)
    beyond = (positions[None] >= SINK) & (positions[:, None] - positions[None] >= RECENT)
    later = torch.arange(1 + period, LENGTH)
    for layer, (needle_pattern, repeat_pattern) in enumerate(zip(eager_patterns(model, tokens),
                                                                 eager_patterns(model, repeated), strict=True)):
        here = frame[frame["layer"] == layer].sort_values("head")
        top = needle_pattern[:, rows].argmax(-1)  # [head, answer token]
        hits = [[int(top[head, i]) in needle_of[i] and tokens[0, top[head, i]] == tokens[0, row + 1]
                 for i, row in enumerate(rows)] for head in range(top.shape[0])]
        np.testing.assert_allclose(here["retrieval"], np.mean(hits, axis=1))
        mass = torch.stack([needle_pattern[:, row, needle_of[i]].sum(-1) for i, row in enumerate(rows)], 1).mean(1)
        np.testing.assert_allclose(here["needle_attention"], mass.numpy(), rtol=1e-5, atol=1e-7)
        share = (needle_pattern * beyond).sum(-1)[:, beyond.any(1)].mean(1)
        np.testing.assert_allclose(here["beyond_window"], share.numpy(), rtol=1e-5, atol=1e-7)
        echo = repeat_pattern[:, later, later - period].mean(1)
        induction = repeat_pattern[:, later, later - period + 1].mean(1)
        np.testing.assert_allclose(here["echo"], echo.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(here["induction"], induction.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(frame["retrieval_ranked"], frame["retrieval"] + frame["needle_attention"] / 1000)
    assert frame.attrs["answered"] == f"{len(spans) - wrong_answer} of {len(spans)} needle questions"
    policy = HeadPolicy.from_scores(frame, score="retrieval_ranked")
    assert policy.n_kv_heads == 2 and np.unique(policy.kv_scores).size == np.size(policy.kv_scores)  # no ties left


def test_a_model_that_answers_nothing_has_no_retrieval_score(tiny: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    needles = long_context_task("needle").generate(tiny["tokenizer"], LENGTH, 1, seed=5)
    monkeypatch.setattr(criteria, "logits_at", answering(needles.tokens, set(range(LENGTH))))
    frame = anchor_scores(tiny["model"], tiny["tokenizer"], LENGTH, n_prompts=1, seed=5, progress=False)
    assert frame["retrieval"].isna().all() and frame["echo"].notna().all()


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
