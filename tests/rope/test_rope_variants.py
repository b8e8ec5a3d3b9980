"""RoPE variants: scaled Llama RoPE, Gemma-3 local/global bases, half precision and GQA.

Every check compares psheads against the model itself (docs: the decomposition): θ against the HF rotary
module's ``inv_freq``, YaRN's magnitude against its ``attention_scaling``, and the pattern rebuilt
from :meth:`RopeLens.frequency_logits` against the model's own ``hook_pattern``. Each variant also
gets a negative control (plain-RoPE tables rebuild a clearly wrong pattern), so a lens that ignored
the variant could not pass.

Note on geometry and length: ``lens.layers[l]`` is read once, from the tables of the self-check
probe (``probe_length`` tokens, capped at ``n_ctx``). For every variant here except dynamic NTK
the tables do not depend on the sequence length, so that geometry holds at any length. Dynamic
NTK recomputes θ from the sequence length once it exceeds ``max_position_embeddings``: there
``lens.layers`` describes the probe length only, while the per-forward decompositions read the
tables the model actually used on that input (tested below).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import psheads
from psheads.rope import geometry
from psheads.rope.layer import check_pattern
from tests import helpers

SHORT = 16
LONG = 512
TOL32 = 1e-5
THETA_TOL = 1e-6

LLAMA3 = {
    # original context 64: wavelengths 2π (kept), 62.8 (smoothed), 628 and 6283 (divided by 8)
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64, "rope_theta": 10000.0,
}
YARN = {
    "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": helpers.N_CTX // 4,
    "rope_theta": 10000.0,
}
LINEAR = {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}
DYNAMIC_MAX_POS = 32
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}

SCALED = {
    "llama3": dict(rope_parameters=LLAMA3),
    "yarn": dict(rope_parameters=YARN),
    "linear": dict(rope_parameters=LINEAR),
}


# --- builders & references ------------------------------------------------------------------
@pytest.fixture(scope="module")
def boot(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``boot(name, dtype=..., **overrides)`` → ``(model, lens)``, cached per module.

    The directory names avoid "llama"/"gemma" (TransformerLens 3.9 path quirk).
    """
    cache: dict[tuple[str, str], tuple[Any, psheads.RopeLens]] = {}

    def make(name: str, family: str = "llama", dtype: torch.dtype = torch.float32, backend: str = "bridge",
             **overrides: Any):
        if backend == "hooked" and not helpers.has_hooked_transformer():
            pytest.skip("this TransformerLens has no HookedTransformer (4.x)")
        if (name, backend) not in cache:
            directory: Path = tmp_path_factory.mktemp("variant") / "m"
            # the config standardises rope_parameters in place: hand it a copy
            helpers.save_tiny(family, directory, dtype=dtype, **copy.deepcopy(overrides))
            boot_fn = helpers.boot_hooked if backend == "hooked" else helpers.boot_bridge
            model = boot_fn(directory, dtype=dtype)
            cache[name, backend] = (model, psheads.RopeLens(model))
        return cache[name, backend]

    return make


def tokens_of(n_pos: int, seed: int = 1, batch: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, helpers.VOCAB, (batch, n_pos), generator=generator)


def hf_rotary(model: Any) -> Any:
    """The HF rotary-embedding module (through the bridge's wrapper, which forwards attributes)."""
    return model.original_model.model.rotary_emb


def descending(inv_freq: torch.Tensor) -> torch.Tensor:
    return torch.sort(inv_freq.double(), descending=True).values


def model_pattern(model: Any, tokens: torch.Tensor, layer: int) -> torch.Tensor:
    """The model's own post-softmax pattern ``[batch, head, query, key]`` (fp64)."""
    name = f"blocks.{layer}.attn.hook_pattern"
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == name)
    return cache[name].double()


