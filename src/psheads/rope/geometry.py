"""Pure tensor functions for RoPE geometry and the per-plane logit decomposition.

Conventions:

* A head vector has ``d_head`` dimensions; the first ``rotary_dim`` are rotated in
  ``rotary_dim / 2`` two-dimensional planes, the rest are left unrotated.
* ``pairing="halves"`` (NeoX, Llama, Gemma, Qwen, Mistral) pairs dims ``(i, i + rotary_dim/2)``;
  ``pairing="adjacent"`` (GPT-J) pairs ``(2i, 2i + 1)``.
* Rotation tables are stored per *element* of the head vector: ``cos[p, d]`` and ``sin[p, d]``
  are the factors the model multiplies dimension ``d`` with at position ``p`` (magnitude
  included: YaRN's attention factor lives in them). Unrotated dims carry ``cos = 1, sin = 0``.
  Rotating is then ``x * cos + sign * x[partner] * sin`` for every architecture.
* Planes in results are ordered by frequency ID ``1 … F`` (fastest first), followed by one
  trailing slice for the unrotated dimensions (frequency ID 0, θ = 0).

Everything here is stateless and works on fp64 unless stated otherwise.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor

from psheads.rope.precision import exact_dtype

Pairing = Literal["halves", "adjacent"]
PAIRINGS: tuple[Pairing, ...] = ("halves", "adjacent")


def native_plane_dims(rotary_dim: int, pairing: Pairing) -> Int[Tensor, "plane 2"]:
    """The two head dimensions of each plane, in the model's native plane order.

    Args:
        rotary_dim: number of rotated dimensions (even).
        pairing: ``"halves"`` or ``"adjacent"``.

    Returns:
        ``[rotary_dim / 2, 2]`` long tensor of dimension pairs.
    """
    if rotary_dim < 0 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be a non-negative even number, got {rotary_dim}.")
    half = rotary_dim // 2
    index = torch.arange(half)
    if pairing == "halves":
        return torch.stack([index, index + half], dim=1)
    if pairing == "adjacent":
        return torch.stack([2 * index, 2 * index + 1], dim=1)
    raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}.")


@dataclass(frozen=True)
class PlaneLayout:
    """Where each plane lives in a head vector and how rotation mixes its two dims.

    Attributes:
        d_head: head dimension.
        rotary_dim: number of rotated dimensions.
        pairing: dimension pairing convention.
        dims: ``[F, 2]`` dimension pairs, ordered by frequency ID 1…F (fastest first).
        partner: ``[d_head]`` index of the dim each dim is mixed with (itself if unrotated).
        sign: ``[d_head]`` sign of the partner term (-1 first dim of a pair, +1 second, 0 unrotated).
    """

    d_head: int
    rotary_dim: int
    pairing: Pairing
    dims: Int[Tensor, "plane 2"]
    partner: Int[Tensor, " d_head"]
    sign: Float[Tensor, " d_head"]

    @property
    def n_planes(self) -> int:
        """Number of rotated planes F (the result tensors carry F + 1 slices)."""
        return int(self.dims.shape[0])

    @functools.cached_property
    def _membership(self) -> Float[Tensor, "d_head plane"]:
        out = torch.zeros(self.d_head, self.n_planes + 1, dtype=torch.float64)
        for slot, (a, b) in enumerate(self.dims.tolist()):
            out[a, slot] = 1.0
            out[b, slot] = 1.0
        out[self.rotary_dim :, self.n_planes] = 1.0
        return out

    def membership(self) -> Float[Tensor, "d_head plane"]:
        """One-hot map from head dims to result slices (F planes, then the unrotated slice)."""
        return self._membership


def plane_layout(
    d_head: int, rotary_dim: int, pairing: Pairing, order: Int[Tensor, " plane"] | None = None
) -> PlaneLayout:
    """Build a ``PlaneLayout``.

    Args:
        d_head: head dimension.
        rotary_dim: rotated dims (``<= d_head``, even).
        pairing: ``"halves"`` or ``"adjacent"``.
        order: native plane indices in frequency-ID order (fastest first). Defaults to the
            native order, which is fastest-first for standard RoPE.
    """
    if not 0 <= rotary_dim <= d_head:
        raise ValueError(f"rotary_dim={rotary_dim} must lie in [0, d_head={d_head}].")
    dims = native_plane_dims(rotary_dim, pairing)
    if order is not None:
        dims = dims[order]
    partner = torch.arange(d_head)
    sign = torch.zeros(d_head, dtype=torch.float64)
    partner[dims[:, 0]] = dims[:, 1]
    partner[dims[:, 1]] = dims[:, 0]
    sign[dims[:, 0]] = -1.0
    sign[dims[:, 1]] = 1.0
    return PlaneLayout(d_head, rotary_dim, pairing, dims, partner, sign)


def extend_tables(
    cos: Float[Tensor, "pos rotary_dim"], sin: Float[Tensor, "pos rotary_dim"], d_head: int
) -> tuple[Float[Tensor, "pos d_head"], Float[Tensor, "pos d_head"]]:
    """Pad per-element tables to the full head (cos = 1, sin = 0 on unrotated dims), in fp64 (fp32 on
    a device without fp64: ``precision.exact_dtype``)."""
    n_pos, rotary_dim = cos.shape
    pad = d_head - rotary_dim
    dtype = exact_dtype(cos.device)
    full_cos = torch.cat([cos.to(dtype), cos.new_ones(n_pos, pad, dtype=dtype)], dim=1)
    full_sin = torch.cat([sin.to(dtype), sin.new_zeros(n_pos, pad, dtype=dtype)], dim=1)
    return full_cos, full_sin


def rotate(
    x: Float[Tensor, "*#batch d_head"],
    cos: Float[Tensor, "*#batch d_head"],
    sin: Float[Tensor, "*#batch d_head"],
    layout: PlaneLayout,
) -> Float[Tensor, "*#batch d_head"]:
    """Apply RoPE as the model does: ``x * cos + sign * x[partner] * sin``, per position.

    The tables' leading dims broadcast against ``x``'s: ``[pos, d_head]`` rows for x's positions,
    one ``[d_head]`` row for a single position.
    """
    return x * cos + layout.sign.to(x) * x[..., layout.partner.to(x.device)] * sin


def rotation_bound(
    x: Float[Tensor, "*#batch d_head"],
    cos: Float[Tensor, "*#batch d_head"],
    sin: Float[Tensor, "*#batch d_head"],
    layout: PlaneLayout,
) -> Float[Tensor, "*#batch d_head"]:
    """Componentwise bound on ``|rotate(x)|``: ``|x| · |cos| + |x[partner]| · |sin|``."""
    magnitude = x.abs()
    return magnitude * cos.abs() + magnitude[..., layout.partner.to(x.device)] * sin.abs()


def plane_thetas(
    cos: Float[Tensor, "pos d_head"], sin: Float[Tensor, "pos d_head"], layout: PlaneLayout
) -> tuple[Float[Tensor, " plane"], Float[Tensor, " plane"]]:
    """Angle per position step θ (radians per position) and magnitude of each native plane.

    Read from the first two positions of the model's own tables: θ = angle(p=1) − angle(p=0),
    magnitude = |(cos, sin)| at p = 0 (1 for plain RoPE, YaRN's attention factor otherwise).
    Planes are in native order (``native_plane_dims``).
    """
    if cos.shape[0] < 2:
        raise ValueError("Reading θ needs rotation tables for at least two positions.")
    first = native_plane_dims(layout.rotary_dim, layout.pairing)[:, 0]
    c, s = cos[:2, first].double(), sin[:2, first].double()
    theta = torch.atan2(s[1], c[1]) - torch.atan2(s[0], c[0])
    theta = torch.remainder(theta + torch.pi, 2 * torch.pi) - torch.pi
    return theta, torch.hypot(c[0], s[0])


def frequency_order(theta: Float[Tensor, " plane"]) -> Int[Tensor, " plane"]:
    """Native plane indices sorted fastest first (stable for ties)."""
    return torch.sort(theta.abs(), descending=True, stable=True).indices


def frequency_logits(
    q_rot: Float[Tensor, "*#batch head d_head"],
    k_rot: Float[Tensor, "*#batch key head d_head"],
    layout: PlaneLayout,
    scale: float,
) -> Float[Tensor, "*#batch head plane key"]:
    """Per-plane pre-softmax logits from one (rotated) query to rotated keys.

    ``k_rot`` must already be expanded to the query heads (GQA); the leading dims broadcast (one
    set of keys for many queries). Computed in fp64.
    """
    products = q_rot.double().unsqueeze(-3) * k_rot.double()  # [*batch, key, head, d_head]
    logits = torch.einsum("...khd,dp->...hpk", products, layout.membership().to(products))
    return logits * scale


def position_token_factors(
    q_rot: Float[Tensor, "*batch d_head"],
    k_pre: Float[Tensor, "*batch token d_head"],
    cos: Float[Tensor, "position d_head"],
    sin: Float[Tensor, "position d_head"],
    layout: PlaneLayout,
    scale: float,
) -> tuple[Float[Tensor, "position factor"], Float[Tensor, "*batch token factor"]]:
    """Factors ``P``, ``T`` with ``M = P Tᵀ``: ``M[p, m] = scale · q_rotᵀ R_p k̃_m``, in ``q_rot``'s dtype
    (the analysis dtype: fp64, or fp32 under ``precision="float32"``).

    In plane f, with ``Q = q_a + i q_b`` (the rotated query), ``K = k_a + i k_b`` (a pre-rotary
    key) and ``E_p = cos_p + i sin_p`` (the model's own table row p, magnitude included), the
    logit is ``Re(E_p · scale · conj(Q) K)``. So row p of ``P`` depends on the key position only
    (``(Re E_p, −Im E_p)`` per plane, shared by every prompt and head) and row m of ``T`` on the
    token only (``scale · conj(Q) K_m`` as (re, im) per plane). With unrotated dims one more
    factor holds them: ``P = 1``, ``T = scale · q_⊥ · k̃_⊥``.

    Returns:
        ``P`` ``[position, 2F (+1)]`` and ``T`` ``[*batch, token, 2F (+1)]``; factors ``2f, 2f + 1``
        belong to frequency ID ``f + 1``, a last odd factor to the unrotated dims.
    """
    first, second = (_positions(layout.dims[:, side].tolist()) for side in (0, 1))
    q = q_rot
    positions = rearrange([cos[:, first], -sin[:, first]], "pair pos plane -> pos (plane pair)").to(q.dtype)
    query = torch.complex(q[..., first], -q[..., second]).unsqueeze(-2) * scale  # scale · conj(Q)
    key = _as_complex(k_pre, first, second)
    tokens = torch.empty(key.shape, dtype=query.dtype, device=key.device).copy_(key).mul_(query)
    tokens = rearrange(torch.view_as_real(tokens), "... plane pair -> ... (plane pair)")
    if layout.rotary_dim < layout.d_head:
        rest = slice(layout.rotary_dim, None)
        positions = torch.cat([positions, positions.new_ones(positions.shape[0], 1)], dim=-1)
        unrotated = k_pre[..., rest].to(q.dtype) @ q[..., rest].unsqueeze(-1) * scale  # [*batch, token, 1]
        tokens = torch.cat([tokens, unrotated], dim=-1)
    return positions, tokens


def _as_complex(x: Tensor, first: slice | list[int], second: slice | list[int]) -> Tensor:
    """``x[first] + i x[second]`` over the last dim; a view when the pairs are adjacent dims."""
    if (isinstance(first, slice) and isinstance(second, slice) and first.step == second.step == 2
            and second.start == first.start + 1 and first.start % 2 == 0 and x.stride(-1) == 1
            and x.dtype in (torch.float32, torch.float64)
            and all(stride % 2 == 0 for stride in x.stride()[:-1]) and x.storage_offset() % 2 == 0):
        return torch.view_as_complex(x[..., first.start : second.stop].unflatten(-1, (-1, 2)))
    return torch.complex(x[..., first], x[..., second])


def _positions(values: list[int]) -> slice | list[int]:
    """A slice for an arithmetic run of indices (a view, no copy), else the list."""
    if len(values) > 1:
        step = values[1] - values[0]
        if step > 0 and values == list(range(values[0], values[-1] + 1, step)):
            return slice(values[0], values[-1] + 1, step)
    return values


def plane_factors(
    positions: Float[Tensor, "*#batch position factor"],
    tokens: Float[Tensor, "*batch token factor"],
    n_planes: int,
) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Factors of ``position_token_factors`` split by plane.

    Returns:
        ``(P, T)`` of the rotated planes, ``[*, F, position, 2]`` and ``[*, F, token, 2]``, and of
        the unrotated dims, ``[*, 1, position, 1]`` and ``[*, 1, token, 1]`` (zeros if none).
    """
    rotated = 2 * n_planes
    p, t = (rearrange(x[..., :rotated], "... n (plane pair) -> ... plane n pair", pair=2) for x in (positions, tokens))
    if positions.shape[-1] > rotated:
        rest = positions[..., rotated:].unsqueeze(-3), tokens[..., rotated:].unsqueeze(-3)
    else:
        rest = (positions.new_ones(*positions.shape[:-1], 1).unsqueeze(-3),
                tokens.new_zeros(*tokens.shape[:-1], 1).unsqueeze(-3))
    return (p, t), rest


def plane_products(
    positions: Float[Tensor, "*#batch position factor"],
    tokens: Float[Tensor, "*batch token factor"],
    n_planes: int,
) -> Float[Tensor, "*batch plane position token"]:
    """``positions @ tokensᵀ`` split by plane (F rotated planes, then the unrotated dims)."""
    (p, t), (p0, t0) = plane_factors(positions, tokens, n_planes)
    return torch.cat([p @ t.transpose(-1, -2), p0 @ t0.transpose(-1, -2)], dim=-3)


def position_token_logits(
    q_rot: Float[Tensor, "*batch head d_head"],
    k_pre: Float[Tensor, "*batch token head d_head"],
    cos: Float[Tensor, "position d_head"],
    sin: Float[Tensor, "position d_head"],
    layout: PlaneLayout,
    scale: float,
    by_frequency: bool = False,
) -> Float[Tensor, "*batch head position token"] | Float[Tensor, "*batch head plane position token"]:
    """The position × token logit matrix ``M[p, m] = scale · q_rotᵀ R_p k̃_m`` (fp64; fp32 without it).

    One matrix product of the factors of ``position_token_factors``: no rotated copy of every
    key at every position is materialised.

    Args:
        q_rot: rotated query at the query position (one per head).
        k_pre: pre-rotary keys of the tokens (expanded to query heads).
        cos: full-head cos table at the positions (rows of M), as from ``extend_tables``.
        sin: full-head sin table at the same positions.
        layout: plane layout.
        scale: score scale.
        by_frequency: add a plane axis (F planes, then the unrotated slice).
    """
    positions, tokens = position_token_factors(q_rot.to(exact_dtype(q_rot.device)), k_pre.transpose(-2, -3), cos, sin,
                                               layout, scale)
    if by_frequency:
        return plane_products(positions, tokens, layout.n_planes)
    return positions @ tokens.transpose(-1, -2)


def soft_cap(logits: Tensor, cap: float | None) -> Tensor:
    """Gemma-2 attention soft-capping ``cap · tanh(x / cap)``; identity when ``cap`` is None."""
    if cap is None:
        return logits
    return cap * torch.tanh(logits / cap)


def visible_keys(query: Int[Tensor, " batch"], n_keys: int, window: int | None,
                 chunk: int | None = None) -> Bool[Tensor, "batch key"]:
    """Keys a causal head sees from each query position: with a sliding ``window``, key j is visible
    from t iff ``0 <= t - j < window``; with ``chunk`` (Llama 4's chunked attention) only keys of the
    query's own chunk (``j // chunk == t // chunk``) are."""
    keys = torch.arange(n_keys, device=query.device)
    distance = query.unsqueeze(-1) - keys
    visible = distance >= 0
    if window is not None:
        visible &= distance < window
    if chunk is not None:
        visible &= query.unsqueeze(-1) // chunk == keys // chunk
    return visible


def plane_keep_mask(
    layout: PlaneLayout, frequency_ids: list[int] | tuple[int, ...]
) -> Float[Tensor, " d_head"]:
    """Multiplier over head dims that zeroes the given planes (frequency IDs; 0 = unrotated).

    Zeroing a plane before rotation zeroes it after rotation too (rotation mixes only within a
    plane), so multiplying pre-rotary q (or k) by this mask removes exactly those planes' terms.
    This is the one plane-mask primitive shared by inference-time and training-time gating.
    """
    mask = torch.ones(layout.d_head, dtype=torch.float64)
    for fid in frequency_ids:
        if not isinstance(fid, int) or isinstance(fid, bool):
            raise TypeError(f"planes: frequency IDs must be ints, got {fid!r}.")
        if fid == 0:
            mask[layout.rotary_dim :] = 0.0
        elif 1 <= fid <= layout.n_planes:
            mask[layout.dims[fid - 1]] = 0.0
        elif layout.n_planes == 0:
            raise ValueError(f"planes: frequency ID {fid} does not exist: this layer applies no RoPE, so its only "
                             "plane is 0 (every dimension).")
        else:
            raise ValueError(
                f"planes: frequency ID {fid} is out of range: this layer has planes 1…{layout.n_planes} "
                "(1 = fastest) and 0 for the unrotated dimensions."
            )
    return mask
