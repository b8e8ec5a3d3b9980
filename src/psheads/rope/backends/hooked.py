"""The HookedTransformer backend (TransformerLens 3.x): hook names, static layer facts and the
rotation tables, which are the attention modules' buffers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from psheads.rope.backends.base import Backend, HookSite, upcast
from psheads.rope.families import HOOKED_UNSUPPORTED, family_of
from psheads.rope.layer import LayerSpec


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

    def qk_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        return (HookSite(f"blocks.{layer}.attn.hook_{which}", "bshd", int(self.cfg.d_head)),)

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
                store[layer] = {"cos": upcast(attn.rotary_cos[:n_pos]), "sin": upcast(attn.rotary_sin[:n_pos])}

            return hook

        yield [(f"blocks.{layer}.attn.hook_rot_k", recorder(layer)) for layer in layers]

    def forward(self, tokens: Tensor) -> None:
        # an explicit all-ones mask: positions 0…N−1 even if the tokenizer pads on the left
        self.model(tokens, attention_mask=torch.ones_like(tokens))

