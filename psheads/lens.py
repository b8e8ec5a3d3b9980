"""``RopeLens``: exact per-frequency RoPE logit decompositions on a TransformerLens model."""

from __future__ import annotations

import contextlib
import logging
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from psheads import geometry
from psheads.backends import Backend, LayerCapture, LayerSpec, backend_for

logger = logging.getLogger(__name__)

#: Self-check tolerance on attention probabilities, by the model's dtype.
SELF_CHECK_TOLERANCE: dict[torch.dtype, float] = {
    torch.float64: 1e-8,
    torch.float32: 1e-5,
    torch.float16: 5e-3,
    torch.bfloat16: 3e-2,
}


def as_index(value: Any, name: str) -> int:
    """An int from an int-like (Python, numpy or 0-d torch integer); TypeError otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got a bool.")
    try:
        return operator.index(value)
    except TypeError as err:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.") from err


class SelfCheckError(RuntimeError):
    """The planes did not rebuild the model's own attention pattern."""


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

    @property
    def n_planes(self) -> int:
        """Number of rotated planes F."""
        return self.layout.n_planes

    @property
    def plane_dims(self) -> Int[Tensor, "plane 2"]:
        """``[F, 2]`` head dimensions of frequency IDs 1…F."""
        return self.layout.dims

    @property
    def kv_head_of(self) -> Int[Tensor, " head"]:
        """KV head read by each query head."""
        return torch.arange(self.n_heads) // (self.n_heads // self.n_kv_heads)

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


def _layer_geometry(layer: int, spec: LayerSpec, capture: LayerCapture) -> LayerGeometry:
    rotary_dim = int(capture.cos.shape[-1])
    native = geometry.plane_layout(spec.d_head, rotary_dim, spec.pairing)
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, spec.d_head)
    theta, magnitude = (x.cpu() for x in geometry.plane_thetas(cos, sin, native))
    order = geometry.frequency_order(theta)
    return LayerGeometry(
        layer=layer,
        n_heads=spec.n_heads,
        n_kv_heads=spec.n_kv_heads,
        d_head=spec.d_head,
        rotary_dim=rotary_dim,
        pairing=spec.pairing,
        scale=spec.scale,
        softcap=spec.softcap,
        window=spec.window,
        theta=theta[order],
        magnitude=magnitude[order],
        layout=geometry.plane_layout(spec.d_head, rotary_dim, spec.pairing, order),
    )


