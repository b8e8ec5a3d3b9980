"""Positional–symbolic head scores, computed exactly from the matrix M.

The swap score of paper B swaps two blocks of hidden states entering a layer and re-runs it.
Every swapped input's logits are entries of ``M[p, m] = scale · q_rotᵀ R_p k̃_m`` (positions p,
tokens m over the swappable set S), so one forward pass per batch gives every swap of every
layer and head. All score arithmetic is fp64.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Literal

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from psheads import geometry
from psheads.backends import LayerCapture
from psheads.config import from_known_fields
from psheads.lens import LayerGeometry, as_lens, head_keys, rotated_query
from psheads.prompts import (
    KeyGroup,
    Prompt,
    batches,
    layer_groups,
    prepare_prompts,
    split_group,
)

logger = logging.getLogger(__name__)

Method = Literal["swap", "anova"]
#: Bytes one intermediate fp64 tensor may take; groups of prompts and swaps are chunked to fit.
CHUNK_BYTES = 2**28
LABELS = ("positional", "symbolic", "uniform", "mixed")


@dataclass(frozen=True)
class ScoreConfig:
    """Options of ``score_heads`` (recorded in ``df.attrs["config"]``).

    Attributes:
        method: ``"swap"`` (paper B's swap score) or ``"anova"`` (all-permutation shares, §2.3).
        tau: temperature of the swap weights α (the paper's 1e-4 makes α nearly an argmax).
        block_size: positions per swapped block.
        gamma: label threshold γ.
        by_frequency: score every plane as its own single-frequency head.
        reduce: average over prompts (False: one row per prompt).
        batch_size: prompts per forward pass.
        layers: layers to score (None = all).
        heads: query heads to score (None = all).
    """

    method: Method = "swap"
    tau: float = 1e-4
    block_size: int = 1
    gamma: float = 0.1
    by_frequency: bool = False
    reduce: bool = True
    batch_size: int = 64
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.method not in ("swap", "anova"):
            raise ValueError(f"method must be 'swap' or 'anova', got {self.method!r}.")
        if not (isinstance(self.tau, (int, float)) and self.tau > 0):
            raise ValueError(f"tau must be a positive number, got {self.tau!r}.")
        if not (isinstance(self.block_size, int) and self.block_size >= 1):
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}.")
        if not 0 <= self.gamma < 0.5:
            raise ValueError(f"gamma must lie in [0, 0.5), got {self.gamma!r}.")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}.")
        for name in ("layers", "heads"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(int(v) for v in value))

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = asdict(self)
        for name in ("layers", "heads"):
            out[name] = list(out[name]) if out[name] is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ScoreConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored."""
        return from_known_fields(cls, data)


# --- pure score arithmetic -----------------------------------------------------------------
def make_blocks(n_swappable: int, block_size: int) -> Int[Tensor, "block size"]:
    """Consecutive blocks of ``block_size`` indices into S from its start (the tail is dropped)."""
    n_blocks = n_swappable // block_size
    return torch.arange(n_blocks * block_size).reshape(n_blocks, block_size)


def block_pairs(n_blocks: int) -> Int[Tensor, "pair 2"]:
    """All pairs ``(i, j)``, ``i < j``, in lexicographic order."""
    return torch.combinations(torch.arange(n_blocks), r=2)


def swap_permutations(blocks: Tensor, pairs: Tensor, n_swappable: int) -> Int[Tensor, "pair n"]:
    """``perm[π, p]``: the S-index of the token that sits at S-position ``p`` after swap π."""
    perm = torch.arange(n_swappable).repeat(len(pairs), 1)
    rows = torch.arange(len(pairs))[:, None]
    perm[rows, blocks[pairs[:, 0]]] = blocks[pairs[:, 1]]
    perm[rows, blocks[pairs[:, 1]]] = blocks[pairs[:, 0]]
    return perm


@dataclass
class SwapAttention:
    """Block attention before and after every swap (per leading index, e.g. prompt × head).

    Attributes:
        d_base: ``[..., block]`` attention mass of each block on the unswapped input.
        d_swapped: ``[..., pair, 2]`` ``(d_i(πx), d_j(πx))`` for every pair ``(i, j)``.
        entropy: ``[...]`` attention entropy at the query over every visible key, divided by
            log(number of visible keys).
        pairs: ``[pair, 2]`` block indices.
    """

    d_base: Tensor
    d_swapped: Tensor
    entropy: Tensor
    pairs: Tensor = field(repr=False)


def base_attention(
    M: Float[Tensor, "*lead n n"], other: Float[Tensor, "*lead n_other"]
) -> tuple[Float[Tensor, "*lead n"], Float[Tensor, "*lead"]]:
    """Attention on S of the unswapped input, and the normalised entropy over every visible key.

    The entropy is ``−Σ D log D / log(number of visible keys)`` (0 with a single key).
    """
    n = M.shape[-1]
    logits = torch.cat([torch.diagonal(M, dim1=-2, dim2=-1), other], dim=-1).double()
    log_d = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    d = log_d.exp()
    n_visible = logits.shape[-1]
    entropy = -(d * log_d).sum(-1) / math.log(n_visible) if n_visible > 1 else torch.zeros_like(d[..., 0])
    return d[..., :n], entropy


def swap_attention_from_M(
    M: Float[Tensor, "*lead n n"],
    other: Float[Tensor, "*lead n_other"],
    block_size: int,
    pair_chunk: int | None = None,
) -> SwapAttention:
    """Attention at the query for the input and every block swap, from ``M`` (fp64).

    Each swapped input's logits are ``M[p, π(p)]`` on S and unchanged elsewhere; its
    attention is a fresh softmax over all visible keys (no cancelling renormalisation).

    Args:
        M: logits ``M[p, m]`` over the swappable set (positions × tokens, S order).
        other: logits to the visible keys outside S (never moved by a swap).
        block_size: block size b.
        pair_chunk: pairs evaluated at once (default: as many as fit in ``CHUNK_BYTES``).
    """
    M, other = M.double(), other.double()
    n = M.shape[-1]
    lead = M.shape[:-2]
    if pair_chunk is None:
        pair_chunk = max(1, CHUNK_BYTES // (8 * max(1, math.prod(lead)) * (n + other.shape[-1])))
    blocks = make_blocks(n, block_size).to(M.device)
    pairs = block_pairs(len(blocks)).to(M.device)
    d_s, entropy = base_attention(M, other)
    d_base = d_s[..., blocks].sum(-1)
    positions = torch.arange(n, device=M.device)[None, :]
    swapped = []
    for start in range(0, len(pairs), pair_chunk):
        chunk = pairs[start : start + pair_chunk]
        perm = swap_permutations(blocks, chunk, n)  # [pair, n]
        moved = M[..., positions, perm]  # [..., pair, n]: M[p, π(p)]
        rest = other.unsqueeze(-2).expand(*lead, len(chunk), other.shape[-1])
        lse = torch.logsumexp(torch.cat([moved, rest], dim=-1), dim=-1, keepdim=True)
        d_moved = (moved - lse).exp()
        d_pair = [
            torch.gather(d_moved, -1, blocks[chunk[:, side]].expand(*lead, len(chunk), block_size)).sum(-1)
            for side in (0, 1)
        ]
        swapped.append(torch.stack(d_pair, dim=-1))
    d_swapped = torch.cat(swapped, dim=-2) if swapped else d_base.new_zeros(*lead, 0, 2)
    return SwapAttention(d_base=d_base, d_swapped=d_swapped, entropy=entropy, pairs=pairs)


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    norm = a.norm(dim=-1) * b.norm(dim=-1)
    return (a * b).sum(-1) / norm.clamp_min(torch.finfo(torch.float64).tiny)


def swap_weights(swap: SwapAttention, tau: float) -> Float[Tensor, "*lead pair"]:
    """α(π) = softmax over swaps of ``|d_i(x) − d_j(x)| / τ``."""
    d_i = swap.d_base[..., swap.pairs[:, 0]]
    d_j = swap.d_base[..., swap.pairs[:, 1]]
    return torch.softmax((d_i - d_j).abs() / tau, dim=-1)


def swap_scores(swap: SwapAttention, tau: float) -> tuple[Float[Tensor, "*lead"], Float[Tensor, "*lead"]]:
    """Paper B's ``(s_POS, s_SYM)`` from block attentions."""
    d_i = swap.d_base[..., swap.pairs[:, 0]]
    d_j = swap.d_base[..., swap.pairs[:, 1]]
    weights = swap_weights(swap, tau)
    original = torch.stack([d_i, d_j], dim=-1)
    mirrored = torch.stack([d_j, d_i], dim=-1)
    s_pos = (weights * _cosine(swap.d_swapped, original)).sum(-1)
    s_sym = (weights * _cosine(swap.d_swapped, mirrored)).sum(-1)
    return s_pos, s_sym


def anova_shares(M: Float[Tensor, "*lead n n"]) -> tuple[Tensor, Tensor, Tensor]:
    """Two-way decomposition of ``M − mean(M)`` over S: shares of position, token, interaction.

    Shares sum to 1; a head with zero total variance (uniform) gets ``(1, 1, 0)`` so that the
    labelling rule calls it uniform, as the swap score does.
    """
    M = M.double()
    centred = M - M.mean(dim=(-2, -1), keepdim=True)
    rows = centred.mean(dim=-1, keepdim=True)
    cols = centred.mean(dim=-2, keepdim=True)
    interaction = centred - rows - cols
    n = M.shape[-1]
    ss_pos = n * rows.square().sum(dim=(-2, -1))
    ss_sym = n * cols.square().sum(dim=(-2, -1))
    ss_int = interaction.square().sum(dim=(-2, -1))
    total = ss_pos + ss_sym + ss_int
    flat = total <= 1e-24 * (M.square().sum(dim=(-2, -1)) + 1e-300)
    safe = torch.where(flat, torch.ones_like(total), total)
    one = torch.ones_like(total)
    return (
        torch.where(flat, one, ss_pos / safe),
        torch.where(flat, one, ss_sym / safe),
        torch.where(flat, torch.zeros_like(total), ss_int / safe),
    )


def label(positional: float, symbolic: float, gamma: float = 0.1) -> str:
    """The labelling rule: pure positional ⇔ s_POS ≥ 1−γ and s_SYM ≤ γ; symbolic the mirror image; uniform ⇔ both ≥ 1−γ; mixed otherwise."""
    high_pos, high_sym = positional >= 1 - gamma, symbolic >= 1 - gamma
    if high_pos and high_sym:
        return "uniform"
    if high_pos and symbolic <= gamma:
        return "positional"
    if high_sym and positional <= gamma:
        return "symbolic"
    return "mixed"


# --- the driver ------------------------------------------------------------------------------
def _group_logits(
    geo: LayerGeometry, capture: LayerCapture, group: KeyGroup, heads: Tensor, by_frequency: bool
) -> tuple[Tensor, Tensor]:
    """``M`` over S and the logits to the other visible keys for one group (soft-capped).

    Shapes: ``[g, h, (plane,) n, n]`` and ``[g, h, (plane,) n_other]``.
    """
    device = capture.k.device
    rows = torch.tensor(group.rows, device=device)
    picked = LayerCapture(q=capture.q[rows][:, :, heads.to(device)], k=capture.k[rows], cos=capture.cos,
                          sin=capture.sin)
    q_rot = rotated_query(geo, picked, group.query)
    swap = torch.tensor(group.swappable, device=device)
    other = torch.tensor(group.others, device=device, dtype=torch.long)
    k_heads = head_keys(geo, picked)[:, :, heads.to(device)]  # [g, pos, h, d]
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
    M = geometry.position_token_logits(q_rot, k_heads[:, swap], cos[swap], sin[swap], geo.layout, geo.scale,
                                       by_frequency)
    k_other = geometry.rotate(k_heads[:, other].transpose(1, 2), cos[other], sin[other], geo.layout).transpose(1, 2)
    other_logits = geometry.frequency_logits(q_rot, k_other, geo.layout, geo.scale)  # [g, h, plane, n_o]
    if not by_frequency:
        other_logits = other_logits.sum(dim=-2)
    return geometry.soft_cap(M, geo.softcap), geometry.soft_cap(other_logits, geo.softcap)


def _versions() -> dict[str, str]:
    out = {}
    for package in ("psheads", "torch", "transformer-lens", "transformers", "pandas"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    return out


SCORE_COLUMNS = ("positional", "symbolic", "entropy", "interaction")


def _group_scores(geo: LayerGeometry, capture: LayerCapture, group: KeyGroup, heads: Tensor,
                  config: ScoreConfig) -> dict[str, Tensor]:
    """Scores of one group: ``{column: [prompt, head(, plane)]}`` (fp64, on the CPU)."""
    M, other = _group_logits(geo, capture, group, heads, config.by_frequency)
    if config.method == "swap":
        swap = swap_attention_from_M(M, other, config.block_size)
        positional, symbolic = swap_scores(swap, config.tau)
        out = {"positional": positional, "symbolic": symbolic, "entropy": swap.entropy}
    else:
        positional, symbolic, interaction = anova_shares(M)
        out = {"positional": positional, "symbolic": symbolic, "entropy": base_attention(M, other)[1],
               "interaction": interaction}
    return {name: value.cpu() for name, value in out.items()}


def _same_geometry(a: LayerGeometry, b: LayerGeometry, capture_a: LayerCapture, capture_b: LayerCapture) -> bool:
    """Whether two layers can be scored as one stack of heads (same geometry and tables)."""
    facts = ("n_heads", "n_kv_heads", "d_head", "rotary_dim", "pairing", "scale", "softcap", "window")
    return (all(getattr(a, name) == getattr(b, name) for name in facts)
            and torch.equal(a.layout.dims, b.layout.dims)
            and torch.equal(capture_a.cos, capture_b.cos) and torch.equal(capture_a.sin, capture_b.sin))


def _layer_stacks(lens: RopeLens, layers: list[int], captures: dict[int, LayerCapture]) -> list[list[int]]:
    """Layers grouped so that each group's heads can be stacked and scored in one pass."""
    stacks: list[list[int]] = []
    for layer in layers:
        for stack in stacks:
            if _same_geometry(lens.layers[stack[0]], lens.layers[layer], captures[stack[0]], captures[layer]):
                stack.append(layer)
                break
        else:
            stacks.append([layer])
    return stacks


def _iter_group_scores(
    lens: RopeLens, prompts: list[Prompt], config: ScoreConfig, layers: list[int], progress: bool | None
) -> Iterator[tuple[LayerGeometry, KeyGroup, Tensor, dict[str, Tensor]]]:
    """One forward pass per batch; yields ``(layer geometry, group, heads, scores)``.

    Layers with the same geometry and rotation tables are scored together, their heads stacked
    (head ``h`` of the ``i``-th stacked layer becomes head ``i · n_heads + h``); with
    ``by_frequency`` each layer and head is scored on its own to bound memory.
    """
    n_batches = math.ceil(len(prompts) / config.batch_size)
    disable = (not sys.stderr.isatty()) if progress is None else not progress
    for indices, tokens, query in tqdm(batches(prompts, config.batch_size), total=n_batches,
                                       desc="score_heads", disable=disable):
        captures = lens.capture(tokens, layers, query)
        stacks = [[layer] for layer in layers] if config.by_frequency else _layer_stacks(lens, layers, captures)
        for stack in stacks:
            first = lens.layers[stack[0]]
            heads = torch.tensor(config.heads if config.heads is not None else range(first.n_heads))
            geo = dataclasses.replace(first, n_heads=first.n_heads * len(stack),
                                      n_kv_heads=first.n_kv_heads * len(stack))
            capture = LayerCapture(q=torch.cat([captures[layer].q for layer in stack], dim=2),
                                   k=torch.cat([captures[layer].k for layer in stack], dim=2),
                                   cos=captures[stack[0]].cos, sin=captures[stack[0]].sin)
            stacked = torch.cat([i * first.n_heads + heads for i in range(len(stack))])
            for group in layer_groups(prompts, indices, first, 2 * config.block_size,
                                      f"2 blocks of {config.block_size}"):
                # M takes [prompt, head, (plane,) n, n]: stream over heads and prompts to bound memory
                head_chunks = stacked.split(1) if config.by_frequency else [stacked]
                slots = geo.n_planes + 1 if config.by_frequency else 1
                per_prompt = 8 * len(head_chunks[0]) * slots * len(group.swappable) ** 2
                for part in split_group(group, max(1, CHUNK_BYTES // per_prompt)):
                    for head_chunk in head_chunks:
                        scores = _group_scores(geo, capture, part, head_chunk, config)
                        n = len(head_chunk) // len(stack)
                        for i, layer in enumerate(stack):
                            yield (lens.layers[layer], part, head_chunk[i * n : (i + 1) * n] - i * first.n_heads,
                                   {name: value[:, i * n : (i + 1) * n] for name, value in scores.items()})
        captures.clear()


def _slots(geo: LayerGeometry, by_frequency: bool) -> dict[str, list]:
    if not by_frequency:
        return {}
    return {"plane": list(range(1, geo.n_planes + 1)) + [0], "theta": geo.theta.tolist() + [0.0]}


def _key_columns(geo: LayerGeometry, heads: Tensor, n_slots: int, by_frequency: bool) -> dict[str, Any]:
    """Index columns for a ``[head, slot]`` block of scores, flattened head-major."""
    head_ids = heads.repeat_interleave(n_slots)
    columns = {"layer": geo.layer, "head": head_ids.numpy(), "kv_head": geo.kv_head_of[head_ids].numpy()}
    for name, values in _slots(geo, by_frequency).items():
        columns[name] = values * len(heads)
    return columns


def _per_prompt_frame(items: Iterator, config: ScoreConfig) -> pd.DataFrame:
    parts = []
    for geo, group, heads, scores in items:
        n_slots = scores["positional"].shape[-1] if config.by_frequency else 1
        keys = _key_columns(geo, heads, n_slots, config.by_frequency)
        for g, prompt in enumerate(group.prompts):
            part = {"prompt": prompt, **keys}
            part.update({name: value[g].reshape(-1).numpy() for name, value in scores.items()})
            parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True)


def _reduced_frame(items: Iterator, config: ScoreConfig) -> pd.DataFrame:
    """Running sums per (layer, head[, plane]): memory does not grow with the number of prompts."""
    sums: dict[tuple[int, int], dict[str, Tensor]] = {}
    meta: dict[tuple[int, int], tuple[LayerGeometry, Tensor]] = {}
    for geo, group, heads, scores in items:
        key = (geo.layer, int(heads[0]))
        meta.setdefault(key, (geo, heads))
        total = sums.setdefault(key, {"n": torch.zeros(())})
        total["n"] += len(group.prompts)
        for name, value in scores.items():
            total[name] = total.get(name, 0) + value.sum(0)
            if name in ("positional", "symbolic"):
                total[name + "_sq"] = total.get(name + "_sq", 0) + value.square().sum(0)
    parts = []
    for key in sorted(sums):
        geo, heads = meta[key]
        total = sums[key]
        n = total["n"]
        n_slots = total["positional"].shape[-1] if config.by_frequency else 1
        part = _key_columns(geo, heads, n_slots, config.by_frequency)
        for name in SCORE_COLUMNS:
            if name in total:
                part[name] = (total[name] / n).reshape(-1).numpy()
        for name in ("positional", "symbolic"):
            mean = total[name] / n
            part[name + "_std"] = (total[name + "_sq"] / n - mean.square()).clamp_min(0).sqrt().reshape(-1).numpy()
        part["n_prompts"] = int(n)
        parts.append(pd.DataFrame(part))
    keys = ["layer", "head", "kv_head"] + (["plane", "theta"] if config.by_frequency else [])
    order = [*keys, "positional", "symbolic", "positional_std", "symbolic_std",
             *(["interaction"] if config.method == "anova" else []), "entropy", "n_prompts"]
    frame = pd.concat(parts, ignore_index=True)[order]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def score_heads(
    model_or_lens: Any,
    prompts: Any,
    *,
    query: int | Sequence[int] | None = None,
    swappable: Sequence[int] | Sequence[Sequence[int]] | slice | None = None,
    exclude_bos: bool | None = None,
    prepend_bos: bool | None = None,
    tau: float = 1e-4,
    block_size: int = 1,
    gamma: float = 0.1,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    by_frequency: bool = False,
    method: Method = "swap",
    batch_size: int = 64,
    progress: bool | None = None,
    reduce: bool = True,
) -> pd.DataFrame:
    """Positional and symbolic scores of every head, exactly and without re-running anything.

    Args:
        model_or_lens: a TransformerLens RoPE model, or a ``RopeLens`` (reused, so
            its self-check is not repeated).
        prompts: strings, a LongTensor ``[n, pos]`` or token-id lists (see ``psheads.prompts``).
        query: query position (default: each prompt's last token), an int or one per prompt.
        swappable: key positions that may be swapped (default: every key before the query except
            BOS; keys a layer's sliding window masks are always dropped).
        exclude_bos: drop position 0 from the default set (None: when it is the BOS token).
        prepend_bos: for string prompts (None: the model's default).
        tau: swap-weight temperature τ.
        block_size: positions per swapped block (S is cut from its start; the tail is dropped).
        gamma: label threshold γ.
        layers: layers to score (default all).
        heads: query heads to score (default all).
        by_frequency: score each plane as its own head (adds ``plane`` and ``theta``).
        method: ``"swap"`` (paper B's definition) or ``"anova"`` (exact all-permutation shares;
            adds ``interaction``).
        batch_size: prompts per forward pass; memory is bounded by one batch.
        progress: progress bar (default: only on a TTY).
        reduce: average over prompts (False: one row per prompt, with a ``prompt`` column).

    Returns:
        A tidy frame, one row per (layer, head[, plane]) with ``positional, symbolic,
        positional_std, symbolic_std, label, entropy, n_prompts`` (std over prompts, ddof=0);
        the configuration and versions are in ``df.attrs``.
    """
    config = ScoreConfig(method=method, tau=tau, block_size=block_size, gamma=gamma, by_frequency=by_frequency,
                         reduce=reduce, batch_size=batch_size, layers=layers, heads=heads)
    lens = as_lens(model_or_lens)
    chosen = sorted({lens._layer(l).layer for l in layers}) if layers is not None else list(range(lens.n_layers))
    if config.heads is not None:
        n_heads = min(lens.layers[layer].n_heads for layer in chosen)
        bad = [h for h in config.heads if not 0 <= h < n_heads]
        if bad or not config.heads:
            raise ValueError(f"heads {list(config.heads)} must be a non-empty list of heads in 0…{n_heads - 1}.")
    prepared = prepare_prompts(lens, prompts, query=query, swappable=swappable, exclude_bos=exclude_bos,
                               prepend_bos=prepend_bos)
    items = _iter_group_scores(lens, prepared, config, chosen, progress)
    if reduce:
        frame = _reduced_frame(items, config)
    else:
        keys = ["prompt", "layer", "head"] + (["plane"] if by_frequency else [])
        frame = _per_prompt_frame(items, config).sort_values(keys, kind="stable").reset_index(drop=True)
    frame["label"] = [label(p, s, gamma) for p, s in zip(frame["positional"], frame["symbolic"])]
    frame.attrs.update({
        "config": config.to_dict(),
        "model": lens.backend.model_name,
        "backend": lens.backend.kind,
        "dtype": str(lens.backend.dtype),
        "n_prompts": len(prepared),
        "versions": _versions(),
    })
    return frame


def swap_attention(
    model_or_lens: Any,
    prompt: Any,
    layer: int,
    head: int,
    *,
    query: int | None = None,
    swappable: Sequence[int] | slice | None = None,
    exclude_bos: bool | None = None,
    prepend_bos: bool | None = None,
    block_size: int = 1,
    tau: float = 1e-4,
) -> pd.DataFrame:
    """Every swap of one prompt and head: block attention before and after, weight and cosines.

    Args:
        model_or_lens: a TransformerLens RoPE model or a ``RopeLens``.
        prompt: one prompt (a string, a 1-D LongTensor or a list of token ids).
        layer: layer index.
        head: query head.
        query: query position (default: the last token).
        swappable: key positions that may be swapped (default: every key before the query but BOS).
        exclude_bos: drop position 0 from the default set (None: when it is the BOS token).
        prepend_bos: for a string prompt (None: the model's default).
        block_size: positions per swapped block.
        tau: swap-weight temperature τ.

    Returns:
        One row per swap ``(i, j)``: ``block_i, block_j, positions_i, positions_j, d_i, d_j``
        (attention of the blocks on the input), ``d_i_swapped, d_j_swapped`` (after the swap),
        ``weight`` (α), ``cos_positional``, ``cos_symbolic``. ``attrs`` holds ``positional``
        and ``symbolic`` (the head's scores on this prompt).
    """
    config = ScoreConfig(tau=tau, block_size=block_size, heads=(head,))
    lens = as_lens(model_or_lens)
    geo = lens._layer(layer)
    if not isinstance(head, int) or not 0 <= head < geo.n_heads:
        raise ValueError(f"head {head!r} is out of range: layer {geo.layer} has {geo.n_heads} heads.")
    if isinstance(prompt, (str, Tensor)) and not (isinstance(prompt, Tensor) and prompt.ndim == 2):
        prompts = [prompt] if isinstance(prompt, str) or prompt.ndim == 1 else prompt
    else:
        prompts = [prompt]
    prepared = prepare_prompts(lens, prompts, query=query, swappable=swappable, exclude_bos=exclude_bos,
                               prepend_bos=prepend_bos)
    if len(prepared) != 1:
        raise ValueError(f"swap_attention takes one prompt, got {len(prepared)}.")
    (indices, tokens, query_index), = batches(prepared, 1)
    capture = lens.capture(tokens, [geo.layer], query_index)[geo.layer]
    (group,) = layer_groups(prepared, indices, geo, 2 * config.block_size, f"2 blocks of {config.block_size}")
    M, other = _group_logits(geo, capture, group, torch.tensor([head]), by_frequency=False)
    swap = swap_attention_from_M(M[0, 0], other[0, 0], config.block_size)
    weights = swap_weights(swap, tau)
    positional, symbolic = swap_scores(swap, tau)
    d_i, d_j = swap.d_base[swap.pairs[:, 0]], swap.d_base[swap.pairs[:, 1]]
    original = torch.stack([d_i, d_j], dim=-1)
    blocks = make_blocks(len(group.swappable), config.block_size)
    positions = [tuple(group.swappable[k] for k in block.tolist()) for block in blocks]
    frame = pd.DataFrame({
        "block_i": swap.pairs[:, 0].tolist(),
        "block_j": swap.pairs[:, 1].tolist(),
        "positions_i": [positions[i] for i in swap.pairs[:, 0].tolist()],
        "positions_j": [positions[j] for j in swap.pairs[:, 1].tolist()],
        "d_i": d_i.tolist(),
        "d_j": d_j.tolist(),
        "d_i_swapped": swap.d_swapped[:, 0].tolist(),
        "d_j_swapped": swap.d_swapped[:, 1].tolist(),
        "weight": weights.tolist(),
        "cos_positional": _cosine(swap.d_swapped, original).tolist(),
        "cos_symbolic": _cosine(swap.d_swapped, original.flip(-1)).tolist(),
    })
    frame.attrs.update({"layer": geo.layer, "head": head, "query": group.query, "positional": float(positional),
                        "symbolic": float(symbolic), "config": config.to_dict(), "model": lens.backend.model_name})
    return frame
