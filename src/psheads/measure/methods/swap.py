"""Paper B's swap score: its options, the method, the per-swap view ``swap_attention`` and the exact
arithmetic behind them.

The swap score never re-normalises a swapped softmax: the cosines are invariant to it, the weights
α need only the unswapped attention, and pairs whose α falls below fp64 resolution are skipped
(their total weight is below 2⁻⁵³). A swap's normaliser, needed only for ``swap_attention``,
follows in O(b) from the unswapped one, with the mass outside the two heaviest units (blocks or
unmoved keys) summed directly so nothing cancels.

Every swapped input's logits are entries of ``M[p, m] = scale · q_rotᵀ R_p k̃_m`` (positions p,
tokens m over the swappable set S), so the engine's factored logits give every swap of every layer
and head without re-running anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from psheads.interface import distributed, validation
from psheads.measure import engine, kernels
from psheads.measure.engine import KeyLogits
from psheads.measure.methods.base import ScoreConfig, register_score_method, score_config
from psheads.measure.prompts import prepare_prompts
from psheads.results import schema
from psheads.rope import geometry
from psheads.rope.lens import as_lens

_FP64_RESOLUTION = 2.0**-53


@dataclass(frozen=True)
class SwapParameters:
    """The swap score's options.

    Attributes:
        tau: temperature of the swap weights α (paper B's 1e-4 makes α nearly an argmax).
        block_size: positions per swapped block.
    """

    tau: float = 1e-4
    block_size: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "tau", validation.number(self.tau, "tau", above=0))
        object.__setattr__(self, "block_size", validation.integer(self.block_size, "block_size", minimum=1))


# --- the arithmetic ------------------------------------------------------------------------------
def make_blocks(n_swappable: int, block_size: int) -> Int[Tensor, "block size"]:
    """Consecutive blocks of ``block_size`` indices into S from its start (the tail is dropped)."""
    n_blocks = n_swappable // block_size
    return torch.arange(n_blocks * block_size).reshape(n_blocks, block_size)


def block_pairs(n_blocks: int, device: torch.device | str = "cpu") -> Int[Tensor, "pair 2"]:
    """All pairs ``(i, j)``, ``i < j``, in lexicographic order, on ``device``."""
    return torch.triu_indices(n_blocks, n_blocks, offset=1, device=device).T  # one operation, combinations' order


def block_attention(logits: KeyLogits, block_size: int) -> Float[Tensor, "*lead block"]:
    """``d_i(x)``: attention mass of each block on the unswapped input."""
    d = logits.log_attention[..., : logits.n].exp()
    n_blocks = logits.n // block_size
    return d[..., : n_blocks * block_size].unflatten(-1, (n_blocks, block_size)).sum(-1)


def skip_threshold(d_blocks: Float[Tensor, "*lead block"], tau: float) -> Float[Tensor, "*lead"]:
    """Pairs with ``|d_i − d_j|`` below this carry, all together, less than 2⁻⁵³ of the weight α.

    α(π) ≤ exp((|d_i − d_j| − max|d_i − d_j|) / τ); below ``2⁻⁵³ / n_pairs`` for every skipped
    pair, their total stays below fp64 resolution of the score.
    """
    n_blocks = d_blocks.shape[-1]
    n_pairs = max(1, n_blocks * (n_blocks - 1) // 2)
    spread = d_blocks.amax(-1) - d_blocks.amin(-1)
    return spread - tau * (math.log(n_pairs) - math.log(_FP64_RESOLUTION))


def _block_sums(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """``(Σ e^x, Σ e^y)`` over the last dim (a block's positions), shifted by their common maximum.

    The larger of the two is at least 1 (no under- or overflow); single positions take one
    exponential.
    """
    if x.shape[-1] == 1:
        diff = (y - x)[..., 0]
        smaller = (-diff.abs()).exp()
        up = diff > 0
        return torch.where(up, smaller, 1.0), torch.where(up, 1.0, smaller)
    shift = torch.maximum(x.amax(-1), y.amax(-1)).unsqueeze(-1)
    return (x - shift).exp().sum(-1), (y - shift).exp().sum(-1)


def _oriented_cosines(u: Tensor, v: Tensor, rho: Tensor) -> tuple[Tensor, Tensor]:
    """Cosines of ``(u, v)`` with ``(1, ρ)`` and with ``(ρ, 1)``, in ``[0, 1]``.

    ``(u, v)`` stands for the swapped attention ``(d_i(πx), d_j(πx))`` of a pair whose heavier
    block ``i`` has base attention ``d_i`` and lighter ``j`` has ``d_j = ρ·d_i``: both normalisers
    cancel in a cosine.
    """
    scale = ((u * u + v * v) * (1 + rho * rho)).rsqrt()
    # both vectors are non-negative: a cosine in [0, 1], which rounding must not leave
    return ((u + v * rho) * scale).clamp(0, 1), ((u * rho + v) * scale).clamp(0, 1)


def _pair_cosines(x: Tensor, y: Tensor, d_i: Tensor, d_j: Tensor) -> tuple[Tensor, Tensor]:
    """Cosines of the swapped block attention with ``(d_i, d_j)`` and ``(d_j, d_i)``.

    ``x[..., k] = M[i_k, j_k]`` and ``y[..., k] = M[j_k, i_k]`` are the swapped blocks' logits.
    Each pair is turned heavier block first (the cosines do not change); a pair with no base
    attention at all has cosines 0.
    """
    first = (d_i >= d_j)[..., None]
    x, y = torch.where(first, x, y), torch.where(first, y, x)
    heavy, light = torch.maximum(d_i, d_j), torch.minimum(d_i, d_j)
    alive = heavy > 0
    rho = torch.where(alive, light / torch.where(alive, heavy, 1.0), 0.0)
    cos_pos, cos_sym = _oriented_cosines(*_block_sums(x, y), rho)
    return cos_pos * alive, cos_sym * alive


def _diagonal_blocks(slab: Tensor, block_size: int) -> Tensor:
    """``[..., I_k, J_k]`` entries of a ``[..., rows·b, cols·b]`` slab as ``[..., I, J, k]``."""
    rows, cols = slab.shape[-2] // block_size, slab.shape[-1] // block_size
    return slab.unflatten(-1, (cols, block_size)).unflatten(-3, (rows, block_size)).diagonal(dim1=-3, dim2=-1)


def _gather_rows(positions: Tensor, lead: Tensor, index: Tensor) -> Tensor:
    """Rows ``index`` ``[L, r]`` of shared (``[n, k]``) or per-entry (``[L, n, k]``) position factors."""
    return positions[index] if positions.ndim == 2 else positions[lead, index]


def swap_scores(logits: KeyLogits, block_size: int,
                tau: float) -> tuple[Float[Tensor, "*lead"], Float[Tensor, "*lead"]]:
    """Paper B's ``(s_POS, s_SYM)`` for every leading entry, exactly, in O(|S|²) or less.

    Pairs whose weight is negligible (``skip_threshold``) are skipped. Short prompts read every
    pair from all of M. For long prompts each pair is read from the row of its heavier block:
    blocks are ranked by attention mass, a block's partners are a prefix of the lighter ranks, and
    only rows with partners are formed (by matrix products), each up to its last partner, so a
    peaked head costs O(|S|·k) and a diffuse one O(|S|²·k). The pair cosines of long prompts run
    as one fused kernel (``psheads.measure.kernels``) once their work is large.
    """
    d_blocks = block_attention(logits, block_size).flatten(0, -2)  # [L, nb]
    threshold = skip_threshold(d_blocks, tau)
    if logits.small_matrix is None:
        sums = _heavy_row_sums(logits.flat(), d_blocks, threshold, tau, block_size)
    else:
        sums = _small_matrix_sums(logits.small_matrix.flatten(0, -3), d_blocks, threshold, tau, block_size)
    return (sums[0] / sums[2]).reshape(logits.lead), (sums[1] / sums[2]).reshape(logits.lead)


def _small_matrix_sums(whole: Float[Tensor, "entry n n"], d_blocks: Tensor, threshold: Tensor, tau: float,
                       block_size: int) -> Float[Tensor, "3 entry"]:
    """``(Σ α·cos_pos, Σ α·cos_sym, Σ α)`` of every entry, the pairs that carry weight read from M."""
    device = d_blocks.device  # everything runs where the logits are (the model's device)
    spread = d_blocks.amax(-1) - d_blocks.amin(-1)
    sums = torch.zeros(3, len(d_blocks), dtype=d_blocks.dtype, device=device)
    pairs = block_pairs(d_blocks.shape[-1], device)
    offsets = torch.arange(block_size, device=device)
    step = max(1, engine.CHUNK_BYTES // (8 * 8 * max(1, len(pairs))))
    for first in range(0, len(whole), step):
        part = slice(first, first + step)
        d_i, d_j = d_blocks[part, pairs[:, 0]], d_blocks[part, pairs[:, 1]]
        lead, pair = ((d_i - d_j).abs() >= threshold[part, None]).nonzero(as_tuple=True)
        rows, cols = (pairs[pair, side, None] * block_size + offsets for side in (0, 1))
        entry = lead[:, None] + first
        d_i, d_j = d_i[lead, pair], d_j[lead, pair]
        weight = (((d_i - d_j).abs() - spread[lead + first]) / tau).exp()
        cos_pos, cos_sym = _pair_cosines(whole[entry, rows, cols], whole[entry, cols, rows], d_i, d_j)
        for row, value in enumerate((weight * cos_pos, weight * cos_sym, weight)):
            sums[row].index_add_(0, lead + first, value)
    return sums


#: Ranks of heavier blocks per tile, and of lighter partners per column chunk, of the compiled
#: kernel, by device type: sized for a CPU's cache, and far larger on a GPU, where each tile is a
#: few launches (the swap score at 8,192 tokens of Qwen2.5-0.5B's shape on an H200: 15.5 s with
#: the CPU's tiles, 1.15 s with these). Other device types take the CPU's.
TILES = {"cpu": (64, 512), "cuda": (2048, 8192)}


def _tile_row_sums(x: Tensor, y: Tensor, inverse_rows: Tensor, d_cols: Tensor, c_cols: Tensor,
                   n_partners: Tensor) -> Float[Tensor, "3 entry row"]:
    """Per row of a tile: ``Σ_j c_j·cos_pos``, ``Σ_j c_j·cos_sym`` and ``Σ_j c_j`` over its partners.

    Args:
        x: ``[entry, row·b, col·b]`` ``M[rows, cols]`` (heavier blocks' rows, lighter blocks' columns).
        y: ``[entry, row·b, col·b]`` ``M[cols, rows]ᵀ``.
        inverse_rows: ``[entry, row]`` ``1 / d_i`` (0 where ``d_i = 0``).
        d_cols: ``[entry, col]`` ``d_j``; c_cols: ``[entry, col]`` the columns' weight factors.
        n_partners: ``[entry, row]`` partners of each row among the tile's columns (a prefix).
    """
    block_size = x.shape[-2] // inverse_rows.shape[-1]
    u, v = _block_sums(_diagonal_blocks(x, block_size), _diagonal_blocks(y, block_size))
    cos_pos, cos_sym = _oriented_cosines(u, v, d_cols[:, None, :] * inverse_rows[:, :, None])
    keep = torch.arange(c_cols.shape[-1], device=c_cols.device) < n_partners[:, :, None]
    c = torch.where(keep, c_cols[:, None, :], 0.0)
    return torch.stack([(c * cos_pos).sum(-1), (c * cos_sym).sum(-1), c.sum(-1)])


_tile_kernel = kernels.Fused(_tile_row_sums)


def _heavy_row_sums(flat: KeyLogits, d_blocks: Tensor, threshold: Tensor, tau: float,
                    block_size: int) -> Float[Tensor, "3 entry"]:
    """``(Σ α·cos_pos, Σ α·cos_sym, Σ α)`` of every entry, from tiles of heavier ranks × lighter ranks.

    A pair's weight ``α = exp((d_i − d_j − spread) / τ)`` (``d_i ≥ d_j``) factors into
    ``r_i = exp((d_i − d_max) / τ)`` and ``c_j = exp((d_min − d_j) / τ)``, both at most 1. Ranks are
    padded with empty blocks to whole tiles (static shapes for the compiled kernel); entries
    with no partner in a tile are left out of it.
    """
    n_lead, n_blocks = d_blocks.shape
    device = d_blocks.device
    ordered, order = d_blocks.sort(dim=-1)  # ascending mass
    ranks = torch.arange(n_blocks, device=device)
    partners = torch.searchsorted(ordered, (ordered - threshold[:, None].clamp_min(0)).contiguous(), right=True)
    partners = torch.minimum(partners, ranks)  # lighter partners of each rank: ranks 0 … partners − 1
    n_heavy, most = int((partners > 0).sum(-1).max()), int(partners.max())  # the heaviest ranks have partners
    work = int(partners.sum())  # pairs that carry weight
    compiled = _tile_kernel.compiles(work)
    if compiled:  # static tile shapes: one compiled kernel serves every call
        n_rows, n_cols = TILES.get(device.type, TILES["cpu"])
    else:  # the fewest eager calls the memory budget allows: every partner at once, as many rows as fit
        n_cols = most
        n_rows = min(n_heavy, max(1, engine.CHUNK_BYTES // (8 * 16 * n_lead * n_cols * block_size**2)))
    lowest = n_blocks - -(-n_heavy // n_rows) * n_rows  # lowest row rank, maybe below 0 (padding)
    front, back = max(0, -lowest), max(0, -(-most // n_cols) * n_cols - n_blocks)

    def padded(values: Tensor, per_block: int = 1) -> Tensor:
        """``values`` ``[L, ranks·per_block, ...]`` with ``front`` empty ranks before and ``back`` after."""
        pad = [0, 0] * (values.ndim - 2) + [front * per_block, back * per_block]
        return torch.nn.functional.pad(values, pad)

    offsets, lead = torch.arange(block_size, device=device), torch.arange(n_lead, device=device)[:, None]
    by_rank = (order[:, :, None] * block_size + offsets).flatten(1)  # [L, nb·b] positions in S
    p_ranked = padded(_gather_rows(flat.positions, lead, by_rank), block_size)
    t_ranked = padded(flat.tokens[lead, by_rank], block_size)
    alive = ordered > 0
    row_weight = padded(((ordered - ordered[:, -1:]) / tau).exp())  # r_i
    row_alive = padded(alive.to(ordered.dtype))  # a heavier block without attention has cosines 0
    inverse = padded(torch.where(alive, 1 / torch.where(alive, ordered, 1.0), 0.0))
    d_cols, c_cols = padded(ordered), padded(((ordered[:, :1] - ordered) / tau).exp())
    partners = padded(partners)
    sums = torch.zeros(3, n_lead, dtype=d_blocks.dtype, device=device)
    step = max(1, engine.CHUNK_BYTES // (8 * 16 * n_rows * n_cols * block_size**2))  # entries per call
    for top in range(n_blocks + front, lowest + front, -n_rows):  # tiles of ranks, heaviest first
        rows = slice(top - n_rows, top)
        row_span = slice(rows.start * block_size, rows.stop * block_size)
        reach = partners[:, rows].amax(-1)  # [L] partners of each entry's heaviest row in the tile
        last = int(reach.max())
        width = n_cols if compiled else last  # eager tiles end at their last partner
        for start in range(front, front + last, width):  # column chunks, lightest first
            cols = slice(start, start + width)
            col_span = slice(start * block_size, cols.stop * block_size)
            active = reach > start - front
            if bool(active.all()):  # contiguous entries: views, no copies
                parts = [slice(first, first + step) for first in range(0, n_lead, step)]
            else:
                parts = list(active.nonzero()[:, 0].split(step))
            for entries in parts:
                p_rows, t_rows = p_ranked[entries, row_span], t_ranked[entries, row_span]
                p_cols, t_cols = p_ranked[entries, col_span], t_ranked[entries, col_span]
                x = geometry.soft_cap(p_rows @ t_cols.transpose(-1, -2), flat.softcap)  # M[rows, cols]
                y = geometry.soft_cap(p_cols @ t_rows.transpose(-1, -2), flat.softcap).transpose(-1, -2)
                within = partners[entries, rows] - (start - front)
                row_sums = _tile_kernel(x, y, inverse[entries, rows], d_cols[entries, cols], c_cols[entries, cols],
                                        within, work=work)
                r, kept = row_weight[entries, rows], row_alive[entries, rows]
                totals = torch.stack([(row_sums[0] * r * kept).sum(-1), (row_sums[1] * r * kept).sum(-1),
                                      (row_sums[2] * r).sum(-1)])
                sums[:, entries] += totals
    return sums


@dataclass
class SwapAttention:
    """Block attention before and after every swap of one head and prompt.

    Attributes:
        d_base: ``[block]`` attention mass of each block on the unswapped input.
        d_swapped: ``[pair, 2]`` ``(d_i(πx), d_j(πx))`` for every pair ``(i, j)``.
        weights: ``[pair]`` swap weights α.
        cos_positional: ``[pair]`` cosine of ``v_ij(πx)`` with ``v_ij(x)``.
        cos_symbolic: ``[pair]`` cosine of ``v_ij(πx)`` with ``v_ji(x)``.
        pairs: ``[pair, 2]`` block indices.
    """

    d_base: Tensor
    d_swapped: Tensor
    weights: Tensor
    cos_positional: Tensor
    cos_symbolic: Tensor
    pairs: Tensor = field(repr=False)


def swap_attention_detail(logits: KeyLogits, block_size: int, tau: float) -> SwapAttention:
    """Every swap of a single head and prompt (``logits`` without leading dims), exactly.

    A swap's normaliser is ``Z − e_i − e_j + Σ e^{M[i_k, j_k]} + Σ e^{M[j_k, i_k]}`` (block masses
    ``e``). The mass outside the swapped blocks is summed directly when they include the
    heaviest unit (a block or an unmoved key), so no subtraction can cancel.
    """
    if logits.lead.numel() != 1 or len(logits.lead) != 0:
        raise ValueError("swap_attention_detail takes the logits of one head and prompt (no leading dims).")
    n_blocks = logits.n // block_size
    blocked = n_blocks * block_size
    lam, other = logits.diagonal, logits.other_logits
    shift = torch.cat([lam, other]).max()
    mass = (lam - shift).exp()
    units = torch.cat([mass[:blocked].reshape(n_blocks, block_size).sum(-1), mass[blocked:],
                       (other - shift).exp()])  # blocks, then every unmoved key
    total = units.sum()
    d_base = units[:n_blocks] / total
    pairs = block_pairs(n_blocks, lam.device)
    i, j = pairs[:, 0], pairs[:, 1]
    offsets = torch.arange(block_size, device=lam.device)
    M = logits.matrix()
    x = M[i[:, None] * block_size + offsets, j[:, None] * block_size + offsets]
    y = M[j[:, None] * block_size + offsets, i[:, None] * block_size + offsets]
    top = units.topk(2).indices.tolist()
    keep = torch.ones(len(units), dtype=torch.bool, device=units.device)
    keep[top[0]] = False
    rest_1 = units[keep].sum()  # all but the heaviest unit, summed directly
    keep[top[1]] = False
    rest_2 = units[keep].sum()  # all but the two heaviest
    rest = total - units[i] - units[j]
    with_top = (i == top[0]) | (j == top[0])
    rest = torch.where(with_top, rest_1 - torch.where(i == top[0], units[j], units[i]), rest)
    rest = torch.where(with_top & ((i == top[1]) | (j == top[1])), rest_2, rest).clamp_min(0)
    pair_shift = torch.maximum(x.amax(-1), y.amax(-1))
    u = (x - pair_shift[:, None]).exp().sum(-1)
    v = (y - pair_shift[:, None]).exp().sum(-1)
    log_norm = torch.logaddexp(shift + rest.log(), pair_shift + (u + v).log())
    d_swapped = torch.stack([pair_shift + u.log() - log_norm, pair_shift + v.log() - log_norm], dim=-1).exp()
    d_i, d_j = d_base[i], d_base[j]
    weights = torch.softmax((d_i - d_j).abs() / tau, dim=-1)
    cos_pos, cos_sym = _pair_cosines(x, y, d_i, d_j)
    return SwapAttention(d_base=d_base, d_swapped=d_swapped, weights=weights, cos_positional=cos_pos,
                         cos_symbolic=cos_sym, pairs=pairs)


# --- the method and the per-swap view ------------------------------------------------------------
class SwapScore:
    """Paper B's swap score (appendix D): block swaps weighted by how unequal their attention is."""

    name = "swap"
    columns = {"positional": "Σ α·cos(v_ij(πx), v_ij(x)) over block swaps π: attention stays at its positions",
               "symbolic": "Σ α·cos(v_ij(πx), v_ji(x)): attention follows the swapped tokens"}
    Parameters = SwapParameters

    def min_swappable(self, config: ScoreConfig) -> int:
        return 2 * config.parameters.block_size

    def score(self, logits: KeyLogits, config: ScoreConfig) -> dict[str, Tensor]:
        positional, symbolic = swap_scores(logits, config.parameters.block_size, config.parameters.tau)
        return {"positional": positional, "symbolic": symbolic}


def _one_prompt(prompt: Any) -> list:
    """``[prompt]`` for one prompt; a clear error for several."""
    if isinstance(prompt, np.ndarray):
        prompt = torch.as_tensor(prompt)
    if isinstance(prompt, Tensor) and prompt.ndim == 2:
        if prompt.shape[0] != 1:
            raise ValueError(f"prompt: swap_attention takes one prompt, got a batch of {prompt.shape[0]}; "
                             "pass one row, e.g. tokens[0].")
        return [prompt[0]]
    if isinstance(prompt, (list, tuple)) and prompt and all(
            isinstance(item, (str, list, tuple, Tensor, np.ndarray))
            and not (isinstance(item, Tensor) and item.ndim == 0) for item in prompt):
        raise ValueError(f"prompt: swap_attention takes one prompt, got a list of {len(prompt)}; pass one of them.")
    return [prompt]


def swap_attention(model_or_lens: Any, prompt: Any, layer: int, head: int, config: ScoreConfig | None = None,
                   **options: Any) -> pd.DataFrame:
    """Every swap of one prompt and head: block attention before and after, weight and cosines.

    Args:
        model_or_lens: a TransformerLens RoPE model or a ``RopeLens``.
        prompt: one prompt (a string, a 1-D LongTensor or a list of token ids).
        layer: layer index.
        head: query head.
        config: a ``ScoreConfig`` (its prompt options, and its ``tau`` and ``block_size`` when its method is
            the swap score; another method's config is read with the swap score's defaults).
        **options: ``ScoreConfig`` fields and prompt options overriding ``config`` (``tau``,
            ``block_size``, ``query``, ``swappable``, ``exclude_bos``, ``prepend_bos``).

    Returns:
        One row per swap ``(i, j)`` (columns in ``psheads.results.schema.SWAPS``): ``block_i, block_j,
        positions_i, positions_j, d_i, d_j`` (attention of the blocks on the input),
        ``d_i_swapped, d_j_swapped`` (after the swap), ``weight`` (α), ``cos_positional``,
        ``cos_symbolic``. ``attrs`` holds ``positional`` and ``symbolic`` (the head's scores on
        this prompt).
    """
    head = validation.integer(head, "head")
    if "heads" in options:
        raise TypeError("swap_attention scores one head: pass head=…, not heads=… (score_heads takes heads).")
    config = score_config(config)
    config = config.replace(**({} if config.method == SwapScore.name else {"method": SwapScore.name}),
                            heads=(head,), **options)
    lens = as_lens(model_or_lens)
    geo = lens.layer(layer)
    if not 0 <= head < geo.n_heads:
        raise ValueError(f"head {head} is out of range: layer {geo.layer} has {geo.n_heads} heads.")
    prompts = _one_prompt(prompt)
    prepared = prepare_prompts(lens.backend, prompts, config.prompt_options)
    details = []
    block_size, tau = config.parameters.block_size, config.parameters.tau

    def measure(logits: KeyLogits) -> dict[str, Tensor]:
        details.append(swap_attention_detail(logits.flat().select(0), block_size, tau))
        return {}

    minimum = 2 * block_size
    with distributed.alone():  # one prompt, measured on every rank
        for _ in engine.run(lens, prepared, measure, layers=[geo.layer], heads=(head,), min_keys=minimum,
                            need=f"2 blocks of {block_size}", batch_size=1, progress=False):
            pass
    (swap,) = details
    prompt_0 = prepared[0]
    swappable = prepared.key_groups([0], geo, minimum, "")[0].swappable
    blocks = make_blocks(len(swappable), block_size)
    positions = [tuple(swappable[k] for k in block.tolist()) for block in blocks]
    i, j = swap.pairs[:, 0], swap.pairs[:, 1]
    frame = pd.DataFrame({
        "block_i": i.tolist(),
        "block_j": j.tolist(),
        "positions_i": [positions[b] for b in i.tolist()],
        "positions_j": [positions[b] for b in j.tolist()],
        "d_i": swap.d_base[i].tolist(),
        "d_j": swap.d_base[j].tolist(),
        "d_i_swapped": swap.d_swapped[:, 0].tolist(),
        "d_j_swapped": swap.d_swapped[:, 1].tolist(),
        "weight": swap.weights.tolist(),
        "cos_positional": swap.cos_positional.tolist(),
        "cos_symbolic": swap.cos_symbolic.tolist(),
    })[schema.SWAPS.names]
    frame.attrs.update({"layer": geo.layer, "head": head, "query": prompt_0.query,
                        "positional": float((swap.weights * swap.cos_positional).sum()),
                        "symbolic": float((swap.weights * swap.cos_symbolic).sum()),
                        "config": config.to_dict(), "model": lens.backend.model_name})
    return frame


register_score_method(SwapScore())