class RopeLens:
    """Wrap a TransformerLens RoPE model for exact per-frequency logit decompositions.

    The model is never changed: every hook is removed on exit (also on error), and the
    training flags are restored. Analysis runs in eval mode under ``torch.no_grad()`` with q/k
    upcast to fp32 and products in fp64.

    Args:
        model: a ``TransformerBridge`` or ``HookedTransformer`` using RoPE.
        self_check: rebuild the model's attention pattern from the planes on a probe input and
            raise ``SelfCheckError`` if they disagree (tolerance by dtype:
            ``SELF_CHECK_TOLERANCE``).
        probe_length: probe length in tokens (capped at the model's context).
        seed: seed of the random probe tokens.

    Raises:
        TypeError: not a TransformerLens model.
        ValueError: not a RoPE model, or an attention variant psheads cannot decompose.
        SelfCheckError: the decomposition does not reproduce the model's pattern.
    """

    def __init__(self, model: Any, self_check: bool = True, probe_length: int = 32, seed: int = 0) -> None:
        if isinstance(model, RopeLens):
            raise TypeError("This is already a RopeLens; use it directly.")
        if not isinstance(probe_length, int) or isinstance(probe_length, bool) or probe_length < 2:
            raise ValueError(f"probe_length must be an int of at least 2, got {probe_length!r}.")
        self.backend: Backend = backend_for(model)
        self.model = model
        n_pos = min(probe_length, self.backend.n_ctx)
        generator = torch.Generator().manual_seed(seed)
        probe = torch.randint(0, int(model.cfg.d_vocab), (2, n_pos), generator=generator)
        captures = self.backend.capture(probe, range(self.backend.n_layers), with_pattern=self_check)
        self.layers: list[LayerGeometry] = [
            _layer_geometry(layer, self.backend.layer_spec(layer), captures[layer])
            for layer in range(self.backend.n_layers)
        ]
        if self_check:
            self._self_check(captures)

    # --- facts ------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Number of layers."""
        return len(self.layers)

    def __repr__(self) -> str:
        first = self.layers[0]
        return (
            f"RopeLens({self.backend.model_name!r}, backend={self.backend.kind}, layers={self.n_layers}, "
            f"heads={first.n_heads}, kv_heads={first.n_kv_heads}, d_head={first.d_head}, "
            f"rotary_dim={first.rotary_dim}, dtype={self.backend.dtype})"
        )

    def geometry_frame(self) -> pd.DataFrame:
        """All layers' planes as one tidy frame (see ``LayerGeometry.to_frame``)."""
        return pd.concat([g.to_frame() for g in self.layers], ignore_index=True)

    # --- validation -------------------------------------------------------------------------
    def _tokens(self, tokens: Any) -> Int[Tensor, "batch pos"]:
        if isinstance(tokens, (list, tuple)):
            if len(tokens) == 0:
                raise ValueError("tokens is empty: pass at least one token sequence.")
            try:
                tokens = torch.tensor(tokens)
            except (ValueError, TypeError) as err:
                raise ValueError(
                    "tokens must be a LongTensor [batch, pos] or a list of equal-length token-id lists."
                ) from err
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(
                f"tokens must be a LongTensor [batch, pos] (e.g. from model.to_tokens), got {type(tokens).__name__}."
            )
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must hold integer token ids, got dtype {tokens.dtype}.")
        if tokens.ndim == 1:
            tokens = tokens.unsqueeze(0)
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}.")
        if tokens.numel() == 0:
            raise ValueError("tokens is empty: pass at least one token.")
        limit = self.backend.max_positions
        if limit is not None and tokens.shape[1] > limit:
            raise ValueError(f"Sequence length {tokens.shape[1]} exceeds the model's context of {limit} tokens.")
        d_vocab = int(self.model.cfg.d_vocab)
        if int(tokens.min()) < 0 or int(tokens.max()) >= d_vocab:
            raise ValueError(f"Token ids must lie in [0, {d_vocab}); got {int(tokens.min())}…{int(tokens.max())}.")
        return tokens.long()

    def _layer(self, layer: int) -> LayerGeometry:
        layer = as_index(layer, "layer")
        if not -self.n_layers <= layer < self.n_layers:
            raise ValueError(f"layer {layer} is out of range for a model with {self.n_layers} layers.")
        return self.layers[layer % self.n_layers]

    @staticmethod
    def _query(query: int, n_pos: int) -> int:
        query = as_index(query, "query")
        if not -n_pos <= query < n_pos:
            raise ValueError(f"query {query} is out of range for sequences of {n_pos} tokens (use 0…{n_pos - 1} or negative).")
        return query % n_pos

    # --- decompositions ---------------------------------------------------------------------
    def frequency_logits(
        self, tokens: Any, layer: int, query: int = -1
    ) -> Float[Tensor, "batch head plane key"]:
        """Pre-softmax logits from ``query`` to every key ``<= query``, one slice per plane.

        Planes are frequency IDs 1…F (fastest first), then one trailing slice for the
        unrotated dims (zeros when ``rotary_dim == d_head``). The scale is included; the sum
        over planes is the model's pre-soft-cap score (window-masked keys included, unmasked).

        Args:
            tokens: ``[batch, pos]`` token ids (a 1-D tensor is one sequence).
            layer: layer index.
            query: query position (negative counts from the end).

        Returns:
            fp64 ``[batch, head, F + 1, query + 1]``.
        """
        geo, tokens = self._layer(layer), self._tokens(tokens)
        t = self._query(query, tokens.shape[1])
        return self._planes(geo, self._capture(tokens, [geo.layer], t)[geo.layer], t)

    def frequency_logits_by_layer(
        self, tokens: Any, layers: Sequence[int] | None = None, query: int = -1
    ) -> Iterator[tuple[int, Float[Tensor, "batch head plane key"]]]:
        """``frequency_logits`` for several layers from one forward pass.

        Yields ``(layer, planes)`` in layer order; only one layer's planes are built at a time.
        """
        tokens = self._tokens(tokens)
        t = self._query(query, tokens.shape[1])
        chosen = range(self.n_layers) if layers is None else [self._layer(l).layer for l in layers]
        captures = self._capture(tokens, chosen, t)
        for layer in sorted(captures):
            yield layer, self._planes(self.layers[layer], captures.pop(layer), t)

    @staticmethod
    def _planes(geo: LayerGeometry, capture: LayerCapture, t: int) -> Float[Tensor, "batch head plane key"]:
        keys = torch.arange(t + 1, device=capture.k.device)
        return geometry.frequency_logits(rotated_query(geo, capture, t), rotated_keys(geo, capture, keys),
                                         geo.layout, geo.scale)

    def position_token_logits(
        self, tokens: Any, layer: int, query: int = -1, by_frequency: bool = False
    ) -> Float[Tensor, "batch head position token"] | Float[Tensor, "batch head plane position token"]:
        """The matrix ``M[p, m]``: the logit the token now at ``m`` would get at position ``p``.

        Positions and tokens run over ``0…query``. Pre-soft-cap; apply
        ``psheads.geometry.soft_cap`` entrywise if the layer has one. The diagonal is the
        model's own logit row.

        Returns:
            fp64 ``[batch, head, position, token]``, or ``[batch, head, F + 1, position, token]``
            with ``by_frequency``.
        """
        geo, tokens = self._layer(layer), self._tokens(tokens)
        t = self._query(query, tokens.shape[1])
        capture = self._capture(tokens, [geo.layer], t)[geo.layer]
        cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
        keys = torch.arange(t + 1, device=capture.k.device)
        return geometry.position_token_logits(
            rotated_query(geo, capture, t), head_keys(geo, capture)[:, keys], cos[keys], sin[keys],
            geo.layout, geo.scale, by_frequency=by_frequency,
        )

    def _capture(self, tokens: Tensor, layers: Sequence[int], query: int) -> dict[int, LayerCapture]:
        return self.capture(tokens, layers, torch.full((tokens.shape[0],), query, dtype=torch.long))

    def capture(
        self, tokens: Tensor, layers: Sequence[int], query_index: Tensor | None = None
    ) -> dict[int, LayerCapture]:
        """One forward pass recording q (at ``query_index`` per row), k̃ and tables (validated)."""
        captures = self.backend.capture(tokens, layers, query_index=query_index)
        for layer, capture in captures.items():
            self._check_capture(layer, capture)
        return captures

    def _check_capture(self, layer: int, capture: LayerCapture) -> None:
        geo = self.layers[layer]
        if capture.k.shape[2] != geo.n_kv_heads or capture.q.shape[2] != geo.n_heads:
            raise RuntimeError(
                f"Layer {layer}: the model now gives {capture.q.shape[2]} query and {capture.k.shape[2]} key "
                f"heads, but was wrapped with {geo.n_heads} and {geo.n_kv_heads}: its configuration changed "
                "after wrapping. Build a new RopeLens."
            )

    # --- self-check -------------------------------------------------------------------------
    def _self_check(self, captures: dict[int, LayerCapture]) -> None:
        tolerance = SELF_CHECK_TOLERANCE.get(self.backend.dtype, 1e-5)
        for geo in self.layers:
            error = pattern_error(geo, captures[geo.layer])
            logger.debug("self-check layer %d: max |Δpattern| = %.3g", geo.layer, error)
            if not error <= tolerance:
                raise SelfCheckError(
                    f"Layer {geo.layer}: the per-plane logits do not rebuild the model's attention "
                    f"pattern (max |Δ| = {error:.3g} > {tolerance:g} for {self.backend.dtype}). This "
                    f"architecture ({type(self.model).__name__} / {self.backend.model_name}) has a "
                    "quirk psheads does not handle; please report it. Pass self_check=False only if "
                    "you accept wrong numbers."
                )

    # --- gating -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def gate(
        self,
        planes: Iterable[int],
        layers: Sequence[int] | None = None,
        heads: Sequence[int] | None = None,
        keys: bool = False,
    ) -> Iterator[None]:
        """Zero chosen planes of q per query head (or of k per KV head) while the block runs.

        The model's own forward passes inside the block see the gated heads; the hooks are
        removed on exit, also on error. Zeroing a plane pre-rotation removes exactly that
        plane's term from every logit of the gated head.

        Args:
            planes: frequency IDs to zero (1…F, 0 = the unrotated dims).
            layers: layers to gate (default: all).
            heads: query heads (or KV heads with ``keys=True``) to gate (default: all).
            keys: gate k on KV heads (shared by all query heads in the group) instead of q.
        """
        planes = tuple(planes)
        layers = range(self.n_layers) if layers is None else [self._layer(l).layer for l in layers]
        fwd_hooks = []
        for layer in layers:
            geo = self.layers[layer]
            n = geo.n_kv_heads if keys else geo.n_heads
            chosen = range(n) if heads is None else [as_index(h, "head") for h in heads]
            for head in chosen:
                if not 0 <= head < n:
                    raise ValueError(f"head {head!r} is out of range: layer {layer} has {n} {'KV ' if keys else ''}heads.")
            head_mask = torch.ones(n, geo.d_head, dtype=torch.float64)
            head_mask[list(chosen)] = geometry.plane_keep_mask(geo.layout, planes)
            site = self.backend.qk_site(layer, "k" if keys else "q")
            fwd_hooks.append((site.name, _gating_hook(site, head_mask)))
        with self.model.hooks(fwd_hooks=fwd_hooks):
            yield

    @contextlib.contextmanager
    def plane_hooks(self, layers: Sequence[int] | None = None) -> Iterator[dict[int, str]]:
        """Add per-frequency hook points ``blocks.{l}.attn.hook_plane_logits`` for the block.

        Inside the block the names work with the model's own ``run_with_hooks``,
        ``run_with_cache`` and ``hooks``. Each holds the layer's per-plane logits
        ``[batch, head, plane, query, key]`` (fp64, scale included, pre-soft-cap, unmasked;
        planes as in ``frequency_logits``). A hook that returns (or writes) a changed
        tensor re-weights the layer's attention to ``softmax(mask(soft-cap(Σ planes)))``;
        an unchanged tensor leaves the model's computation untouched. The planes are only
        computed for layers whose hook point has hooks. Everything is removed on exit.
        Edits are for analysis: gradients do not flow through an edited layer's pattern into
        its q and k.

        Yields:
            ``{layer: hook name}``.
        """
        from transformer_lens.hook_points import HookPoint

        chosen = range(self.n_layers) if layers is None else sorted({self._layer(l).layer for l in layers})
        points = {layer: HookPoint() for layer in chosen}
        names = {layer: f"blocks.{layer}.attn.{PLANE_HOOK}" for layer in chosen}

        def on_layer(layer: int, capture: LayerCapture) -> tuple[Tensor, Tensor] | None:
            point = points[layer]
            if not point._forward_hooks:
                return None
            self._check_capture(layer, capture)
            planes = all_query_planes(self.layers[layer], capture)
            reference = planes.clone()
            edited = point(planes)
            if torch.equal(edited, reference):
                return None
            return edited.sum(dim=2), reference.sum(dim=2)

        added: list[str] = []
        try:
            for layer in chosen:
                points[layer].name = names[layer]
                self.backend.add_hook_point(names[layer], points[layer])
                added.append(names[layer])
            with self.backend.live_edits(list(chosen), on_layer):
                yield dict(names)
        finally:
            for name in added:
                self.backend.remove_hook_point(name)


