"""The only module that knows TransformerBridge vs HookedTransformer, and the one place that
touches TransformerLens (and torch) internals.

A backend answers two questions for a layer: *what are its static attention facts* (heads,
scale, soft-cap, window, pairing: a ``LayerSpec``) and *what were q, k̃ and the rotation tables
on this input* (one forward pass with targeted hooks; nothing else is cached). What differs
between architecture families is data in ``psheads.rope.families``; the facts used are listed in the
docs' decomposition page, and the lens self-check guards them.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import transformers
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from psheads.rope import geometry
from psheads.rope.families import GENERIC, HOOKED_UNSUPPORTED, UNSUPPORTED, Family, family_of
from psheads.rope.layer import LayerCapture, LayerSpec

logger = logging.getLogger(__name__)


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


def _upcast(x: Tensor) -> Tensor:
    """Detached fp32 (or wider) copy: the analysis never works on half precision."""
    x = x.detach()
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x.clone()


def _module_tree(*roots: Any) -> list[torch.nn.Module]:
    """Every module under ``roots`` (those that are modules), each once, parents first.

    Walks ``_modules`` directly: ``Module.modules()`` builds a name for every module, which on a
    TransformerBridge (hundreds of hook points) cost milliseconds per call.
    """
    seen: set[int] = set()
    out: list[torch.nn.Module] = []
    stack = [root for root in reversed(roots) if isinstance(root, torch.nn.Module)]
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        out.append(module)
        stack.extend(child for child in reversed(module._modules.values()) if child is not None)
    return out


def input_device(model: torch.nn.Module) -> torch.device:
    """Where ``model``'s inputs go: the device of its first parameter that holds data (the CPU if
    none does).

    The one device-placement rule for inputs. A model dispatched over devices (accelerate's
    ``device_map``, TransformerLens' ``n_devices``) moves activations between its layers itself,
    and psheads reads each layer's q and k̃ on that layer's device. Parameters offloaded to CPU or
    disk sit on the meta device until their layer runs, so they are skipped.
    """
    return next((p.device for p in model.parameters() if p.device.type != "meta"), torch.device("cpu"))


class _Values:
    """A copy of some tensors' bytes, equal to another exactly when every byte, shape and dtype
    matches (NaNs included): a full comparison, no hash."""

    def __init__(self, tensors: list[Tensor]) -> None:
        self.meta = tuple((t.shape, t.dtype) for t in tensors)
        self.data = tuple(t.detach().reshape(-1).view(torch.uint8).to("cpu", copy=True).numpy() for t in tensors)

    def __eq__(self, other: object) -> bool:  # numpy compares bytes several times faster than torch
        return (isinstance(other, _Values) and self.meta == other.meta
                and all(np.array_equal(a, b) for a, b in zip(self.data, other.data)))

    __hash__ = None  # type: ignore[assignment]


def _state(model: torch.nn.Module) -> tuple:
    """Changes whenever a parameter or buffer of ``model`` is replaced, written, cast or moved.

    Built from each tensor's identity, storage, torch version counter (bumped by every in-place
    write, optimizer steps and ``load_state_dict`` included), dtype and device, and from a copy
    of every buffer's values: a write through ``buffer.data`` (``embed_positions.data.copy_(…)``)
    bumps no counter, and the buffers hold the rotation tables psheads reads θ from. Parameters
    written through ``.data`` are not seen (comparing every weight on each call would cost more
    than a forward): after such an edit, build a new ``RopeLens``.
    """
    modules = _module_tree(model)
    tensors = [t for module in modules for tensors in (module._parameters, module._buffers)
               for t in tensors.values() if t is not None]
    identity = tuple((id(t), t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)
    buffers = [t.contiguous() for module in modules for t in module._buffers.values()
               if t is not None and t.numel() and t.device.type != "meta"]  # meta: offloaded, no data
    return identity, _Values(buffers)


def _hook_last(point: torch.nn.Module, read: Callable[[Tensor], None]) -> list:
    """Call ``read(output)`` after every other forward hook of ``point``, also hooks added later.

    A pre-hook moves the reader to the end of the module's hook order before each call.
    Returns the handles to remove.
    """
    handle = point.register_forward_hook(lambda module, args, output: read(output))

    def keep_last(module: torch.nn.Module, args: tuple) -> None:
        module._forward_hooks.move_to_end(handle.id)

    return [handle, point.register_forward_pre_hook(keep_last)]


def all_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's modules plus those of a bridge's HF model, each once."""
    return _module_tree(model, getattr(model, "original_model", None))


