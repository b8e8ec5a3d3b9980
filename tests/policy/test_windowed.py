"""Running a model under a policy: exactness against a StreamingLLM reference mask, the Hugging Face path
against the TransformerLens path, bit-for-bit identity where nothing is hidden, hooks removed, errors first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import transformers
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from psheads.policy import HeadPolicy, attention_shape, keep_keys, windowed
from psheads.rope.backends import backend_for, masked_keys, streaming_sdpa
from tests import helpers

FAMILIES = ["llama", "gptj", "gemma3", "qwen2"]
"""GQA with RoPE halves (Llama, Qwen2 with biases), GPT-J (attention TransformerLens wraps as it is),
Gemma 3 (a sliding-window layer, QK-norm)."""
LENGTH = 40
SINK, RECENT = 3, 7


@pytest.fixture(scope="module", params=FAMILIES)
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same tiny random model as Hugging Face SDPA, Hugging Face eager and a TransformerBridge."""
    directory: Path = tmp_path_factory.mktemp("policy")
    overrides = {"sliding_window": 12} if request.param == "gemma3" else {}
    helpers.save_tiny(request.param, directory, **overrides)
    load = transformers.AutoModelForCausalLM.from_pretrained
    return {"family": request.param, "sdpa": load(directory, attn_implementation="sdpa").eval(),
            "eager": load(directory, attn_implementation="eager").eval(), "bridge": helpers.boot_bridge(directory),
            "directory": directory}


def policy_for(model: Any, seed: int = 0, **changes: Any) -> HeadPolicy:
    shape = attention_shape(model)
    rng = np.random.default_rng(seed)
    rows = [{"layer": layer, "head": head, "kv_head": shape.kv_head_of[head], "positional": rng.random(),
             "symbolic": rng.random()} for layer in shape.layers for head in range(shape.n_heads)]
    frame = pd.DataFrame(rows)
    return HeadPolicy.from_scores(frame, sink=SINK, recent=RECENT, shape=shape).with_changes(**changes)


def tokens(batch: int = 2, length: int = LENGTH) -> torch.Tensor:
    return torch.randint(1, helpers.VOCAB, (batch, length), generator=torch.Generator().manual_seed(1))


