"""Architecture families as data: one small record per family, read by ``psheads.rope.backends``.

A record says what cannot be read off a model reliably (TransformerBridge's config reports wrong
RoPE facts for some families; see the decomposition docs): how dims pair into planes, where the
rotation tables can be captured, whether the model's attention pattern can be replaced in place,
whether its tables stop at ``n_ctx``, where its sliding window is configured, and which features
it has. Values the model computes with (scale, soft-cap, window size, head counts) are read from
the model itself by the backend. Attention variants psheads cannot decompose exactly are listed
once, in ``UNSUPPORTED``.

Every list of families, in the code, the tests and the docs, is derived from ``FAMILIES``. To
support a new family: add a record here and a tiny look-alike to ``tests/helpers.py``; the
self-check, the consistency tests and the generated docs table do the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from psheads.rope.geometry import Pairing

TableSource = Literal["cos_sin_hooks", "position_embeddings"]
WindowSource = Literal["module", "config"]


@dataclass(frozen=True)
class Family:
    """How psheads reads one architecture family.

    Attributes:
        name: short name (``"gptj"``, ``"llama"``, …).
        architectures: Hugging Face model classes (``type(bridge.original_model).__name__``), which
            are also HookedTransformer's ``cfg.original_architecture``.
        pairing: how head dims pair into planes (``"adjacent"`` for GPT-J, ``"halves"`` otherwise).
        tables: where a TransformerBridge exposes the rotation tables: its ``hook_cos`` /
            ``hook_sin`` hooks, or (GPT-J, whose bridge never fires them) the ``position_embeddings``
            argument of the HF attention module.
        live_pattern: a tensor returned at the bridge's ``hook_pattern`` feeds the layer's output
            (False for GPT-J, whose bridge fires the hook after the HF attention has run).
        fixed_context: rotation tables are precomputed up to ``n_ctx``, so inputs are capped there.
        window: where a sliding window is configured: on each attention module (None on global
            layers), in the model config for every layer, or nowhere (None).
        softcap: attention logits are soft-capped (``attn_logit_softcapping``).
        qk_norm: q and k are normalised before RoPE; they are read after the norm.
        features: what the family exercises, for the docs' generated family table (GQA, …).
        title: the family's name for people (``"GPT-NeoX / Pythia"``).
        hooked: TransformerLens 3.x builds it as a ``HookedTransformer`` from a local directory
            (psheads' zoo does, and the tests run it on both backends).
        sdpa: its Hugging Face attention runs as SDPA, so long inputs are captured without forming
            any [query, key] score (not with a fused ``query_key_value`` that only the bridge
            splits, nor with soft-capping, which SDPA lacks).
    """

    name: str
    architectures: tuple[str, ...]
    title: str = ""
    pairing: Pairing = "halves"
    tables: TableSource = "cos_sin_hooks"
    live_pattern: bool = True
    fixed_context: bool = False
    window: WindowSource | None = None
    softcap: bool = False
    qk_norm: bool = False
    features: tuple[str, ...] = ()
    hooked: bool = False
    sdpa: bool = True


FAMILIES: tuple[Family, ...] = (
    Family("gptj", ("GPTJForCausalLM",), "GPT-J", pairing="adjacent", tables="position_embeddings",
           live_pattern=False, fixed_context=True, features=("adjacent pairs", "partial rotary"), hooked=True),
    Family("neox", ("GPTNeoXForCausalLM",), "GPT-NeoX / Pythia", features=("partial rotary",), hooked=True,
           sdpa=False),
    Family("llama", ("LlamaForCausalLM",), "Llama", features=("GQA", "llama3 / YaRN / linear / dynamic-NTK scaling"),
           hooked=True),
    Family("mistral", ("MistralForCausalLM",), "Mistral", window="config", features=("GQA", "sliding window"),
           hooked=True),
    Family("qwen2", ("Qwen2ForCausalLM",), "Qwen2", window="module", features=("GQA", "q/k biases"), hooked=True),
    Family("gemma", ("GemmaForCausalLM",), "Gemma", features=("MQA",), hooked=True),
    Family("gemma2", ("Gemma2ForCausalLM",), "Gemma 2", window="module", softcap=True,
           features=("GQA", "query_pre_attn_scalar", "soft-cap", "local/global layers"), hooked=True, sdpa=False),
    Family("gemma3", ("Gemma3ForCausalLM",), "Gemma 3", window="module", qk_norm=True,
           features=("GQA", "QK-norm", "local/global RoPE bases", "sliding window")),
)
"""The families psheads is tested on (tiny look-alikes of each, both backends where TL builds them)."""

GENERIC = Family("rotary", (), "any other RoPE architecture")
"""Any other TransformerBridge model whose attention fires ``hook_cos``/``hook_sin``: read with the
common rules and accepted only if the self-check passes. QK-norm is detected on the bridge."""


def family_titles(families: tuple[Family, ...] = FAMILIES) -> str:
    """The families' names for people, joined for a sentence (``"GPT-J, GPT-NeoX / Pythia, …"``)."""
    return ", ".join(family.title for family in families)


def hooked_families() -> tuple[Family, ...]:
    """The families TransformerLens 3.x builds as a ``HookedTransformer`` from a local directory."""
    return tuple(family for family in FAMILIES if family.hooked)


def family_of(architecture: str) -> Family:
    """The record for a model class name (``GENERIC`` when none matches)."""
    for family in FAMILIES:
        if architecture in family.architectures:
            return family
    return GENERIC


@dataclass(frozen=True)
class Unsupported:
    """An attention variant psheads cannot decompose exactly, and how to recognise it.

    Attributes:
        reason: what the variant is, for the error message.
        applies: ``applies(hf_attention, config)`` on a bridge's HF attention module and TL config.
    """

    reason: str
    applies: Callable[[Any, Any], bool]


def _rope_parameters(hf_attention: Any) -> dict:
    rope = getattr(getattr(hf_attention, "config", None), "rope_parameters", None)
    return rope if isinstance(rope, dict) else {}


UNSUPPORTED: tuple[Unsupported, ...] = (
    Unsupported("attention sinks (GPT-OSS)", lambda hf, cfg: getattr(hf, "sinks", None) is not None),
    Unsupported("QK-norm after RoPE", lambda hf, cfg: bool(getattr(cfg, "qk_norm_after_rope", False))),
    Unsupported("adjacent-pair RoPE on a cos/sin bridge (GLM/ERNIE/Cohere)",
                lambda hf, cfg: bool(getattr(cfg, "rotary_interleaved_cos_sin", False)
                                     or getattr(cfg, "rotary_adjacent_pairs", False))),
    Unsupported("llama-4 position-dependent query scaling",
                lambda hf, cfg: _rope_parameters(hf).get("llama_4_scaling_beta") is not None),
    Unsupported("key multipliers (Falcon-H1)", lambda hf, cfg: getattr(hf, "key_multiplier", None) is not None),
)
"""Variants refused on a TransformerBridge (checked on every layer of a cos/sin-hook family)."""

HOOKED_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("use_qk_norm", "normalises q/k after hook_q/hook_k (QK-norm)"),
    ("use_logn_attn", "scales queries by log-n beyond the training length"),
)
"""HookedTransformer config flags psheads refuses: ``(flag, what it does)``."""