@contextlib.contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Run in eval mode (dropout off) and restore every module's own training flag afterwards.

    A TransformerBridge's ``train``/``eval`` also reach its HF model, which is not a registered
    submodule: its modules are restored too.
    """
    flags = [(module, module.training) for module in all_modules(model)]
    if not any(was_training for _, was_training in flags):  # already in eval mode: nothing to switch
        yield
        return
    model.eval()
    try:
        yield
    finally:
        for module, was_training in flags:
            module.training = was_training


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
                "psheads decomposes RoPE logits and cannot score it. Use a RoPE model "
                "(GPT-J, Pythia/GPT-NeoX, Llama, Mistral, Qwen2, Gemma)."
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
        device or layer facts change (see ``_state`` for what is and is not seen)."""
        return _state(self.weights_owner()), tuple(self.layer_spec(layer) for layer in range(self.n_layers))

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

    def _embeddings_recorder(self, layer: int, store: dict, table: Callable[[Tensor, bool], Tensor]) -> Callable:
        """A pre-hook on the Hugging Face attention of ``layer`` that stores the tables it receives as
        ``position_embeddings``: ``(cos, sin)``, or ``(sin, cos)`` at half width for GPT-J."""
        gptj = self.family.tables != "cos_sin_hooks"

        def pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
            if "position_embeddings" not in kwargs:
                raise ValueError(f"The attention of layer {layer} ({type(module).__name__}) takes no rotary tables "
                                 f"(position_embeddings): GPT-J computes them inside its attention before "
                                 f"transformers 5.24. Upgrade: pip install 'transformers>=5.24'.")
            first, second = kwargs["position_embeddings"]
            cos, sin = (second, first) if gptj else (first, second)
            store[layer] = {"cos": table(cos, widen=gptj), "sin": table(sin, widen=gptj)}

        return pre_hook

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
                live[which][layer] = _upcast(site.to_canonical(tensor))

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
                        handles += _hook_last(self.model.hook_dict[site.name], recorder(which, layer, site))
                    if self.pattern_is_live(layer):
                        hooks.append((self.pattern_hook(layer), pattern_editor(layer)))
                    else:
                        if self.layer_spec(layer).softcap is not None:
                            raise ValueError(f"Layer {layer}: logit edits need a live pattern under soft-capping.")
                        handles.append(self.edit_site(layer).register_forward_pre_hook(widen_mask(layer), with_kwargs=True))
                        handles += _hook_last(self.model.hook_dict[self.qk_site(layer, "k").name], bias_editor(layer))
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
                    store[kind][layer] = _upcast(value)
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


class HookedTransformerBackend(Backend):
    """TransformerLens ``HookedTransformer`` (3.x): rotation tables are the attention buffers."""

    kind = "HookedTransformer"

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.family = family_of(str(getattr(self.cfg, "original_architecture", "")))
        for flag, what in HOOKED_UNSUPPORTED:
            if getattr(self.cfg, flag, False):
                raise ValueError(
                    f"This HookedTransformer {what}, which psheads does not decompose on this backend. "
                    "Boot the model with TransformerBridge.boot_transformers(...) instead."
                )

    def layer_spec(self, layer: int) -> LayerSpec:
        cfg = self.cfg
        n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
        if getattr(cfg, "ungroup_grouped_query_attention", False):  # hook_k then carries every head
            n_kv = cfg.n_heads
        use_scale = getattr(cfg, "use_attn_scale", True)
        softcap = getattr(cfg, "attn_scores_soft_cap", -1.0)
        window = None
        attn_types = getattr(cfg, "attn_types", None)
        if getattr(cfg, "use_local_attn", False) and attn_types is not None and attn_types[layer] == "local":
            window = int(cfg.window_size)
        return LayerSpec(
            n_heads=int(cfg.n_heads),
            n_kv_heads=int(n_kv),
            d_head=int(cfg.d_head),
            pairing="adjacent" if getattr(cfg, "rotary_adjacent_pairs", False) else "halves",
            scale=1.0 / float(cfg.attn_scale) if use_scale else 1.0,
            softcap=float(softcap) if softcap and softcap > 0 else None,
            window=window,
        )

    def qk_site(self, layer: int, which: str) -> HookSite:
        return HookSite(f"blocks.{layer}.attn.hook_{which}", "bshd", int(self.cfg.d_head))

    def add_hook_point(self, name: str, hook_point: Any) -> None:
        if name in self.model.mod_dict:
            raise ValueError(f"The model already has a hook point named {name!r}.")
        self.model.mod_dict[name] = hook_point
        self.model.hook_dict[name] = hook_point

    def remove_hook_point(self, name: str) -> None:
        self.model.mod_dict.pop(name, None)
        self.model.hook_dict.pop(name, None)

    @contextlib.contextmanager
    def table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        # read after the rotation: the attention grows (and, with dynamic NTK, rebuilds) its
        # tables during the forward
        def recorder(layer: int) -> Callable:
            attn = self.model.blocks[layer].attn

            def hook(tensor: Tensor, hook: Any) -> None:
                n_pos = tensor.shape[1]
                store[layer] = {"cos": _upcast(attn.rotary_cos[:n_pos]), "sin": _upcast(attn.rotary_sin[:n_pos])}

            return hook

        yield [(f"blocks.{layer}.attn.hook_rot_k", recorder(layer)) for layer in layers]

    def forward(self, tokens: Tensor) -> None:
        # an explicit all-ones mask: positions 0…N−1 even if the tokenizer pads on the left
        self.model(tokens, attention_mask=torch.ones_like(tokens))


