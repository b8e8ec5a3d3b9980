"""The all-permutation score (``method="anova"``): shares of position, token and interaction effects in M.

The sums of squares come from the Gram matrices of the factors of ``M = P Tᵀ``,
``SS_int = ⟨PᶜᵀPᶜ, TᶜᵀTᶜ⟩`` (O(|S|·k²), k ≤ d_head + 1), or from M itself under a soft-cap or when
|S| ≤ k. Exact, with no |S|³ cost; the method has no options.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from psheads.measure import engine
from psheads.measure.engine import KeyLogits
from psheads.measure.methods.base import ScoreConfig, register_score_method


def anova_shares(M: Float[Tensor, "*lead n n"]) -> tuple[Tensor, Tensor, Tensor]:
    """Two-way decomposition of ``M − mean(M)`` over S: shares of position, token, interaction.

    Shares sum to 1; a head with zero total variance (uniform) gets ``(1, 1, 0)`` so that the
    labelling rule calls it uniform, as the swap score does.
    """
    centred = M - M.mean(dim=(-2, -1), keepdim=True)
    rows = centred.mean(dim=-1, keepdim=True)
    cols = centred.mean(dim=-2, keepdim=True)
    n = M.shape[-1]
    ss_pos = n * rows.square().sum(dim=(-2, -1))
    ss_sym = n * cols.square().sum(dim=(-2, -1))
    ss_int = (centred - rows - cols).square().sum(dim=(-2, -1))
    return _shares(ss_pos, ss_sym, ss_int, M.square().sum(dim=(-2, -1)))


def anova_shares_factored(logits: KeyLogits) -> tuple[Tensor, Tensor, Tensor]:
    """``anova_shares`` of ``M = P Tᵀ`` without forming M (no soft-cap), in O(|S|·k²).

    With ``Pᶜ``, ``Tᶜ`` centred over S: row effects ``Pᶜ t̄``, column effects ``Tᶜ p̄`` and
    interaction ``Pᶜ Tᶜᵀ``, whose sum of squares is ``⟨PᶜᵀPᶜ, TᶜᵀTᶜ⟩``. The position factors are
    shared, so their Gram matrix is formed once.
    """
    p, t = logits.positions, logits.tokens
    p_mean, t_mean = p.mean(-2, keepdim=True), t.mean(-2, keepdim=True)
    p_c, t_c = p - p_mean, t - t_mean
    n = logits.n
    ss_pos = n * (p_c @ t_mean.transpose(-1, -2)).square().sum((-2, -1))
    ss_sym = n * (t_c @ p_mean.transpose(-1, -2)).square().sum((-2, -1))
    ss_int = ((p_c.transpose(-1, -2) @ p_c) * (t_c.transpose(-1, -2) @ t_c)).sum((-2, -1))
    mean = (p_mean * t_mean).sum((-2, -1))
    return _shares(ss_pos, ss_sym, ss_int, ss_pos + ss_sym + ss_int + n * n * mean.square())


def _shares(ss_pos: Tensor, ss_sym: Tensor, ss_int: Tensor, square_sum: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    total = ss_pos + ss_sym + ss_int
    # rounding leaves a uniform head ~ε² of variance: 1e-24 in fp64, scaled by (ε / ε_fp64)² in fp32
    flat = total <= 1e-24 * (torch.finfo(total.dtype).eps / torch.finfo(torch.float64).eps) ** 2 * (square_sum + 1e-300)
    safe = torch.where(flat, torch.ones_like(total), total)
    one = torch.ones_like(total)
    return (torch.where(flat, one, ss_pos / safe), torch.where(flat, one, ss_sym / safe),
            torch.where(flat, torch.zeros_like(total), ss_int / safe))


class AnovaScore:
    """All-permutation shares of position, token and interaction effects in M (exact)."""

    name = "anova"
    columns = {"positional": "share of M's variance over S in its position (row) effects",
               "symbolic": "share in its token (column) effects",
               "interaction": "share in the interaction of position and token (the three sum to 1)"}

    def min_swappable(self, config: ScoreConfig) -> int:
        return 2

    def score(self, logits: KeyLogits, config: ScoreConfig) -> dict[str, Tensor]:
        if logits.softcap is None and logits.n > logits.tokens.shape[-1]:
            shares = anova_shares_factored(logits)
        else:
            shares = _anova_dense(logits)
        return dict(zip(self.columns, shares, strict=True))


def _anova_dense(logits: KeyLogits) -> tuple[Tensor, Tensor, Tensor]:
    """``anova_shares`` of M itself (soft-capped), a chunk of leading entries at a time."""
    if logits.small_matrix is not None:
        return anova_shares(logits.small_matrix)
    flat = logits.flat()
    per_entry = 8 * 4 * logits.n * logits.n
    step = max(1, engine.CHUNK_BYTES // per_entry)
    parts = [anova_shares(flat.select(slice(s, s + step)).matrix()) for s in range(0, len(flat.tokens), step)]
    positional, symbolic, interaction = (torch.cat([part[c] for part in parts]).reshape(logits.lead) for c in range(3))
    return positional, symbolic, interaction


register_score_method(AnovaScore())
