"""``RopeLens``: exact per-frequency RoPE logit decompositions, gating and plane hooks on a
TransformerLens model.

The lens is the user-facing handle: it reads each layer's geometry from the model's own tables,
self-checks that the planes rebuild the model's attention, and offers decompositions, frequency
gating and scoped per-plane hook points. Capture lives in ``psheads.rope.backends``, input validation
in ``psheads.measure.prompts``, per-layer maths in ``psheads.rope.layer``. A model's checked geometry is
kept while the model lives and is unchanged: ``RopeLens(model)`` and ``as_lens`` reuse it instead of
self-checking again (new weights, dtype, device or layer facts check anew).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from psheads.interface import reprs, validation
from psheads.interface.progress import progress_bar
from psheads.rope import geometry, precision
from psheads.rope.backends import Backend, backend_for
from psheads.rope.families import UnsupportedModelError
from psheads.rope.inputs import check_tokens, layer_index, layer_indices, query_position
from psheads.rope.layer import (
    LayerCapture,
    LayerGeometry,
    Layers,
    all_query_planes,
    check_pattern,
    query_planes,
    rotated_query,
)

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Checked:
    """A model's self-checked geometry: valid while the backend's ``fingerprint`` is unchanged.

    ``probe`` is the probe it was checked on, ``(length in tokens, seed)``.
    """

    fingerprint: tuple
    layers: Layers
    probe: tuple[int, int]


#: Checked geometry per live model (the object the user passed). Weak keys, and values that do not
#: reference the model, so a cached model can still be garbage-collected; the model is not changed.
_CHECKED: weakref.WeakKeyDictionary[Any, _Checked] = weakref.WeakKeyDictionary()


def _cached(model: Any, backend: Backend, probe: tuple[int, int] | None = None) -> Layers | None:
    """The checked geometry of ``model`` if it is unchanged since (and, given ``probe``, checked on it)."""
    try:
        entry = _CHECKED.get(model)
    except TypeError:  # not weak-referenceable, or unhashable: never cached
        return None
    if entry is None or (probe is not None and entry.probe != probe):
        return None
    return entry.layers if entry.fingerprint == backend.fingerprint() else None


class SelfCheckError(RuntimeError):
    """The planes did not rebuild the model's own attention pattern."""