class BridgeBackend(Backend):
    """TransformerLens ``TransformerBridge`` over a Hugging Face model."""

    kind = "TransformerBridge"

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.family = family_of(type(model.original_model).__name__)
        for layer in range(self.n_layers):
            self._check_supported(layer)

    def weights_owner(self) -> torch.nn.Module:
        return self.model.original_model

    def _attn(self, layer: int) -> Any:
        return self.model.blocks[layer].attn

    def _hf_attn(self, layer: int) -> Any:
        return self._attn(layer).original_component

    @property
    def max_positions(self) -> int | None:
        """GPT-J's precomputed sinusoid table caps inputs at ``n_ctx``; the other families
        compute their tables per forward (dynamic NTK acts beyond ``n_ctx``)."""
        return self.n_ctx if self.family.fixed_context else None

    def add_hook_point(self, name: str, hook_point: Any) -> None:
        if name in self.model.hook_dict:
            raise ValueError(f"The model already has a hook point named {name!r}.")
        self.model._hook_registry[name] = hook_point

    def remove_hook_point(self, name: str) -> None:
        self.model._hook_registry.pop(name, None)

    def pattern_is_live(self, layer: int) -> bool:
        return self.family.live_pattern

    def edit_site(self, layer: int) -> torch.nn.Module:
        return self._hf_attn(layer)

    def _d_head(self, layer: int) -> int:
        hf = self._hf_attn(layer)
        return int(getattr(hf, "head_dim", None) or getattr(hf, "head_size", None) or self.cfg.d_head)

    def _qk_norm_phase(self, layer: int) -> str | None:
        """Where the bridge applies QK-norm (``"pre_reshape"``/``"post_reshape"``), or None."""
        return getattr(self._attn(layer), "_qk_norm_phase", None)

    def _check_supported(self, layer: int) -> None:
        attn, hf = self._attn(layer), self._hf_attn(layer)
        reasons = []
        if self.family.tables == "cos_sin_hooks":
            if not hasattr(attn, "hook_cos"):
                reasons.append(f"attention module {type(hf).__name__} without RoPE table hooks")
            reasons += [check.reason for check in UNSUPPORTED if check.applies(hf, self.cfg)]
        if self.family is not GENERIC and self.family.qk_norm != (self._qk_norm_phase(layer) is not None):
            reasons.append(f"{'no ' if self.family.qk_norm else ''}QK-norm, unlike the {self.family.name} family")
        if reasons:
            raise ValueError(
                f"Layer {layer} of {self.model_name} uses {', '.join(reasons)}, which psheads does "
                "not decompose exactly. Supported: GPT-J, GPT-NeoX/Pythia, Llama, Mistral, Qwen2, "
                f"Gemma, Gemma-2, Gemma-3 (bridge attention: {type(attn).__name__})."
            )

    def layer_spec(self, layer: int) -> LayerSpec:
        hf = self._hf_attn(layer)
        cfg = self.cfg
        d_head = self._d_head(layer)
        n_heads = int(cfg.n_heads)
        n_kv = n_heads // int(getattr(hf, "num_key_value_groups", 1) or 1)
        scale = getattr(hf, "scaling", None)
        if scale is None:
            scale = d_head**-0.5
        softcap = getattr(hf, "attn_logit_softcapping", None)
        if self.family is GENERIC:
            window = getattr(hf, "sliding_window", getattr(getattr(hf, "config", None), "sliding_window", None))
        elif self.family.window == "module":
            window = getattr(hf, "sliding_window", None)
        elif self.family.window == "config":
            window = getattr(hf.config, "sliding_window", None)
        else:
            window = None
        return LayerSpec(
            n_heads=n_heads,
            n_kv_heads=n_kv,
            d_head=d_head,
            pairing=self.family.pairing,
            scale=float(scale),
            softcap=float(softcap) if softcap is not None else None,
            window=int(window) if window is not None else None,
        )

    def qk_site(self, layer: int, which: str) -> HookSite:
        d_head = self._d_head(layer)
        phase = self._qk_norm_phase(layer)
        if phase is not None:
            layout = "bhsd" if phase == "post_reshape" else "bshd"
            return HookSite(f"blocks.{layer}.attn.hook_{which}_normed", layout, d_head)
        return HookSite(f"blocks.{layer}.attn.hook_{which}", "bshd", d_head)

    def sdpa_ready(self, layers: Sequence[int]) -> bool:
        """Every layer up to the last in ``layers`` has its Hugging Face attention, no soft-cap
        (SDPA has none) and a parent block to put it back in."""
        for layer in range(max(layers) + 1):
            attn = self._attn(layer)
            if (getattr(attn, "original_component", None) is None or self.layer_spec(layer).softcap is not None
                    or self._attention_slot(layer) is None):
                return False
            # the modules whose hooks give q and k must be called by Hugging Face's attention itself
            # (not so for a fused query_key_value, which only the bridge splits)
            names = ("q_norm", "k_norm") if self._qk_norm_phase(layer) is not None else ("q", "k")
            children = list(attn.original_component.children())
            if not all(any(child is getattr(attn, name, None) for child in children) for name in names):
                return False
        return True

    def _attention_slot(self, layer: int) -> str | None:
        """The attribute of the Hugging Face block that holds the bridge's attention."""
        block = getattr(self.model.blocks[layer], "original_component", None)
        attn = self._attn(layer)
        return next((name for name, child in block.named_children() if child is attn), None) if block else None

    def sdpa_site(self, layer: int, which: str) -> HookSite:
        """Hugging Face's attention calls the bridge's projections (``hook_q``/``hook_k`` fire, as
        ``[batch, pos, head · d_head]``); with QK-norm, the norm's own output (``[batch, head, pos,
        d_head]``: Hugging Face normalises after the transpose)."""
        d_head = self._d_head(layer)
        if self._qk_norm_phase(layer) is not None:
            return HookSite(f"blocks.{layer}.attn.{which}_norm.hook_out", "bhsd", d_head)
        return HookSite(f"blocks.{layer}.attn.hook_{which}", "bshd", d_head)

    @contextlib.contextmanager
    def sdpa_forward(self) -> Iterator[None]:
        """Each block's Hugging Face attention back in its place and every config on ``"sdpa"``,
        for this block only (the bridge's own eager attention forms every [query, key] score)."""
        swapped, configs = [], {}
        try:
            for layer in range(self.n_layers):
                slot = self._attention_slot(layer)
                if slot is None:
                    continue
                block = self.model.blocks[layer].original_component
                setattr(block, slot, self._hf_attn(layer))
                swapped.append((block, slot, self._attn(layer)))
            for config in (self.model.original_model.config,
                           *(self._hf_attn(layer).config for layer in range(self.n_layers))):
                configs.setdefault(id(config), (config, config._attn_implementation))
                config._attn_implementation = "sdpa"
            yield
        finally:
            for block, slot, bridge in swapped:
                setattr(block, slot, bridge)
            for config, implementation in configs.values():
                config._attn_implementation = implementation

    @contextlib.contextmanager
    def sdpa_table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        """The tables from the ``position_embeddings`` each Hugging Face attention receives."""
        handles = []
        table = _table_cache()
        try:
            for layer in layers:
                handles.append(self._hf_attn(layer).register_forward_pre_hook(
                    self._embeddings_recorder(layer, store, table), with_kwargs=True))
            yield []
        finally:
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        hooks = []
        handles = []
        table = _table_cache()

        def tl_recorder(layer: int, which: str) -> Callable:
            def hook(tensor: Tensor, hook: Any) -> None:
                store.setdefault(layer, {})[which] = table(tensor, widen=False)

            return hook

        try:
            for layer in layers:
                if self.family.tables == "cos_sin_hooks":
                    hooks.append((f"blocks.{layer}.attn.hook_cos", tl_recorder(layer, "cos")))
                    hooks.append((f"blocks.{layer}.attn.hook_sin", tl_recorder(layer, "sin")))
                else:
                    handles.append(self._hf_attn(layer).register_forward_pre_hook(
                        self._embeddings_recorder(layer, store, table), with_kwargs=True))
            yield hooks
        finally:
            for handle in handles:
                handle.remove()