def rebuilt_row(lens: psheads.RopeLens, tokens: torch.Tensor, layer: int, query: int) -> torch.Tensor:
    """Attention at ``query`` rebuilt from the planes: sum, soft-cap, mask, softmax."""
    geo = lens.layers[layer]
    planes = lens.frequency_logits(tokens, layer, query)  # [batch, head, plane, key]
    assert planes.dtype == torch.float64
    assert planes.shape[-2:] == (geo.n_planes + 1, query + 1)
    logits = geometry.soft_cap(planes.sum(dim=-2), geo.softcap)
    visible = geometry.visible_keys(torch.tensor([query]), query + 1, geo.window)[0]
    return torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)


def row_errors(model: Any, lens: psheads.RopeLens, tokens: torch.Tensor, layer: int,
               queries: tuple[int, ...] | None = None) -> float:
    """Worst |Δ| between rebuilt and model attention rows over ``queries`` (default: mid, last)."""
    n_pos = tokens.shape[1]
    queries = queries or (n_pos // 2, n_pos - 1)
    pattern = model_pattern(model, tokens, layer)
    worst = 0.0
    for t in queries:
        rebuilt = rebuilt_row(lens, tokens, layer, t)
        assert not pattern[:, :, t, t + 1 :].any()  # causal: no weight on future keys
        worst = max(worst, float((rebuilt - pattern[:, :, t, : t + 1]).abs().max()))
    return worst


def assert_pattern_matches(model: Any, lens: psheads.RopeLens, tokens: torch.Tensor, tol: float) -> None:
    for layer in range(lens.n_layers):
        error = row_errors(model, lens, tokens, layer)
        assert error <= tol, f"layer {layer}, N={tokens.shape[1]}: max |Δpattern| = {error:.3g} > {tol:g}"


def plain_tables(n_pos: int, rotary_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Unscaled halves-pairing RoPE tables, as a lens that ignored the scaling would use."""
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def full_capture(lens: psheads.RopeLens, tokens: torch.Tensor, layers: list[int]) -> dict:
    """q at every position, k̃, tables and the model's pattern, for :func:`pattern_error`."""
    return lens.backend.capture(tokens, layers, with_pattern=True)


def pattern_error(geo, capture) -> float:
    """Max |Δ| between the pattern rebuilt from the planes and an fp32 model's own."""
    return check_pattern(geo, capture, torch.float32).error


def thetas_of(capture: Any, geo: psheads.LayerGeometry) -> torch.Tensor:
    """θ (fastest first) of the tables a forward pass actually used."""
    native = geometry.plane_layout(geo.d_head, geo.rotary_dim, geo.pairing)
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
    theta, _ = geometry.plane_thetas(cos, sin, native)
    return descending(theta)


# --- 1. scaled Llama RoPE -------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(SCALED))
def test_scaled_theta_matches_hf_inv_freq(boot: Any, variant: str) -> None:
    model, lens = boot(variant, **SCALED[variant])
    rotary = hf_rotary(model)
    expected = descending(rotary.inv_freq)
    rotary_dim = 2 * expected.numel()
    plain = descending(1.0 / 10000.0 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    assert (expected - plain).abs().max() > 1e-3, "the scaling did not take effect in the HF model"
    for geo in lens.layers:
        assert geo.n_planes == expected.numel()
        assert torch.allclose(geo.theta, expected, rtol=0, atol=THETA_TOL), (variant, geo.layer, geo.theta, expected)
        assert torch.allclose(geo.magnitude, torch.full_like(geo.magnitude, float(rotary.attention_scaling)),
                              rtol=0, atol=1e-6)


def test_yarn_magnitude_is_attention_factor(boot: Any) -> None:
    model, lens = boot("yarn", **SCALED["yarn"])
    factor = float(hf_rotary(model).attention_scaling)
    assert factor == pytest.approx(0.1 * math.log(YARN["factor"]) + 1.0, abs=1e-12)  # 1.1386…
    frame = lens.geometry_frame()
    for geo in lens.layers:
        assert torch.allclose(geo.magnitude, torch.full_like(geo.magnitude, factor), rtol=0, atol=1e-6)
        assert frame.loc[frame.layer == geo.layer, "magnitude"].to_numpy() == pytest.approx(factor, abs=1e-6)


@pytest.mark.parametrize("n_pos", [SHORT, LONG])
@pytest.mark.parametrize("variant", sorted(SCALED))
def test_scaled_pattern_rebuilt(boot: Any, variant: str, n_pos: int) -> None:
    model, lens = boot(variant, **SCALED[variant])
    assert_pattern_matches(model, lens, tokens_of(n_pos), TOL32)


@pytest.mark.parametrize("variant", sorted(SCALED))
def test_scaled_negative_control(boot: Any, variant: str) -> None:
    """Plain RoPE tables (no scaling, no attention factor) must rebuild a visibly wrong pattern."""
    model, lens = boot(variant, **SCALED[variant])
    tokens = tokens_of(SHORT)
    captures = full_capture(lens, tokens, list(range(lens.n_layers)))
    for geo in lens.layers:
        capture = captures[geo.layer]
        assert pattern_error(geo, capture) <= TOL32
        cos, sin = plain_tables(SHORT, geo.rotary_dim, 10000.0)
        wrong = dataclasses.replace(capture, cos=cos, sin=sin)
        assert pattern_error(geo, wrong) > 1e-3
        if variant == "yarn":  # right θ, attention factor dropped (logits ×1/1.296)
            factor = float(hf_rotary(model).attention_scaling)
            unit = dataclasses.replace(capture, cos=capture.cos / factor, sin=capture.sin / factor)
            assert pattern_error(geo, unit) > 1e-3


# --- 1b. dynamic NTK ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dynamic(boot: Any) -> tuple[Any, psheads.RopeLens]:
    return boot("dynamic", max_position_embeddings=DYNAMIC_MAX_POS, rope_parameters=DYNAMIC)


def dynamic_inv_freq(model: Any, n_pos: int) -> torch.Tensor:
    """θ HF's dynamic NTK uses for a sequence of ``n_pos`` tokens (independent of the hooks)."""
    config = model.original_model.config
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, None, seq_len=n_pos)
    return descending(inv_freq)


def test_dynamic_geometry_is_read_at_probe_length(dynamic: tuple[Any, psheads.RopeLens]) -> None:
    """The probe (≤ max_position_embeddings tokens) sees the unscaled base: θ = original_inv_freq."""
    model, lens = dynamic
    assert lens.backend.n_ctx == DYNAMIC_MAX_POS
    original = descending(hf_rotary(model).original_inv_freq)
    assert torch.allclose(original, dynamic_inv_freq(model, DYNAMIC_MAX_POS), rtol=0, atol=1e-7)
    for geo in lens.layers:
        assert torch.allclose(geo.theta, original, rtol=0, atol=THETA_TOL)


@pytest.mark.parametrize("n_pos", [SHORT, 2 * DYNAMIC_MAX_POS, LONG])
def test_dynamic_capture_reads_tables_of_each_forward(dynamic: tuple[Any, psheads.RopeLens], n_pos: int) -> None:
    """Beyond max_position_embeddings the model changes θ; the capture follows it exactly."""
    model, lens = dynamic
    tokens = tokens_of(n_pos, batch=1)
    captures = full_capture(lens, tokens, list(range(lens.n_layers)))
    expected = dynamic_inv_freq(model, n_pos)
    original = descending(hf_rotary(model).original_inv_freq)
    if n_pos > DYNAMIC_MAX_POS:
        assert (expected - original).abs().max() > 1e-3, "dynamic NTK did not trigger"
    else:
        assert torch.allclose(expected, original)
    for geo in lens.layers:
        capture = captures[geo.layer]
        assert torch.allclose(thetas_of(capture, geo), expected, rtol=0, atol=THETA_TOL)
        error = pattern_error(geo, capture)
        assert error <= TOL32, f"layer {geo.layer}, N={n_pos}: {error:.3g}"
        if n_pos > DYNAMIC_MAX_POS:  # the probe-length tables would be wrong here
            cos, sin = plain_tables(n_pos, geo.rotary_dim, DYNAMIC["rope_theta"])
            assert pattern_error(geo, dataclasses.replace(capture, cos=cos, sin=sin)) > 1e-3


def test_dynamic_pattern_rebuilt_within_context(dynamic: tuple[Any, psheads.RopeLens]) -> None:
    model, lens = dynamic
    assert_pattern_matches(model, lens, tokens_of(SHORT), TOL32)
    assert_pattern_matches(model, lens, tokens_of(DYNAMIC_MAX_POS), TOL32)


@pytest.mark.parametrize("n_pos", [2 * DYNAMIC_MAX_POS, LONG])
def test_dynamic_pattern_rebuilt_beyond_context(dynamic: tuple[Any, psheads.RopeLens], n_pos: int) -> None:
    model, lens = dynamic
    assert_pattern_matches(model, lens, tokens_of(n_pos, batch=1), TOL32)


# --- 2. Gemma-3 local / global bases ---------------------------------------------------------
GEMMA3_BASES = {
    # (sliding base, full base) and how the config receives them
    "rope_parameters": dict(rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 500.0},
        "full_attention": {"rope_type": "default", "rope_theta": 200000.0},
    }),
    "rope_local_base_freq": dict(rope_local_base_freq=500.0, rope_theta=200000.0),
}


