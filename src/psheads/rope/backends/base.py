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
from psheads.rope.families import GENERIC, Family, family_titles
from psheads.rope.layer import LayerCapture, LayerSpec


@dataclass(frozen=True)
class HookSite:
    """A TransformerLens hook carrying pre-rotary q or k, and its tensor layout.

    Attributes:
        name: hook name.
        layout: ``"bshd"`` (``[batch, pos, head, d_head]``, possibly flattened to
            ``[batch, pos, head * d_head]``) or ``"bhsd"`` (``[batch, head, pos, d_head]``).
        d_head: head dimension.
    """

    name: str
    layout: str
    d_head: int

    def to_canonical(self, x: Tensor) -> Float[Tensor, "batch pos head d_head"]:
        """View the hook's tensor as ``[batch, pos, head, d_head]``."""
        if self.layout == "bhsd":
            return rearrange(x, "batch head pos d -> batch pos head d")
        return x.reshape(*x.shape[:2], -1, self.d_head)  # [batch, pos, head(, d_head)]: both kinds

    def from_canonical(self, canonical: Tensor, like: Tensor) -> Tensor:
        """Inverse of ``to_canonical``, shaped like the hook's original tensor ``like``."""
        if self.layout == "bhsd":
            return rearrange(canonical, "batch pos head d -> batch head pos d")
        return canonical.reshape(like.shape)


class _StopForward(Exception):
    """Raised from the last needed hook to skip the rest of the forward pass."""


SCORES_BYTES = 2**28
"""Above this many bytes of one layer's eager [batch, head, query, key] scores, ``capture`` runs the
model's own SDPA attention instead (where the backend can), so no pattern is formed: long prompts
cost the memory of a plain SDPA forward. Shorter inputs keep the bridge's eager attention."""



def upcast(x: Tensor) -> Tensor:
    """Detached fp32 (or wider) copy: the analysis never works on half precision."""
    x = x.detach()
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x.clone()



