"""Backends: the only code that knows TransformerBridge vs HookedTransformer, and the one place that
touches TransformerLens (and torch) internals.

A backend answers two questions for a layer: *what are its static attention facts* (heads,
scale, soft-cap, window, pairing: a ``LayerSpec``) and *what were q, k̃ and the rotation tables
on this input* (one forward pass with targeted hooks; nothing else is cached). What differs
between architecture families is data in ``psheads.rope.families``; the facts used are listed in the
docs' decomposition page, and the lens self-check guards them.

One module per role: ``base`` (the capture every backend shares), ``hooked`` and ``bridge`` (one
per kind of model), ``facts`` (what the measurements and experiments read about any model); this
face picks the backend for a model.
"""

from __future__ import annotations

from typing import Any

import transformers

from psheads.rope.backends.base import Backend, HookSite
from psheads.rope.backends.bridge import BridgeBackend, as_bridge
from psheads.rope.backends.hooked import HookedTransformerBackend

__all__ = ["Backend", "BridgeBackend", "HookSite", "HookedTransformerBackend", "as_bridge", "backend_for"]


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