@pytest.fixture(scope="module", params=sorted(GEMMA3_BASES))
def gemma3(request: pytest.FixtureRequest, boot: Any) -> tuple[Any, psheads.RopeLens]:
    # 4 layers, pattern 2: sliding, full, sliding, full
    return boot(f"gemma3-{request.param}", family="gemma3", num_hidden_layers=4, **GEMMA3_BASES[request.param])


def test_gemma3_local_and_global_theta(gemma3: tuple[Any, psheads.RopeLens]) -> None:
    model, lens = gemma3
    config = model.original_model.config
    rotary = hf_rotary(model)
    assert config.layer_types == ["sliding_attention", "full_attention"] * 2
    local = descending(rotary.sliding_attention_inv_freq)
    glob = descending(rotary.full_attention_inv_freq)
    head_dim = config.head_dim
    half_dims = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    assert torch.allclose(local, descending(1.0 / 500.0**half_dims), rtol=1e-6, atol=0)
    assert torch.allclose(glob, descending(1.0 / 200000.0**half_dims), rtol=1e-6, atol=0)
    assert (local - glob).abs().max() > 1e-2
    for geo, layer_type in zip(lens.layers, config.layer_types, strict=True):
        expected = local if layer_type == "sliding_attention" else glob
        assert torch.allclose(geo.theta, expected, rtol=0, atol=THETA_TOL), (geo.layer, layer_type)
        assert torch.allclose(geo.magnitude, torch.ones_like(geo.magnitude), atol=1e-6)
        assert geo.window == (config.sliding_window if layer_type == "sliding_attention" else None)