def _table_cache() -> Callable[[Tensor, bool], Tensor]:
    """``table(source, widen)``: ``[pos, rotary_dim]`` from a ``[(batch,) pos, width]`` table (the
    first row, fp32 or wider, each half-width entry repeated for its pair when ``widen``: GPT-J).
    Layers usually share one table tensor per forward: each is converted once (its source is kept
    so that its id cannot be reused while the forward runs)."""
    converted: dict[int, tuple[Tensor, Tensor]] = {}

    def table(source: Tensor, widen: bool) -> Tensor:
        if id(source) not in converted:
            value = _upcast(source.reshape(-1, *source.shape[-2:])[0])
            converted[id(source)] = (source, value.repeat_interleave(2, -1) if widen else value)
        return converted[id(source)][1]

    return table


#: Bridges booted from Hugging Face models: ``hf_model -> (its state, tokenizer, bridge)``. Weak keys,
#: and values that do not reference the key (the bridge wraps a copy), so the user's model can be
#: garbage-collected, and its bridge with it.
_BRIDGES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_bridge(model: transformers.PreTrainedModel, tokenizer: Any = None) -> Any:
    """A TransformerBridge over a copy of a Hugging Face ``PreTrainedModel``; ``model`` is never changed.

    TransformerLens wraps the modules of the model it boots in place and switches it to eager
    attention, so the bridge is booted on ``copy.deepcopy(model)``: a second copy of the weights,
    on the model's device and in its dtype, kept for as long as ``model`` lives so that later
    calls with the model unchanged reuse it (any change to its weights, dtype or device boots a
    new one). To avoid the copy, hand the model over to TransformerLens yourself:
    ``TransformerBridge.boot_transformers(name, hf_model=model, tokenizer=tokenizer)`` (it then
    modifies ``model``).

    Args:
        model: a Hugging Face causal LM of a RoPE family psheads supports.
        tokenizer: its tokenizer (default: loaded from ``model.name_or_path``, the directory or
            hub name it was loaded from).

    Raises:
        TypeError: ``model`` is not a ``transformers.PreTrainedModel``.
        ValueError: no tokenizer was given and none can be loaded from ``model.name_or_path``.
    """
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"as_bridge needs a transformers.PreTrainedModel, got {type(model).__name__}.")
    if any(hasattr(module, "original_component") for module in model.modules()):
        raise TypeError(f"This {type(model).__name__} is already wrapped by a TransformerBridge (a bridge's "
                        "original_model): pass the bridge itself.")
    state = _state(model)
    cached = _BRIDGES.get(model)
    if cached is not None and cached[0] == state and cached[1] is tokenizer:
        return cached[2]
    from transformer_lens.model_bridge import TransformerBridge

    source = str(getattr(model, "name_or_path", "") or "")
    if tokenizer is None and not source:
        raise ValueError(f"This {type(model).__name__} has no name_or_path to load its tokenizer from (built with "
                         "from_config?); pass it: psheads.rope.backends.as_bridge(model, tokenizer=tokenizer), and pass "
                         "the bridge to psheads.")
    clone = copy.deepcopy(model)
    clone.set_attn_implementation("eager")  # TransformerLens 3.9 keeps a given model's attention kernel
    try:
        bridge = TransformerBridge.boot_transformers(source or type(model).__name__, hf_model=clone,
                                                     tokenizer=tokenizer)
    except OSError as error:  # the tokenizer could not be found
        raise ValueError(f"Could not load the tokenizer of this {type(model).__name__} from {source!r} ({error}); "
                         "pass it: psheads.rope.backends.as_bridge(model, tokenizer=tokenizer).") from None
    _BRIDGES[model] = (state, tokenizer, bridge)
    return bridge


