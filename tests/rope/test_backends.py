"""psheads.families and psheads.backends against the tiny models themselves.

Every fact a backend reports (family, layer specs, captured q/k/tables/patterns) is compared with
what the Hugging Face config or the model's own hooks say; the bookkeeping (analysis mode,
fingerprints, hooks left behind) is checked by changing the model and restoring it afterwards.
Models from ``model_factory`` are cached and shared: every test restores what it changes.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest
import torch
import transformers
from transformer_lens.hook_points import HookPoint

import psheads
from psheads.rope import families
from psheads.rope.backends import Backend, BridgeBackend, HookSite, backend_for
from psheads.rope.backends.facts import all_modules, preserved_state
from psheads.rope.families import FAMILIES, GENERIC, HOOKED_UNSUPPORTED, UnsupportedModelError, family_of
from psheads.rope.layer import LayerCapture, LayerSpec
from tests import helpers
from tests.conftest import FAMILIES as TESTED_FAMILIES
from tests.conftest import HOOKED_FAMILIES, model_state

N_POS = 7
BRIDGE_CASES = [(family, "bridge") for family in TESTED_FAMILIES]
CASES = BRIDGE_CASES + [(family, "hooked") for family in HOOKED_FAMILIES]
COMMON_FAMILIES = [f.name for f in FAMILIES if f.name in TESTED_FAMILIES and f.table_layout == "auto"]
"""Families whose tables need nothing of their record (GPT-J's (sin, cos) half-width tables do)."""


def tokens_of(n_pos: int = N_POS, batch: int = 2, seed: int = 3) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, helpers.VOCAB, (batch, n_pos), generator=generator)


def config_of(model: Any, family: str) -> Any:
    """The HF config the tiny model was built from (a bridge carries its own)."""
    hf = getattr(model, "original_model", None)
    return hf.config if hf is not None else helpers.hf_config(family)


def expected_spec(config: Any, family: str, layer: int) -> LayerSpec:
    """A layer's attention facts, read off the HF config (independently of psheads)."""
    n_heads = config.num_attention_heads
    d_head = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    scale = float(config.query_pre_attn_scalar) ** -0.5 if family in ("gemma2", "gemma3") else d_head**-0.5
    if family == "mistral":  # one window for every layer
        window = config.sliding_window
    elif family in ("qwen2", "gemma2", "gemma3"):  # local and global layers
        window = config.sliding_window if config.layer_types[layer] == "sliding_attention" else None
    else:
        window = None
    return LayerSpec(
        n_heads=n_heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or n_heads,
        d_head=d_head,
        pairing="adjacent" if family == "gptj" else "halves",
        scale=scale,
        softcap=config.attn_logit_softcapping if family == "gemma2" else None,
        window=window,
    )


def model_cache(model: Any, tokens: torch.Tensor, names: set[str]) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
    return {name: cache[name] for name in names}


def hf_rotary_dim(model: Any, family: str) -> int:
    """Rotated dims per head, from the HF rotary module (a bridge) or the HF config."""
    config = config_of(model, family)
    if family == "gptj":
        return int(config.rotary_dim)
    if getattr(model, "original_model", None) is None:
        rope = getattr(config, "rope_parameters", None) or {}
        factor = getattr(config, "rotary_pct", None) or rope.get("partial_rotary_factor", 1.0)
        d_head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return int(d_head * factor)
    sizes = {buffer.numel() for name, buffer in model.original_model.named_buffers()
             if name.endswith("inv_freq")}  # Gemma-3: one per layer type
    assert len(sizes) == 1, sizes
    return 2 * sizes.pop()


# --- families ----------------------------------------------------------------------------------
def test_family_records_are_the_tested_families() -> None:
    names = [f.name for f in FAMILIES]
    assert len(set(names)) == len(names)
    for name in TESTED_FAMILIES:  # the rope suite's look-alikes are of their record's architectures
        record = family_of_name(name)
        model_class = transformers.AutoModelForCausalLM._model_mapping[type(helpers.hf_config(name))]
        assert model_class.__name__ in record.architectures, name
    assert {"gptj", "llama", "gemma3"} <= set(TESTED_FAMILIES)
    assert all(f.title for f in FAMILIES), "every family has a name for people"
    assert set(HOOKED_FAMILIES) <= set(TESTED_FAMILIES)
    architectures = [a for f in FAMILIES for a in f.architectures]
    assert len(set(architectures)) == len(architectures), "an architecture belongs to one family"
    assert GENERIC not in FAMILIES and GENERIC.architectures == ()


def family_of_name(name: str) -> families.Family:
    return next(f for f in FAMILIES if f.name == name)


@pytest.mark.parametrize("record", FAMILIES, ids=lambda f: f.name)
def test_family_of_finds_each_architecture(record: families.Family) -> None:
    for architecture in record.architectures:
        assert family_of(architecture) is record