@pytest.mark.parametrize("n_pos", [SHORT, LONG])
def test_gemma3_pattern_rebuilt(gemma3: tuple[Any, psheads.RopeLens], n_pos: int) -> None:
    model, lens = gemma3
    window = model.original_model.config.sliding_window
    assert n_pos > window
    assert_pattern_matches(model, lens, tokens_of(n_pos), TOL32)


def test_gemma3_bases_not_swapped(gemma3: tuple[Any, psheads.RopeLens]) -> None:
    """Negative control: the other layer type's tables rebuild a wrong pattern."""
    model, lens = gemma3
    config = model.original_model.config
    captures = full_capture(lens, tokens_of(SHORT), list(range(lens.n_layers)))
    for geo, layer_type in zip(lens.layers, config.layer_types, strict=True):
        other = 200000.0 if layer_type == "sliding_attention" else 500.0
        cos, sin = plain_tables(SHORT, geo.rotary_dim, other)
        assert pattern_error(geo, captures[geo.layer]) <= TOL32
        assert pattern_error(geo, dataclasses.replace(captures[geo.layer], cos=cos, sin=sin)) > 1e-3


# --- 3. half precision ------------------------------------------------------------------------
HALF = [torch.float16, torch.bfloat16]
HALF_ROW_TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2}
"""Max |Δ| of the attention rows ``frequency_logits`` rebuilds on these tiny models (fp32 products of
half-precision q and k̃: about 2⁻¹¹ and 2⁻⁸ of logits of order 1, through the softmax); the
self-check itself uses the derived per-entry bound of ``check_pattern``."""


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("family", ["llama", "gptj"])
def test_half_precision(tmp_path_factory: pytest.TempPathFactory, family: str, dtype: torch.dtype) -> None:
    directory = helpers.save_tiny(family, tmp_path_factory.mktemp("half") / "m", dtype=dtype)
    model = helpers.boot_bridge(directory, dtype=dtype)
    before = [(name, p.dtype) for name, p in model.named_parameters()]
    assert {d for _, d in before} == {dtype}
    lens = psheads.RopeLens(model)  # self-check at the dtype's tolerance
    assert [(name, p.dtype) for name, p in model.named_parameters()] == before

    tol = HALF_ROW_TOLERANCE[dtype]
    worst = {}
    for n_pos in (SHORT, LONG):
        tokens = tokens_of(n_pos, batch=1)
        captures = full_capture(lens, tokens, list(range(lens.n_layers)))
        for geo in lens.layers:
            assert captures[geo.layer].q.dtype == torch.float32  # upcast for analysis
            check = check_pattern(geo, captures[geo.layer], dtype)
            at_rows = row_errors(model, lens, tokens, geo.layer)
            worst[(n_pos, geo.layer)] = (check.error, at_rows)
            assert check.worst <= 1, \
                f"{family} {dtype} N={n_pos} layer {geo.layer}: {check.error:.3g} ({check.worst:.3g})"
            assert at_rows <= tol
    print(f"\n{family} {dtype}: worst |Δpattern| (all queries, frequency_logits rows) = "
          + ", ".join(f"N={n} L{layer}: {a:.2e}/{b:.2e}" for (n, layer), (a, b) in worst.items()))
    assert [(name, p.dtype) for name, p in model.named_parameters()] == before


