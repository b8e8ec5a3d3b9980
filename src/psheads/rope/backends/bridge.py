"""The TransformerBridge backend (TransformerLens 3.9 and 4.x) over a Hugging Face model: where each
attention layer's pre-rotary q and k and its rotation tables can be read, its static facts (read off
the Hugging Face attention module), the SDPA forward for long inputs, and ``as_bridge``, which boots
a bridge over a copy of a Hugging Face model.

A bridge holds one of three kinds of attention per layer, and each is read its own way:

* *reimplemented* (TransformerLens computes the attention itself and fires ``hook_q`` / ``hook_k`` or
  their QK-normed versions, ``hook_cos`` / ``hook_sin`` and a live ``hook_pattern``): Llama, Qwen,
  Gemma and most others; a layer whose tables never fire does not rotate (NoPE);
* *latent* (DeepSeek's multi-head latent attention): q and k are read from the projections the
  model splits into a rotated and an unrotated part, the rotated part of k shared by every head;
* *wrapped* (TransformerLens runs the Hugging Face attention as it is): q and k are read at the
  projections (or at the norms applied before RoPE), the tables from the ``position_embeddings``
  the attention receives.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import transformers
import transformers.cache_utils
from torch import Tensor

from psheads.rope.backends.base import Backend, HookSite, upcast
from psheads.rope.backends.facts import weights_state
from psheads.rope.backends.key_masks import KeepKeys, hf_masked_keys, scores_hook
from psheads.rope.families import GENERIC, UnsupportedModelError, family_of
from psheads.rope.geometry import Pairing
from psheads.rope.layer import LayerSpec, QueryScale


@functools.cache
def _attention_classes() -> tuple[type, type]:
    """TransformerLens' classes for attention it computes itself, and for latent attention."""
    from transformer_lens.model_bridge.generalized_components.mla_attention import MLAAttentionBridge
    from transformer_lens.model_bridge.generalized_components.position_embedding_hooks_mixin import (
        PositionEmbeddingHooksMixin,
    )

    return PositionEmbeddingHooksMixin, MLAAttentionBridge


def _kind_of(attention: Any) -> str:
    """``"latent"``, ``"reimplemented"`` or ``"wrapped"``: how a bridge's attention module computes."""
    reimplemented, latent = _attention_classes()
    if isinstance(attention, latent):
        return "latent"
    return "reimplemented" if isinstance(attention, reimplemented) else "wrapped"


def _partial_rotary_factor(hf: Any) -> float:
    """The fraction of each head the layer rotates, as its Hugging Face config says (1 by default)."""
    config = getattr(hf, "config", None)
    rope = getattr(config, "rope_parameters", None)
    if not isinstance(rope, dict):
        return float(getattr(config, "partial_rotary_factor", 1.0) or 1.0)
    types = getattr(config, "layer_types", None)
    layer = getattr(hf, "layer_idx", None)
    if types is not None and layer is not None and isinstance(rope.get(types[layer]), dict):
        rope = rope[types[layer]]
    return float(rope.get("partial_rotary_factor", 1.0) or 1.0)


