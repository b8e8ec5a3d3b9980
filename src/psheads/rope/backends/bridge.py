"""The TransformerBridge backend (TransformerLens 3.9 and 4.x) over a Hugging Face model: hook names,
static layer facts read off the Hugging Face attention modules, the rotation tables (the bridge's
cos/sin hooks or the tables each attention receives), the SDPA forward for long inputs, and
``as_bridge``, which boots a bridge over a copy of a Hugging Face model."""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import transformers
from torch import Tensor

from psheads.rope.backends.base import Backend, HookSite, upcast
from psheads.rope.backends.facts import weights_state
from psheads.rope.families import GENERIC, UNSUPPORTED, family_of, family_titles
from psheads.rope.layer import LayerSpec


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
        table = table_cache()
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
        table = table_cache()

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



def table_cache() -> Callable[[Tensor, bool], Tensor]:
    """``table(source, widen)``: ``[pos, rotary_dim]`` from a ``[(batch,) pos, width]`` table (the
    first row, fp32 or wider, each half-width entry repeated for its pair when ``widen``: GPT-J).
    Layers usually share one table tensor per forward: each is converted once (its source is kept
    so that its id cannot be reused while the forward runs)."""
    converted: dict[int, tuple[Tensor, Tensor]] = {}

    def table(source: Tensor, widen: bool) -> Tensor:
        if id(source) not in converted:
            value = upcast(source.reshape(-1, *source.shape[-2:])[0])
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
    state = weights_state(model)
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