class RopeLens:
    """Wrap a TransformerLens RoPE model for exact per-frequency logit decompositions.

    The model is never changed: every hook is removed on exit (also on error), and the
    training flags are restored. Analysis runs in eval mode under ``torch.no_grad()`` with q/k
    upcast to fp32 and products in fp64.

    Args:
        model: a ``TransformerBridge`` or ``HookedTransformer`` using RoPE.
        self_check: rebuild the model's attention pattern from the planes on a probe input and
            raise ``SelfCheckError`` if an entry differs by more than the model's own rounding
            allows at its logits (``psheads.rope.layer.check_pattern``). A model already checked
            on the same probe, and unchanged since (same weights, not written in place, same
            dtype, device and layer facts), is not checked again: the new lens takes the checked
            geometry, without a forward pass. The check is kept only while the model lives.
        probe_length: probe length in tokens (capped at the model's context and ``max_positions``).
        seed: seed of the random probe tokens.
        progress: a bar over the self-check's probe forward pass and layers (default: in a
            notebook or on a terminal).

    Raises:
        TypeError: not a TransformerLens model.
        ValueError: not a RoPE model.
        UnsupportedModelError: an attention variant psheads cannot decompose exactly, a model whose
            own forward pass fails, or a TransformerLens bridge that computes the attention
            differently from the Hugging Face model it wraps (a ``ValueError``).
        SelfCheckError: the decomposition does not reproduce the model's pattern.
    """

    def __init__(self, model: Any, self_check: bool = True, probe_length: int = 32, seed: int = 0, *,
                 progress: bool | None = None) -> None:
        if isinstance(model, RopeLens):
            raise TypeError("This is already a RopeLens; use it directly.")
        self_check = validation.boolean(self_check, "self_check")
        probe_length = validation.integer(probe_length, "probe_length", minimum=2)
        seed = validation.seed(seed)
        progress = validation.optional_boolean(progress, "progress")
        self.backend: Backend = backend_for(model)
        self.model = self.backend.model  # a Hugging Face model is wrapped in a bridge of its own
        self._active: list[str] = []  # gates and plane hooks now open on this lens, for the views
        n_pos = min(probe_length, self.backend.n_ctx, self.backend.max_positions or self.backend.n_ctx)
        if self_check:
            checked = _cached(model, self.backend, (n_pos, seed))
            if checked is not None:
                self.layers = checked
                return
        generator = torch.Generator().manual_seed(seed)
        probe = torch.randint(0, self.backend.d_vocab, (2, n_pos), generator=generator)
        # the bar's steps: the probe's forward pass, then each layer's check
        with progress_bar(desc="RopeLens self-check", progress=progress if self_check else False,
                          total=len(self.backend.attention_layers) + 1) as bar:
            captures = self._probe(probe, self_check)
            bar.update(1)
            try:
                self.layers = Layers([
                    LayerGeometry.from_tables(layer, self.backend.layer_spec(layer), captures[layer].cos,
                                              captures[layer].sin)
                    for layer in self.backend.attention_layers
                ], self.backend.n_layers)
            except UnsupportedModelError as error:
                raise UnsupportedModelError(f"{self.backend.architecture}: {error}") from None
            if self_check:
                self._self_check(captures, on_layer=lambda: bar.update(1))
                with contextlib.suppress(TypeError):  # a model that cannot be weakly referenced is not kept
                    _CHECKED[model] = _Checked(self.backend.fingerprint(), self.layers, (n_pos, seed))

    def _probe(self, probe: Tensor, with_pattern: bool) -> dict[int, LayerCapture]:
        """One capture of every attention layer on the probe; a model whose own forward fails is refused."""
        try:
            return self.backend.capture(probe, self.backend.attention_layers, with_pattern=with_pattern)
        except (UnsupportedModelError, SelfCheckError):
            raise
        except Exception as error:  # the model's own forward (or TransformerLens') failed
            raise UnsupportedModelError(
                f"{self.backend.architecture}: the model's own forward pass fails on a random probe of "
                f"{probe.shape[1]} tokens ({type(error).__name__}: {error}). psheads can only decompose a model that "
                "runs; with a TransformerBridge this is usually a TransformerLens version that does not support "
                "this architecture with the installed transformers.") from error

    @classmethod
    def _checked(cls, backend: Backend, layers: Layers) -> RopeLens:
        lens = cls.__new__(cls)
        lens.backend, lens.model, lens.layers, lens._active = backend, backend.model, layers, []
        return lens

    # --- facts ------------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        """Number of blocks (``self.layers`` holds those with softmax attention: all but in hybrids)."""
        return self.layers.n_blocks

    def attention_layers(self, layers: Any = None) -> list[int]:
        """Sorted distinct attention layers from a list of layers (negative counts from the end); None:
        every attention layer.

        Raises:
            ValueError: a layer is out of range or has no softmax attention.
        """
        if layers is None:
            return list(self.layers.indices)
        chosen = layer_indices(layers, self.n_layers)
        for layer in chosen:
            self.layers[layer]  # raises for a block without softmax attention
        return chosen

    def __repr__(self) -> str:
        first = next(iter(self.layers))
        return (
            f"RopeLens({self.backend.model_name!r}, backend={self.backend.kind}, layers={self.n_layers}, "
            f"heads={first.n_heads}, kv_heads={first.n_kv_heads}, d_head={first.d_head}, "
            f"rotary_dim={first.rotary_dim}, dtype={self.backend.dtype})"
        )

    def _facts(self) -> list[tuple[str, Any]]:
        def distinct(values: Iterable[Any]) -> str:
            return " / ".join(str(value) for value in dict.fromkeys(values))

        bases: dict[str, list[int]] = {}
        for geo in self.layers:
            bases.setdefault(self._rope_base(geo), []).append(geo.layer)
        local = [geo for geo in self.layers if geo.window is not None]
        return [
            ("model", self.backend.model_name), ("backend", self.backend.kind),
            ("family", self.backend.family.name), ("dtype", str(self.backend.dtype)), ("layers", self.n_layers),
            ("heads", distinct(geo.n_heads for geo in self.layers)),
            ("KV heads", distinct(geo.n_kv_heads for geo in self.layers)),
            ("d_head", distinct(geo.d_head for geo in self.layers)),
            ("rotary dim", distinct(geo.rotary_dim for geo in self.layers)),
            ("planes", distinct(geo.n_planes for geo in self.layers)),
            ("RoPE base", next(iter(bases)) if len(bases) == 1 else
             "; ".join(f"{base} (layers {reprs.layer_text(layers)})" for base, layers in bases.items())),
            ("local layers", f"{reprs.layer_text(geo.layer for geo in local)} "
                             f"(window {distinct(geo.window for geo in local)})" if local else "none"),
            ("global layers", reprs.layer_text(geo.layer for geo in self.layers if geo.window is None)),
            ("other blocks", reprs.layer_text(sorted(set(range(self.n_layers)) - set(self.layers.indices)))
             if len(self.layers) < self.n_layers else "none"),
            ("active", "; ".join(self._active) or "none"),
        ]

    @staticmethod
    def _rope_base(geo: LayerGeometry) -> str:
        """The base read from the two fastest planes: θ₁/θ₂ = base^(2/rotary_dim). Linear scaling keeps
        that ratio; llama3 and YaRN scaling keep it when those planes turn faster than the original
        context (as in released checkpoints)."""
        if geo.n_planes < 2:
            return "n/a (one plane)"
        return f"{float(geo.theta[0] / geo.theta[1]) ** (geo.rotary_dim / 2):,.0f}"

    def _repr_html_(self) -> str:
        """Notebook view: model, family, layer shapes, RoPE bases, local/global layers, open gates and hooks."""
        return reprs.html("RopeLens", self._facts())

    @contextlib.contextmanager
    def _activated(self, what: str) -> Iterator[None]:
        self._active.append(what)
        try:
            yield
        finally:
            self._active.remove(what)

    def geometry_frame(self) -> pd.DataFrame:
        """All layers' planes as one tidy frame (see ``LayerGeometry.to_frame``)."""
        return pd.concat([g.to_frame() for g in self.layers], ignore_index=True)

    def layer(self, layer: int) -> LayerGeometry:
        """The geometry of ``layer`` (negative counts from the end).

        Raises:
            ValueError: out of range, or a block without softmax attention.
        """
        return self.layers[layer_index(layer, self.n_layers)]

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
        ((_, planes),) = self.frequency_logits_by_layer(tokens, [self.layer(layer).layer], query)
        return planes

    def frequency_logits_by_layer(
        self, tokens: Any, layers: Sequence[int] | None = None, query: int = -1
    ) -> Iterator[tuple[int, Float[Tensor, "batch head plane key"]]]:
        """``frequency_logits`` for several layers from one forward pass.

        Yields ``(layer, planes)`` in layer order; only one layer's planes are built at a time.
        """
        tokens = check_tokens(self.backend, tokens)
        t = query_position(query, tokens.shape[1])
        captures = self._capture_at(tokens, self.attention_layers(layers), t)
        for layer in sorted(captures):
            yield layer, query_planes(self.layers[layer], captures.pop(layer), t)

    def position_token_logits(
        self, tokens: Any, layer: int, query: int = -1, by_frequency: bool = False
    ) -> Float[Tensor, "batch head position token"] | Float[Tensor, "batch head plane position token"]:
        """The matrix ``M[p, m]``: the logit the token now at ``m`` would get at position ``p``.

        Positions and tokens run over ``0…query``. Pre-soft-cap; apply
        ``psheads.rope.geometry.soft_cap`` entrywise if the layer has one. The diagonal is the
        model's own logit row.

        Returns:
            fp64 ``[batch, head, position, token]``, or ``[batch, head, F + 1, position, token]``
            with ``by_frequency``.
        """
        geo, tokens = self.layer(layer), check_tokens(self.backend, tokens)
        by_frequency = validation.boolean(by_frequency, "by_frequency")
        t = query_position(query, tokens.shape[1])
        capture = self._capture_at(tokens, [geo.layer], t)[geo.layer]
        cos, sin = capture.full_tables
        q_rot = rotated_query(geo, capture, t)
        keys = torch.arange(t + 1, device=capture.k.device)
        k = capture.k[:, : t + 1, geo.kv_head_of.to(capture.k.device)]
        return geometry.position_token_logits(q_rot, k, cos[keys], sin[keys], geo.layout, geo.scale,
                                              by_frequency=by_frequency)

    def _capture_at(self, tokens: Tensor, layers: Sequence[int], query: int) -> dict[int, LayerCapture]:
        precision.require_float64(self.backend.device, "The per-plane logits")
        captures = self.backend.capture(tokens, layers, torch.full((tokens.shape[0],), query, dtype=torch.long))
        for layer, capture in captures.items():
            self.layers[layer].check_capture(capture)
        return captures

    # --- self-check -------------------------------------------------------------------------
    def _self_check(self, captures: dict[int, LayerCapture], on_layer: Callable[[], Any] | None = None) -> None:
        """Check every layer's planes against the probe's pattern; ``on_layer()`` after each layer."""
        for geo in self.layers:
            self._check_layer(geo, captures[geo.layer])
            if on_layer is not None:
                on_layer()

    def _check_layer(self, geo: LayerGeometry, capture: LayerCapture) -> None:
        dtype = self.backend.dtype
        largest = torch.finfo(dtype).max
        if not precision.supports_float64(capture.q.device):  # the fp64 rebuild of one probe runs on the CPU
            capture = capture.to(torch.device("cpu"))
        check = check_pattern(geo, capture, dtype)
        logger.debug("self-check layer %d: max |Δpattern| = %.3g (%.3g of the tolerance), max |logit| = %.3g",
                     geo.layer, check.error, check.worst, check.max_logit)
        if check.worst <= 1:
            if capture.reference is not None:
                self._check_against_reference(geo, capture)
            return
        unscaled = check.max_logit / abs(geo.scale) if geo.scale else math.inf
        if math.isfinite(check.max_logit) and max(check.max_logit, unscaled) > largest:
            raise SelfCheckError(
                f"Layer {geo.layer}: an overflow in {dtype}: its attention logits reach {check.max_logit:.3g} "
                f"({unscaled:.3g} before the 1/√d scale), beyond {dtype}'s largest value {largest:.3g}, so the "
                f"model's own attention is wrong there. Run the model in float32 or bfloat16 "
                f"(model.to(torch.float32)).")
        if not (math.isfinite(check.error) and math.isfinite(check.max_logit)):
            raise SelfCheckError(
                f"Layer {geo.layer}: the model's attention on the self-check probe is not finite (inf or NaN), "
                f"e.g. an overflow in {dtype}; run the model in float32 or bfloat16 (model.to(torch.float32)).")
        raise SelfCheckError(
            f"Layer {geo.layer}: the per-plane logits do not rebuild the model's attention pattern (max |Δ| = "
            f"{check.error:.3g}, {check.worst:.3g} times what {dtype} rounding allows at logits up to "
            f"{check.max_logit:.3g}). This architecture ({type(self.model).__name__} / "
            f"{self.backend.model_name}) has a quirk psheads does not handle; please report it. Pass "
            "self_check=False only if you accept wrong numbers.")

    def _check_against_reference(self, geo: LayerGeometry, capture: LayerCapture) -> None:
        """Where TransformerLens computes the attention itself, the planes (which rebuild the bridge's
        pattern) must also rebuild the original model's: else the bridge computes another attention."""
        check = check_pattern(geo, capture, self.backend.dtype, capture.reference)
        logger.debug("self-check layer %d against the original attention: max |Δpattern| = %.3g (%.3g of the "
                     "tolerance)", geo.layer, check.error, check.worst)
        if check.worst > 1:
            raise UnsupportedModelError(
                f"Layer {geo.layer} of {self.backend.architecture}: the TransformerBridge computes this attention "
                f"differently from the Hugging Face model it wraps (their patterns differ by up to {check.error:.3g} "
                "on a random probe, beyond rounding). psheads decomposes what the bridge computes, which is not "
                "the model: use a TransformerLens version whose bridge reproduces this architecture.")

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
        planes = validation.integers(planes, "planes", minimum=0)
        keys = validation.boolean(keys, "keys")
        layers = self.attention_layers(layers)
        chosen_heads = None if heads is None else validation.integers(heads, "heads", unique=True)
        fwd_hooks = []
        for layer in layers:
            geo = self.layers[layer]
            if geo.norm_eps is not None:
                raise ValueError(f"Layer {layer} normalises q and k after RoPE: zeroing a plane there also rescales "
                                 "every other plane (the norm), so gating would not remove one plane's term alone. "
                                 "Gate another layer, or use plane_hooks to edit the planes' logits.")
            n = geo.n_kv_heads if keys else geo.n_heads
            chosen = range(n) if chosen_heads is None else chosen_heads
            for head in chosen:
                if not 0 <= head < n:
                    raise ValueError(f"heads: head {head} is out of range: layer {layer} has {n} "
                                     f"{'KV ' if keys else ''}heads.")
            head_mask = torch.ones(n, geo.d_head, dtype=torch.float64)
            head_mask[list(chosen)] = geometry.plane_keep_mask(geo.layout, planes)
            start = 0
            for site in self.backend.qk_sites(layer, "k" if keys else "q"):
                part = head_mask[:, start:start + site.width]
                start += site.width
                if site.shared is not None:  # one head shared by all: gated alike for every head, or not at all
                    if not torch.equal(part, part[:1].expand_as(part)):
                        raise ValueError(f"Layer {layer}: the rotated part of its keys is one vector shared by every "
                                         "head (latent attention), so it is gated for all heads or none: pass "
                                         "heads=None, or gate the queries instead (keys=False).")
                    part = part[:1]
                if not torch.all(part == 1):
                    fwd_hooks.append((site.name, _gating_hook(site, part)))
        heads_text = "all" if chosen_heads is None else ", ".join(map(str, chosen_heads))
        with self.model.hooks(fwd_hooks=fwd_hooks), self._activated(
                f"gate planes {', '.join(map(str, planes))} of {'k' if keys else 'q'} on layers "
                f"{reprs.layer_text(layers)}, heads {heads_text}"):
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

        chosen = self.attention_layers(layers)
        precision.require_float64(self.backend.device, "plane_hooks")
        points = {layer: HookPoint() for layer in chosen}
        names = {layer: self.backend.attention_hook_name(layer, PLANE_HOOK) for layer in chosen}

        def on_layer(layer: int, capture: LayerCapture) -> tuple[Tensor, Tensor] | None:
            point = points[layer]
            if not self.backend.has_hooks(point):
                return None
            self.layers[layer].check_capture(capture)
            planes = all_query_planes(self.layers[layer], capture)
            reference = planes.clone()
            edited = point(planes)
            if not isinstance(edited, Tensor) or edited.shape != reference.shape:
                got = tuple(edited.shape) if isinstance(edited, Tensor) else type(edited).__name__
                raise ValueError(f"A hook on {names[layer]} returned {got}; it must return the per-plane logits "
                                 f"with their shape {tuple(reference.shape)} [batch, head, plane, query, key].")
            if torch.equal(edited, reference):
                return None
            return edited.double().sum(dim=2), reference.sum(dim=2)

        added: list[str] = []
        try:
            for layer in chosen:
                points[layer].name = names[layer]
                self.backend.add_hook_point(names[layer], points[layer])
                added.append(names[layer])
            with self.backend.live_edits(list(chosen), on_layer), \
                    self._activated(f"plane hooks on layers {reprs.layer_text(chosen)}"):
                yield dict(names)
        finally:
            for name in added:
                self.backend.remove_hook_point(name)


