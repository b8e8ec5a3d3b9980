"""Backends: the only code that knows TransformerBridge vs HookedTransformer, and the one place that
touches TransformerLens (and torch) internals.

A backend answers two questions for a layer: *what are its static attention facts* (heads,
scale, soft-cap, window, pairing: a ``LayerSpec``) and *what were q, k̃ and the rotation tables
on this input* (one forward pass with targeted hooks; nothing else is cached). What differs
between architecture families is data in ``psheads.rope.families``; the facts used are listed in the
docs' decomposition page, and the lens self-check guards them.

One module per role: ``base`` (the capture every backend shares), ``hooked`` and ``bridge`` (one
per kind of model), ``facts`` (what the measurements and experiments read about any model), ``key_masks`` (keys hidden
from chosen heads in the model's own forward, and the attention shape a head map describes); this
face picks the backend for a model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import transformers

from psheads.rope.backends.base import Backend, HookSite
from psheads.rope.backends.bridge import BridgeBackend, as_bridge
from psheads.rope.backends.facts import model_kind
from psheads.rope.backends.hooked import HookedTransformerBackend
from psheads.rope.backends.key_masks import (
    AttentionShape,
    KeepKeys,
    hf_attention_modules,
    hf_attention_shape,
    hf_masked_keys,
    short_name,
)

__all__ = ["AttentionShape", "Backend", "BridgeBackend", "HookSite", "HookedTransformerBackend", "KeepKeys",
           "as_bridge", "attention_shape", "backend_for", "masked_keys", "short_name"]


def backend_for(model: Any) -> Backend:
    """Pick the backend for a TransformerLens model (duck-typed; TL 3.9 and 4.x), or for a Hugging
    Face ``PreTrainedModel`` through ``as_bridge``.

    Raises:
        TypeError: ``model`` is not a TransformerBridge, HookedTransformer or PreTrainedModel.
        ValueError: the model does not use RoPE.
        UnsupportedModelError: it uses an attention variant psheads cannot decompose exactly (a
            ``ValueError``).
    """
    if hasattr(model, "original_model") and hasattr(model, "hooks"):  # a bridge (some have no blocks: refused)
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


def _plain_hf(model: Any) -> transformers.PreTrainedModel:
    """``model`` itself when it is a plain Hugging Face model (not a TransformerLens one)."""
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(f"psheads needs a TransformerLens model or a Hugging Face transformers.PreTrainedModel, got "
                        f"{type(model).__name__}.")
    return model


def attention_shape(model: Any) -> AttentionShape:
    """The attention shape of a TransformerLens model or a Hugging Face ``PreTrainedModel`` (read off the
    model itself: a Hugging Face model is not bridged).

    Raises:
        TypeError: neither kind of model.
        ValueError: its attention layers differ in shape (a head map is a rectangle), or none can be found.
    """
    if model_kind(model) == "hf":  # one config: every layer has its shape
        return hf_attention_shape(_plain_hf(model))
    backend = backend_for(model)
    specs = [backend.layer_spec(layer) for layer in backend.attention_layers]
    shapes = {(spec.n_heads, spec.n_kv_heads, spec.d_head) for spec in specs}
    if len(shapes) != 1:
        raise ValueError(f"{backend.architecture} has attention layers of different shapes (heads, KV heads, head "
                         f"width: {sorted(shapes)}); a head map is a rectangle of layers × heads, so psheads maps only "
                         "models whose attention layers all have the same shape.")
    first = specs[0]
    return AttentionShape(str(short_name(backend.model_name)), backend.architecture, backend.attention_layers,
                          first.n_heads, first.n_kv_heads, first.d_head, tuple(spec.window for spec in specs))


@contextlib.contextmanager
def masked_keys(model: Any, keep: KeepKeys) -> Iterator[None]:
    """While active, ``model``'s forward hides from each head the keys ``keep`` hides
    (``psheads.rope.backends.key_masks``).

    Args:
        model: a TransformerLens model (TransformerBridge, HookedTransformer) or a Hugging Face
            ``PreTrainedModel`` running SDPA or eager attention.
        keep: per layer, the keys each head may see (``KeepKeys``).

    Raises:
        TypeError: not a model of those kinds.
        ValueError: a Hugging Face attention that is neither SDPA nor eager.
    """
    if model_kind(model) == "hf":
        with hf_masked_keys(hf_attention_modules(_plain_hf(model)), keep):
            yield
        return
    with backend_for(model).masked_keys(keep):
        yield
