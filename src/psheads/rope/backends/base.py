"""The capture every backend shares: one forward pass with targeted hooks that records q, k̃ and the
rotation tables of the requested layers (eagerly, or as SDPA on long inputs, whole or streamed),
and live logit edits; subclasses map a layer to hook names and static facts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from psheads.rope import geometry
from psheads.rope.backends.facts import input_device, preserved_state, weights_state
from psheads.rope.backends.key_masks import KeepKeys, scores_hook
from psheads.rope.families import GENERIC, Family, family_titles
from psheads.rope.layer import LayerCapture, LayerSpec, attention_pattern, visible_keys
from psheads.rope.precision import exact_dtype


@dataclass(frozen=True)
class HookSite:
    """A TransformerLens hook carrying pre-rotary q or k (or a part of them), and how to read it.

    Attributes:
        name: hook name.
        layout: ``"bshd"`` (``[batch, pos, head, d_head]``, possibly flattened to
            ``[batch, pos, head * d_head]``), ``"bhsd"`` (``[batch, head, pos, d_head]``) or
            ``"auto"`` (either, told apart by which axis holds the ``heads``: a norm's output, whose
            layout follows the model's code).
        d_head: the hook's per-head width.
        dims: the per-head dimensions that belong to q or k, in the order psheads reads them (the
            rotated ones first); None: all of them, as they are.
        shared: the hook holds one head that this many heads share (the rotary key of multi-head
            latent attention), or None.
        factor: a scalar the model multiplies the hooked tensor by before RoPE (Falcon-H1's key
            multiplier).
    """

    name: str
    layout: str
    d_head: int
    dims: tuple[int, ...] | None = None
    shared: int | None = None
    factor: float = 1.0
    heads: int | None = None

    @property
    def width(self) -> int:
        """Dimensions per head this site contributes."""
        return self.d_head if self.dims is None else len(self.dims)

    def _layout(self, x: Tensor) -> str:
        if self.layout != "auto" or x.ndim == 3:
            return "bshd" if self.layout == "auto" else self.layout
        second, third = (x.shape[1] == self.heads), (x.shape[2] == self.heads)
        if second != third:
            return "bhsd" if second else "bshd"
        raise ValueError(f"{self.name} has shape {tuple(x.shape)}: with {self.heads} heads psheads cannot tell its "
                         "positions from its heads. Use prompts of another length.")

    def _heads(self, x: Tensor) -> Float[Tensor, "batch pos head d_head"]:
        if self._layout(x) == "bhsd":
            return rearrange(x, "batch head pos d -> batch pos head d")
        return x.reshape(*x.shape[:2], -1, self.d_head)  # [batch, pos, head(, d_head)]: both kinds

    def to_canonical(self, x: Tensor) -> Float[Tensor, "batch pos head width"]:
        """The hook's tensor as ``[batch, pos, head, width]``: its own dims, heads shared out, scaled."""
        x = self._heads(x)
        if self.dims is not None:
            x = x[..., list(self.dims)]
        if self.shared is not None:
            x = x.expand(-1, -1, self.shared, -1)
        return x * self.factor if self.factor != 1 else x

    def from_canonical(self, canonical: Tensor, like: Tensor) -> Tensor:
        """Inverse of ``to_canonical``, shaped like the hook's original tensor ``like`` (dims this site
        does not read keep ``like``'s values)."""
        if self.shared is not None:
            raise ValueError(f"{self.name} holds one head shared by {self.shared} heads: it cannot take per-head "
                             "values.")
        values = canonical / self.factor if self.factor != 1 else canonical
        if self.dims is not None:
            full = self._heads(like).clone()
            full[..., list(self.dims)] = values.to(full.dtype)
            values = full
        if self._layout(like) == "bhsd":
            return rearrange(values, "batch pos head d -> batch head pos d")
        return values.reshape(like.shape)


@dataclass(frozen=True)
class Reading:
    """How one forward reads a layer: its q and k sites (by ``"q"`` / ``"k"``) and its static facts."""

    sites: dict[str, tuple[HookSite, ...]]
    spec: LayerSpec


class _StopForward(Exception):
    """Raised from the last needed hook to skip the rest of the forward pass."""


SCORES_BYTES = 2**28
"""Above this many bytes of one layer's eager [batch, head, query, key] scores, ``capture`` runs the
model's own SDPA attention instead (where the backend can), so no pattern is formed: long prompts
cost the memory of a plain SDPA forward. Shorter inputs keep the bridge's eager attention."""



def upcast(x: Tensor, source: Tensor | None = None) -> Tensor:
    """Detached fp32 (or wider) tensor sharing no memory with the model's ``source`` (default: ``x``
    itself, which is then copied): the analysis never works on half precision, and what the model
    writes later cannot reach it. ``x`` computed from ``source`` into new memory is kept as it is."""
    x = x.detach()
    if x.dtype in (torch.float16, torch.bfloat16):
        return x.float()
    fresh = source is not None and x.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()
    return x if fresh else x.clone()



def hook_last(point: torch.nn.Module, read: Callable[[Tensor], None]) -> list:
    """Call ``read(output)`` after every other forward hook of ``point``, also hooks added later.

    A pre-hook moves the reader to the end of the module's hook order before each call.
    Returns the handles to remove.
    """
    handle = point.register_forward_hook(lambda module, args, output: read(output))

    def keep_last(module: torch.nn.Module, args: tuple) -> None:
        module._forward_hooks.move_to_end(handle.id)  # type: ignore[attr-defined]  # torch types an OrderedDict as dict

    return [handle, point.register_forward_pre_hook(keep_last)]



class Backend:
    """Common capture logic; subclasses map a layer to hook names and static facts.

    Attributes:
        model: the TransformerLens model.
        family: the architecture family record (``psheads.rope.families``).
    """

    kind: str = ""
    family: Family = GENERIC

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cfg = model.cfg
        self._analysing = False
        self._readings: dict[tuple[int, bool], Reading] = {}  # read once per analysis: the model is fixed then
        if getattr(self.cfg, "positional_embedding_type", None) != "rotary":
            raise ValueError(
                f"{self.model_name} does not use rotary position embeddings "
                f"(positional_embedding_type={getattr(self.cfg, 'positional_embedding_type', None)!r}); "
                f"psheads decomposes RoPE logits and cannot score it. Use a RoPE model ({family_titles()}, or "
                "another architecture of the docs' coverage table)."
            )

    # --- facts ------------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        """Model name as TransformerLens reports it."""
        return str(getattr(self.cfg, "model_name", type(self.model).__name__))

    @property
    def architecture(self) -> str:
        """The model's architecture: the Hugging Face class it is (or was converted from)."""
        return str(getattr(self.cfg, "original_architecture", None) or type(self.model).__name__)

    @property
    def n_layers(self) -> int:
        """Number of transformer blocks."""
        return len(self.model.blocks)

    @property
    def attention_layers(self) -> tuple[int, ...]:
        """The blocks whose mixer is softmax attention (every block but in hybrid models, whose other
        blocks hold linear attention, state-space or convolution mixers)."""
        return tuple(range(self.n_layers))

    @property
    def n_ctx(self) -> int:
        """Longest context the model accepts."""
        return int(self.cfg.n_ctx)

    @property
    def d_vocab(self) -> int:
        """Vocabulary size (token ids lie in ``[0, d_vocab)``)."""
        return int(self.cfg.d_vocab)

    @property
    def max_positions(self) -> int | None:
        """Longest input psheads decomposes exactly: where the rotation tables stop (None: the model
        computes them per input, or nothing else caps it)."""
        return self.n_ctx

    @property
    def max_positions_reason(self) -> str:
        """Why inputs stop at ``max_positions``, for the error."""
        return f"the model's context of {self.max_positions} tokens"

    @property
    def dtype(self) -> torch.dtype:
        """The model's parameter dtype."""
        return next(self.model.parameters()).dtype

    @property
    def device(self) -> torch.device:
        """Where the model's inputs go (``input_device``)."""
        return input_device(self.model)

    @property
    def tokenizer(self) -> Any | None:
        """The model's tokenizer, if it has one."""
        return getattr(self.model, "tokenizer", None)

    def to_tokens(self, text: str, prepend_bos: bool | None = None) -> Tensor:
        """``[pos]`` token ids of ``text`` as the model tokenises it (BOS: the model's default), never
        truncated: a text longer than the context is the caller's to refuse or warn about."""
        kwargs = {} if prepend_bos is None else {"prepend_bos": prepend_bos}
        return self.model.to_tokens(text, truncate=False, **kwargs)[0].cpu()

    def layer_spec(self, layer: int) -> LayerSpec:
        """Static attention facts of ``layer``."""
        raise NotImplementedError

    @contextlib.contextmanager
    def analysis(self) -> Iterator[None]:
        """Eval mode (training flags restored afterwards) and no gradients, for a whole analysis.

        Re-entrant: captures inside an open analysis skip the per-forward mode switch.
        """
        if self._analysing:
            yield
            return
        # no_grad, not inference_mode: buffers the model grows during a forward (rotary caches,
        # dynamic-NTK frequencies) must stay usable for the user's own backward passes
        with preserved_state(self.model), torch.no_grad():
            self._analysing = True
            try:
                yield
            finally:
                self._analysing = False
                self._readings.clear()

    def weights_owner(self) -> torch.nn.Module:
        """The module that holds every parameter and buffer of the model."""
        return self.model

    def fingerprint(self) -> tuple:
        """Changes whenever the weights (in place or replaced), the rotation tables' values, dtype,
        device or layer facts change (see ``weights_state`` for what is and is not seen); hooks the
        user opens are theirs and are not part of it."""
        return weights_state(self.weights_owner()), tuple(self.layer_spec(layer) for layer in self.attention_layers)

    def forward(self, tokens: Tensor) -> None:
        """Run the model on ``tokens`` (its output is not needed)."""
        self.model(tokens)

    def output_site(self, layer: int, d_head: int) -> HookSite:
        """Where each head's output z (``[batch, pos, head, d_head]``, the attention-weighted values
        before the output projection) can be read and replaced: ``hook_z``, which both backends fire."""
        return HookSite(f"blocks.{layer}.attn.hook_z", "bshd", d_head)

    # --- the SDPA capture (long prompts) ----------------------------------------------------
    def sdpa_ready(self, layers: Sequence[int]) -> bool:
        """Whether ``layers`` can be captured with the model's own SDPA attention (no [query, key]
        scores formed); False unless a subclass knows how."""
        return False

    def long_input(self, shape: torch.Size) -> bool:
        """Whether tokens of ``shape`` are long: one layer's eager scores would take more than
        ``SCORES_BYTES``. ``capture`` then runs the model's own SDPA attention where ``sdpa_ready``,
        and the engine streams the layers (``capture(on_layer=…)``)."""
        return self.scores_bytes(shape) > SCORES_BYTES

    def scores_bytes(self, shape: torch.Size) -> int:
        """Bytes of one layer's eager [batch, head, query, key] scores for ``tokens`` of ``shape``."""
        batch, n_pos = int(shape[0]), int(shape[1])
        return batch * int(self.cfg.n_heads) * n_pos * n_pos * max(4, self.dtype.itemsize)

    def sdpa_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        """Where pre-rotary q or k can be read when the attention runs as SDPA."""
        raise NotImplementedError

    @contextlib.contextmanager
    def sdpa_forward(self) -> Iterator[None]:
        """Within this block the forward runs the model's own attention as SDPA."""
        raise NotImplementedError
        yield  # pragma: no cover

    @contextlib.contextmanager
    def sdpa_table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        """``table_recorder`` for the SDPA forward."""
        raise NotImplementedError
        yield []  # pragma: no cover

    @contextlib.contextmanager
    def reference_recorder(self, layers: Sequence[int], store: dict) -> Iterator[None]:
        """While active, each forward stores in ``store[layer]`` the pattern the original model's own
        attention computes where the backend computes it another way (nothing here: a
        HookedTransformer is its own reference)."""
        yield

    # --- per-layer hook plumbing (subclasses) ---------------------------------------------
    def qk_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        """Where pre-rotary ``which`` ("q" or "k") of ``layer`` can be read and edited: one site, or
        several whose dims concatenate (in order) into the head vector psheads decomposes."""
        raise NotImplementedError

    def rotation_optional(self, layer: int) -> bool:
        """Whether ``layer`` may run a forward without rotating (a NoPE layer): then no table is recorded
        and every dimension is plane 0. False: a missing table is an error."""
        return False

    @contextlib.contextmanager
    def table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        """Context yielding extra TL hooks that fill ``store[layer] = {"cos": …, "sin": …}``
        (``[pos, rotary_dim]``, the tables the layer rotated with) while the forward runs."""
        raise NotImplementedError
        yield []  # pragma: no cover

    def pattern_hook(self, layer: int) -> str:
        """Name of the hook holding the post-softmax pattern ``[batch, head, q, k]``."""
        return f"blocks.{layer}.attn.hook_pattern"

    # --- scoped hook points and live logit edits -------------------------------------------
    @staticmethod
    def attention_hook_name(layer: int, point: str) -> str:
        """The TransformerLens name of hook point ``point`` in layer ``layer``'s attention block."""
        return f"blocks.{layer}.attn.{point}"

    def add_hook_point(self, name: str, hook_point: Any) -> None:
        """Make ``name`` resolvable by the model's ``hooks`` / ``run_with_hooks`` / ``run_with_cache``."""
        raise NotImplementedError

    def remove_hook_point(self, name: str) -> None:
        """Undo ``add_hook_point``."""
        raise NotImplementedError

    @staticmethod
    def has_hooks(hook_point: Any) -> bool:
        """Whether anything is hooked on a TransformerLens ``HookPoint``."""
        return bool(hook_point._forward_hooks)

    def pattern_is_live(self, layer: int) -> bool:
        """Whether a tensor returned at ``hook_pattern`` feeds the layer's output."""
        return True

    @contextlib.contextmanager
    def live_edits(self, layers: Sequence[int], on_layer: Callable[[int, LayerCapture], Any]) -> Iterator[None]:
        """While active, every forward pass calls ``on_layer(layer, capture)`` for ``layers``.

        ``capture`` holds q at every position, k̃ and the tables of that forward. ``on_layer``
        returns None (leave the layer alone) or ``(edited, original)``: total pre-soft-cap logits
        ``[batch, head, query, key]`` that should replace the model's (``original`` = what the
        planes gave unedited). Hooks are removed on exit, also on error.
        """
        live: dict[str, dict] = {"q": {}, "k": {}, "tables": {}, "bias": {}}
        hooks: list = []
        handles: list = []
        readings = {layer: self._reading(layer, sdpa=False) for layer in layers}

        def recorder(which: str, layer: int, index: int, site: HookSite) -> Callable:
            def hook(tensor: Tensor) -> None:
                live[which].setdefault(layer, {})[index] = upcast(site.to_canonical(tensor))

            return hook

        def current(layer: int, n_pos: int) -> LayerCapture:
            return self._assemble(layer, readings[layer], live["q"], live["k"], live["tables"], n_pos)

        def pattern_editor(layer: int) -> Callable:
            spec = readings[layer].spec

            def hook(pattern: Tensor, hook: Any) -> Tensor | None:
                result = on_layer(layer, current(layer, pattern.shape[-1]))
                if result is None:
                    return None
                edited, _ = result
                n_pos = edited.shape[-1]
                visible = visible_keys(spec, torch.arange(n_pos, device=edited.device), n_pos)
                logits = geometry.soft_cap(edited, spec.softcap).masked_fill(~visible, float("-inf"))
                return attention_pattern(spec, logits).to(device=pattern.device, dtype=pattern.dtype)

            return hook

        def bias_editor(layer: int) -> Callable:
            def hook(tensor: Tensor) -> None:
                result = on_layer(layer, current(layer, next(iter(live["k"][layer].values())).shape[1]))
                if result is not None:
                    edited, original = result
                    bias = live["bias"][layer]
                    bias += (edited - original).to(device=bias.device, dtype=bias.dtype)

            return hook

        def widen_mask(layer: int) -> Callable:
            n_heads = self.layer_spec(layer).n_heads

            def pre_hook(module: Any, args: tuple, kwargs: dict) -> tuple:
                mask = kwargs.get("attention_mask")
                batch, n_pos = kwargs["hidden_states"].shape[:2]
                if mask is None:
                    mask = torch.ones(n_pos, n_pos, dtype=torch.bool, device=kwargs["hidden_states"].device).tril()
                if mask.dtype == torch.bool:
                    mask = torch.zeros(mask.shape, device=mask.device).masked_fill(~mask, float("-inf"))
                bias = mask.float().expand(batch, n_heads, n_pos, n_pos).clone()
                live["bias"][layer] = bias
                return args, {**kwargs, "attention_mask": bias}

            return pre_hook

        try:
            with self.table_recorder(layers, live["tables"]) as table_hooks:
                hooks.extend(table_hooks)
                for layer in layers:
                    # q and k are read after every other hook on their hook points, also hooks added
                    # later (an inner gate or user hook): edits see the q and k the model uses
                    for which in ("q", "k"):
                        for index, site in enumerate(readings[layer].sites[which]):
                            handles += hook_last(self.model.hook_dict[site.name], recorder(which, layer, index, site))
                    if self.pattern_is_live(layer):
                        hooks.append((self.pattern_hook(layer), pattern_editor(layer)))
                    else:
                        spec, k_sites = readings[layer].spec, readings[layer].sites["k"]
                        if spec.softcap is not None or spec.sinks is not None or len(k_sites) > 1:
                            raise ValueError(f"Layer {layer}: logit edits on this layer need a live attention pattern "
                                             "(soft-capping, attention sinks or a key read in parts).")
                        handles.append(self.edit_site(layer).register_forward_pre_hook(widen_mask(layer),
                                                                                       with_kwargs=True))
                        handles += hook_last(self.model.hook_dict[k_sites[0].name], bias_editor(layer))
                with self.model.hooks(fwd_hooks=hooks):
                    yield
        finally:
            for handle in handles:
                handle.remove()

    def edit_site(self, layer: int) -> torch.nn.Module:
        """Module whose ``attention_mask`` kwarg is widened into an editable score bias."""
        raise NotImplementedError

    @contextlib.contextmanager
    def masked_keys(self, keep: KeepKeys) -> Iterator[None]:
        """While active, every forward hides from each head the keys ``keep`` hides
        (``psheads.rope.backends.key_masks``): ``-inf`` at the pre-softmax ``hook_attn_scores``, which
        TransformerLens fires after its own causal mask. Hooks are removed on exit, also on error."""
        hooks = [(self.attention_hook_name(layer, "hook_attn_scores"), scores_hook(layer, keep))
                 for layer in self.attention_layers]
        with self.model.hooks(fwd_hooks=hooks):
            yield

    # --- capture ----------------------------------------------------------------------------
    def capture(
        self,
        tokens: torch.Tensor,
        layers: Sequence[int],
        query_index: torch.Tensor | None = None,
        with_pattern: bool = False,
        on_layer: Callable[[int, LayerCapture], None] | None = None,
    ) -> dict[int, LayerCapture]:
        """One forward pass recording q, k̃ and rotation tables for ``layers``.

        Args:
            tokens: ``[batch, pos]`` token ids.
            layers: attention layers to record (any order; duplicates ignored).
            query_index: ``[batch]`` query position per row: keep q only there (and the pattern
                row). None keeps every position.
            with_pattern: also record the model's own attention pattern (for checks).
            on_layer: streaming: ``on_layer(layer, capture)`` is called with each layer's capture as
                soon as it is complete (when a later layer starts, and for the last layer after the
                forward), and the capture is dropped, so the forward holds about one layer's capture
                at a time. Not with ``with_pattern``.

        Returns:
            ``{layer: LayerCapture}`` (empty when streaming). The forward stops after the last
            requested layer.
        """
        layers = sorted(set(layers))
        if not layers:
            raise ValueError("No layers requested: pass at least one layer.")
        if with_pattern and on_layer is not None:
            raise ValueError("capture streams layers (on_layer) or records patterns (with_pattern), not both.")
        sdpa = not with_pattern and self.long_input(tokens.shape) and self.sdpa_ready(layers)
        rows = torch.arange(tokens.shape[0])
        n_pos = int(tokens.shape[1])
        store: dict[str, dict[int, Any]] = {"q": {}, "k": {}, "pattern": {}, "reference": {}}
        tables: dict[int, dict[str, Tensor]] = {}
        last_layer = layers[-1]
        readings = {layer: self._reading(layer, sdpa) for layer in layers}

        def emit_before(layer: int | None, emit: Callable[[int, LayerCapture], None]) -> None:
            """Hand every recorded layer below ``layer`` (all of them for None) to ``emit``."""
            for done in sorted(store["k"]):
                if layer is not None and done >= layer:
                    break
                capture = self._assemble(done, readings[done], store["q"], store["k"], tables, n_pos, query_index)
                del store["q"][done], store["k"][done]
                tables.pop(done, None)
                emit(done, capture)

        on_device: dict[torch.device, tuple[Tensor, Tensor]] = {}  # rows and queries, moved once per device

        def keep_query(x: Tensor, pos_axis: int) -> Tensor:
            if query_index is None:
                return x
            if x.device not in on_device:
                on_device[x.device] = rows.to(x.device), query_index.to(x.device)
            picked = x.movedim(pos_axis, 1)[on_device[x.device]]
            return picked.unsqueeze(pos_axis)

        def recorder(kind: str, layer: int, index: int, convert: Callable[[Tensor], Tensor] | None,
                     stop: bool) -> Callable:
            def hook(tensor: Tensor, hook: Any) -> None:
                if on_layer is not None:  # layers run in order: every layer below this one is complete
                    emit_before(layer, on_layer)
                value = convert(tensor) if convert is not None else tensor
                if kind == "q":
                    value = keep_query(value, 1)
                elif kind == "pattern":
                    value = keep_query(value, 2)
                if kind == "pattern":
                    store[kind][layer] = upcast(value, tensor)
                elif kind:
                    store[kind].setdefault(layer, {})[index] = upcast(value, tensor)
                if stop:
                    raise _StopForward

            return hook

        hooks = []
        for layer in layers:
            for which in ("q", "k"):  # k comes after q: with SDPA the last layer's k ends the forward
                sites = readings[layer].sites[which]
                for index, site in enumerate(sites):
                    stop = sdpa and which == "k" and layer == last_layer and index == len(sites) - 1
                    hooks.append((site.name, recorder(which, layer, index, site.to_canonical, stop)))
            stop_here = layer == last_layer and not sdpa
            if with_pattern:
                hooks.append((self.pattern_hook(layer), recorder("pattern", layer, 0, None, stop_here)))
            elif stop_here:
                hooks.append((self.pattern_hook(layer), recorder("", layer, 0, None, True)))
        tokens = tokens.to(self.device)
        forward = self.sdpa_forward() if sdpa else contextlib.nullcontext()
        recording = self.sdpa_table_recorder(layers, tables) if sdpa else self.table_recorder(layers, tables)
        references = self.reference_recorder(layers, store["reference"]) if with_pattern else contextlib.nullcontext()
        with self.analysis():
            with (recording as table_hooks, forward, references, self.model.hooks(fwd_hooks=hooks + table_hooks),
                  contextlib.suppress(_StopForward)):
                self.forward(tokens)
            if on_layer is not None:  # the last layer, once the model is back as it was
                emit_before(None, on_layer)
                return {}
        return {
            layer: self._assemble(layer, readings[layer], store["q"], store["k"], tables, n_pos, query_index,
                                  store["pattern"].get(layer), keep_query(store["reference"][layer], 2)
                                  if layer in store["reference"] else None)
            for layer in layers
        }

    def _reading(self, layer: int, sdpa: bool) -> Reading:
        """Where ``layer``'s q and k are read in this forward, and its static facts (read once per
        open analysis: every batch of one call reuses them)."""
        if (layer, sdpa) in self._readings:
            return self._readings[(layer, sdpa)]
        sites = {which: self.sdpa_sites(layer, which) if sdpa else self.qk_sites(layer, which) for which in ("q", "k")}
        reading = Reading(sites, self.layer_spec(layer))
        if self._analysing:
            self._readings[(layer, sdpa)] = reading
        return reading

    def _assemble(
        self, layer: int, reading: Reading, q: dict, k: dict, tables: dict, n_pos: int,
        query_index: Tensor | None = None, pattern: Tensor | None = None, reference: Tensor | None = None,
    ) -> LayerCapture:
        """One layer's capture from its recorded parts: q and k concatenated from their sites, the
        tables (none on a layer that did not rotate), and the model's steps after RoPE that act on
        each vector alone (an RMS norm, a per-position query scale) folded into q and k."""
        n_sites = {which: len(sites) for which, sites in reading.sites.items()}
        complete = all(len(parts.get(layer, {})) == n_sites[which] for which, parts in (("q", q), ("k", k)))
        rotated = {"cos", "sin"} <= set(tables.get(layer, {}))
        if not complete or not (rotated or self.rotation_optional(layer)):
            raise RuntimeError(
                f"The forward pass did not fire the q/k/RoPE hooks of layer {layer} on this "
                f"{type(self.model).__name__}; this architecture is not supported by psheads."
            )
        q_full, k_full = (parts[layer][0] if n_sites[which] == 1 else
                          torch.cat([parts[layer][index] for index in range(n_sites[which])], dim=-1)
                          for which, parts in (("q", q), ("k", k)))
        if rotated:
            cos, sin = tables[layer]["cos"][:n_pos], tables[layer]["sin"][:n_pos]
        else:
            cos = sin = k_full.new_zeros(n_pos, 0)
        q_full, k_full = self._after_rope(reading.spec, q_full, k_full, cos, sin, n_pos, query_index)
        return LayerCapture(q=q_full, k=k_full, cos=cos, sin=sin, pattern=pattern, reference=reference)

    @staticmethod
    def _after_rope(spec: LayerSpec, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, n_pos: int,
                    query_index: Tensor | None) -> tuple[Tensor, Tensor]:
        """q and k with the model's per-vector steps after RoPE folded in (fp64 where any applies).

        An RMS norm after RoPE divides each rotated vector by its RMS, which rotation leaves unchanged
        up to the tables' magnitude: dividing the pre-rotary vector by the RMS of its rotated self is
        exact. A per-position query scale multiplies the query at its absolute position.
        """
        if spec.norm_eps is None and spec.query_scale is None:
            return q, k
        positions = torch.arange(n_pos, device=q.device)
        query_positions = positions.expand(q.shape[0], -1) if query_index is None else query_index.to(q.device)[:, None]
        q, k = q.to(exact_dtype(q.device)), k.to(exact_dtype(k.device))
        if spec.norm_eps is not None:
            layout = geometry.plane_layout(spec.d_head, cos.shape[-1], spec.pairing)
            full_cos, full_sin = geometry.extend_tables(cos, sin, spec.d_head)

            def rms_scaled(x: Tensor, at: Tensor, eps: float) -> Tensor:  # x [batch, pos, head, d]; at [batch, pos]
                rotated = geometry.rotate(x, full_cos[at].unsqueeze(-2), full_sin[at].unsqueeze(-2), layout)
                return x * torch.rsqrt(rotated.square().mean(-1, keepdim=True) + eps)

            q = rms_scaled(q, query_positions, spec.norm_eps[0])
            k = rms_scaled(k, positions.expand(k.shape[0], -1), spec.norm_eps[1])
        if spec.query_scale is not None:
            q = q * spec.query_scale.at(query_positions).to(q.device)[..., None, None]
        return q, k
