"""Properties of the score arithmetic (hypothesis) on hand-built and random heads."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psheads.measure import methods
from psheads.measure.engine import KeyLogits
from psheads.rope import geometry

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


def random_tensor(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def from_matrix(M: torch.Tensor, other: torch.Tensor) -> KeyLogits:
    """A head whose position × token matrix is ``M`` (factors ``M`` and the identity)."""
    return KeyLogits(M, torch.eye(M.shape[-1], dtype=torch.float64).expand_as(M), other, None)


def scores(M: torch.Tensor, other: torch.Tensor, block_size: int = 1, tau: float = 1e-4):
    """Per-swap detail, then the fast path's ``(s_POS, s_SYM)``, which must agree with it."""
    swap = methods.swap_attention_detail(from_matrix(M, other), block_size, tau)
    s_pos, s_sym = methods.swap_scores(from_matrix(M[None], other[None]), block_size, tau)
    assert abs(float(s_pos[0]) - float((swap.weights * swap.cos_positional).sum())) < 1e-12
    assert abs(float(s_sym[0]) - float((swap.weights * swap.cos_symbolic).sum())) < 1e-12
    return swap, s_pos[0], s_sym[0]


@SETTINGS
@given(n=st.integers(3, 9), n_other=st.integers(0, 3), seed=st.integers(0, 10_000),
       scale=st.floats(0.01, 5.0), tau=st.sampled_from([1e-4, 1e-2, 1.0]), block_size=st.integers(1, 2))
def test_exclusion_frontier(n, n_other, seed, scale, tau, block_size) -> None:
    """arccos s_POS + arccos s_SYM ≥ Σ_π α(π) |π/2 − 2 atan(d_j / d_i)| (the exact frontier)."""
    if n // block_size < 2:
        return
    M = random_tensor(seed, n, n, scale=scale)
    other = random_tensor(seed + 1, n_other, scale=scale)
    swap, s_pos, s_sym = scores(M, other, block_size, tau)
    weights = swap.weights
    d_i, d_j = swap.d_base[swap.pairs[:, 0]], swap.d_base[swap.pairs[:, 1]]
    bound = (weights * (math.pi / 2 - 2 * torch.atan(d_j / d_i)).abs()).sum()
    angles = torch.arccos(s_pos.clamp(-1, 1)) + torch.arccos(s_sym.clamp(-1, 1))
    assert float(angles) >= float(bound) - 1e-7


def head_matrix(q: torch.Tensor, k: torch.Tensor, d_head: int, rotary_dim: int, base: float = 100.0):
    """M for one head with plain RoPE tables (q: [d], k: [n, d])."""
    n = k.shape[0]
    inv_freq = base ** (-torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(n + 1, dtype=torch.float64)[:, None] * inv_freq
    cos = torch.cat([angles.cos(), angles.cos()], -1)
    sin = torch.cat([angles.sin(), angles.sin()], -1)
    layout = geometry.plane_layout(d_head, rotary_dim, "halves")
    cos, sin = geometry.extend_tables(cos, sin, d_head)
    q_rot = geometry.rotate(q[None], cos[n], sin[n], layout)  # the query sits after the keys
    return geometry.position_token_logits(q_rot, k[:, None], cos[:n], sin[:n], layout, 1.0)[0]


@SETTINGS
@given(n=st.integers(3, 8), seed=st.integers(0, 10_000))
def test_identical_keys_make_a_pure_positional_head(n, seed) -> None:
    q = random_tensor(seed, 8, scale=3.0)
    k = random_tensor(seed + 1, 8).expand(n, 8)  # every token has the same key
    M = head_matrix(q, k, d_head=8, rotary_dim=8)
    _, s_pos, s_sym = scores(M, torch.zeros(0, dtype=torch.float64))
    assert float(s_pos) == 1.0 or abs(float(s_pos) - 1.0) < 1e-12
    ss_pos, ss_sym, ss_int = methods.anova_shares(M)
    assert float(ss_pos) > 1 - 1e-9 and float(ss_sym) < 1e-9
    assert float(s_pos) >= float(s_sym)


@SETTINGS
@given(n=st.integers(3, 8), seed=st.integers(0, 10_000))
def test_unrotated_planes_make_a_pure_symbolic_head(n, seed) -> None:
    q = torch.cat([torch.zeros(4, dtype=torch.float64), random_tensor(seed, 4, scale=3.0)])  # only plane 0
    k = random_tensor(seed + 1, n, 8)
    M = head_matrix(q, k, d_head=8, rotary_dim=4)
    swap, s_pos, s_sym = scores(M, torch.zeros(0, dtype=torch.float64))
    assert abs(float(s_sym) - 1.0) < 1e-12
    # the swapped attention follows the tokens exactly
    d_i, d_j = swap.d_base[swap.pairs[:, 0]], swap.d_base[swap.pairs[:, 1]]
    torch.testing.assert_close(swap.d_swapped, torch.stack([d_j, d_i], -1), atol=1e-12, rtol=0)
    ss_pos, ss_sym, _ = methods.anova_shares(M)
    assert float(ss_sym) > 1 - 1e-9 and float(ss_pos) < 1e-9
    assert float(s_sym) >= float(s_pos)


@SETTINGS
@given(n=st.integers(2, 8), value=st.floats(-20, 20), n_other=st.integers(0, 3))
def test_constant_logits_are_uniform(n, value, n_other) -> None:
    M = torch.full((n, n), value, dtype=torch.float64)
    swap, s_pos, s_sym = scores(M, torch.full((n_other,), value - 1.0, dtype=torch.float64))
    assert abs(float(s_pos) - 1) < 1e-12 and abs(float(s_sym) - 1) < 1e-12
    assert methods.label(float(s_pos), float(s_sym)) == "uniform"
    assert [float(x) for x in methods.anova_shares(M)] == [1.0, 1.0, 0.0]


def test_equal_mix_near_the_threshold() -> None:
    """An equal mix with a logit gap of 1.06 scores about 0.90 / 0.90 (labels near γ are fragile)."""
    gap = 1.06
    M = torch.tensor([[0.0, gap / 2], [gap / 2, gap]], dtype=torch.float64)  # M = (d_p + d_m) / 2
    _, s_pos, s_sym = scores(M, torch.zeros(0, dtype=torch.float64))
    assert abs(float(s_pos) - 0.90) < 0.005 and abs(float(s_sym) - 0.90) < 0.005


def test_labels() -> None:
    assert methods.label(0.95, 0.05) == "positional"
    assert methods.label(0.05, 0.95) == "symbolic"
    assert methods.label(0.95, 0.95) == "uniform"
    assert methods.label(0.95, 0.5) == "mixed"
    assert methods.label(0.8, 0.05, gamma=0.25) == "positional"


def test_block_partition_and_pairs() -> None:
    assert methods.make_blocks(7, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert methods.block_pairs(3).tolist() == [[0, 1], [0, 2], [1, 2]]
    assert methods.block_pairs(1).shape == (0, 2)