PLANE_HOOK = "hook_plane_logits"


def _gating_hook(site: Any, head_mask: Float[Tensor, "head d_head"]) -> Any:
    def hook(tensor: Tensor, hook: Any) -> Tensor:
        canonical = site.to_canonical(tensor)
        gated = canonical * head_mask.to(device=tensor.device, dtype=tensor.dtype)
        return site.from_canonical(gated, tensor)

    return hook


def head_keys(geo: LayerGeometry, capture: LayerCapture) -> Float[Tensor, "batch pos head d_head"]:
    """Pre-rotary keys expanded to the query heads (GQA: head h reads KV head h // group), fp64."""
    return capture.k[:, :, geo.kv_head_of.to(capture.k.device)].double()


def rotated_query(geo: LayerGeometry, capture: LayerCapture, t: int) -> Float[Tensor, "batch head d_head"]:
    """The query captured at position ``t``, rotated with the model's table row ``t`` (fp64)."""
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
    return geometry.rotate(capture.q[:, 0].double(), cos[t], sin[t], geo.layout)


def rotated_keys(geo: LayerGeometry, capture: LayerCapture, keys: Tensor) -> Float[Tensor, "batch key head d_head"]:
    """Keys at positions ``keys``, expanded to query heads and rotated at their own positions."""
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
    k = head_keys(geo, capture)[:, keys]
    return geometry.rotate(k.transpose(1, 2), cos[keys], sin[keys], geo.layout).transpose(1, 2)


