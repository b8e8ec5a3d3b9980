"""One attention layer: its static facts, its RoPE geometry, what a forward pass captured there,
and the per-layer maths that turns a capture into logits.

``LayerSpec`` is what a family adapter reads off the model; ``LayerGeometry`` adds what only the
model's own rotation tables tell (θ, magnitude, plane order); ``LayerCapture`` holds q, k̃ and the
tables of one forward pass. Everything here is pure tensor code on top of ``psheads.rope.geometry``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from jaxtyping import Bool, Float, Int, Shaped
from torch import Tensor

from psheads.rope import geometry
from psheads.rope.families import UnsupportedModelError
from psheads.rope.precision import exact_dtype


@dataclass(frozen=True)
class QueryScale:
    """A factor on the query that depends on its absolute position p only (Llama 4's attention
    temperature, Ministral 3's llama-4 scaling): ``s(p) = 1 + slope · ln(1 + floor((p + offset) / period))``.

    It multiplies every plane of the query alike, so the decomposition stays exact; the capture
    applies it to the query (``psheads.rope.backends``).
    """

    slope: float
    period: float
    offset: int = 0

    def at(self, positions: Shaped[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
        """``s(p)`` at integer ``positions``, fp64 (fp32 on a device without it)."""
        steps = torch.floor((positions.to(exact_dtype(positions.device)) + self.offset) / self.period)
        return 1 + self.slope * torch.log1p(steps)


@dataclass(frozen=True)
class LayerSpec:
    """Static attention facts of one layer, as the model computes them.

    Attributes:
        n_heads: query heads.
        n_kv_heads: key/value heads (GQA: query head h reads KV head ``h // (n_heads / n_kv_heads)``).
        d_head: head dimension (of q and k; the values may differ).
        pairing: ``"halves"`` or ``"adjacent"``.
        scale: factor multiplying ``q_rot · k_rot`` (``1/√d_head`` by default).
        softcap: Gemma-2 logit soft-cap, or None.
        window: sliding window (key j is visible from t iff ``0 <= t - j < window``), or None.
        chunk: chunked attention (Llama 4): key j is visible from t only if ``j // chunk == t // chunk``.
        sinks: per query head, a learned logit that joins every softmax as one extra column and is
            dropped afterwards (gpt-oss's attention sinks), or None. It lies outside every plane.
        norm_eps: ``(eps_q, eps_k)`` of an RMS norm the model applies to q and k *after* RoPE
            (HunYuan, NanoChat, Llama 4), or None. Rotation keeps a vector's norm, so the capture
            divides the pre-rotary q and k by the RMS of their rotated selves.
        query_weight: ``[d_head]`` per-dimension weights that norm multiplies after RoPE, folded into
            the query (``w_q · w_k``), or None. A plane whose two weights differ is then no longer a
            function of relative position alone.
        query_scale: a per-position factor on the query (``QueryScale``), or None.
    """

    n_heads: int
    n_kv_heads: int
    d_head: int
    pairing: geometry.Pairing
    scale: float
    softcap: float | None
    window: int | None
    chunk: int | None = None
    sinks: tuple[float, ...] | None = None
    norm_eps: tuple[float, float] | None = None
    query_weight: tuple[float, ...] | None = None
    query_scale: QueryScale | None = None


@dataclass
class LayerCapture:
    """What one forward pass recorded for one layer (fp32 or wider; never the model's tensors).

    Attributes:
        q: pre-rotary queries ``[batch, query, head, d_head]`` (``query`` = the requested query
            positions, or every position).
        k: pre-rotary keys ``[batch, pos, kv_head, d_head]``.
        cos: per-element cos table ``[pos, rotary_dim]`` the model used.
        sin: per-element sin table ``[pos, rotary_dim]``.
        pattern: the model's own attention pattern ``[batch, head, query, pos]``, when requested.
        reference: with ``pattern``, where TransformerLens computes the attention itself: the pattern
            the original Hugging Face attention computes on the same inputs (a check on the bridge).
    """

    q: Float[Tensor, "batch query head d_head"]
    k: Float[Tensor, "batch pos kv_head d_head"]
    cos: Float[Tensor, "pos rotary_dim"]
    sin: Float[Tensor, "pos rotary_dim"]
    pattern: Float[Tensor, "batch head query pos"] | None = None
    reference: Float[Tensor, "batch head query pos"] | None = None

    def to(self, device: torch.device) -> LayerCapture:
        """The capture with every tensor moved to ``device``."""
        return dataclasses.replace(self, **{name: value.to(device) for name in ("q", "k", "cos", "sin", "pattern",
                                                                               "reference")
                                            if (value := getattr(self, name)) is not None})

    @functools.cached_property
    def full_tables(self) -> tuple[Float[Tensor, "pos d_head"], Float[Tensor, "pos d_head"]]:
        """The tables over the whole head in fp64 (``cos = 1, sin = 0`` on unrotated dims)."""
        return geometry.extend_tables(self.cos, self.sin, int(self.k.shape[-1]))


@dataclass(frozen=True)
class LayerGeometry:
    """RoPE geometry of one layer, read from the model's own rotation tables.

    Attributes:
        layer: layer index.
        n_heads: query heads.
        n_kv_heads: key/value heads.
        d_head: head dimension.
        rotary_dim: rotated dimensions; ``d_head - rotary_dim`` dims form plane 0.
        pairing: ``"halves"`` (dims ``(i, i + rotary_dim/2)``) or ``"adjacent"`` (``(2i, 2i+1)``).
        scale: factor on ``q_rot · k_rot`` in the model's score.
        softcap: attention logit soft-cap (Gemma-2), or None.
        window: sliding window (keys with ``t - j >= window`` are masked), or None.
        theta: ``[F]`` radians per position of frequency IDs 1…F (fastest first).
        magnitude: ``[F]`` norm of the (cos, sin) factors (1 for plain RoPE; YaRN's attention
            factor otherwise). Logits carry its square.
        layout: plane layout (dimension pairs in frequency-ID order).
        chunk, sinks, norm_eps, query_weight, query_scale: as in ``LayerSpec``.
    """

    layer: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    rotary_dim: int
    pairing: geometry.Pairing
    scale: float
    softcap: float | None
    window: int | None
    theta: Float[Tensor, " plane"]
    magnitude: Float[Tensor, " plane"]
    layout: geometry.PlaneLayout
    chunk: int | None = None
    sinks: tuple[float, ...] | None = None
    norm_eps: tuple[float, float] | None = None
    query_weight: tuple[float, ...] | None = None
    query_scale: QueryScale | None = None

    @classmethod
    def from_tables(
        cls, layer: int, spec: LayerSpec, cos: Float[Tensor, "pos rotary_dim"], sin: Float[Tensor, "pos rotary_dim"]
    ) -> LayerGeometry:
        """Read θ, magnitude and the fastest-first plane order from the model's tables."""
        rotary_dim = int(cos.shape[-1])
        native = geometry.plane_layout(spec.d_head, rotary_dim, spec.pairing)
        if rotary_dim == 0:  # a layer without RoPE (NoPE): every dimension is plane 0
            empty = torch.zeros(0, dtype=torch.float64)
            return cls(layer=layer, rotary_dim=0, theta=empty, magnitude=empty, layout=native, **_fields(spec))
        first, second = native.dims[:, 0], native.dims[:, 1]
        if not (torch.equal(cos[:, first], cos[:, second]) and torch.equal(sin[:, first], sin[:, second])):
            raise UnsupportedModelError(
                f"Layer {layer}: the rotation tables differ between the two dims of a plane, so the model "
                f"does not rotate with {spec.pairing!r} pairing; psheads cannot decompose it exactly."
            )
        cos64, sin64 = geometry.extend_tables(cos, sin, spec.d_head)
        theta, magnitude = (x.cpu() for x in geometry.plane_thetas(cos64, sin64, native))
        order = geometry.frequency_order(theta)
        return cls(
            layer=layer,
            rotary_dim=rotary_dim,
            theta=theta[order],
            magnitude=magnitude[order],
            layout=geometry.plane_layout(spec.d_head, rotary_dim, spec.pairing, order),
            **_fields(spec),
        )

    @property
    def n_planes(self) -> int:
        """Number of rotated planes F."""
        return self.layout.n_planes

    @property
    def plane_dims(self) -> Int[Tensor, "plane 2"]:
        """``[F, 2]`` head dimensions of frequency IDs 1…F."""
        return self.layout.dims

    @property
    def plane_ids(self) -> list[int]:
        """Frequency IDs of the result slices: ``1 … F``, then 0 (the unrotated dims)."""
        return [*range(1, self.n_planes + 1), 0]

    @functools.cached_property
    def kv_head_of(self) -> Int[Tensor, " head"]:
        """KV head read by each query head (computed once: read it, never write into it)."""
        return torch.arange(self.n_heads) // (self.n_heads // self.n_kv_heads)

    @property
    def spec(self) -> LayerSpec:
        """The static facts this geometry was read with."""
        return LayerSpec(**{field.name: getattr(self, field.name) for field in dataclasses.fields(LayerSpec)})

    def same_geometry(self, other: LayerGeometry) -> bool:
        """Whether ``other`` has the same attention facts and plane layout (tables aside)."""
        return self._facts == other._facts

    @functools.cached_property
    def _facts(self) -> tuple:
        """The attention facts and plane layout ``same_geometry`` compares (read once per layer)."""
        facts = ("rotary_dim", *(field.name for field in dataclasses.fields(LayerSpec)))
        return (*(getattr(self, name) for name in facts), tuple(map(tuple, self.layout.dims.tolist())))

    def check_capture(self, capture: LayerCapture) -> None:
        """Raise if a capture's head counts or rotated width differ from this geometry (the model changed)."""
        if capture.k.shape[2] != self.n_kv_heads or capture.q.shape[2] != self.n_heads:
            raise RuntimeError(
                f"Layer {self.layer}: the model now gives {capture.q.shape[2]} query and {capture.k.shape[2]} key "
                f"heads, but was wrapped with {self.n_heads} and {self.n_kv_heads}: its configuration changed "
                "after wrapping. Build a new RopeLens."
            )
        if capture.cos.shape[-1] != self.rotary_dim:
            raise RuntimeError(
                f"Layer {self.layer}: the model now rotates {capture.cos.shape[-1]} dimensions, but was wrapped "
                f"rotating {self.rotary_dim}: its configuration changed after wrapping. Build a new RopeLens.")

    def visible(self, query: Int[Tensor, " batch"], n_keys: int) -> Bool[Tensor, "batch key"]:
        """Keys the layer's mask leaves visible from each query position (causal, window, chunk)."""
        return visible_keys(self, query, n_keys)

    def sink_logits(self, heads: Tensor | None = None) -> Float[Tensor, " head"] | None:
        """The attention sinks' logits of ``heads`` (all by default) in fp64, or None without sinks."""
        if self.sinks is None:
            return None
        sinks = torch.tensor(self.sinks, dtype=exact_dtype(torch.device("cpu")))
        return sinks if heads is None else sinks[heads.cpu()]

    def to_frame(self) -> pd.DataFrame:
        """One row per plane (frequency ID 0 = unrotated dims), with θ, period and dims."""
        rows = [
            {
                "layer": self.layer,
                "plane": fid + 1,
                "theta": float(self.theta[fid]),
                "period": float(2 * torch.pi / self.theta[fid]) if self.theta[fid] != 0 else float("inf"),
                "magnitude": float(self.magnitude[fid]),
                "dims": tuple(int(d) for d in self.layout.dims[fid]),
            }
            for fid in range(self.n_planes)
        ]
        if self.rotary_dim < self.d_head:
            rows.append(
                {
                    "layer": self.layer,
                    "plane": 0,
                    "theta": 0.0,
                    "period": float("inf"),
                    "magnitude": 1.0,
                    "dims": tuple(range(self.rotary_dim, self.d_head)),
                }
            )
        return pd.DataFrame(rows)


class Layers:
    """The geometry of a model's attention layers, looked up by block index.

    ``layers[i]`` is block i's geometry (negative i counts from the last block); iteration and
    ``len`` run over the attention layers in order. In a hybrid model the blocks whose mixer is not
    softmax attention (linear attention, state-space, convolution) have no geometry: ``i in layers``
    is False, and ``layers[i]`` raises ``ValueError`` naming the blocks that have one.
    """

    def __init__(self, geometries: Sequence[LayerGeometry], n_blocks: int) -> None:
        self._by_block = {geo.layer: geo for geo in geometries}
        self.n_blocks = n_blocks

    def __getitem__(self, layer: int) -> LayerGeometry:
        index = layer + self.n_blocks if isinstance(layer, int) and -self.n_blocks <= layer < 0 else layer
        if index not in self._by_block:
            raise ValueError(f"Layer {layer} has no softmax attention to decompose: the model's attention layers "
                             f"are {list(self._by_block)} of its {self.n_blocks} blocks.")
        return self._by_block[index]

    def __contains__(self, layer: object) -> bool:
        return layer in self._by_block

    def __iter__(self) -> Iterator[LayerGeometry]:
        return iter(self._by_block.values())

    def __len__(self) -> int:
        return len(self._by_block)

    def __repr__(self) -> str:
        return f"Layers({list(self._by_block)} of {self.n_blocks} blocks)"

    @property
    def indices(self) -> tuple[int, ...]:
        """The blocks that hold softmax attention, in order."""
        return tuple(self._by_block)


def visible_keys(facts: LayerSpec | LayerGeometry, query: Int[Tensor, " batch"], n_keys: int
                 ) -> Bool[Tensor, "batch key"]:
    """Keys a layer's mask leaves visible from each query position: causal, then its sliding window
    and attention chunk (``psheads.rope.geometry.visible_keys``)."""
    return geometry.visible_keys(query, n_keys, facts.window, facts.chunk)


def _fields(spec: LayerSpec) -> dict:
    """``spec``'s fields by name (``dataclasses.asdict`` would turn a ``QueryScale`` into a dict)."""
    return {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}


# --- per-layer maths -------------------------------------------------------------------------
def weighted_query(geo: LayerGeometry, q_rot: Float[Tensor, "*batch d_head"]) -> Float[Tensor, "*batch d_head"]:
    """A rotated query with the layer's post-RoPE per-dimension weights (``query_weight``) applied."""
    if geo.query_weight is None:
        return q_rot
    return q_rot * torch.tensor(geo.query_weight, dtype=q_rot.dtype, device=q_rot.device)


def head_keys(geo: LayerGeometry, capture: LayerCapture) -> Float[Tensor, "batch pos head d_head"]:
    """Pre-rotary keys expanded to the query heads (GQA: head h reads KV head h // group), fp64."""
    return capture.k[:, :, geo.kv_head_of.to(capture.k.device)].double()


def rotated_query(geo: LayerGeometry, capture: LayerCapture, t: int) -> Float[Tensor, "batch head d_head"]:
    """The first captured query, rotated with the model's table row ``t`` (fp64)."""
    cos, sin = capture.full_tables
    return weighted_query(geo, geometry.rotate(capture.q[:, 0].double(), cos[t], sin[t], geo.layout))


def rotated_keys(geo: LayerGeometry, capture: LayerCapture, keys: Tensor) -> Float[Tensor, "batch key head d_head"]:
    """Keys at positions ``keys``, expanded to query heads and rotated at their own positions."""
    cos, sin = capture.full_tables
    k = head_keys(geo, capture)[:, keys]
    return geometry.rotate(k.transpose(1, 2), cos[keys], sin[keys], geo.layout).transpose(1, 2)


def query_planes(geo: LayerGeometry, capture: LayerCapture, t: int) -> Float[Tensor, "batch head plane key"]:
    """Per-plane logits from the captured query at ``t`` to every key ``0…t`` (pre-soft-cap)."""
    keys = torch.arange(t + 1, device=capture.k.device)
    return geometry.frequency_logits(rotated_query(geo, capture, t), rotated_keys(geo, capture, keys),
                                     geo.layout, geo.scale)


def all_query_planes(geo: LayerGeometry, capture: LayerCapture) -> Float[Tensor, "batch head plane query key"]:
    """Per-plane logits from every query to every key (unmasked, pre-soft-cap, fp64).

    ``capture`` must hold q at every position.
    """
    cos, sin = capture.full_tables
    q_rot = weighted_query(geo, geometry.rotate(capture.q.double().transpose(1, 2), cos, sin, geo.layout))
    q_rot = q_rot.transpose(1, 2)
    k_rot = rotated_keys(geo, capture, torch.arange(capture.k.shape[1], device=capture.k.device))
    planes = geometry.frequency_logits(q_rot, k_rot.unsqueeze(1), geo.layout, geo.scale)  # [b, q, h, plane, k]
    return planes.permute(0, 2, 3, 1, 4)


def unit_roundoff(dtype: torch.dtype) -> float:
    """u = ε/2 of a float dtype: the largest relative error of one rounding."""
    return torch.finfo(dtype).eps / 2


SOFTMAX_DTYPE = torch.float32
"""The dtype of the model's softmax: Hugging Face's eager attention takes it in fp32 whatever the
model's dtype (an fp64 model too); the bound assumes it, which is conservative for a wider one."""


def _wider(dtype: torch.dtype) -> torch.dtype:
    """The dtype a model accumulates its products in: fp32 for half precision."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def logit_error_factor(dtype: torch.dtype, d_head: int) -> float:
    """γ of the bound |Δlogit| ≤ γ · A + 2u · |logit| on a model's own attention logit (see ``check_pattern``).

    Six roundings in ``dtype`` (rotating q and k: a product, a product and a sum each) and a dot
    product of ``d_head`` terms accumulated in the wider dtype (a recursive sum's worst case).
    """
    return 6 * unit_roundoff(dtype) + (d_head + 2) * unit_roundoff(_wider(dtype))


@dataclass(frozen=True)
class PatternCheck:
    """How the pattern rebuilt from the planes compares with the model's own on a probe.

    Attributes:
        error: max |Δ| between the two patterns.
        worst: max of |Δ| / tolerance over every entry: ≤ 1 means every entry is within what the
            model's own rounding allows.
        max_logit: the largest |logit| to a visible key (fp64 rebuild).
    """

    error: float
    worst: float
    max_logit: float


def attention_pattern(facts: LayerSpec | LayerGeometry, logits: Float[Tensor, "batch head query key"]
                      ) -> Float[Tensor, "batch head query key"]:
    """The softmax of masked (``-inf``), soft-capped logits over the keys, with the layer's attention
    sinks as one extra column that takes its share of the mass and is then dropped."""
    if facts.sinks is None:
        return torch.softmax(logits, dim=-1)
    sinks = torch.tensor(facts.sinks, dtype=logits.dtype, device=logits.device)
    column = sinks.view(1, -1, 1, 1).expand(*logits.shape[:-1], 1)
    return torch.softmax(torch.cat([logits, column], dim=-1), dim=-1)[..., :-1]


def check_pattern(geo: LayerGeometry, capture: LayerCapture, dtype: torch.dtype,
                  pattern: Tensor | None = None) -> PatternCheck:
    """Compare the pattern rebuilt from the planes with the model's own, at every query, entry by entry.

    The model computes each logit in ``dtype`` and its softmax in ``SOFTMAX_DTYPE``, so the model's
    logit may differ from the exact one (the fp64 rebuild) by ``E = γ · A + (2u + u_s) · |λ|``
    (+ ``2u · cap`` with soft-capping): ``u`` and ``u_s`` are the unit roundoffs of ``dtype`` and of
    the softmax, ``γ`` is ``logit_error_factor`` and ``A = scale · Σ_c |q_c|·|k_c|`` bounds the sum
    of the dot product's terms (rotated components bounded by ``|x|·|cos| + |x_partner|·|sin|``).
    Logit errors ``ε_k`` with ``|ε_k| ≤ E_k`` move a softmax entry by at most
    ``p_j · expm1(E_j + max_k E_k)``; the softmax's own rounding and the cast of the pattern to
    ``dtype`` add ``p_j · (8 u_s + u)``, and an underflowing entry ``finfo(dtype).tiny``. An entry
    within that tolerance is what the model's arithmetic allows.

    ``capture`` must hold q at every position and the model's pattern (or ``pattern`` is given: another
    pattern of the same inputs, such as ``capture.reference``).
    """
    pattern = capture.pattern if pattern is None else pattern
    if pattern is None:
        raise ValueError("The capture holds no attention pattern; capture with with_pattern=True.")
    n_pos = capture.k.shape[1]
    cos, sin = capture.full_tables
    q = capture.q.double().transpose(1, 2)  # [batch, head, query, d_head]
    k = head_keys(geo, capture).double().transpose(1, 2)  # [batch, head, key, d_head]
    q_bound = weighted_query(geo, geometry.rotation_bound(q, cos, sin, geo.layout)).abs()
    magnitude = torch.einsum("bhqd,bhkd->bhqk", q_bound,
                             geometry.rotation_bound(k, cos, sin, geo.layout)) * abs(geo.scale)
    raw = all_query_planes(geo, capture).sum(dim=2)
    u, u_softmax = unit_roundoff(dtype), unit_roundoff(SOFTMAX_DTYPE)
    bound = logit_error_factor(dtype, geo.d_head) * magnitude + (2 * u + u_softmax) * raw.abs()
    if geo.softcap is not None:
        bound = bound + 2 * u * geo.softcap  # tanh's slope is at most 1
    logits = geometry.soft_cap(raw, geo.softcap)
    visible = geo.visible(torch.arange(n_pos, device=logits.device), n_pos)  # [query, key]
    bound = bound.masked_fill(~visible, 0.0)
    rebuilt = attention_pattern(geo, logits.masked_fill(~visible, float("-inf")))
    tolerance = rebuilt * (torch.expm1(bound + bound.amax(-1, keepdim=True))
                           + 8 * u_softmax + u) + torch.finfo(dtype).tiny
    # 0 · ∞: logits so large (diverged weights) that rounding bounds nothing there
    tolerance = torch.nan_to_num(tolerance, nan=math.inf)
    difference = (rebuilt - pattern.double()).abs()
    return PatternCheck(error=float(difference.max()), worst=float((difference / tolerance).max()),
                        max_logit=float(raw.abs().masked_fill(~visible, 0.0).max()))
