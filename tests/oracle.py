"""Brute-force swap-score oracle (paper B, appendix D), for the test suite only.

Deliberately slow and simple, and independent of psheads: every block swap is *executed* — the
hidden states entering ``layer`` are permuted with a TransformerLens hook on
``blocks.{layer}.hook_resid_pre`` (position ids stay fixed, earlier layers are untouched), the
model is re-run, and ``blocks.{layer}.attn.hook_pattern`` is read at the query row. The score
arithmetic then follows the definition in docs/scoring.md literally, in fp64, with plain Python loops.

API
---
``make_blocks(swappable_positions, block_size) -> LongTensor [n_blocks, b]``
``brute_force_swap_attention(model, tokens, layer, query, blocks) -> dict`` with keys
    ``pairs``      LongTensor [n_pairs, 2]        (i, j), i < j, lexicographic order
    ``blocks``     LongTensor [n_blocks, b]       the blocks as given
    ``base``       float64 [n_heads, query+1]     attention of the query on the unswapped prompt
    ``swapped``    float64 [n_pairs, n_heads, query+1]  attention of the query after swap p
    ``d_base``     float64 [n_heads, n_blocks]    d_i(x) = Σ of ``base`` over block i
    ``d_swapped``  float64 [n_pairs, n_heads, 2]  (d_i(πx), d_j(πx)) for pair p = (i, j)
``swap_scores_from_attention(d_base, d_swapped, pairs, tau=1e-4) -> (s_pos, s_sym)``
    float64 [n_heads] each.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["make_blocks", "brute_force_swap_attention", "swap_scores_from_attention", "swap_permutations"]


def make_blocks(swappable_positions: Sequence[int] | torch.Tensor, block_size: int) -> torch.Tensor:
    """Cut ``swappable_positions`` into consecutive blocks of ``block_size`` from its start.

    A shorter tail is left out. Returns LongTensor ``[n_blocks, block_size]`` (``n_blocks`` may
    be 0 or 1: callers decide whether a prompt has enough blocks).
    """
    if int(block_size) < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    b = int(block_size)
    positions = [int(p) for p in (swappable_positions.tolist() if isinstance(swappable_positions, torch.Tensor)
                                  else swappable_positions)]
    n_blocks = len(positions) // b
    rows = [positions[k * b:(k + 1) * b] for k in range(n_blocks)]
    return torch.tensor(rows, dtype=torch.long).reshape(n_blocks, b)


def _check_blocks(blocks: torch.Tensor, query: int) -> torch.Tensor:
    blocks = torch.as_tensor(blocks, dtype=torch.long)
    if blocks.ndim != 2:
        raise ValueError(f"blocks must be [n_blocks, b], got shape {tuple(blocks.shape)}")
    if blocks.shape[0] < 2:
        raise ValueError("need at least 2 blocks to swap")
    flat = blocks.flatten().tolist()
    if len(set(flat)) != len(flat):
        raise ValueError("blocks overlap (a position appears twice)")
    if min(flat) < 0 or max(flat) >= query:
        raise ValueError(f"every block position must be in [0, query={query})")
    return blocks


def swap_permutations(n_pos: int, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``pairs`` [n_pairs, 2] and one gather index per pair, ``perms`` [n_pairs, n_pos].

    ``new_resid[:, q] = resid[:, perms[p, q]]``: position ``blocks[i][k]`` receives the hidden
    state that was at ``blocks[j][k]`` and vice versa; every other position keeps its own.
    """
    n_blocks = blocks.shape[0]
    pairs = list(itertools.combinations(range(n_blocks), 2))
    perms = torch.arange(n_pos).repeat(len(pairs), 1)
    for p, (i, j) in enumerate(pairs):
        for k in range(blocks.shape[1]):
            a, b = int(blocks[i, k]), int(blocks[j, k])
            perms[p, a] = b
            perms[p, b] = a
    return torch.tensor(pairs, dtype=torch.long).reshape(len(pairs), 2), perms


def _pattern_at_query(model: Any, tokens: torch.Tensor, layer: int, query: int,
                      perms: torch.Tensor) -> torch.Tensor:
    """Run ``tokens`` once per row of ``perms`` (one batch), permuting resid_pre at ``layer``.

    Returns the query row of the layer's pattern, float64 ``[n_rows, n_heads, query+1]``.
    """
    n_rows, n_pos = perms.shape
    device = tokens.device
    index = perms.to(device)
    captured: dict[str, torch.Tensor] = {}

    def permute_resid(resid: torch.Tensor, hook: Any) -> torch.Tensor:
        assert resid.shape[:2] == (n_rows, n_pos), f"{hook.name}: unexpected shape {tuple(resid.shape)}"
        gather = index[:, :, None].expand(n_rows, n_pos, resid.shape[-1])
        return torch.gather(resid, 1, gather)

    def grab_pattern(pattern: torch.Tensor, hook: Any) -> None:
        # [batch, head, query_pos, key_pos]
        captured["pattern"] = pattern[:, :, query, : query + 1].detach().to(torch.float64).cpu().clone()

    batch = tokens.reshape(1, n_pos).expand(n_rows, n_pos).contiguous()
    with model.hooks(fwd_hooks=[(f"blocks.{layer}.hook_resid_pre", permute_resid),
                                (f"blocks.{layer}.attn.hook_pattern", grab_pattern)]):
        model(batch)
    if "pattern" not in captured:
        raise RuntimeError(f"blocks.{layer}.attn.hook_pattern never fired")
    return captured["pattern"]


