"""Properties of the score arithmetic (hypothesis) on hand-built and random heads."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from psheads import geometry, scoring

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


def random_tensor(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def scores(M: torch.Tensor, other: torch.Tensor, block_size: int = 1, tau: float = 1e-4):
    swap = scoring.swap_attention_from_M(M, other, block_size)
    return swap, *scoring.swap_scores(swap, tau)


@SETTINGS
@given(n=st.integers(3, 9), n_other=st.integers(0, 3), seed=st.integers(0, 10_000),
       scale=st.floats(0.01, 5.0), tau=st.sampled_from([1e-4, 1e-2, 1.0]), block_size=st.integers(1, 2))
def test_exclusion_frontier(n, n_other, seed, scale, tau, block_size) -> None:
    """arccos s_POS + arccos s_SYM ≥ Σ_π α(π) |π/2 − 2 atan(d_j / d_i)| (DESIGN.md §2.1)."""
    if n // block_size < 2:
        return
    M = random_tensor(seed, n, n, scale=scale)
    other = random_tensor(seed + 1, n_other, scale=scale)
    swap, s_pos, s_sym = scores(M, other, block_size, tau)
    weights = scoring.swap_weights(swap, tau)
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
    ss_pos, ss_sym, ss_int = scoring.anova_shares(M)
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
    ss_pos, ss_sym, _ = scoring.anova_shares(M)
    assert float(ss_sym) > 1 - 1e-9 and float(ss_pos) < 1e-9
    assert float(s_sym) >= float(s_pos)


@SETTINGS
@given(n=st.integers(2, 8), value=st.floats(-20, 20), n_other=st.integers(0, 3))
def test_constant_logits_are_uniform(n, value, n_other) -> None:
    M = torch.full((n, n), value, dtype=torch.float64)
    swap, s_pos, s_sym = scores(M, torch.full((n_other,), value - 1.0, dtype=torch.float64))
    assert abs(float(s_pos) - 1) < 1e-12 and abs(float(s_sym) - 1) < 1e-12
    assert scoring.label(float(s_pos), float(s_sym)) == "uniform"
    assert [float(x) for x in scoring.anova_shares(M)] == [1.0, 1.0, 0.0]


def test_equal_mix_near_the_threshold() -> None:
    """DESIGN.md §2.1: an equal mix with a logit gap of 1.06 scores about 0.90 / 0.90."""
    gap = 1.06
    M = torch.tensor([[0.0, gap / 2], [gap / 2, gap]], dtype=torch.float64)  # M = (d_p + d_m) / 2
    _, s_pos, s_sym = scores(M, torch.zeros(0, dtype=torch.float64))
    assert abs(float(s_pos) - 0.90) < 0.005 and abs(float(s_sym) - 0.90) < 0.005


def test_labels() -> None:
    assert scoring.label(0.95, 0.05) == "positional"
    assert scoring.label(0.05, 0.95) == "symbolic"
    assert scoring.label(0.95, 0.95) == "uniform"
    assert scoring.label(0.95, 0.5) == "mixed"
    assert scoring.label(0.8, 0.05, gamma=0.25) == "positional"


def test_block_partition_and_pairs() -> None:
    assert scoring.make_blocks(7, 3).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert scoring.block_pairs(3).tolist() == [[0, 1], [0, 2], [1, 2]]
    perm = scoring.swap_permutations(scoring.make_blocks(4, 2), torch.tensor([[0, 1]]), 5)
    assert perm.tolist() == [[2, 3, 0, 1, 4]]


def test_pair_chunks_do_not_change_the_result() -> None:
    M = random_tensor(3, 2, 12, 12)
    other = random_tensor(4, 2, 2)
    whole = scoring.swap_attention_from_M(M, other, 1)
    chunked = scoring.swap_attention_from_M(M, other, 1, pair_chunk=7)
    torch.testing.assert_close(whole.d_swapped, chunked.d_swapped, atol=0, rtol=0)