def logits(model: Any, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    with torch.no_grad():
        out = model(x, **kwargs)
    return out.logits if hasattr(out, "logits") else out


def streaming_reference(model: Any, x: torch.Tensor, context: int | None = None) -> torch.Tensor:
    """StreamingLLM on every head: a 4D additive mask given to the Hugging Face model itself (eager)."""
    n = x.shape[1]
    query, key = torch.arange(n)[:, None], torch.arange(n)[None, :]
    keep = (key <= query) & ((key < SINK) | (query - key < RECENT))
    if context is not None:
        keep |= (key <= query) & (query < context)
    mask = torch.zeros(1, 1, n, n).masked_fill(~keep, torch.finfo(torch.float32).min)
    return logits(model, x, attention_mask=mask)


def test_a_budget_of_zero_or_a_window_over_the_length_gives_the_plain_forward_bit_for_bit(models: dict) -> None:
    x = tokens()
    for kind in ("sdpa", "eager", "bridge"):
        model = models[kind]
        plain = logits(model, x)
        with windowed(model, policy_for(model), budget=0.0):
            assert torch.equal(logits(model, x), plain)
        with windowed(model, policy_for(model, recent=LENGTH), budget=1.0):
            assert torch.equal(logits(model, x), plain)
        assert torch.equal(logits(model, x), plain)  # and after


def test_every_head_streamed_equals_the_streamingllm_reference_mask(models: dict) -> None:
    if models["family"] == "gemma3":
        pytest.skip("the 4D reference mask replaces Gemma 3's sliding-window mask too")
    x = tokens()
    reference = streaming_reference(models["eager"], x)
    assert not torch.allclose(reference, logits(models["eager"], x), atol=1e-3)  # the window matters here
    for kind in ("sdpa", "eager", "bridge"):
        with windowed(models[kind], policy_for(models[kind]), budget=1.0):
            torch.testing.assert_close(logits(models[kind], x), reference, rtol=1e-5, atol=1e-5)


def test_decode_mode_windows_only_the_rows_after_the_context(models: dict) -> None:
    if models["family"] == "gemma3":
        pytest.skip("the 4D reference mask replaces Gemma 3's sliding-window mask too")
    x, context = tokens(), 25
    reference = streaming_reference(models["eager"], x, context=context)
    for kind in ("sdpa", "bridge"):
        with windowed(models[kind], policy_for(models[kind]), budget=1.0, mode="decode", context=context):
            out = logits(models[kind], x)
        torch.testing.assert_close(out, reference, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out[:, :context], logits(models[kind], x)[:, :context], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("level", ["kv", "query"])
@pytest.mark.parametrize("budget", [0.25, 0.5, 0.75])
def test_the_hugging_face_path_equals_the_transformerlens_path(models: dict, level: str, budget: float) -> None:
    x = tokens()
    results = {}
    for kind in ("sdpa", "eager", "bridge"):
        with windowed(models[kind], policy_for(models[kind]), budget=budget, level=level):
            results[kind] = logits(models[kind], x)
    torch.testing.assert_close(results["sdpa"], results["eager"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results["bridge"], results["sdpa"], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(results["sdpa"], logits(models["sdpa"], x), atol=1e-4)


def test_the_hookedtransformer_path_equals_the_hugging_face_path(models: dict) -> None:
    if not helpers.has_hooked_transformer() or models["family"] not in ("llama", "gptj", "qwen2"):
        pytest.skip("HookedTransformer is TransformerLens 3.x only (and built here for these families)")
    hooked = helpers.boot_hooked(models["directory"])
    x = tokens()
    with windowed(models["sdpa"], policy_for(models["sdpa"]), budget=0.5):
        expected = logits(models["sdpa"], x)
    with windowed(hooked, policy_for(models["sdpa"]).with_changes(model=None), budget=0.5):
        torch.testing.assert_close(logits(hooked, x), expected, rtol=1e-4, atol=1e-4)


def test_a_kv_group_is_streamed_together_and_query_heads_alone(models: dict) -> None:
    model = models["sdpa"]
    policy = policy_for(model)
    shape = attention_shape(model)
    positions = torch.arange(LENGTH)
    for level in ("kv", "query"):
        keep = keep_keys(policy, 0.5, level=level)
        streamed = policy.streamed_query_heads(0.5, level=level)
        for i, layer in enumerate(shape.layers):
            mask = keep(layer, positions, positions)
            if mask is None:
                assert not streamed[i].any()
                continue
            mask = mask.expand(shape.n_heads, -1, -1)
            hidden = (~mask).flatten(1).any(1)
            assert hidden.tolist() == streamed[i].tolist()


def hook_state(models: dict) -> tuple:
    """Every forward pre-hook of the Hugging Face modules, every TransformerLens hook and every override of
    transformers' attention functions, by id."""
    modules = [m for kind in ("sdpa", "eager") for m in models[kind].modules()]
    modules += list(models["bridge"].original_model.modules())
    backend = backend_for(models["bridge"])
    return (tuple(tuple(module._forward_pre_hooks) for module in modules),
            tuple(name for name, point in models["bridge"].hook_dict.items() if backend.has_hooks(point)),
            tuple((name, id(function)) for name, function in ALL_ATTENTION_FUNCTIONS._local_mapping.items()))


def test_every_hook_is_removed_on_exit_and_on_error(models: dict) -> None:
    x = tokens()
    for kind in ("sdpa", "eager", "bridge"):
        logits(models[kind], x)  # TransformerLens adds hooks of its own on a first forward
    before = hook_state(models)
    for kind in ("sdpa", "bridge"):
        with windowed(models[kind], policy_for(models[kind])):
            assert hook_state(models) != before
            logits(models[kind], x)
        with pytest.raises(RuntimeError, match="inside"), windowed(models[kind], policy_for(models[kind])):
            logits(models[kind], x)
            raise RuntimeError("an error inside the block")
    assert hook_state(models) == before


def test_bad_input_is_refused_before_anything_is_hooked(models: dict) -> None:
    before = hook_state(models)
    model = models["sdpa"]
    policy = policy_for(model)
    with pytest.raises(ValueError, match="budget"), windowed(model, policy, budget=1.5):
        pass
    with pytest.raises(ValueError, match="context"), windowed(model, policy, mode="decode"):
        pass
    with pytest.raises(ValueError, match="level"), windowed(model, policy, level="layer"):  # type: ignore[arg-type]
        pass
    shape = attention_shape(model)
    wrong = HeadPolicy.from_kv_scores(np.random.default_rng(0).random((len(shape.layers) + 1, shape.n_kv_heads)),
                                      n_heads=shape.n_heads)
    with pytest.raises(ValueError, match=r"layers × .* but the model"), windowed(model, wrong):
        pass
    with pytest.raises(ValueError, match="another name"), windowed(model, policy.with_changes(model="someone-else")):
        pass
    with pytest.raises(TypeError, match="HeadPolicy"), windowed(model, "policy"):  # type: ignore[arg-type]
        pass
    assert hook_state(models) == before


def test_a_model_without_rope_is_refused(tmp_path: Path) -> None:
    helpers.save_tiny("gpt2", tmp_path)
    gpt2 = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    policy = HeadPolicy.from_kv_scores(np.random.default_rng(0).random((2, 4)))
    with pytest.raises(ValueError, match="rotary"), windowed(gpt2, policy):
        pass


def test_the_fast_path_equals_the_masked_path_over_many_blocks(models: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill at the KV level on SDPA skips the hidden keys block by block (``streaming_sdpa``); over inputs
    longer than a block it gives the logits of the dense mask, with the model's own sliding window kept."""
    model = models["sdpa"]
    policy = policy_for(model, sink=5, recent=70)
    x = tokens(batch=1, length=streaming_sdpa.BLOCK * 2 + 37)
    calls = []
    blockwise = streaming_sdpa.windowed_attention
    monkeypatch.setattr(streaming_sdpa, "windowed_attention", lambda *a: calls.append(1) or blockwise(*a))
    with windowed(model, policy, budget=0.5):
        fast = logits(model, x)
    assert calls  # the fast path ran
    with masked_keys(model, keep_keys(policy, 0.5)):
        masked = logits(model, x)
    torch.testing.assert_close(fast, masked, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(fast, logits(model, x), atol=1e-4)
    assert streaming_sdpa.streamable(model) and not streaming_sdpa.streamable(models["eager"])


@pytest.mark.parametrize("kind", ["sdpa", "eager"])
def test_generating_with_a_cache_equals_one_forward_under_the_policy(models: dict, kind: str) -> None:
    """A prefill, then one token at a time with the model's dynamic cache (Gemma 3's sliding layers included),
    gives the logits of one forward over the whole input: decoding keeps the same windows."""
    model = models[kind]
    policy = policy_for(model)
    x = tokens(batch=1)
    with windowed(model, policy, budget=0.5), torch.no_grad():
        whole = model(x).logits
        out = model(x[:, :20], use_cache=True)
        steps = [out.logits[:, -1]]
        for position in range(20, LENGTH):
            out = model(x[:, position:position + 1], cache=out.past_key_values, use_cache=True)
            steps.append(out.logits[:, -1])
    torch.testing.assert_close(torch.stack(steps[:-1], dim=1), whole[:, 19:-1], rtol=1e-5, atol=1e-5)


def test_left_padding_and_static_caches_are_refused(models: dict) -> None:
    model = models["sdpa"]
    x = tokens(batch=2)
    left = torch.ones_like(x)
    left[1, :5] = 0
    right = torch.ones_like(x)
    right[1, -5:] = 0
    with windowed(model, policy_for(model), budget=0.5):
        with pytest.raises(ValueError, match="left-padded"):
            logits(model, x, attention_mask=left)
        padded = logits(model, x, attention_mask=right)
        alone = logits(model, x[1:, :-5])
    torch.testing.assert_close(padded[1:, :-5], alone, rtol=1e-5, atol=1e-5)
    cache = transformers.StaticCache(config=model.config, max_cache_len=64)
    with windowed(model, policy_for(model), budget=0.5, mode="decode", context=10), \
            pytest.raises(ValueError, match="static"):
        logits(model, x[:1], cache=cache, use_cache=True)
