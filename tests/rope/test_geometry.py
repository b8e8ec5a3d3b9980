"""Pure tensor functions of psheads.geometry against independent references."""

from __future__ import annotations

import pytest
import torch
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_rotary
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
from transformers.models.llama.modeling_llama import (
    apply_rotary_pos_emb as llama_rotary,
)

from psheads.rope import geometry


def llama_tables(n_pos: int, rotary_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2).float() / rotary_dim)
    angles = torch.arange(n_pos).float()[:, None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def gptj_tables(n_pos: int, rotary_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    sincos = create_sinusoidal_positions(n_pos, rotary_dim)
    sin, cos = sincos.split(rotary_dim // 2, dim=-1)
    return sin, cos, cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)


def test_native_plane_dims() -> None:
    assert geometry.native_plane_dims(6, "halves").tolist() == [[0, 3], [1, 4], [2, 5]]
    assert geometry.native_plane_dims(6, "adjacent").tolist() == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="even"):
        geometry.native_plane_dims(5, "halves")
    with pytest.raises(ValueError, match="pairing"):
        geometry.native_plane_dims(4, "interleaved")  # type: ignore[arg-type]


@pytest.mark.parametrize("rotary_dim", [4, 8])
def test_rotate_matches_llama(rotary_dim: int) -> None:
    d_head, n_pos = 8, 11
    cos, sin = llama_tables(n_pos, rotary_dim)
    x = torch.randn(2, 3, n_pos, d_head)  # [batch, head, pos, d]
    layout = geometry.plane_layout(d_head, rotary_dim, "halves")
    cos_full, sin_full = geometry.extend_tables(cos, sin, d_head)
    ours = geometry.rotate(x.double(), cos_full, sin_full, layout)
    x_rot, _ = llama_rotary(x[..., :rotary_dim], x[..., :rotary_dim], cos[None], sin[None])
    expected = torch.cat([x_rot, x[..., rotary_dim:]], dim=-1)
    torch.testing.assert_close(ours, expected.double(), atol=1e-6, rtol=0)


def test_rotate_matches_gptj() -> None:
    d_head, rotary_dim, n_pos = 8, 4, 9
    sin, cos, cos_el, sin_el = gptj_tables(n_pos, rotary_dim)
    x = torch.randn(2, n_pos, 3, d_head)  # GPT-J's layout [batch, pos, head, d]
    layout = geometry.plane_layout(d_head, rotary_dim, "adjacent")
    cos_full, sin_full = geometry.extend_tables(cos_el, sin_el, d_head)
    ours = geometry.rotate(x.double().transpose(1, 2), cos_full, sin_full, layout).transpose(1, 2)
    x_rot = gptj_rotary(x[..., :rotary_dim], sin[None], cos[None])
    expected = torch.cat([x_rot, x[..., rotary_dim:]], dim=-1)
    torch.testing.assert_close(ours, expected.double(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("pairing", ["halves", "adjacent"])
def test_plane_thetas_recover_the_base(pairing: str) -> None:
    d_head = rotary_dim = 16
    cos, sin = llama_tables(4, rotary_dim, base=500.0)
    if pairing == "adjacent":  # same angles laid out pairwise
        cos = cos[:, : rotary_dim // 2].repeat_interleave(2, -1)
        sin = sin[:, : rotary_dim // 2].repeat_interleave(2, -1)
    layout = geometry.plane_layout(d_head, rotary_dim, pairing)  # type: ignore[arg-type]
    theta, magnitude = geometry.plane_thetas(*geometry.extend_tables(cos, sin, d_head), layout)
    expected = 500.0 ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    torch.testing.assert_close(theta, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(magnitude, torch.ones_like(magnitude), atol=1e-6, rtol=0)
    assert geometry.frequency_order(theta).tolist() == list(range(rotary_dim // 2))


def test_frequency_order_sorts_fastest_first() -> None:
    theta = torch.tensor([0.1, 0.5, 0.01, 0.5])
    assert geometry.frequency_order(theta).tolist() == [1, 3, 0, 2]


def _random_layout_and_tables(pairing: str, d_head: int = 8, rotary_dim: int = 6, n_pos: int = 7):
    cos, sin = llama_tables(n_pos, rotary_dim)
    if pairing == "adjacent":
        cos = cos[:, : rotary_dim // 2].repeat_interleave(2, -1)
        sin = sin[:, : rotary_dim // 2].repeat_interleave(2, -1)
    order = torch.randperm(rotary_dim // 2)  # any frequency-ID order must give the same sums
    layout = geometry.plane_layout(d_head, rotary_dim, pairing, order)  # type: ignore[arg-type]
    return layout, *geometry.extend_tables(cos, sin, d_head)


@pytest.mark.parametrize("pairing", ["halves", "adjacent"])
def test_frequency_logits_sum_to_the_dot_product(pairing: str) -> None:
    layout, cos, sin = _random_layout_and_tables(pairing)
    q = torch.randn(2, 3, 8, dtype=torch.float64)
    k = torch.randn(2, 7, 3, 8, dtype=torch.float64)
    q_rot = geometry.rotate(q, cos[6], sin[6], layout)
    k_rot = geometry.rotate(k.transpose(1, 2), cos, sin, layout).transpose(1, 2)
    planes = geometry.frequency_logits(q_rot, k_rot, layout, scale=0.5)
    assert planes.shape == (2, 3, layout.n_planes + 1, 7)
    direct = 0.5 * torch.einsum("bhd,bkhd->bhk", q_rot, k_rot)
    torch.testing.assert_close(planes.sum(dim=2), direct, atol=1e-12, rtol=0)
    # each slice only uses its own dims
    a, b = layout.dims[1].tolist()
    torch.testing.assert_close(
        planes[:, :, 1], 0.5 * (q_rot[:, :, None, a] * k_rot[..., a].transpose(1, 2)
                                + q_rot[:, :, None, b] * k_rot[..., b].transpose(1, 2)),
        atol=1e-12, rtol=0,
    )
    unrotated = 0.5 * torch.einsum("bhd,bkhd->bhk", q_rot[..., 6:], k_rot[..., 6:])
    torch.testing.assert_close(planes[:, :, -1], unrotated, atol=1e-12, rtol=0)


@pytest.mark.parametrize("pairing", ["halves", "adjacent"])
@pytest.mark.parametrize("by_frequency", [False, True])
def test_position_token_logits_match_explicit_rotation(pairing: str, by_frequency: bool) -> None:
    layout, cos, sin = _random_layout_and_tables(pairing)
    q_rot = torch.randn(2, 3, 8, dtype=torch.float64)
    k = torch.randn(2, 7, 3, 8, dtype=torch.float64)
    M = geometry.position_token_logits(q_rot, k, cos, sin, layout, scale=0.25, by_frequency=by_frequency)
    # brute force: rotate every token m to every position p
    expected = torch.empty(2, 3, layout.n_planes + 1, 7, 7, dtype=torch.float64)
    for p in range(7):
        k_at_p = geometry.rotate(k, cos[p], sin[p], layout)  # [batch, token, head, d]
        expected[:, :, :, p, :] = geometry.frequency_logits(q_rot, k_at_p, layout, 0.25)
    if not by_frequency:
        expected = expected.sum(dim=2)
    torch.testing.assert_close(M, expected, atol=1e-12, rtol=0)


def test_soft_cap_and_visible_keys() -> None:
    x = torch.tensor([-100.0, 0.0, 3.0])
    assert torch.equal(geometry.soft_cap(x, None), x)
    torch.testing.assert_close(geometry.soft_cap(x, 2.0), 2.0 * torch.tanh(x / 2.0))
    visible = geometry.visible_keys(torch.tensor([4]), 6, window=2)
    assert visible.tolist() == [[False, False, False, True, True, False]]
    assert geometry.visible_keys(torch.tensor([2]), 4, None).tolist() == [[True, True, True, False]]


def test_plane_keep_mask() -> None:
    layout = geometry.plane_layout(8, 6, "halves")
    mask = geometry.plane_keep_mask(layout, [1, 0])
    assert mask.tolist() == [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    assert geometry.plane_keep_mask(layout, []).tolist() == [1.0] * 8
    with pytest.raises(ValueError, match="out of range"):
        geometry.plane_keep_mask(layout, [4])
    with pytest.raises(TypeError, match="ints"):
        geometry.plane_keep_mask(layout, [1.0])  # type: ignore[list-item]


def test_plane_layout_rejects_bad_rotary_dim() -> None:
    with pytest.raises(ValueError, match="rotary_dim"):
        geometry.plane_layout(4, 6, "halves")