class BridgeBackend(Backend):
    """TransformerLens ``TransformerBridge`` over a Hugging Face model."""

    kind = "TransformerBridge"

    def __init__(self, model: Any) -> None:
        self.family = family_of(type(model.original_model).__name__)
        if self.family.refused:
            raise UnsupportedModelError(
                f"{self.architecture_of(model)} uses {self.family.refused}; psheads cannot decompose its attention "
                "into RoPE planes exactly and refuses it.")
        if not hasattr(model, "blocks"):
            raise UnsupportedModelError(f"This TransformerBridge over {self.architecture_of(model)} has no blocks: "
                                        "psheads reads attention layer by layer and cannot find its layers.")
        super().__init__(model)
        # each attention layer's bridge module and kind, looked up once (a TransformerLens attribute
        # lookup is slow, and the capture asks for them per layer and batch)
        attention = {layer: self.model.blocks[layer]._modules.get("attn") for layer in range(self.n_layers)}
        self._attention = {layer: module for layer, module in attention.items() if module is not None}
        self._kinds = {layer: _kind_of(module) for layer, module in self._attention.items()}
        self._attention_layers = tuple(self._attention)
        if not self._attention_layers:
            raise UnsupportedModelError(f"{self.architecture} has no softmax attention block that TransformerLens "
                                        "exposes: there is no attention head to decompose.")
        for layer in self._attention_layers:
            self._check_supported(layer)

    @staticmethod
    def architecture_of(model: Any) -> str:
        """The Hugging Face class a bridge wraps (``"LlamaForCausalLM"``)."""
        return type(model.original_model).__name__

    @property
    def architecture(self) -> str:
        """The Hugging Face class this bridge wraps."""
        return self.architecture_of(self.model)

    @property
    def attention_layers(self) -> tuple[int, ...]:
        return self._attention_layers

    def weights_owner(self) -> torch.nn.Module:
        return self.model.original_model

    def _attn(self, layer: int) -> Any:
        return self._attention[layer]

    def _hf_attn(self, layer: int) -> Any:
        return self._attn(layer).original_component

    def _kind(self, layer: int) -> str:
        """``"latent"``, ``"reimplemented"`` or ``"wrapped"`` (see the module docstring)."""
        return self._kinds[layer]

    @property
    def max_positions(self) -> int | None:
        """GPT-J's precomputed sinusoid table caps inputs at ``n_ctx``; a sparse-attention indexer
        (GLM-MoE-DSA) at its ``index_topk``; the other families compute their tables per forward
        (dynamic NTK acts beyond ``n_ctx``)."""
        limits = [self.n_ctx] if self.family.fixed_context else []
        limits += [keys for layer in self.attention_layers if (keys := self._selected_keys(layer))]
        return min(limits, default=None)

    @property
    def max_positions_reason(self) -> str:
        if self.family.fixed_context and self.max_positions == self.n_ctx:
            return super().max_positions_reason
        return (f"{self.max_positions} tokens: from there on {self.architecture}'s sparse attention keeps, for each "
                "query, only the keys its indexer selects by content, and which keys a moved key would keep is no "
                "sum of RoPE planes; psheads decomposes it exactly on shorter inputs")

    def _selected_keys(self, layer: int) -> int | None:
        """How many keys a content-selecting indexer keeps per query (GLM-MoE-DSA's ``index_topk``), or None."""
        hf = self._hf_attn(layer)
        return int(hf.config.index_topk) if hasattr(hf, "indexer") and getattr(hf.config, "index_topk", None) else None

    def add_hook_point(self, name: str, hook_point: Any) -> None:
        if name in self.model.hook_dict:
            raise ValueError(f"The model already has a hook point named {name!r}.")
        self.model._hook_registry[name] = hook_point

    def remove_hook_point(self, name: str) -> None:
        self.model._hook_registry.pop(name, None)

    def pattern_is_live(self, layer: int) -> bool:
        """A wrapped attention (GPT-J, …) fires ``hook_pattern`` after the Hugging Face attention has run."""
        return self._kind(layer) != "wrapped"

    def edit_site(self, layer: int) -> torch.nn.Module:
        return self._hf_attn(layer)

    @contextlib.contextmanager
    def masked_keys(self, keep: KeepKeys) -> Iterator[None]:
        """Attention TransformerLens computes itself: ``-inf`` at its pre-softmax ``hook_attn_scores``;
        attention it wraps as it is (GPT-J): the Hugging Face attention's own mask, narrowed."""
        wrapped = {layer: self._hf_attn(layer) for layer in self.attention_layers if self._kind(layer) == "wrapped"}
        hooks = [(self.attention_hook_name(layer, "hook_attn_scores"), scores_hook(layer, keep))
                 for layer in self.attention_layers if layer not in wrapped]
        with hf_masked_keys(wrapped, keep), self.model.hooks(fwd_hooks=hooks):
            yield

    def scores_bytes(self, shape: torch.Size) -> int:
        heads = max(self._head_counts(layer)[0] for layer in self.attention_layers)
        return int(shape[0]) * heads * int(shape[1]) ** 2 * max(4, self.dtype.itemsize)

    def output_site(self, layer: int, d_head: int) -> HookSite:
        hf = self._hf_attn(layer)
        values = getattr(hf, "v_head_dim", None)  # latent attention: values narrower than q and k
        return super().output_site(layer, int(values) if values else d_head)

    # --- static facts ---------------------------------------------------------------------
    def _d_head(self, layer: int) -> int:
        """The width of a q or k head: for latent attention its unrotated plus its rotated part."""
        hf = self._hf_attn(layer)
        if self._kind(layer) == "latent":
            return int(hf.qk_nope_head_dim + hf.qk_rope_head_dim)
        return int(getattr(hf, "head_dim", None) or getattr(hf, "head_size", None) or self.cfg.d_head)

    def _qk_norm_phase(self, layer: int) -> str | None:
        """Where the bridge applies QK-norm before RoPE (``"pre_reshape"``/``"post_reshape"``), or None."""
        if getattr(self.cfg, "qk_norm_after_rope", False):
            return None
        return getattr(self._attn(layer), "_qk_norm_phase", None)

    def _post_rope_norms(self, layer: int) -> tuple[Any, Any] | None:
        """The modules of the RMS norms the model applies to q and k after RoPE, or None."""
        hf = self._hf_attn(layer)
        if getattr(self.cfg, "qk_norm_after_rope", False):  # the bridge says so (HunYuan)
            attn = self._attn(layer)
            return attn.q_norm, attn.k_norm
        names = self.family.norms_after_rope
        if names is None or not all(hasattr(hf, name) for name in names) or not self._rotates(layer):
            return None
        return getattr(hf, names[0]), getattr(hf, names[1])

    def _rotates(self, layer: int) -> bool:
        """Whether the layer applies RoPE at all, where its module says (otherwise: if it receives tables)."""
        hf = self._hf_attn(layer)
        if self.family.rotates is not None:
            return self.family.rotates(hf)
        return bool(getattr(hf, "use_rope", True))  # SmolLM3, Llama 4: 0 or 1 from config.no_rope_layers

    def _pairing(self, layer: int) -> Pairing:
        if self.family.pairing is not None:
            return self.family.pairing
        adjacent = (getattr(self.cfg, "rotary_adjacent_pairs", False)
                    or getattr(self.cfg, "rotary_interleaved_cos_sin", False)
                    or (self._kind(layer) == "latent"
                        and getattr(self._hf_attn(layer).config, "rope_interleave", True)))
        return "adjacent" if adjacent else "halves"

    def _window(self, layer: int) -> int | None:
        """The layer's sliding window: the module's own (EXAONE-4 sets one on every layer and marks the
        sliding ones), else its config's for a sliding layer; 0 means none."""
        hf = self._hf_attn(layer)
        if getattr(hf, "is_sliding", True) is False:
            return None
        if hasattr(hf, "sliding_window"):
            window = hf.sliding_window
        else:
            config = hf.config
            types = getattr(config, "layer_types", None)
            sliding = types is None or types[layer] == "sliding_attention"
            window = getattr(config, "sliding_window", None) if sliding else None
        return int(window) if window else None

    def _chunk(self, layer: int) -> int | None:
        """Llama 4's attention chunk on its chunked layers."""
        config = self._hf_attn(layer).config
        types = getattr(config, "layer_types", None)
        if types is None or types[layer] != "chunked_attention":
            return None
        return int(config.attention_chunk_size)

    def _query_scale(self, layer: int) -> QueryScale | None:
        """A per-position factor on the query: Llama 4's attention temperature on its layers without
        RoPE, or Ministral 3's llama-4 scaling (``rope_parameters["llama_4_scaling_beta"]``)."""
        hf = self._hf_attn(layer)
        if getattr(hf, "attn_temperature_tuning", False) and not self._rotates(layer):
            return QueryScale(float(hf.attn_scale), float(hf.floor_scale), 1)
        rope = getattr(hf.config, "rope_parameters", None)
        if isinstance(rope, dict) and rope.get("llama_4_scaling_beta") is not None:
            return QueryScale(float(rope["llama_4_scaling_beta"]), float(rope["original_max_position_embeddings"]))
        return None

    def _norm_facts(self, layer: int, d_head: int) -> tuple[tuple[float, float] | None, tuple[float, ...] | None]:
        """``(eps of the q and k norms, w_q · w_k)`` of the RMS norms after RoPE, or ``(None, None)``.

        Each norm's per-dimension weight is the one of {1, its parameter, 1 + its parameter} with which
        ``w ⊙ x / rms(x)`` reproduces the model's own norm on a random probe (norms differ in that
        convention); a norm that none reproduces (one that subtracts the mean, mixing the planes) is
        refused.
        """
        norms = self._post_rope_norms(layer)
        if norms is None:
            return None, None
        weights, epsilons = [], []
        for which, norm in zip("qk", norms, strict=True):
            eps = next((float(getattr(norm, name)) for name in ("variance_epsilon", "eps", "epsilon")
                        if isinstance(getattr(norm, name, None), float)), 0.0)
            parameter = next(norm.parameters(), None)
            probe = torch.randn(4, d_head, generator=torch.Generator().manual_seed(0))
            output = norm(probe if parameter is None else probe.to(parameter)).double()
            unit = probe.double() * torch.rsqrt(probe.double().square().mean(-1, keepdim=True) + eps)
            candidates = [torch.ones(d_head, dtype=torch.float64)]
            if parameter is not None and parameter.numel() == d_head:
                candidates += [parameter.detach().double().reshape(-1), 1 + parameter.detach().double().reshape(-1)]
            weight = next((c for c in candidates if torch.allclose(output, c * unit, rtol=1e-4, atol=1e-6)), None)
            if weight is None:
                raise UnsupportedModelError(
                    f"Layer {layer} of {self.architecture} normalises {which} after RoPE with {type(norm).__name__}, "
                    "which is not an RMS norm (it subtracts the mean, mixing the RoPE planes): the logit is then no "
                    "sum of per-plane terms, and psheads cannot decompose it exactly.")
            weights.append(weight)
            epsilons.append(eps)
        product = weights[0] * weights[1]
        query_weight = None if torch.all(product == 1) else tuple(float(w) for w in product)
        return (epsilons[0], epsilons[1]), query_weight

    def _head_counts(self, layer: int) -> tuple[int, int]:
        """``(query heads, key heads)`` of the layer, from its own module where it says (Laguna's vary by
        layer; Falcon's module has no groups, TransformerLens' config has its KV heads)."""
        hf = self._hf_attn(layer)
        n_heads = int(getattr(hf, "num_heads", None) or self.cfg.n_heads)
        groups = getattr(hf, "num_key_value_groups", None)
        if self._kind(layer) == "latent":
            return n_heads, n_heads  # each head has its own unrotated key; the rotated part is shared
        if groups:
            return n_heads, n_heads // int(groups)
        return n_heads, int(getattr(self.cfg, "n_key_value_heads", None) or n_heads)

    def layer_spec(self, layer: int) -> LayerSpec:
        hf = self._hf_attn(layer)
        d_head = self._d_head(layer)
        n_heads, n_kv = self._head_counts(layer)
        scale = next((getattr(hf, name) for name in ("scaling", "softmax_scale")
                      if getattr(hf, name, None) is not None), d_head**-0.5)
        softcap = getattr(hf, "attn_logit_softcapping", None)
        sinks = getattr(hf, "sinks", None)
        norm_eps, query_weight = self._norm_facts(layer, d_head)
        return LayerSpec(
            n_heads=n_heads,
            n_kv_heads=n_kv,
            d_head=d_head,
            pairing=self._pairing(layer),
            scale=float(scale),
            softcap=float(softcap) if softcap is not None else None,
            window=self._window(layer),
            chunk=self._chunk(layer),
            sinks=tuple(float(x) for x in sinks.detach().reshape(-1).tolist()) if sinks is not None else None,
            norm_eps=norm_eps,
            query_weight=query_weight,
            query_scale=self._query_scale(layer),
        )

    def _check_supported(self, layer: int) -> None:
        attn = self._attn(layer)
        if self.family is not GENERIC and self.family.qk_norm != (self._qk_site_norm(layer) is not None):
            raise UnsupportedModelError(
                f"Layer {layer} of {self.architecture} has {'no ' if self.family.qk_norm else ''}QK-norm, unlike the "
                f"{self.family.title} family psheads knows (bridge attention: {type(attn).__name__}): psheads would "
                "read q and k at the wrong place.")
        if self._kind(layer) == "latent" and getattr(self._hf_attn(layer), "kv_lora_rank", None) is None:
            raise UnsupportedModelError(f"Layer {layer} of {self.architecture}: latent attention without a "
                                        "kv_lora_rank, whose keys psheads cannot locate.")
        self.layer_spec(layer)  # a norm after RoPE that psheads cannot fold is refused here

    # --- where q, k and the tables are read -------------------------------------------------
    def _qk_site_norm(self, layer: int) -> str | None:
        """The name of the bridge's q-norm submodule whose output is q (a QK-norm before RoPE), or None."""
        if self._kind(layer) == "reimplemented":
            return "hook_q_normed" if self._qk_norm_phase(layer) is not None else None
        if self._kind(layer) == "wrapped" and self._post_rope_norms(layer) is None \
                and getattr(self._attn(layer), "q_norm", None) is not None:
            return "q_norm"
        return None

    def qk_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        prefix, d_head = f"blocks.{layer}.attn", self._d_head(layer)
        kind = self._kind(layer)
        if kind == "latent":
            return self._latent_sites(layer, which)
        if kind == "reimplemented":
            phase = self._qk_norm_phase(layer)
            if phase is not None:
                layout = "bhsd" if phase == "post_reshape" else "bshd"
                return (HookSite(f"{prefix}.hook_{which}_normed", layout, d_head),)
            multiplier = getattr(self._hf_attn(layer), "key_multiplier", None) if which == "k" else None
            if multiplier is not None:  # Falcon-H1: the name hook_k resolves to the unscaled projection
                return (HookSite(f"{prefix}.k.hook_out", "bshd", d_head, factor=float(multiplier)),)
            return (HookSite(f"{prefix}.hook_{which}", "bshd", d_head),)
        if self._qk_site_norm(layer) is not None:  # a norm before RoPE inside the Hugging Face attention
            return self.sdpa_sites(layer, which)
        return (HookSite(f"{prefix}.hook_{which}", "bshd", d_head),)

    def _latent_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        """Latent attention: q from its (up-)projection, k from the rotated part of the joint
        projection (one head, shared) and the unrotated part of the key/value up-projection; the
        rotated dims first."""
        hf, prefix = self._hf_attn(layer), f"blocks.{layer}.attn"
        nope, rope = int(hf.qk_nope_head_dim), int(hf.qk_rope_head_dim)
        if which == "q":
            name = "q_b_proj" if getattr(hf, "q_lora_rank", None) is not None else "q_proj"
            dims = (*range(nope, nope + rope), *range(nope))
            return (HookSite(f"{prefix}.{name}.hook_out", "bshd", nope + rope, dims=dims),)
        latent, values = int(hf.kv_lora_rank), int(hf.v_head_dim)
        heads = self._head_counts(layer)[0]
        return (HookSite(f"{prefix}.kv_a_proj_with_mqa.hook_out", "bshd", latent + rope,
                         dims=tuple(range(latent, latent + rope)), shared=heads),
                HookSite(f"{prefix}.kv_b_proj.hook_out", "bshd", nope + values, dims=tuple(range(nope))))

    def rotation_optional(self, layer: int) -> bool:
        """A layer that received no tables did not rotate (the self-check holds that reading to the
        model's pattern)."""
        return True

    def _table_layout(self, layer: int) -> str:
        """How the tables the layer receives become per-dimension ones: ``"first_half_pairs"`` (a halves
        table whose first half the model repeats for adjacent pairs: GLM, ERNIE, interleaved latent
        attention), the family's own layout, or ``"as_is"`` (widened at run time where the model
        duplicates a half-width table itself, as gpt-oss's does)."""
        if self.family.table_layout != "auto":
            return self.family.table_layout
        interleaved = self._kind(layer) == "latent" and self._pairing(layer) == "adjacent"
        return "first_half_pairs" if getattr(self.cfg, "rotary_adjacent_pairs", False) or interleaved else "as_is"

    def _converter(self, layer: int) -> Callable[[Any], tuple[Tensor, Tensor] | None]:
        """``convert(source)``: the ``(cos, sin)`` per-dimension tables ``[pos, rotary_dim]`` of a layer
        from what the model rotates with (a ``(cos, sin)`` pair, GPT-J's ``(sin, cos)``, or a complex
        table); None when the layer does not rotate."""
        layout, d_head = self._table_layout(layer), self._d_head(layer)
        doubled = (layout == "as_is" and self._kind(layer) != "latent"
                   and _partial_rotary_factor(self._hf_attn(layer)) == 1)
        rotates = self._rotates(layer)

        def first_row(x: Tensor) -> Tensor:
            return upcast(x.reshape(-1, *x.shape[-2:])[0])

        def convert(source: Any) -> tuple[Tensor, Tensor] | None:
            if source is None or not rotates:
                return None
            if isinstance(source, Tensor) and source.is_complex():  # Llama 4, DeepSeek V2: adjacent pairs
                table = first_row(source)
                return table.real.repeat_interleave(2, -1), table.imag.repeat_interleave(2, -1)
            cos, sin = (first_row(x) for x in source)
            if layout == "sin_first_pairs":
                return sin.repeat_interleave(2, -1), cos.repeat_interleave(2, -1)
            if layout == "first_half_pairs":
                half = cos.shape[-1] // 2
                return cos[:, :half].repeat_interleave(2, -1), sin[:, :half].repeat_interleave(2, -1)
            if layout == "negated_sin":
                return cos, -sin
            if doubled and 2 * cos.shape[-1] == d_head:  # gpt-oss: half-width tables the model duplicates
                return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
            return cos, sin

        return convert

    def _table_source(self, layer: int) -> str:
        """``"hooks"`` (the bridge's hook_cos / hook_sin, where it computes the attention itself),
        ``"bridge"`` or ``"attention"`` (the ``position_embeddings`` the bridge's attention receives, for
        latent attention, or the wrapped Hugging Face attention does)."""
        return {"wrapped": "attention", "latent": "bridge", "reimplemented": "hooks"}[self._kind(layer)]

    def _store_tables(self, layer: int, store: dict, converted: dict) -> Callable[[Any], None]:
        """``record(source)``: the layer's per-dimension tables from what it rotates with, into ``store``.

        Layers usually share one table per forward: each source is converted once per layout
        (``converted`` keeps the source too, so that its id cannot be reused while the forward runs).
        """
        convert, layout = self._converter(layer), (self._table_layout(layer), self._rotates(layer))

        def record(source: Any) -> None:
            key = (id(source[0] if isinstance(source, tuple) else source), layout)
            if key not in converted:
                converted[key] = (source, convert(source))
            tables = converted[key][1]
            if tables is not None:
                store[layer] = {"cos": tables[0], "sin": tables[1]}

        return record

    def _kwargs_recorder(self, layer: int, store: dict, converted: dict) -> Callable:
        """A forward pre-hook (with kwargs) that records the ``position_embeddings`` an attention module
        of ``layer`` receives."""
        record = self._store_tables(layer, store, converted)

        def pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
            if "position_embeddings" not in kwargs:
                raise ValueError(f"The attention of layer {layer} ({type(module).__name__}) takes no rotary tables "
                                 "(position_embeddings): GPT-J computes them inside its attention before "
                                 "transformers 5.24. Upgrade: pip install 'transformers>=5.24'.")
            record(kwargs["position_embeddings"])

        return pre_hook

    @contextlib.contextmanager
    def table_recorder(self, layers: Sequence[int], store: dict) -> Iterator[list]:
        hooks, handles = [], []
        converted: dict[tuple, tuple] = {}

        def tl_recorder(layer: int) -> Callable:
            record, seen = self._store_tables(layer, store, converted), {}

            def hook(tensor: Tensor, hook: Any) -> None:
                seen[hook.name.rsplit("_", 1)[-1]] = tensor
                if len(seen) == 2:
                    record((seen.pop("cos"), seen.pop("sin")))

            return hook

        try:
            for layer in layers:
                source = self._table_source(layer)
                if source == "hooks":
                    recorder = tl_recorder(layer)
                    hooks += [(f"blocks.{layer}.attn.hook_cos", recorder), (f"blocks.{layer}.attn.hook_sin", recorder)]
                else:
                    module = self._attn(layer) if source == "bridge" else self._hf_attn(layer)
                    handles.append(module.register_forward_pre_hook(self._kwargs_recorder(layer, store, converted),
                                                                    with_kwargs=True))
            yield hooks
        finally:
            for handle in handles:
                handle.remove()

    # --- the SDPA capture (long prompts) ----------------------------------------------------
    def sdpa_ready(self, layers: Sequence[int]) -> bool:
        """Every attention layer up to the last in ``layers`` has its Hugging Face attention, no
        soft-cap or sinks (SDPA has neither), q and k each read at one site that the Hugging Face
        attention calls itself, and a parent block to put it back in."""
        for layer in (layer for layer in self.attention_layers if layer <= max(layers)):
            attn, spec = self._attn(layer), self.layer_spec(layer)
            if (getattr(attn, "original_component", None) is None or spec.softcap is not None or spec.sinks is not None
                    or self._attention_slot(layer) is None or self._kind(layer) == "latent"):
                return False
            # the modules whose hooks give q and k must be called by Hugging Face's attention itself
            # (not so for a fused query_key_value, which only the bridge splits)
            names = ("q_norm", "k_norm") if self._qk_site_norm(layer) is not None else ("q", "k")
            children = list(attn.original_component.children())
            if not all(any(child is getattr(attn, name, None) for child in children) for name in names):
                return False
        return True

    def _attention_slot(self, layer: int) -> str | None:
        """The attribute of the Hugging Face block that holds the bridge's attention."""
        block = getattr(self.model.blocks[layer], "original_component", None)
        attn = self._attn(layer)
        return next((name for name, child in block.named_children() if child is attn), None) if block else None

    def sdpa_sites(self, layer: int, which: str) -> tuple[HookSite, ...]:
        """Hugging Face's attention calls the bridge's projections (``hook_q``/``hook_k`` fire, as
        ``[batch, pos, head · d_head]``); with QK-norm, the norm's own output, whose layout follows the
        model's code (``"auto"``: read from its shape)."""
        d_head = self._d_head(layer)
        if self._qk_site_norm(layer) is not None:
            heads = self._head_counts(layer)[0 if which == "q" else 1]
            return (HookSite(f"blocks.{layer}.attn.{which}_norm.hook_out", "auto", d_head, heads=heads),)
        return (HookSite(f"blocks.{layer}.attn.hook_{which}", "bshd", d_head),)

    @contextlib.contextmanager
    def sdpa_forward(self) -> Iterator[None]:
        """Each block's Hugging Face attention back in its place and every config on ``"sdpa"``,
        for this block only (the bridge's own eager attention forms every [query, key] score)."""
        swapped: list[tuple[Any, str, Any]] = []
        configs: dict[int, tuple[Any, str]] = {}
        try:
            for layer in self.attention_layers:
                slot = self._attention_slot(layer)
                if slot is None:
                    continue
                block = self.model.blocks[layer].original_component
                setattr(block, slot, self._hf_attn(layer))
                swapped.append((block, slot, self._attn(layer)))
            for config in (self.model.original_model.config,
                           *(self._hf_attn(layer).config for layer in self.attention_layers)):
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
        handles: list[torch.utils.hooks.RemovableHandle] = []
        converted: dict[tuple, tuple] = {}
        try:
            for layer in layers:
                handles.append(self._hf_attn(layer).register_forward_pre_hook(
                    self._kwargs_recorder(layer, store, converted), with_kwargs=True))
            yield []
        finally:
            for handle in handles:
                handle.remove()

    # --- the Hugging Face attention's own pattern -------------------------------------------
    @contextlib.contextmanager
    def reference_recorder(self, layers: Sequence[int], store: dict) -> Iterator[None]:
        """While active, each forward also runs the Hugging Face attention of every layer in ``layers``
        that the bridge computes itself, on the very inputs the bridge's attention receives, and
        stores its eager pattern ``[batch, head, query, key]`` in ``store[layer]``: what the model
        computes, to compare the bridge's own pattern with."""
        handles = []

        def pre_hook(layer: int) -> Callable:
            hf = self._hf_attn(layer)

            def hook(module: Any, args: tuple, kwargs: dict) -> None:
                config = hf.config
                # no key/value cache: the bridge's own attention appends to it right after
                kwargs = {name: value for name, value in kwargs.items()
                          if not isinstance(value, transformers.cache_utils.Cache)}
                implementation, config._attn_implementation = config._attn_implementation, "eager"
                try:
                    output = hf(*args, **kwargs)
                finally:
                    config._attn_implementation = implementation
                weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
                if isinstance(weights, Tensor) and weights.dim() == 4:
                    store[layer] = upcast(weights)

            return hook

        try:
            for layer in layers:
                if self._kind(layer) != "wrapped":
                    handles.append(self._attn(layer).register_forward_pre_hook(pre_hook(layer), with_kwargs=True))
            yield
        finally:
            for handle in handles:
                handle.remove()


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
                         "from_config?); pass it: psheads.rope.backends.as_bridge(model, tokenizer=tokenizer), and "
                         "pass the bridge to psheads.")
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

