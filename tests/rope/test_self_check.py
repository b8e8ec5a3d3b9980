"""The self-check is exact about precision: no false alarm on large logits, every quirk caught.

A model's attention logits carry the rounding of its own dtype: at |logit| ≈ 4·10³ an fp32 logit
is only known to ~5e-4, and the softmax passes that on to the pattern. The self-check compares the
rebuilt pattern with the model's under a tolerance derived from each logit's magnitude and the
dtype (``psheads.rope.layer.check_pattern``), so it neither cries wolf on a correct model with a
large key bias (Qwen2.5) nor lets a real quirk through.
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import pytest
import torch
import transformers

import psheads
from psheads.rope import backends, layer
from psheads.rope import lens as lens_module
from psheads.rope.lens import SelfCheckError
from tests import helpers

BIAS = 90.0
"""Size of the aligned q and k biases on the slowest plane: logits of about BIAS² / √d_head ≈ 2000."""


def _large_bias_qwen2(directory, dtype: torch.dtype = torch.float32):
    """A tiny Qwen2 whose q and k biases point the same way on the slowest plane of every head:
    every logit carries a common ~2000 that varies slowly with distance, like Qwen2.5's attention sinks."""
    config = helpers.hf_config("qwen2")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    d_head = config.hidden_size // config.num_attention_heads
    slowest = d_head // 2 - 1  # half-split pairing: plane (f, f + d/2); the last one turns slowest
    with torch.no_grad():
        for block in model.model.layers:
            attention = block.self_attn
            attention.q_proj.bias.view(-1, d_head)[:, slowest] = BIAS
            attention.k_proj.bias.view(-1, d_head)[:, slowest] = BIAS
    model.to(dtype).save_pretrained(directory)
    helpers.save_word_tokenizer(directory)
    return helpers.boot_bridge(directory, dtype=dtype)


@pytest.fixture(scope="module")
def large_bias(tmp_path_factory):
    return _large_bias_qwen2(tmp_path_factory.mktemp("qwen_bias"))


def _checks(lens_or_model) -> list[layer.PatternCheck]:
    lens = psheads.RopeLens(lens_or_model, self_check=False)
    tokens = torch.randint(0, 64, (1, 32), generator=torch.Generator().manual_seed(0))
    captures = lens.backend.capture(tokens, list(range(lens.n_layers)), None, with_pattern=True)
    return [layer.check_pattern(geo, captures[geo.layer], lens.backend.dtype) for geo in lens.layers]


def test_large_logits_pass_and_would_have_failed_a_fixed_tolerance(large_bias) -> None:
    checks = _checks(large_bias)
    assert max(check.max_logit for check in checks) >= 2000
    assert max(check.error for check in checks) > 1e-5  # the old fixed tolerance cried wolf here
    assert all(check.worst <= 1 for check in checks), [check.worst for check in checks]
    psheads.RopeLens(large_bias)  # the self-check passes


def _perturbed_capture(monkeypatch, change) -> None:
    """Apply ``change(capture)`` to every capture the backend returns (a quirk psheads would miss).

    A model whose captures change is another model: the checks made before are forgotten meanwhile.
    """
    real = backends.Backend.capture
    monkeypatch.setattr(lens_module, "_CHECKED", weakref.WeakKeyDictionary())

    def capture(self, *args, **kwargs):
        return {layer_index: change(item) for layer_index, item in real(self, *args, **kwargs).items()}

    monkeypatch.setattr(backends.Backend, "capture", capture)


def _with_tables(capture, cos, sin):
    return dataclasses.replace(capture, cos=cos, sin=sin)


def _wrong_base(relative: float, columns: slice | list[int] = slice(None)):
    """Tables whose angles are off by a factor (1 + relative) in ``columns`` (a wrong RoPE base there)."""
    def change(capture):
        cos, sin = capture.cos.double().clone(), capture.sin.double().clone()
        angle = torch.atan2(sin[:, columns], cos[:, columns]) * (1 + relative)
        radius = torch.hypot(sin[:, columns], cos[:, columns])
        cos[:, columns], sin[:, columns] = radius * torch.cos(angle), radius * torch.sin(angle)
        return _with_tables(capture, cos.to(capture.cos.dtype), sin.to(capture.sin.dtype))
    return change


def _relative_move(lens, captures, change) -> float:
    """How far ``change`` moves the logits to visible keys, relative to the largest |logit|: the part
    that differs between keys (a shift common to every key of a query leaves the pattern as it is)."""
    worst = 0.0
    for geo in lens.layers:
        capture = captures[geo.layer]
        before = layer.all_query_planes(geo, capture).sum(2)
        after = layer.all_query_planes(geo, change(capture)).sum(2)
        n = before.shape[-1]
        visible = torch.ones(n, n, dtype=torch.bool).tril()
        moved = (after - before).masked_fill(~visible, 0.0)
        centred = (moved - moved.sum(-1, keepdim=True) / visible.sum(-1)).masked_fill(~visible, 0.0)
        worst = max(worst, float(centred.abs().max() / before.masked_fill(~visible, 0.0).abs().max()))
    return worst


