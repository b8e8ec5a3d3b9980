"""Keys hidden from chosen heads inside a model's own forward, and the attention shape a head map
describes, for TransformerLens models and plain Hugging Face models alike.

``masked_keys(model, keep)`` runs the model's own attention with extra keys masked per layer and
head, on top of its causal (and sliding-window) mask: ``keep(layer, query_positions, key_positions)``
returns which keys each head may see (``[head or 1, query, key]``, True: visible) or None to leave
the layer alone. Three routes, one rule:

* a Hugging Face attention module (a ``PreTrainedModel``, or the attention a TransformerBridge wraps
  as it is, GPT-J's): a pre-hook narrows its ``attention_mask`` argument per head (boolean for SDPA,
  additive for eager attention), so SDPA stays SDPA;
* TransformerLens' own attention (a HookedTransformer, the bridge's reimplemented attention): the
  pre-softmax ``hook_attn_scores``, already causal, gets ``-inf`` at the hidden keys.

A layer ``keep`` leaves alone, or whose mask hides nothing the model would have shown, runs
untouched, bit for bit. Positions are absolute token indices (an unpadded or right-padded batch: a
left-padded one is refused); the queries are the last positions of the keys seen so far (prefill,
or decoding with a dynamic cache; a static cache is refused).
Every hook is removed on exit, also on error; the model is never changed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from jaxtyping import Bool, Int
from torch import Tensor

KeepKeys = Callable[[int, Tensor, Tensor], Tensor | None]
"""``keep(layer, query_positions [q], key_positions [k])`` → ``Bool[head or 1, q, k]`` (True: the head
may see the key) or None (the layer runs as it is)."""

MASKED_IMPLEMENTATIONS = ("sdpa", "eager")
"""Hugging Face attention implementations whose ``attention_mask`` argument ``masked_keys`` can narrow."""


@dataclass(frozen=True)
class AttentionShape:
    """What a per-head map of a model must match: its identity and its attention heads.

    Attributes:
        name: the model's name (the last part of its Hugging Face ``name_or_path`` or TransformerLens
            ``model_name``: a local folder's name, not its full path).
        architecture: the Hugging Face class it is or wraps (``"Qwen2ForCausalLM"``).
        layers: the attention layers, in order.
        n_heads: query heads per layer.
        n_kv_heads: key/value heads per layer (GQA: query head h reads KV head
            ``h // (n_heads // n_kv_heads)``).
        d_head: key (and value) width per head.
        windows: per attention layer, the model's own sliding window (keys kept per head), or None.
    """

    name: str
    architecture: str
    layers: tuple[int, ...]
    n_heads: int
    n_kv_heads: int
    d_head: int
    windows: tuple[int | None, ...]

    @property
    def kv_head_of(self) -> tuple[int, ...]:
        """The KV head each query head reads (``repeat_interleave``: consecutive query heads share one)."""
        group = self.n_heads // self.n_kv_heads
        return tuple(head // group for head in range(self.n_heads))


def short_name(name: object) -> str | None:
    """A model's name without its folder (``"/cache/qwen2.5-…-1d96"`` → ``"qwen2.5-…-1d96"``); None stays None."""
    if name is None:
        return None
    text = str(name)
    return Path(text).name or text


def hf_attention_modules(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """The attention modules of a Hugging Face model by layer index (each ``*Attention`` with a ``layer_idx``).

    Raises:
        ValueError: none found, or two share a layer index.
    """
    found: dict[int, torch.nn.Module] = {}
    for module in model.modules():
        layer = getattr(module, "layer_idx", None)
        if type(module).__name__.endswith("Attention") and isinstance(layer, int) and hasattr(module, "config"):
            if layer in found:
                raise ValueError(f"{type(model).__name__} has two attention modules for layer {layer}; psheads "
                                 "cannot tell which one to mask.")
            found[layer] = module
    if not found:
        raise ValueError(f"{type(model).__name__} has no attention module with a layer_idx (a Hugging Face "
                         "*Attention module): psheads cannot mask its keys.")
    return dict(sorted(found.items()))


def hf_attention_shape(model: transformers.PreTrainedModel) -> AttentionShape:
    """The attention shape of a Hugging Face ``PreTrainedModel`` (``attention_shape`` for any model).

    Raises:
        ValueError: its attention layers cannot be found.
    """
    modules = hf_attention_modules(model)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0))
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    d_head = int(getattr(config, "head_dim", None) or int(getattr(config, "hidden_size", 0)) // max(heads, 1))
    windows = tuple(int(window) if isinstance(window := getattr(module, "sliding_window", None), int) else None
                    for module in modules.values())
    return AttentionShape(str(short_name(getattr(model, "name_or_path", ""))), type(model).__name__, tuple(modules),
                          heads, kv_heads, d_head, windows)


# --- the Hugging Face route: narrow the attention_mask argument ----------------------------------------
def _implementation(module: torch.nn.Module) -> str:
    return str(getattr(module.config, "_attn_implementation", None) or "eager")


def check_maskable(modules: dict[int, torch.nn.Module]) -> None:
    """Raise ``ValueError`` unless every module runs an attention whose mask argument can be narrowed."""
    other = sorted({_implementation(module) for module in modules.values()} - set(MASKED_IMPLEMENTATIONS))
    if other:
        raise ValueError(f"psheads masks keys through the attention_mask of SDPA or eager attention, and this model "
                         f"runs {other}: load it with attn_implementation='sdpa' (or call "
                         "model.set_attn_implementation('sdpa')) first.")


def narrowed_mask(mask: Tensor | None, keep: Bool[Tensor, "head query key"], query_positions: Int[Tensor, " query"],
                  key_positions: Int[Tensor, " key"], boolean: bool, dtype: torch.dtype) -> Tensor:
    """The model's ``attention_mask`` with the keys ``keep`` hides masked too: ``[batch or 1, head, query, key]``.

    ``mask`` is the model's own (None: causal, as SDPA's ``is_causal``; boolean: True visible;
    additive: 0 visible). ``boolean`` says which kind to build when ``mask`` is None.
    """
    if mask is None:
        causal = key_positions[None, :] <= query_positions[:, None]
        if boolean:
            mask = causal[None, None]
        else:
            mask = torch.zeros(causal.shape, dtype=dtype, device=keep.device).masked_fill(
                ~causal, torch.finfo(dtype).min)[None, None]
    mask = mask[..., : keep.shape[-1]]
    if mask.dtype == torch.bool:
        return mask & keep[None]
    return mask.masked_fill(~keep[None], torch.finfo(mask.dtype).min)


def hides_something(keep: Bool[Tensor, "head query key"], query_positions: Int[Tensor, " query"],
                    key_positions: Int[Tensor, " key"]) -> bool:
    """Whether ``keep`` hides a key the causal mask would show (else the layer can run untouched)."""
    causal = key_positions[None, :] <= query_positions[:, None]
    return bool((causal[None] & ~keep).any())


def check_unpadded_left(module: torch.nn.Module, mask: Tensor | None, query_positions: Tensor,
                        key_positions: Tensor) -> None:
    """Raise ``ValueError`` when the model's mask hides the first token from a query that should see it:
    a left-padded batch, whose positions are not the token indices the windows count."""
    if mask is None or int(key_positions[0]) != 0:
        return
    own = getattr(module, "sliding_window", None)
    rows = query_positions < own if isinstance(own, int) else torch.ones_like(query_positions, dtype=torch.bool)
    first = mask[..., 0] if mask.dtype == torch.bool else mask[..., 0] == 0  # [batch, 1 or head, query]
    if rows.any() and not bool(first[..., rows.to(first.device)].all()):
        raise ValueError("This batch is left-padded: psheads counts a window's sink and recent tokens from the first "
                         "column, so padded rows would keep pads and lose tokens. Pad on the right, or run one "
                         "prompt at a time.")


def _positions(layer: int, kwargs: dict, n_query: int, mask: Tensor | None,
               device: torch.device) -> tuple[int, Tensor, Tensor]:
    """``(past, query positions, key positions)`` of one attention call, from its cache and mask.

    Raises:
        ValueError: a cache whose keys are not the last positions seen (a static cache's mask has a
            column for every slot it can hold).
    """
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    past = int(cache.get_seq_length(layer)) if cache is not None and hasattr(cache, "get_seq_length") else 0
    seen = past + n_query
    n_keys = int(mask.shape[-1]) if isinstance(mask, Tensor) else seen
    if n_keys > seen or getattr(cache, "is_compileable", False):
        raise ValueError(f"Layer {layer}: the attention has {n_keys} key slots for {seen} tokens seen (a static or "
                         "preallocated cache); psheads windows heads with a dynamic cache (the default) or none.")
    return past, torch.arange(past, seen, device=device), torch.arange(seen - n_keys, seen, device=device)


def hf_mask_hook(layer: int, keep: KeepKeys, decoding_only: bool = False) -> Callable:
    """A ``register_forward_pre_hook(..., with_kwargs=True)`` hook narrowing a Hugging Face attention's mask
    (with ``decoding_only``, only in calls that extend a cache: the prefill is computed elsewhere)."""

    def pre_hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        if hidden is None:
            raise ValueError(f"Layer {layer}: the attention received no hidden_states, so psheads cannot mask it.")
        mask = kwargs.get("attention_mask")
        device = hidden.device
        past, query_positions, key_positions = _positions(layer, kwargs, int(hidden.shape[1]), mask, device)
        if decoding_only and past == 0:
            return None
        check_unpadded_left(module, mask, query_positions, key_positions)
        visible = keep(layer, query_positions, key_positions)
        if visible is None or not hides_something(visible, query_positions, key_positions):
            return None
        boolean = _implementation(module) == "sdpa"
        narrowed = narrowed_mask(mask, visible.to(device), query_positions, key_positions, boolean, hidden.dtype)
        return args, {**kwargs, "attention_mask": narrowed}

    return pre_hook


@contextlib.contextmanager
def hf_masked_keys(modules: dict[int, torch.nn.Module], keep: KeepKeys, decoding_only: bool = False) -> Iterator[None]:
    """``masked_keys`` on Hugging Face attention modules (by layer); with ``decoding_only``, only in the
    calls that extend a cache."""
    check_maskable(modules)
    handles = []
    try:
        for layer, module in modules.items():
            handles.append(module.register_forward_pre_hook(hf_mask_hook(layer, keep, decoding_only),
                                                            with_kwargs=True))
        yield
    finally:
        for handle in handles:
            handle.remove()


def scores_hook(layer: int, keep: KeepKeys) -> Callable:
    """A TransformerLens hook on pre-softmax scores ``[batch, head, query, key]`` (already causal) hiding
    the keys ``keep`` hides."""

    def hook(scores: Tensor, hook: Any) -> Tensor | None:
        n_query, n_keys = int(scores.shape[-2]), int(scores.shape[-1])
        key_positions = torch.arange(n_keys, device=scores.device)
        query_positions = key_positions[n_keys - n_query:]
        visible = keep(layer, query_positions, key_positions)
        if visible is None or not hides_something(visible, query_positions, key_positions):
            return None
        return scores.masked_fill(~visible.to(scores.device)[None], float("-inf"))

    return hook