@pytest.mark.parametrize("architecture", ["FalconForCausalLM", "", "llama", "LlamaModel", "gptjforcausallm"])
def test_unknown_architectures_fall_back_to_generic(architecture: str) -> None:
    assert family_of(architecture) is GENERIC


@pytest.mark.parametrize("family", TESTED_FAMILIES)
def test_bridge_resolves_its_family_record(model_factory, family: str) -> None:
    model = model_factory(family)
    backend = backend_for(model)
    assert isinstance(backend, BridgeBackend)
    assert backend.family.name == family
    assert backend.family is family_of(type(model.original_model).__name__)
    # the record's flags agree with what the backend reads off the model
    specs = [backend.layer_spec(layer) for layer in range(backend.n_layers)]
    assert {spec.pairing for spec in specs} == {backend.family.pairing}
    assert any(spec.softcap is not None for spec in specs) == backend.family.softcap
    assert all(backend.pattern_is_live(layer) == (family != "gptj") for layer in range(backend.n_layers))
    assert backend.max_positions == (helpers.N_CTX if backend.family.fixed_context else None)
    if backend.family.qk_norm:
        assert all(backend.qk_sites(layer, "q")[0].name.endswith("hook_q_normed") for layer in range(backend.n_layers))


# --- layer specs -------------------------------------------------------------------------------
@pytest.mark.parametrize(("family", "backend"), CASES)
def test_layer_spec_matches_the_hf_config(model_factory, family: str, backend: str) -> None:
    model = model_factory(family, backend)
    adapter = backend_for(model)
    config = config_of(model, family)
    assert adapter.n_layers == config.num_hidden_layers
    for layer in range(adapter.n_layers):
        spec = adapter.layer_spec(layer)
        expected = expected_spec(config, family, layer)
        assert spec.scale == pytest.approx(expected.scale, rel=1e-12, abs=0)
        assert {**spec.__dict__, "scale": None} == {**expected.__dict__, "scale": None}, layer


@pytest.mark.parametrize(("family", "overrides", "windows"), [
    ("qwen2", dict(use_sliding_window=True, sliding_window=3, max_window_layers=1), [None, 3]),
    ("mistral", dict(sliding_window=None), [None, None]),
    ("gemma2", dict(sliding_window=3, attn_logit_softcapping=None), [3, None]),
], ids=["qwen2-sliding", "mistral-no-window", "gemma2-window3-no-softcap"])
def test_layer_spec_follows_the_config(model_factory, family: str, overrides: dict, windows: list) -> None:
    model = model_factory(family, **overrides)
    backend = backend_for(model)
    config = model.original_model.config
    specs = [backend.layer_spec(layer) for layer in range(backend.n_layers)]
    assert specs == [expected_spec(config, family, layer) for layer in range(backend.n_layers)]
    assert [spec.window for spec in specs] == windows


def test_windows_of_local_and_global_layers(model_factory) -> None:
    """Guard the expectations above: the tiny configs do have both kinds of layers."""
    for family in ("gemma2", "gemma3"):
        config = model_factory(family).original_model.config
        assert config.layer_types == ["sliding_attention", "full_attention"]
        assert [backend_for(model_factory(family)).layer_spec(i).window for i in (0, 1)] == [5, None]
    assert {backend_for(model_factory("mistral")).layer_spec(i).window for i in (0, 1)} == {5}


@pytest.mark.parametrize("family", COMMON_FAMILIES)
def test_generic_record_reads_the_same_facts(model_factory, family: str, monkeypatch) -> None:
    """An unknown architecture is read with the common rules: same facts here."""
    model = model_factory(family)
    dedicated = backend_for(model)
    monkeypatch.setattr(psheads.backends.bridge, "family_of", lambda architecture: GENERIC)
    generic = backend_for(model)
    assert generic.family is GENERIC
    for layer in range(generic.n_layers):
        assert generic.layer_spec(layer) == dedicated.layer_spec(layer)
        assert generic.qk_sites(layer, "k") == dedicated.qk_sites(layer, "k")