def hook_last(point: torch.nn.Module, read: Callable[[Tensor], None]) -> list:
    """Call ``read(output)`` after every other forward hook of ``point``, also hooks added later.

    A pre-hook moves the reader to the end of the module's hook order before each call.
    Returns the handles to remove.
    """
    handle = point.register_forward_hook(lambda module, args, output: read(output))

    def keep_last(module: torch.nn.Module, args: tuple) -> None:
        module._forward_hooks.move_to_end(handle.id)

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
    def n_layers(self) -> int:
        """Number of transformer blocks."""
        return len(self.model.blocks)

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
        """Longest input whose rotation tables exist (None: the model computes them per input)."""
        return self.n_ctx

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

    def weights_owner(self) -> torch.nn.Module:
        """The module that holds every parameter and buffer of the model."""
        return self.model

    def fingerprint(self) -> tuple:
        """Changes whenever the weights (in place or replaced), the rotation tables' values, dtype,
        device or layer facts change (see ``weights_state`` for what is and is not seen)."""
        return weights_state(self.weights_owner()), tuple(self.layer_spec(layer) for layer in range(self.n_layers))

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

    def sdpa_site(self, layer: int, which: str) -> HookSite:
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

    # --- per-layer hook plumbing (subclasses) ---------------------------------------------
    def qk_site(self, layer: int, which: str) -> HookSite:
        """Where pre-rotary ``which`` ("q" or "k") of ``layer`` can be read and edited."""
        raise NotImplementedError

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

        def recorder(which: str, layer: int, site: HookSite) -> Callable:
            def hook(tensor: Tensor) -> None:
                live[which][layer] = upcast(site.to_canonical(tensor))

            return hook

        def current(layer: int, n_pos: int) -> LayerCapture:
            return self._assemble(layer, live["q"], live["k"], live["tables"], n_pos)

        def pattern_editor(layer: int) -> Callable:
            spec = self.layer_spec(layer)

            def hook(pattern: Tensor, hook: Any) -> Tensor | None:
                result = on_layer(layer, current(layer, pattern.shape[-1]))
                if result is None:
                    return None
                edited, _ = result
                n_pos = edited.shape[-1]
                visible = geometry.visible_keys(torch.arange(n_pos, device=edited.device), n_pos, spec.window)
                logits = geometry.soft_cap(edited, spec.softcap).masked_fill(~visible, float("-inf"))
                return torch.softmax(logits, dim=-1).to(device=pattern.device, dtype=pattern.dtype)

            return hook

        def bias_editor(layer: int) -> Callable:
            def hook(tensor: Tensor) -> None:
                result = on_layer(layer, current(layer, live["k"][layer].shape[1]))
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
                        site = self.qk_site(layer, which)
                        handles += hook_last(self.model.hook_dict[site.name], recorder(which, layer, site))
                    if self.pattern_is_live(layer):
                        hooks.append((self.pattern_hook(layer), pattern_editor(layer)))
                    else:
                        if self.layer_spec(layer).softcap is not None:
                            raise ValueError(f"Layer {layer}: logit edits need a live pattern under soft-capping.")
                        handles.append(self.edit_site(layer).register_forward_pre_hook(widen_mask(layer), with_kwargs=True))
                        handles += hook_last(self.model.hook_dict[self.qk_site(layer, "k").name], bias_editor(layer))
                with self.model.hooks(fwd_hooks=hooks):
                    yield
        finally:
            for handle in handles:
                handle.remove()

    def edit_site(self, layer: int) -> torch.nn.Module:
        """Module whose ``attention_mask`` kwarg is widened into an editable score bias."""
        raise NotImplementedError

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
            layers: layers to record (any order; duplicates ignored).
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
        store: dict[str, dict[int, Tensor]] = {"q": {}, "k": {}, "pattern": {}}
        tables: dict[int, dict[str, Tensor]] = {}
        last_layer = layers[-1]

        def emit_before(layer: int | None) -> None:
            """Hand every recorded layer below ``layer`` (all of them for None) to ``on_layer``."""
            for done in sorted(store["k"]):
                if layer is not None and done >= layer:
                    break
                capture = self._assemble(done, store["q"], store["k"], tables, n_pos)
                del store["q"][done], store["k"][done], tables[done]
                on_layer(done, capture)

        def keep_query(x: Tensor, pos_axis: int) -> Tensor:
            if query_index is None:
                return x
            picked = x.movedim(pos_axis, 1)[rows.to(x.device), query_index.to(x.device)]
            return picked.unsqueeze(pos_axis)

        def recorder(kind: str, layer: int, convert: Callable[[Tensor], Tensor] | None, stop: bool) -> Callable:
            def hook(tensor: Tensor, hook: Any) -> None:
                if on_layer is not None:  # layers run in order: every layer below this one is complete
                    emit_before(layer)
                value = convert(tensor) if convert is not None else tensor
                if kind == "q":
                    value = keep_query(value, 1)
                elif kind == "pattern":
                    value = keep_query(value, 2)
                if kind:
                    store[kind][layer] = upcast(value)
                if stop:
                    raise _StopForward

            return hook

        hooks = []
        for layer in layers:
            for which in ("q", "k"):  # k comes after q: with SDPA the last layer's k ends the forward
                site = self.sdpa_site(layer, which) if sdpa else self.qk_site(layer, which)
                hooks.append((site.name, recorder(which, layer, site.to_canonical,
                                                  sdpa and which == "k" and layer == last_layer)))
            stop_here = layer == last_layer and not sdpa
            if with_pattern:
                hooks.append((self.pattern_hook(layer), recorder("pattern", layer, None, stop_here)))
            elif stop_here:
                hooks.append((self.pattern_hook(layer), recorder("", layer, None, True)))
        tokens = tokens.to(self.device)
        forward = self.sdpa_forward() if sdpa else contextlib.nullcontext()
        recording = self.sdpa_table_recorder(layers, tables) if sdpa else self.table_recorder(layers, tables)
        with self.analysis():
            with recording as table_hooks, forward:
                with self.model.hooks(fwd_hooks=hooks + table_hooks):
                    try:
                        self.forward(tokens)
                    except _StopForward:
                        pass
            if on_layer is not None:  # the last layer, once the model is back as it was
                emit_before(None)
                return {}
        return {
            layer: self._assemble(layer, store["q"], store["k"], tables, n_pos, store["pattern"].get(layer))
            for layer in layers
        }

    def _assemble(
        self, layer: int, q: dict, k: dict, tables: dict, n_pos: int, pattern: Tensor | None = None
    ) -> LayerCapture:
        if layer not in q or layer not in k or {"cos", "sin"} - set(tables.get(layer, {})):
            raise RuntimeError(
                f"The forward pass did not fire the q/k/RoPE hooks of layer {layer} on this "
                f"{type(self.model).__name__}; this architecture is not supported by psheads."
            )
        cos, sin = tables[layer]["cos"][:n_pos], tables[layer]["sin"][:n_pos]
        return LayerCapture(q=q[layer], k=k[layer], cos=cos, sin=sin, pattern=pattern)