def brute_force_swap_attention(model: Any, tokens: torch.Tensor, layer: int, query: int,
                               blocks: torch.Tensor, max_batch: int = 64) -> dict[str, torch.Tensor]:
    """Execute every block swap at ``layer`` and read the query's attention (see module doc).

    ``tokens``: LongTensor ``[pos]`` (one prompt, ``query < pos``); ``blocks``: LongTensor
    ``[n_blocks, b]`` of key positions ``< query``, disjoint. Swaps are run as batches of at most
    ``max_batch`` permuted copies of the prompt (row 0 of the first batch is the unswapped prompt).
    The model runs in eval mode under ``torch.no_grad``; its training flags are restored and the
    hooks removed even on error.
    """
    tokens = torch.as_tensor(tokens, dtype=torch.long)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be one prompt [pos], got shape {tuple(tokens.shape)}")
    n_pos = tokens.shape[0]
    query = int(query)
    if not 0 <= query < n_pos:
        raise ValueError(f"query {query} outside the prompt (length {n_pos})")
    blocks = _check_blocks(blocks, query)
    pairs, perms = swap_permutations(n_pos, blocks)
    all_perms = torch.cat([torch.arange(n_pos)[None], perms])  # row 0: identity (base)

    # a bridge's eval() also reaches its HF model, which is not a registered submodule
    hf = getattr(model, "original_model", None)
    roots = [model] + ([hf] if isinstance(hf, torch.nn.Module) else [])
    flags = list({id(m): (m, m.training) for root in roots for m in root.modules()}.values())
    try:
        model.eval()
        with torch.no_grad():
            chunks = [_pattern_at_query(model, tokens, layer, query, all_perms[s:s + max_batch])
                      for s in range(0, all_perms.shape[0], max_batch)]
    finally:
        for module, training in flags:
            module.training = training
    rows = torch.cat(chunks)
    base, swapped = rows[0], rows[1:]

    n_heads, n_blocks = base.shape[0], blocks.shape[0]
    d_base = torch.zeros(n_heads, n_blocks, dtype=torch.float64)
    for i in range(n_blocks):
        d_base[:, i] = base[:, blocks[i]].sum(-1)
    d_swapped = torch.zeros(pairs.shape[0], n_heads, 2, dtype=torch.float64)
    for p, (i, j) in enumerate(pairs.tolist()):
        d_swapped[p, :, 0] = swapped[p][:, blocks[i]].sum(-1)
        d_swapped[p, :, 1] = swapped[p][:, blocks[j]].sum(-1)
    return {"pairs": pairs, "blocks": blocks, "base": base, "swapped": swapped,
            "d_base": d_base, "d_swapped": d_swapped}


def _cos(u: tuple[float, float], v: tuple[float, float]) -> float:
    nu = math.hypot(u[0], u[1])
    nv = math.hypot(v[0], v[1])
    if nu == 0.0 or nv == 0.0:
        return 0.0  # no attention on either block: no direction to compare
    return (u[0] * v[0] + u[1] * v[1]) / (nu * nv)


def swap_scores_from_attention(d_base: torch.Tensor, d_swapped: torch.Tensor, pairs: torch.Tensor,
                               tau: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition literally: per head, ``(s_POS, s_SYM)`` as float64 ``[n_heads]`` each.

    ``d_base`` [n_heads, n_blocks]: d_i(x); ``d_swapped`` [n_pairs, n_heads, 2]:
    (d_i(πx), d_j(πx)); ``pairs`` [n_pairs, 2]: (i, j). α = softmax over pairs of
    |d_i(x) − d_j(x)| / τ (max subtracted); s_POS = Σ α cos(v_ij(πx), v_ij(x)),
    s_SYM = Σ α cos(v_ij(πx), v_ji(x)). A zero vector contributes cos = 0.
    """
    d_base = torch.as_tensor(d_base, dtype=torch.float64)
    d_swapped = torch.as_tensor(d_swapped, dtype=torch.float64)
    pair_list = [(int(i), int(j)) for i, j in torch.as_tensor(pairs).tolist()]
    n_heads = d_base.shape[0]
    if d_swapped.shape != (len(pair_list), n_heads, 2):
        raise ValueError(f"d_swapped must be [{len(pair_list)}, {n_heads}, 2], got {tuple(d_swapped.shape)}")
    s_pos = torch.zeros(n_heads, dtype=torch.float64)
    s_sym = torch.zeros(n_heads, dtype=torch.float64)
    for h in range(n_heads):
        logits = [abs(float(d_base[h, i]) - float(d_base[h, j])) / tau for i, j in pair_list]
        top = max(logits)
        weights = [math.exp(z - top) for z in logits]
        total = math.fsum(weights)
        pos_terms, sym_terms = [], []
        for p, (i, j) in enumerate(pair_list):
            alpha = weights[p] / total
            v_x = (float(d_base[h, i]), float(d_base[h, j]))
            v_x_rev = (v_x[1], v_x[0])
            v_px = (float(d_swapped[p, h, 0]), float(d_swapped[p, h, 1]))
            pos_terms.append(alpha * _cos(v_px, v_x))
            sym_terms.append(alpha * _cos(v_px, v_x_rev))
        s_pos[h] = math.fsum(pos_terms)
        s_sym[h] = math.fsum(sym_terms)
    return s_pos, s_sym