def all_query_planes(geo: LayerGeometry, capture: LayerCapture) -> Float[Tensor, "batch head plane query key"]:
    """Per-plane logits from every query to every key (unmasked, pre-soft-cap, fp64).

    ``capture`` must hold q at every position.
    """
    cos, sin = geometry.extend_tables(capture.cos, capture.sin, geo.d_head)
    q_rot = geometry.rotate(capture.q.double().transpose(1, 2), cos, sin, geo.layout).transpose(1, 2)
    k_rot = rotated_keys(geo, capture, torch.arange(capture.k.shape[1], device=capture.k.device))
    planes = geometry.frequency_logits(q_rot, k_rot.unsqueeze(1), geo.layout, geo.scale)  # [b, q, h, plane, k]
    return planes.permute(0, 2, 3, 1, 4)


def pattern_error(geo: LayerGeometry, capture: LayerCapture) -> float:
    """Max |Δ| between the pattern rebuilt from the planes and the model's own, at every query.

    ``capture`` must hold q at every position and the model's pattern.
    """
    if capture.pattern is None:
        raise ValueError("The capture holds no attention pattern; capture with with_pattern=True.")
    n_pos = capture.k.shape[1]
    logits = geometry.soft_cap(all_query_planes(geo, capture).sum(dim=2), geo.softcap)
    visible = geometry.visible_keys(torch.arange(n_pos, device=logits.device), n_pos, geo.window)  # [query, key]
    rebuilt = torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)
    return float((rebuilt - capture.pattern.double()).abs().max())


def as_lens(model_or_lens: Any) -> RopeLens:
    """Return a ``RopeLens`` (wrapping a model, or the lens itself, so no second self-check)."""
    return model_or_lens if isinstance(model_or_lens, RopeLens) else RopeLens(model_or_lens)