def _no_key_bias(model):
    biases = [block.self_attn.k_proj.bias.detach().clone() for block in model.original_model.model.layers]

    def change(capture):
        bias = biases[0].view(capture.k.shape[2], capture.k.shape[3]).to(capture.k)
        return dataclasses.replace(capture, k=capture.k - bias)
    return change


def test_a_wrong_base_that_moves_large_logits_by_1e4_relative_fails(large_bias, monkeypatch) -> None:
    """The slowest plane carries the ~2000 logits: its angles off by δ move them between keys. δ is
    calibrated so that they move by 1e-4 of the largest logit; a thousand times less passes, as it
    is below what the model's own fp32 rounding of those logits allows."""
    lens = psheads.RopeLens(large_bias, self_check=False)
    probe = torch.randint(0, 64, (2, 32), generator=torch.Generator().manual_seed(0))
    captures = lens.backend.capture(probe, list(range(lens.n_layers)), with_pattern=True)
    d_head = lens.layers[0].d_head
    slowest = [d_head // 2 - 1, d_head - 1]  # both columns of the last half-split plane
    trial = 1e-2
    delta = trial * 1e-4 / _relative_move(lens, captures, _wrong_base(trial, slowest))
    assert _relative_move(lens, captures, _wrong_base(delta, slowest)) == pytest.approx(1e-4, rel=0.05)
    with monkeypatch.context() as patch:
        _perturbed_capture(patch, _wrong_base(delta, slowest))
        with pytest.raises(SelfCheckError, match=r"Layer \d: the per-plane logits do not rebuild"):
            psheads.RopeLens(large_bias)
    with monkeypatch.context() as patch:
        _perturbed_capture(patch, _wrong_base(delta / 1000, slowest))
        psheads.RopeLens(large_bias)


def test_a_missing_key_bias_fails(large_bias, monkeypatch) -> None:
    _perturbed_capture(monkeypatch, _no_key_bias(large_bias))
    with pytest.raises(SelfCheckError, match="do not rebuild"):
        psheads.RopeLens(large_bias)


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2", "gptj", "neox"])
@pytest.mark.parametrize("quirk", ["scale", "base", "pairing", "gqa"])
def test_every_quirk_is_caught(model_factory, monkeypatch, family: str, quirk: str) -> None:
    model = model_factory(family, **({"num_key_value_heads": 2} if family in ("llama", "qwen2") else {}))
    psheads.RopeLens(model)  # the model itself passes
    real_spec = backends.BridgeBackend.layer_spec
    if quirk == "scale":
        monkeypatch.setattr(backends.BridgeBackend, "layer_spec",
                            lambda self, i: type(s := real_spec(self, i))(**{**s.__dict__, "scale": s.scale * 1.01}))
    elif quirk == "base":
        _perturbed_capture(monkeypatch, _wrong_base(1e-2))
    elif quirk == "pairing":
        other = {"adjacent": "halves", "halves": "adjacent"}
        monkeypatch.setattr(backends.BridgeBackend, "layer_spec", lambda self, i: type(s := real_spec(self, i))(
            **{**s.__dict__, "pairing": other[s.pairing]}))
    else:
        spec = real_spec(backends.backend_for(model), 0)
        if spec.n_kv_heads == spec.n_heads:
            pytest.skip("no GQA in this look-alike")

        def tiled(capture):  # tile instead of repeat_interleave: the wrong KV head for most query heads
            k = capture.k
            order = torch.arange(k.shape[2]).flip(0)
            return dataclasses.replace(capture, k=k[:, :, order])
        _perturbed_capture(monkeypatch, tiled)
    # a wrong pairing is refused even earlier, by the tables' own shape (their two dims of a plane differ)
    with pytest.raises((SelfCheckError, ValueError), match="do not rebuild|does not rotate with"):
        psheads.RopeLens(model)


def test_an_fp16_overflow_is_reported_as_an_overflow(tmp_path) -> None:
    model = _large_bias_qwen2(tmp_path, dtype=torch.float16)  # ~2000 logits; a 4x larger bias overflows
    with torch.no_grad():
        for block in model.original_model.model.layers:
            block.self_attn.q_proj.bias.mul_(40)
            block.self_attn.k_proj.bias.mul_(40)
    with pytest.raises(SelfCheckError, match=r"overflow.*float16.*float32 or bfloat16"):
        psheads.RopeLens(model)


def test_the_tolerance_is_the_documented_bound() -> None:
    """Hand-computed: one key pair, the bound's terms as docs/decomposition.md states them."""
    u32 = torch.finfo(torch.float32).eps / 2
    assert layer.unit_roundoff(torch.float32) == u32 and layer.unit_roundoff(torch.bfloat16) == 2.0 ** -8
    assert math.isclose(layer.logit_error_factor(torch.float32, d_head=64), 6 * u32 + 66 * u32)
    assert math.isclose(layer.logit_error_factor(torch.float16, d_head=64), 6 * 2.0 ** -11 + 66 * u32)