# --- capture -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("family", "backend"), CASES)
def test_capture_is_the_models_own_q_k_and_pattern(model_factory, family: str, backend: str) -> None:
    model = model_factory(family, backend)
    adapter = backend_for(model)
    tokens = tokens_of()
    layers = list(range(adapter.n_layers))
    captures = adapter.capture(tokens, layers[::-1] + [0], with_pattern=True)  # order and duplicates ignored
    assert list(captures) == layers
    sites = {(layer, which): adapter.qk_sites(layer, which)[0] for layer in layers for which in ("q", "k")}
    names = {site.name for site in sites.values()} | {adapter.pattern_hook(layer) for layer in layers}
    cache = model_cache(model, tokens, names)
    rotary_dim = hf_rotary_dim(model, family)
    for layer, capture in captures.items():
        assert isinstance(capture, LayerCapture)
        spec = adapter.layer_spec(layer)
        assert capture.q.shape == (2, N_POS, spec.n_heads, spec.d_head)
        assert capture.k.shape == (2, N_POS, spec.n_kv_heads, spec.d_head)
        assert capture.cos.shape == capture.sin.shape == (N_POS, rotary_dim)
        assert capture.pattern.shape == (2, spec.n_heads, N_POS, N_POS)
        for which, value in (("q", capture.q), ("k", capture.k)):
            site = sites[layer, which]
            torch.testing.assert_close(value, site.to_canonical(cache[site.name]).float(), atol=0, rtol=0)
        torch.testing.assert_close(capture.pattern, cache[adapter.pattern_hook(layer)].float(), atol=1e-6, rtol=0)
        # rotation tables: angle 0 at position 0, unit magnitude (plain RoPE in every tiny model)
        torch.testing.assert_close(capture.cos[0], torch.ones(rotary_dim), atol=1e-6, rtol=0)
        torch.testing.assert_close(capture.sin[0], torch.zeros(rotary_dim), atol=1e-6, rtol=0)
        torch.testing.assert_close(capture.cos**2 + capture.sin**2, torch.ones(N_POS, rotary_dim), atol=1e-5, rtol=0)
        assert not capture.sin[1:].eq(0).all()


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "gemma"])
def test_capture_tables_are_the_hf_rotary_tables(model_factory, family: str) -> None:
    model = model_factory(family)
    backend = backend_for(model)
    n_pos = 40
    captures = backend.capture(tokens_of(n_pos, batch=1), [0, 1])
    spec = backend.layer_spec(0)
    with torch.no_grad():
        cos, sin = model.original_model.model.rotary_emb(torch.zeros(1, n_pos, spec.d_head),
                                                        torch.arange(n_pos)[None])
    for capture in captures.values():
        torch.testing.assert_close(capture.cos, cos[0].float(), atol=1e-6, rtol=0)
        torch.testing.assert_close(capture.sin, sin[0].float(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("family", ["llama", "gptj", "gemma3"])
def test_query_index_keeps_one_row_per_batch(model_factory, family: str) -> None:
    backend = backend_for(model_factory(family))
    tokens = tokens_of(batch=3)
    query_index = torch.tensor([6, 2, 4])
    full = backend.capture(tokens, [0, 1], with_pattern=True)
    picked = backend.capture(tokens, [0, 1], query_index=query_index, with_pattern=True)
    rows = torch.arange(3)
    for layer in (0, 1):
        spec = backend.layer_spec(layer)
        assert picked[layer].q.shape == (3, 1, spec.n_heads, spec.d_head)
        assert picked[layer].pattern.shape == (3, spec.n_heads, 1, N_POS)
        torch.testing.assert_close(picked[layer].q[:, 0], full[layer].q[rows, query_index], atol=0, rtol=0)
        torch.testing.assert_close(picked[layer].pattern[:, :, 0], full[layer].pattern[rows, :, query_index],
                                   atol=0, rtol=0)
        # keys and tables cover every position
        torch.testing.assert_close(picked[layer].k, full[layer].k, atol=0, rtol=0)
        torch.testing.assert_close(picked[layer].cos, full[layer].cos, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_capture_of_a_half_precision_model_is_fp32(model_factory, dtype: torch.dtype) -> None:
    model = model_factory("llama", dtype=dtype)
    backend = backend_for(model)
    assert backend.dtype == dtype
    tokens = tokens_of()
    capture = backend.capture(tokens, [1], query_index=torch.tensor([3, 6]), with_pattern=True)[1]
    for tensor in (capture.q, capture.k, capture.cos, capture.sin, capture.pattern):
        assert tensor.dtype == torch.float32
        assert not tensor.requires_grad
    (site,) = backend.qk_sites(1, "k")
    cache = model_cache(model, tokens, {site.name})
    assert cache[site.name].dtype == dtype
    torch.testing.assert_close(capture.k, site.to_canonical(cache[site.name]).float(), atol=0, rtol=0)


@pytest.mark.parametrize(("family", "backend"), CASES)
def test_capture_stops_after_the_last_requested_layer(model_factory, family: str, backend: str) -> None:
    model = model_factory(family, backend)
    adapter = backend_for(model)
    last = adapter.n_layers - 1
    hf = getattr(model, "original_model", None)
    head = hf.lm_head if hf is not None else model.unembed
    calls = {"last_attention": 0, "lm_head": 0}

    def counter(key: str):
        def pre_hook(module, args, kwargs):
            calls[key] += 1

        return pre_hook

    handles = [
        model.blocks[last].attn.register_forward_pre_hook(counter("last_attention"), with_kwargs=True),
        head.register_forward_pre_hook(counter("lm_head"), with_kwargs=True),
    ]
    try:
        adapter.capture(tokens_of(), [0])
        assert calls == {"last_attention": 0, "lm_head": 0}
        adapter.capture(tokens_of(), [last])
        assert calls == {"last_attention": 1, "lm_head": 0}
        model(tokens_of())  # control: the counters do see a full forward
        assert calls == {"last_attention": 2, "lm_head": 1}
    finally:
        for handle in handles:
            handle.remove()


def test_capture_needs_a_layer(model_factory) -> None:
    with pytest.raises(ValueError, match="No layers requested"):
        backend_for(model_factory("llama")).capture(tokens_of(), [])


def test_backend_facts(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    assert backend.d_vocab == helpers.VOCAB
    assert backend.n_ctx == helpers.N_CTX
    assert backend.tokenizer is model.tokenizer
    assert backend.to_tokens("t5 t6 t7", prepend_bos=False).tolist() == [5, 6, 7]
    tokens = backend.to_tokens("t5 t6 t7")
    assert tokens.ndim == 1 and tokens.device.type == "cpu"
    assert tokens.tolist() == model.to_tokens("t5 t6 t7")[0].tolist()
    assert backend.kind == "TransformerBridge"


# --- hook sites --------------------------------------------------------------------------------
@pytest.mark.parametrize("layout, shape", [("bshd", (2, 5, 3, 4)), ("bshd", (2, 5, 12)), ("bhsd", (2, 3, 5, 4))],
                         ids=["bshd", "bshd-flat", "bhsd"])
def test_hook_site_round_trip(layout: str, shape: tuple[int, ...]) -> None:
    site = HookSite("blocks.0.attn.hook_q", layout, d_head=4)
    x = torch.randn(shape)
    canonical = site.to_canonical(x)
    assert canonical.shape == (2, 5, 3, 4)
    for b, s, h in ((0, 0, 0), (1, 3, 2), (0, 4, 1)):
        if layout == "bhsd":
            expected = x[b, h, s]
        elif len(shape) == 3:
            expected = x[b, s, 4 * h : 4 * (h + 1)]
        else:
            expected = x[b, s, h]
        torch.testing.assert_close(canonical[b, s, h], expected, atol=0, rtol=0)
    back = site.from_canonical(canonical, like=x)
    assert back.shape == x.shape
    torch.testing.assert_close(back, x, atol=0, rtol=0)
    # an edit in canonical coordinates lands on the same head and position of the hook's tensor
    edited = canonical.clone()
    edited[1, 3, 2] += 1.0
    delta = site.from_canonical(edited, like=x) - x
    assert torch.count_nonzero(delta) == 4
    assert torch.allclose(site.to_canonical(delta)[1, 3, 2], torch.ones(4))


@pytest.mark.parametrize("family", TESTED_FAMILIES)
def test_hook_sites_of_the_models(model_factory, family: str) -> None:
    """The model's q/k hook tensors, seen through their site, are ``[batch, pos, head, d_head]``."""
    model = model_factory(family)
    backend = backend_for(model)
    tokens = tokens_of()
    sites = [site for layer in range(backend.n_layers) for which in ("q", "k")
             for site in backend.qk_sites(layer, which)]
    cache = model_cache(model, tokens, {site.name for site in sites})
    for site in sites:
        spec = backend.layer_spec(int(site.name.split(".")[1]))
        heads = spec.n_heads if site.name.split(".")[-1].startswith("hook_q") else spec.n_kv_heads
        raw = cache[site.name]
        assert site.to_canonical(raw).shape == (2, N_POS, heads, spec.d_head), site
        torch.testing.assert_close(site.from_canonical(site.to_canonical(raw), like=raw), raw, atol=0, rtol=0)


# --- unsupported models ------------------------------------------------------------------------
@pytest.mark.parametrize("record", [f for f in FAMILIES if f.refused], ids=lambda f: f.name)
def test_refused_families_say_what_and_why(model_factory, monkeypatch, record: families.Family) -> None:
    model = model_factory("llama")
    monkeypatch.setattr(psheads.backends.bridge, "family_of", lambda architecture: record)
    with pytest.raises(UnsupportedModelError) as error:
        backend_for(model)
    assert "LlamaForCausalLM uses " in str(error.value) and record.refused in str(error.value)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize(("family", "phase", "message"), [
    ("llama", "post_reshape", "has QK-norm, unlike the Llama family"),
    ("gemma3", None, "has no QK-norm, unlike the Gemma 3 family"),
])
def test_qk_norm_must_match_the_family(model_factory, monkeypatch, family, phase, message) -> None:
    model = model_factory(family)
    with monkeypatch.context() as mp:
        mp.setattr(model.blocks[0].attn, "_qk_norm_phase", phase, raising=False)
        with pytest.raises(UnsupportedModelError, match=r"Layer 0 of .*" + re.escape(message)):
            backend_for(model)
    assert backend_for(model).family.name == family  # undone: accepted again


def test_a_norm_after_rope_that_subtracts_the_mean_is_refused(model_factory, monkeypatch) -> None:
    """An RMS norm after RoPE folds into q and k exactly; a LayerNorm (mean subtracted: it mixes the
    planes) does not, and is refused with that reason."""
    model = model_factory("gemma3")
    monkeypatch.setattr(model.cfg, "qk_norm_after_rope", True, raising=False)
    monkeypatch.setattr(psheads.backends.bridge, "family_of", lambda architecture: GENERIC)
    assert backend_for(model).layer_spec(1).norm_eps is not None  # Gemma 3's own norms are RMS norms
    real = BridgeBackend._post_rope_norms
    monkeypatch.setattr(BridgeBackend, "_post_rope_norms", lambda self, layer: (
        (torch.nn.LayerNorm(8), real(self, layer)[1]) if layer == 1 else real(self, layer)))
    with pytest.raises(UnsupportedModelError, match=r"Layer 1 of Gemma3ForCausalLM normalises q after RoPE with "
                                                    r"LayerNorm, which is not an RMS norm"):
        backend_for(model)


def test_a_wrong_claim_of_a_norm_after_rope_fails_the_self_check(model_factory, monkeypatch) -> None:
    """Gemma 3 normalises q and k before RoPE: read as if after, the planes miss its attention (its
    norms' weights differ by dimension here; with equal weights, before and after are the same)."""
    model = model_factory("gemma3", rms_norm_eps=1e-5)  # a model of this test's own
    with torch.no_grad():
        for block in model.blocks:
            for norm in (block.attn.q_norm, block.attn.k_norm):
                norm.original_component.weight.copy_(torch.linspace(-0.5, 0.5, 8))
    monkeypatch.setattr(model.cfg, "qk_norm_after_rope", True, raising=False)
    monkeypatch.setattr(psheads.backends.bridge, "family_of", lambda architecture: GENERIC)
    with pytest.raises(psheads.SelfCheckError, match="do not rebuild"):
        psheads.RopeLens(model)


def test_gptj_read_with_the_common_rules_is_refused(model_factory, monkeypatch) -> None:
    """GPT-J's attention receives its tables as (sin, cos) at half width: only its family record says
    so. Read as an unknown architecture, it is refused rather than scored wrongly."""
    model = model_factory("gptj")
    monkeypatch.setattr(psheads.backends.bridge, "family_of", lambda architecture: GENERIC)
    with pytest.raises(UnsupportedModelError, match="does not rotate with 'halves' pairing"):
        psheads.RopeLens(model)


def test_rejects_non_rope_and_non_transformerlens_models(model_factory) -> None:
    with pytest.raises(ValueError, match="does not use rotary position embeddings"):
        backend_for(model_factory("gpt2"))
    with pytest.raises(TypeError, match="already wrapped by a TransformerBridge"):
        backend_for(model_factory("llama").original_model)
    with pytest.raises(TypeError, match="needs a TransformerLens model .* got object"):
        backend_for(object())


@pytest.mark.parametrize(("flag", "what"), HOOKED_UNSUPPORTED)
def test_hooked_unsupported_flags_are_refused(model_factory, monkeypatch, flag: str, what: str) -> None:
    model = model_factory("llama", "hooked")
    monkeypatch.setattr(model.cfg, flag, True, raising=False)
    with pytest.raises(ValueError, match=re.escape(what)):
        backend_for(model)


# --- analysis mode -----------------------------------------------------------------------------
def _flags(model: Any) -> list[bool]:
    return [module.training for module in all_modules(model)]


def _in_analysis_state(model: Any) -> bool:
    return not any(_flags(model)) and not torch.is_grad_enabled()


@pytest.mark.parametrize(("family", "backend"), [("llama", "bridge"), ("gptj", "bridge"), ("llama", "hooked")])
def test_analysis_switches_to_eval_and_restores_each_flag(model_factory, family: str, backend: str) -> None:
    model = model_factory(family, backend)
    adapter = backend_for(model)
    try:
        model.train()
        model.blocks[0].eval()  # a mixed state: each module's own flag must come back
        before = _flags(model)
        assert any(before) and not all(before)
        with adapter.analysis():
            assert _in_analysis_state(model)
            with adapter.analysis():  # re-entrant
                assert _in_analysis_state(model)
            assert _in_analysis_state(model), "the inner analysis restored the modes early"
            adapter.capture(tokens_of(), [1])  # captures open their own (nested) analysis
            assert _in_analysis_state(model)
        assert _flags(model) == before
        assert torch.is_grad_enabled()

        with pytest.raises(RuntimeError, match="inside"), adapter.analysis():
            raise RuntimeError("inside")
        assert _flags(model) == before
        assert torch.is_grad_enabled()
        with adapter.analysis():  # a failed analysis leaves the backend reusable
            assert _in_analysis_state(model)
        assert _flags(model) == before
    finally:
        model.eval()


def test_preserved_state_of_an_eval_model_changes_nothing(model_factory) -> None:
    model = model_factory("llama")
    assert not any(_flags(model))
    with preserved_state(model):
        assert not any(_flags(model))
    assert not any(_flags(model))
    modules = all_modules(model)
    assert len({id(m) for m in modules}) == len(modules)
    owned = {id(m) for m in model.modules()} | {id(m) for m in model.original_model.modules()}
    assert owned == {id(m) for m in modules}


# --- fingerprints and weights ------------------------------------------------------------------
@pytest.mark.parametrize(("family", "backend"), CASES)
def test_fingerprint_is_stable_on_an_unchanged_model(model_factory, family: str, backend: str) -> None:
    adapter = backend_for(model_factory(family, backend))
    first = adapter.fingerprint()
    assert adapter.fingerprint() == first
    adapter.capture(tokens_of(), [0, 1], with_pattern=True)
    assert adapter.fingerprint() == first
    assert backend_for(adapter.model).fingerprint() == first  # a fresh backend agrees


def test_offloaded_buffers_are_fingerprinted_without_their_values() -> None:
    """accelerate's ``offload_buffers=True`` leaves buffers on the meta device until their layer runs:
    they hold no values to copy (reading them would raise), and the others are still compared."""
    from psheads.rope.backends.facts import weights_state

    model = torch.nn.Module()
    model.register_buffer("offloaded", torch.empty(3, device="meta"))
    model.register_buffer("table", torch.zeros(3))
    first = weights_state(model)
    assert weights_state(model) == first
    model.table.data.copy_(torch.ones(3))  # bumps no version counter: seen through the values
    assert weights_state(model) != first


def test_the_weights_owner_is_the_hf_model(model_factory) -> None:
    model = model_factory("llama")
    owner = backend_for(model).weights_owner()
    ids = {id(t) for t in list(owner.parameters()) + list(owner.buffers())}
    assert owner is model.original_model
    assert id(model.blocks[0].attn.original_component.q_proj.weight) in ids


def test_a_rotation_table_written_through_data_is_seen(model_factory) -> None:
    """embed_positions.data.copy_(...) bumps no version counter: a cached lens kept the old θ."""
    model = model_factory("gptj")
    tables = [b for name, b in model.original_model.named_buffers() if name.endswith("embed_positions")]
    lens = psheads.RopeLens(model)
    before, saved = backend_for(model).fingerprint(), [table.detach().clone() for table in tables]
    half = tables[0].shape[-1] // 2
    inverse = 1.0 / 500.0 ** (torch.arange(0, 2 * half, 2, dtype=torch.float32) / (2 * half))  # base 500, not 10,000
    angles = torch.arange(tables[0].shape[0], dtype=torch.float32)[:, None] * inverse
    try:
        for table in tables:
            table.data.copy_(torch.cat([angles.sin(), angles.cos()], dim=-1))
        assert backend_for(model).fingerprint() != before
        torch.testing.assert_close(psheads.RopeLens(model).layers[0].theta, inverse.double(), rtol=1e-5, atol=0)
        assert not torch.allclose(lens.layers[0].theta, inverse.double())
    finally:
        for table, values in zip(tables, saved, strict=True):
            table.data.copy_(values)
    assert backend_for(model).fingerprint() == before


def test_fingerprint_changes_with_in_place_weight_edits(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    weight = model.blocks[0].attn.original_component.q_proj.weight
    saved = weight.detach().clone()
    before = backend.fingerprint()
    try:
        with torch.no_grad():
            weight.add_(1.0)
        assert backend.fingerprint() != before
    finally:
        with torch.no_grad():
            weight.copy_(saved)
    assert torch.equal(weight, saved)


def test_fingerprint_changes_with_load_state_dict(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    before = backend.fingerprint()
    model.original_model.load_state_dict(model.original_model.state_dict())  # same values, written in place
    assert backend.fingerprint() != before


def test_fingerprint_changes_with_replaced_parameters(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    q_proj = model.blocks[1].attn.original_component.q_proj.original_component  # the HF Linear
    assert isinstance(q_proj, torch.nn.Linear)
    before = backend.fingerprint()
    original = q_proj.weight
    # not monkeypatch: its undo deletes a parameter (it is not in the module's __dict__)
    replacement = torch.nn.Parameter(original.detach().clone())
    with torch.no_grad():  # same version counter as the original: only identity/storage tell them apart
        while replacement._version < original._version:
            replacement.mul_(1.0)
    assert replacement._version == original._version
    try:
        q_proj.weight = replacement
        assert backend.fingerprint() != before
    finally:
        q_proj.weight = original
    assert backend.fingerprint() == before


def test_fingerprint_changes_with_layer_facts(model_factory, monkeypatch) -> None:
    model = model_factory("mistral")
    backend = backend_for(model)
    before = backend.fingerprint()
    hf = model.blocks[0].attn.original_component
    with monkeypatch.context() as mp:
        mp.setattr(hf, "scaling", hf.scaling * 2)
        assert backend.fingerprint() != before
    with monkeypatch.context() as mp:
        mp.setattr(hf.config, "sliding_window", 3)
        assert backend.layer_spec(1).window == 3
        assert backend.fingerprint() != before
    assert backend.fingerprint() == before


def test_fingerprint_changes_with_dtype(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    before = backend.fingerprint()
    saved = {name: t.detach().clone() for name, t in model.original_model.state_dict().items()}
    try:
        model.to(torch.float64)
        assert backend.dtype == torch.float64
        assert backend.fingerprint() != before
    finally:
        model.to(torch.float32)
    assert backend.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    restored = model.original_model.state_dict()
    assert all(torch.equal(restored[name], value) for name, value in saved.items())


# --- hooks -------------------------------------------------------------------------------------
def test_has_hooks() -> None:
    point = HookPoint()
    assert not Backend.has_hooks(point)
    point.add_hook(lambda tensor, hook: None)
    assert Backend.has_hooks(point)
    point.remove_hooks()
    assert not Backend.has_hooks(point)


def test_has_hooks_on_a_models_hook_point(model_factory) -> None:
    model = model_factory("llama")
    backend = backend_for(model)
    name = backend.qk_sites(0, "q")[0].name
    assert not backend.has_hooks(model.hook_dict[name])
    with model.hooks(fwd_hooks=[(name, lambda tensor, hook: None)]):
        assert backend.has_hooks(model.hook_dict[name])
    assert not backend.has_hooks(model.hook_dict[name])


@pytest.mark.parametrize(("family", "backend"), [("llama", "bridge"), ("gptj", "bridge"), ("gemma3", "bridge"),
                                                 ("gptj", "hooked")])
def test_model_left_unchanged_by_captures_even_after_errors(model_factory, family: str, backend: str,
                                                            monkeypatch) -> None:
    model = model_factory(family, backend)
    adapter = backend_for(model)
    try:
        model.train()
        before = model_state(model)
        tokens = tokens_of()
        adapter.capture(tokens, [0])
        adapter.capture(tokens, [0, 1], query_index=torch.tensor([2, 5]), with_pattern=True)
        assert model_state(model) == before
        calls = {"n": 0}
        real_upcast = psheads.backends.base.upcast

        def failing_upcast(x, source=None):
            calls["n"] += 1
            if calls["n"] == 2:  # inside the forward pass, after every hook was added
                raise RuntimeError("boom")
            return real_upcast(x, source)

        with monkeypatch.context() as mp:
            mp.setattr(psheads.backends.base, "upcast", failing_upcast)
            with pytest.raises(RuntimeError, match="boom"):
                adapter.capture(tokens, [0, 1], with_pattern=True)
        assert calls["n"] == 2
        assert model_state(model) == before
        assert torch.is_grad_enabled()
        # and the backend still captures correctly afterwards
        assert adapter.capture(tokens, [1])[1].q.shape[:2] == (2, N_POS)
    finally:
        model.eval()


def test_upcast_copies_what_shares_the_models_memory_and_keeps_what_does_not() -> None:
    """A capture never holds the model's memory (a later in-place write must not reach it), and
    a tensor already computed into new memory (a gathered query) is not copied a second time."""
    from psheads.rope.backends.base import upcast

    activation = torch.randn(2, 5, 4)
    view = activation.reshape(2, 5, 2, 2)
    kept = upcast(view, activation)
    activation.add_(1)
    assert kept.untyped_storage().data_ptr() != activation.untyped_storage().data_ptr()
    torch.testing.assert_close(kept + 1, view, atol=0, rtol=0)
    gathered = activation[torch.tensor([0, 1]), torch.tensor([4, 2])]
    assert upcast(gathered, activation).data_ptr() == gathered.data_ptr()
    assert upcast(activation).data_ptr() != activation.data_ptr()  # no source: always a copy
    half = activation.half()
    assert upcast(half, half).dtype == torch.float32


def test_hook_sites_are_read_once_per_call_not_per_batch(model_factory, monkeypatch) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    reads: list[tuple[int, str]] = []
    qk_sites = lens.backend.qk_sites
    monkeypatch.setattr(lens.backend, "qk_sites", lambda layer, which: reads.append((layer, which)) or qk_sites(
        layer, which))
    tokens = torch.randint(0, 64, (6, 12))
    first = psheads.score_heads(lens, tokens, batch_size=2, progress=False)  # three batches
    assert sorted(reads) == sorted({(geo.layer, which) for geo in lens.layers for which in "qk"})
    assert not lens.backend._readings  # dropped with the analysis: a later call reads them anew
    psheads.score_heads(lens, tokens, batch_size=2, progress=False)
    assert len(reads) == 2 * 2 * len(lens.layers)
    pd.testing.assert_frame_equal(first, psheads.score_heads(lens, tokens, batch_size=6, progress=False),
                                  check_exact=False, atol=1e-12)


# --- Hugging Face models ----------------------------------------------------------------------
def _hf_snapshot(model: torch.nn.Module) -> dict:
    """Everything psheads must leave alone on a user's Hugging Face model."""
    return {
        "params": [(name, id(p), p.dtype, p.device, p.detach().clone()) for name, p in model.named_parameters()],
        "buffers": [(name, id(b), b.detach().clone()) for name, b in model.named_buffers()],
        "modules": [(name, type(m).__name__, id(m)) for name, m in model.named_modules()],
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()],
        "training": [m.training for m in model.modules()],
        "attention": model.config._attn_implementation,
    }


def _assert_same_snapshot(before: dict, after: dict) -> None:
    assert [entry[:4] for entry in after["params"]] == [entry[:4] for entry in before["params"]]
    assert all(torch.equal(a[4], b[4]) for a, b in zip(after["params"], before["params"], strict=True))
    assert [entry[:2] for entry in after["buffers"]] == [entry[:2] for entry in before["buffers"]]
    assert all(torch.equal(a[2], b[2]) for a, b in zip(after["buffers"], before["buffers"], strict=True))
    for key in ("modules", "hooks", "training", "attention"):
        assert after[key] == before[key], key


@pytest.fixture
def hf_llama(tmp_path) -> tuple[Any, Any]:
    directory = helpers.save_tiny("llama", tmp_path / "m")
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    return model, directory


@pytest.mark.parametrize("family", ["gptj", "llama"])
def test_hf_model_scores_like_its_bridge_and_is_left_unchanged(tmp_path, family: str) -> None:
    directory = helpers.save_tiny(family, tmp_path / "m")
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    model.train()  # a mode the analysis must switch off and restore
    seen = []
    model.register_forward_hook(lambda module, args, output: seen.append(1))
    before = _hf_snapshot(model)
    prompts = tokens_of(n_pos=9, batch=3)
    scores = psheads.score_heads(model, prompts)
    profile = psheads.frequency_profile(model, prompts)
    _assert_same_snapshot(before, _hf_snapshot(model))
    assert not seen, "the user's own model was run"
    bridge = helpers.boot_bridge(directory)
    pd.testing.assert_frame_equal(scores, psheads.score_heads(bridge, prompts), check_like=False, check_exact=False,
                                  rtol=1e-9, atol=1e-12)
    pd.testing.assert_frame_equal(profile.planes, psheads.frequency_profile(bridge, prompts).planes, rtol=1e-9,
                                  atol=1e-12)


def test_hf_model_bridge_is_reused_until_the_weights_change(hf_llama) -> None:
    model, _ = hf_llama
    bridge = psheads.backends.as_bridge(model)
    assert psheads.backends.as_bridge(model) is bridge
    assert backend_for(model).model is bridge
    assert bridge.original_model is not model and bridge.cfg.model_name == model.name_or_path
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    rebuilt = psheads.backends.as_bridge(model)
    assert rebuilt is not bridge
    assert torch.equal(next(rebuilt.original_model.parameters()), next(model.parameters()))


def test_hf_model_keeps_its_dtype(tmp_path) -> None:
    directory = helpers.save_tiny("llama", tmp_path / "m")
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16)
    bridge = psheads.backends.as_bridge(model)
    assert backend_for(bridge).dtype == torch.bfloat16
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_hf_model_without_a_tokenizer_source_needs_one(hf_llama) -> None:
    _, directory = hf_llama
    built = transformers.AutoModelForCausalLM.from_config(helpers.hf_config("llama"))
    with pytest.raises(ValueError, match="no name_or_path to load its tokenizer from"):
        psheads.score_heads(built, tokens_of())
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    bridge = psheads.backends.as_bridge(built, tokenizer=tokenizer)
    assert bridge.tokenizer is not None
    assert len(psheads.score_heads(bridge, ["t1 t2 t3 t4 t5"])) == 2 * 4
    with pytest.raises(TypeError, match="needs a transformers.PreTrainedModel"):
        psheads.backends.as_bridge(bridge)


def test_an_attention_without_rotary_tables_gets_a_clear_error(model_factory) -> None:
    """GPT-J before transformers 5.24 computed its tables inside the attention: the SDPA table
    recorder cannot read them, and says which transformers to install (and removes its hooks)."""
    model = model_factory("gptj")
    backend = backend_for(model)
    attention = backend._hf_attn(0)
    before = model_state(model)
    with (pytest.raises(ValueError, match=re.escape("pip install 'transformers>=5.24'")),
          backend.sdpa_table_recorder([0], {})):
        attention(hidden_states=torch.zeros(1, 3, int(model.cfg.d_model)))  # no position_embeddings
    assert model_state(model) == before


def test_a_window_of_zero_is_no_window(model_factory, monkeypatch) -> None:
    """Qwen2-MoE configs set sliding_window to 0 when sliding is off: read as a window of 0 it hid
    every key, and the self-check reported a finite model's attention as not finite."""
    model = model_factory("qwen2")
    monkeypatch.setattr(model.blocks[0].attn.original_component, "sliding_window", 0)
    assert backend_for(model).layer_spec(0).window is None
    psheads.RopeLens(model)  # no false alarm