# --- 4. GQA ---------------------------------------------------------------------------------
N_HEADS = 4


def boot_gqa(boot: Any, n_kv: int, backend: str = "bridge") -> tuple[Any, psheads.RopeLens]:
    """Tiny Llama with ``n_kv`` KV heads and 3 layers."""
    model, lens = boot(f"gqa{n_kv}", backend=backend, num_attention_heads=N_HEADS, num_hidden_layers=3,
                       num_key_value_heads=n_kv)
    return model, lens


@pytest.mark.parametrize("backend", ["bridge", "hooked"])
@pytest.mark.parametrize("n_kv", [1, 2, N_HEADS])
def test_gqa_pattern_every_layer(boot: Any, n_kv: int, backend: str) -> None:
    model, lens = boot_gqa(boot, n_kv, backend)
    group = N_HEADS // n_kv
    for geo in lens.layers:
        assert (geo.n_heads, geo.n_kv_heads) == (N_HEADS, n_kv)
        assert geo.kv_head_of.tolist() == [h // group for h in range(N_HEADS)]
    for n_pos in (SHORT, LONG):
        assert_pattern_matches(model, lens, tokens_of(n_pos), TOL32)


def test_gqa_tiled_kv_mapping_would_fail(boot: Any) -> None:
    """Negative control: reading KV heads tiled (h % n_kv) instead of interleaved breaks the check."""
    model, lens = boot_gqa(boot, 2)
    captures = full_capture(lens, tokens_of(SHORT), list(range(lens.n_layers)))
    for geo in lens.layers:
        capture = captures[geo.layer]
        tiled_k = capture.k[:, :, torch.arange(N_HEADS) % 2]  # expanded to query heads, tiled order
        interleaved_index = torch.arange(N_HEADS) // 2
        # present the tiled keys as N_HEADS "KV heads" read one per query head
        flat = dataclasses.replace(geo, n_kv_heads=N_HEADS)
        assert pattern_error(flat, dataclasses.replace(capture, k=capture.k[:, :, interleaved_index])) <= TOL32
        assert pattern_error(flat, dataclasses.replace(capture, k=tiled_k)) > 1e-3