def model_kind(model: Any) -> str:
    """``"bridge"`` (a TransformerBridge), ``"hooked"`` (a HookedTransformer) or ``"hf"`` (any other module)."""
    if hasattr(model, "original_model") and hasattr(model, "blocks"):
        return "bridge"
    if hasattr(model, "blocks") and hasattr(model, "cfg") and hasattr(model, "run_with_hooks"):
        return "hooked"
    return "hf"


def vocab_size(model: Any) -> int | None:
    """The model's vocabulary size (``cfg.d_vocab`` or the HF config's ``vocab_size``); None when it declares none."""
    for owner, name in ((getattr(model, "cfg", None), "d_vocab"), (getattr(model, "config", None), "vocab_size")):
        value = getattr(owner, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def context_length(model: Any) -> int | None:
    """The model's context in tokens (``cfg.n_ctx``, or the HF config's ``max_position_embeddings`` or
    ``n_positions``); None when the model declares none."""
    for owner, name in ((getattr(model, "cfg", None), "n_ctx"), (getattr(model, "config", None), "max_position_embeddings"),
                        (getattr(model, "config", None), "n_positions")):
        value = getattr(owner, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def input_limit(model: Any) -> int | None:
    """The longest input ``model`` can run at all: its ``context_length`` where the family precomputes
    its rotation tables up to the context (GPT-J), None where they are computed per input."""
    kind = model_kind(model)
    if kind == "bridge":
        architecture = type(model.original_model).__name__
    elif kind == "hooked":
        architecture = str(getattr(model.cfg, "original_architecture", ""))
    else:
        architecture = type(model).__name__
    return context_length(model) if family_of(architecture).fixed_context else None


def tokenizer_of(model: Any) -> Any:
    """The tokenizer a TransformerLens model carries (``model.tokenizer``); None for a plain HF model."""
    return getattr(model, "tokenizer", None)


def _keeps_logits(model: Any, kind: str) -> bool:
    """Whether the HF forward under ``model`` takes ``logits_to_keep``."""
    hf = model.original_model if kind == "bridge" else model
    try:
        return "logits_to_keep" in inspect.signature(hf.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return False


def _logits(out: Any) -> Tensor:
    return out.logits if hasattr(out, "logits") else out  # HF output or TransformerLens tensor


def last_logits(model: Any, tokens: Tensor, max_bytes: int) -> Tensor:
    """``[batch, vocab]`` logits after the last token of each row, with at most ``max_bytes`` of fp32 logits.

    Runs ``model(tokens)`` and reads the last position while the batch's full logits fit in
    ``max_bytes``; beyond that computes only the last position's logits: by ``logits_to_keep=1``
    where the Hugging Face forward takes it, on a ``HookedTransformer`` by cutting the residual
    stream to the last position before the unembedding, and otherwise by running fewer rows at once.
    """
    vocab = vocab_size(model)
    rows, positions = tokens.shape
    if vocab is None or rows * positions * vocab * 4 <= max_bytes:
        return _logits(model(tokens))[:, -1]
    kind = model_kind(model)
    if kind == "hooked":
        last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
        return model.run_with_hooks(tokens, fwd_hooks=[(last, lambda resid, hook: resid[:, -1:])])[:, -1]
    if _keeps_logits(model, kind):
        out = model(tokens, logits_to_keep=1) if kind == "bridge" else model(input_ids=tokens, logits_to_keep=1)
        return _logits(out)[:, -1]
    step = max(1, max_bytes // (positions * vocab * 4))
    return torch.cat([_logits(model(tokens[start:start + step]))[:, -1] for start in range(0, rows, step)])


def backend_for(model: Any) -> Backend:
    """Pick the backend for a TransformerLens model (duck-typed; TL 3.9 and 4.x), or for a Hugging
    Face ``PreTrainedModel`` through ``as_bridge``.

    Raises:
        TypeError: ``model`` is not a TransformerBridge, HookedTransformer or PreTrainedModel.
        ValueError: the model does not use RoPE, or uses an attention variant psheads
            cannot decompose exactly.
    """
    if hasattr(model, "original_model") and hasattr(model, "blocks") and hasattr(model, "hooks"):
        return BridgeBackend(model)
    if hasattr(model, "blocks") and hasattr(model, "cfg") and hasattr(model, "hooks"):
        return HookedTransformerBackend(model)
    if isinstance(model, transformers.PreTrainedModel):
        return BridgeBackend(as_bridge(model))
    hint = ""
    if hasattr(model, "config") and hasattr(model, "save_pretrained"):
        hint = " This looks like a wrapped Hugging Face model: pass the transformers.PreTrainedModel it wraps."
    raise TypeError(
        f"psheads needs a TransformerLens model (TransformerBridge or HookedTransformer) or a Hugging Face "
        f"transformers.PreTrainedModel, got {type(model).__name__}.{hint}"
    )
