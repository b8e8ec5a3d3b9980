"""psheads on two more real LLM families from the zoo: SmolLM2-135M (Llama) and Qwen2.5-Coder-0.5B (Qwen2).

Like ``test_real_llm.py`` these run by default and fail, saying what to install, unless
``PSHEADS_SKIP_REAL_LLM=1``. Each model is rebuilt against Hugging Face's own eager attention at
a few hundred tokens on an early, a middle and the last layer, under the self-check's derived
per-entry bound (Qwen2.5's key bias gives logits in the thousands, where a fixed tolerance cried
wolf), and is scored, profiled and gated on a few layers.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
import transformers

import psheads
from psheads.rope.layer import check_pattern

SKIP = os.environ.get("PSHEADS_SKIP_REAL_LLM") == "1"
LENGTH = 320

MODELS = {
    # name: (layers, heads, KV heads, d_head, RoPE base, family)
    "smollm2-135m": (30, 9, 3, 64, 1e5, "llama"),
    "qwen2.5-coder-0.5b": (24, 14, 2, 64, 1e6, "qwen2"),
}


@pytest.fixture(scope="module", params=list(MODELS))
def llm(request):
    if SKIP:
        pytest.skip("real-LLM tests skipped on request (PSHEADS_SKIP_REAL_LLM=1)")
    try:
        pretrained = psheads.load_pretrained(request.param)
    except ValueError as err:
        pytest.fail(f"{err} Or set PSHEADS_SKIP_REAL_LLM=1 to skip the real-LLM tests explicitly.")
    lens = psheads.RopeLens(pretrained.model)
    text = "\n".join((Path(__file__).resolve().parents[1] / "docs" / name).read_text()
                     for name in ("index.md", "scoring.md"))
    tokens = pretrained.model.to_tokens(text)[:, :LENGTH]
    assert tokens.shape[1] == LENGTH
    return request.param, pretrained, lens, tokens


def _layers(lens) -> list[int]:
    return [0, lens.n_layers // 2, lens.n_layers - 1]


def test_the_model_is_what_the_packages_ship(llm) -> None:
    name, pretrained, lens, _ = llm
    n_layers, n_heads, n_kv, d_head, base, family = MODELS[name]
    assert pretrained.info["sha256"] == psheads.zoo.LLMS[name].sha256
    assert pretrained.info["licence"] == "Apache-2.0" and "Apache-2.0" in repr(pretrained)
    assert lens.n_layers == n_layers and lens.backend.family.name == family
    geo = lens.layers[0]
    assert (geo.n_heads, geo.n_kv_heads, geo.d_head, geo.rotary_dim) == (n_heads, n_kv, d_head, d_head)
    theta = 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    torch.testing.assert_close(geo.theta, theta, atol=1e-6, rtol=1e-5)


def test_planes_rebuild_hf_eager_attention(llm) -> None:
    name, pretrained, lens, tokens = llm
    hf = transformers.AutoModelForCausalLM.from_pretrained(pretrained.info["directory"], dtype=torch.float32,
                                                           attn_implementation="eager").eval()
    with torch.no_grad():
        attentions = hf(tokens, output_attentions=True).attentions  # [1, head, query, key] per layer
    positions = torch.arange(LENGTH)[None]
    cos, sin = hf.model.rotary_emb(torch.zeros(1, LENGTH, lens.layers[0].d_head), positions)
    captures = lens.backend.capture(tokens, _layers(lens), with_pattern=True)
    for layer in _layers(lens):
        capture = captures[layer]
        torch.testing.assert_close(capture.cos, cos[0].float(), atol=1e-6, rtol=0)  # the model's own tables
        torch.testing.assert_close(capture.sin, sin[0].float(), atol=1e-6, rtol=0)
        against_hf = check_pattern(lens.layers[layer], dataclasses.replace(capture, pattern=attentions[layer]),
                                   torch.float32)
        assert against_hf.worst <= 1, (name, layer, against_hf)
    del hf


def test_scores_profiles_and_gates(llm) -> None:
    name, pretrained, lens, tokens = llm
    prompts = tokens[:, :96].repeat(2, 1)
    prompts[1, 1:] = prompts[1, 1:].flip(0)
    layers = _layers(lens)
    frame = psheads.score_heads(lens, prompts, layers=layers)
    assert len(frame) == 3 * lens.layers[0].n_heads and frame[["positional", "symbolic"]].notna().all().all()
    anova = psheads.score_heads(lens, prompts, method="anova", layers=layers[:1])
    torch.testing.assert_close(torch.tensor((anova.positional + anova.symbolic + anova.interaction).to_numpy()),
                               torch.ones(len(anova), dtype=torch.float64), atol=1e-9, rtol=0)
    profile = psheads.frequency_profile(lens, prompts, layers=layers[-1:])
    sums = profile.planes.groupby(["layer", "head"])["usage"].sum()
    torch.testing.assert_close(torch.tensor(sums.to_numpy()), torch.ones(len(sums), dtype=torch.float64))
    short = prompts[:1, :48]
    with torch.no_grad():
        plain = pretrained.model(short)
        with lens.gate([1, 2, 3], layers=layers[1:2], heads=[0]):
            gated = pretrained.model(short)
        again = pretrained.model(short)
    assert float((gated - plain).abs().max()) > 1e-4  # the gate changes the output
    torch.testing.assert_close(again, plain, atol=0, rtol=0)  # and leaves nothing behind


@pytest.mark.parametrize("task", ["llm-number", "llm-letter", "binding"])
def test_the_llm_tasks_are_written_in_this_tokenizer(llm, task) -> None:
    """Qwen2.5's tokenizer merges across fragment boundaries (".\\n\\n" is one token, "=sun" is "=s" "un"):
    the tasks used to refuse it; consecutive text is now tokenised together and a value must stay
    one token after what precedes it."""
    _, pretrained, _, _ = llm
    tokenizer = pretrained.model.tokenizer
    for window in (12, 100):
        built = psheads.tasks.with_window(psheads.tasks.get_task(task).for_tokenizer(tokenizer), window)
        batch = psheads.tasks.checked_batch(built, 32, seed=1)  # generate checks each prompt's tokenisation
        rows = torch.arange(len(batch))
        assert torch.equal(batch.tokens[rows, batch.answer_positions], batch.answers)
    if task == "llm-letter":
        equals = tokenizer("=", add_special_tokens=False)["input_ids"]
        for word, token in zip(built.answer_words, built.candidates.tolist(), strict=True):
            assert tokenizer("=" + word, add_special_tokens=False)["input_ids"] == [*equals, token], word