PLANE_HOOK = "hook_plane_logits"


def _gating_hook(site: Any, head_mask: Float[Tensor, "head width"]) -> Any:
    """Multiply a site's dims by ``head_mask`` (one row per head the hook holds)."""
    shared = dataclasses.replace(site, shared=None)  # a shared head is gated as the one head it is

    def hook(tensor: Tensor, hook: Any) -> Tensor:
        canonical = shared.to_canonical(tensor)
        gated = canonical * head_mask.to(device=tensor.device, dtype=canonical.dtype)
        return shared.from_canonical(gated, tensor)

    return hook


def as_lens(model_or_lens: Any, *, progress: bool | None = None) -> RopeLens:
    """A ``RopeLens`` for a model, or the lens itself.

    A model checked before (on any probe) with unchanged weights (none replaced or written in
    place), dtype, device and layer facts gets a lens built from its checked geometry, without a
    new probe or self-check; anything else builds (and self-checks) a new one, with a progress bar
    as ``progress`` says.
    """
    if isinstance(model_or_lens, RopeLens):
        return model_or_lens
    backend = backend_for(model_or_lens)
    checked = _cached(model_or_lens, backend)
    if checked is not None:
        return RopeLens._checked(backend, checked)
    return RopeLens(model_or_lens, progress=progress)
