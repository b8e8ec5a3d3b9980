"""Architecture families as data: one small record per family, read by ``psheads.rope.backends``.

A record says what cannot be read off a model reliably (TransformerBridge's config reports wrong
RoPE facts for some families; see the decomposition docs): how dims pair into planes, where the
rotation tables can be captured, whether the model's attention pattern can be replaced in place,
whether its tables stop at ``n_ctx``, where its sliding window is configured, and which features
it has. Values the model computes with (scale, soft-cap, window size, head counts) are read from
the model itself by the backend. Attention variants psheads cannot decompose exactly are listed
once, in ``UNSUPPORTED``.

Every list of families, in the code, the tests and the docs, is derived from ``FAMILIES``, which the
registry starts from. To support a new family in psheads: add a record here and a tiny look-alike to
``tests/helpers.py``; the self-check, the consistency tests and the generated docs table do the
rest. From your own code: ``register_family(Family(...))`` (``replace=True`` replaces one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from psheads.interface.registry import Registry, named
from psheads.rope.geometry import Pairing

TableLayout = Literal["auto", "sin_first_pairs", "negated_sin"]


class UnsupportedModelError(ValueError):
    """psheads cannot decompose this model's attention exactly; the message names the architecture,
    the feature and why (raised before any score is produced)."""


@dataclass(frozen=True)
class Family:
    """How psheads reads one architecture family: what cannot be read off the model reliably.

    Attributes:
        name: short name (``"gptj"``, ``"llama"``, …).
        architectures: Hugging Face model classes (``type(bridge.original_model).__name__``), which
            are also HookedTransformer's ``cfg.original_architecture``.
        title: the family's name for people (``"GPT-NeoX / Pythia"``).
        pairing: how head dims pair into planes (``"adjacent"``: GPT-J, Llama 4); None: read from the
            bridge (adjacent where TransformerLens rotates adjacent pairs, as for GLM, ERNIE and Cohere,
            or where multi-head latent attention interleaves its rotary dims).
        table_layout: how those tables become per-dimension ones beyond the rules every family shares:
            ``"sin_first_pairs"`` (GPT-J: ``(sin, cos)`` at half width, one entry per adjacent pair)
            or ``"negated_sin"`` (NanoChat rotates by −θ).
        fixed_context: rotation tables are precomputed up to ``n_ctx``, so inputs are capped there.
        softcap: attention logits are soft-capped (``attn_logit_softcapping``).
        qk_norm: q and k are normalised before RoPE; they are read after the norm.
        norms_after_rope: the Hugging Face attention's attributes holding the RMS norms it applies to
            q and k after RoPE, where the bridge does not say so itself (NanoChat, Llama 4).
        rotates: ``rotates(hf_attention)``: whether a layer applies RoPE at all, for families whose
            attention receives the tables on every layer but uses them on some (AFMoE's global
            layers); None: every layer that receives tables rotates.
        refused: why psheads cannot decompose this family exactly ("" when it can).
        features: what the family exercises, for the docs' generated family table (GQA, …).
        hooked: TransformerLens 3.x builds it as a ``HookedTransformer`` from a local directory
            (psheads' zoo does, and the tests run it on both backends).
        sdpa: its Hugging Face attention runs as SDPA, so long inputs are captured without forming
            any [query, key] score (not with a fused ``query_key_value`` that only the bridge
            splits, nor with soft-capping, which SDPA lacks).
    """

    name: str
    architectures: tuple[str, ...]
    title: str = ""
    pairing: Pairing | None = None
    table_layout: TableLayout = "auto"
    fixed_context: bool = False
    softcap: bool = False
    qk_norm: bool = False
    norms_after_rope: tuple[str, str] | None = None
    rotates: Callable[[Any], bool] | None = None
    refused: str = ""
    features: tuple[str, ...] = ()
    hooked: bool = False
    sdpa: bool = True


FAMILIES: tuple[Family, ...] = (
    Family("gptj", ("GPTJForCausalLM",), "GPT-J", pairing="adjacent", table_layout="sin_first_pairs",
           fixed_context=True, features=("adjacent pairs", "partial rotary"), hooked=True),
    Family("neox", ("GPTNeoXForCausalLM",), "GPT-NeoX / Pythia", pairing="halves", features=("partial rotary",),
           hooked=True, sdpa=False),
    Family("llama", ("LlamaForCausalLM",), "Llama", pairing="halves",
           features=("GQA", "llama3 / YaRN / linear / dynamic-NTK scaling"), hooked=True),
    Family("mistral", ("MistralForCausalLM",), "Mistral", pairing="halves", features=("GQA", "sliding window"),
           hooked=True),
    Family("qwen2", ("Qwen2ForCausalLM",), "Qwen2", pairing="halves", features=("GQA", "q/k biases"), hooked=True),
    Family("gemma", ("GemmaForCausalLM",), "Gemma", pairing="halves", features=("MQA",), hooked=True),
    Family("gemma2", ("Gemma2ForCausalLM",), "Gemma 2", pairing="halves", softcap=True,
           features=("GQA", "query_pre_attn_scalar", "soft-cap", "local/global layers"), hooked=True, sdpa=False),
    Family("gemma3", ("Gemma3ForCausalLM",), "Gemma 3", pairing="halves", qk_norm=True,
           features=("GQA", "QK-norm", "local/global RoPE bases", "sliding window")),
    Family("nanochat", ("NanoChatForCausalLM",), "NanoChat", pairing="halves", table_layout="negated_sin",
           norms_after_rope=("q_norm", "k_norm"), features=("rotation by −θ", "QK-norm after RoPE")),
    Family("llama4", ("Llama4ForCausalLM",), "Llama 4", pairing="adjacent", norms_after_rope=("qk_norm", "qk_norm"),
           features=("complex rotation tables", "QK-norm after RoPE", "NoPE layers", "attention temperature",
                     "chunked attention", "MoE")),
    Family("afmoe", ("AfmoeForCausalLM",), "AFMoE", pairing="halves", qk_norm=True,
           rotates=lambda attention: bool(getattr(attention, "is_local_attention", True)),
           features=("QK-norm", "RoPE on sliding layers only", "MoE")),
    Family("cohere2", ("Cohere2ForCausalLM",), "Command R7B (Cohere 2)",
           rotates=lambda attention: getattr(attention, "sliding_window", None) is not None,
           features=("adjacent pairs", "RoPE on sliding layers only")),
    Family("exaone4", ("Exaone4ForCausalLM",), "EXAONE 4", pairing="halves", qk_norm=True,
           rotates=lambda attention: attention.sliding_window is None or bool(getattr(attention, "is_sliding", False)),
           features=("QK-norm", "RoPE on sliding layers only")),
    Family("jetmoe", ("JetMoeForCausalLM", "JetMoEForCausalLM"), "JetMoE", features=("mixture of attention heads",),
           refused="a mixture of attention heads: each token routes its query to a few of several query experts, so "
                   "a query head is a routing slot whose weights change from token to token, not a head whose "
                   "scores can be compared across keys and prompts"),
    Family("deepseek_v4", ("DeepseekV4ForCausalLM",), "DeepSeek V4", features=("compressed keys",),
           refused="compressed key entries: its attention also attends to keys pooled from blocks of tokens, chosen "
                   "by a separate scorer, which are not token positions that a swap could move"),
    Family("hrm_text", ("HrmTextForCausalLM",), "HRM", features=("recurrent layer stacks",),
           refused="layers that run several times per forward pass (hierarchical reasoning cycles): one layer's "
                   "attention has several different q and k per input, which no per-layer capture can tell apart"),
    Family("codegen", ("CodeGenForCausalLM",), "CodeGen", features=("fused q/v/k in four shards",),
           refused="a TransformerLens bridge that cannot run: its CodeGen attention reads embed_positions and "
                   "scale_attn, which transformers 5.24 removed from CodeGenAttention"),
    Family("zamba2", ("Zamba2ForCausalLM",), "Zamba 2", features=("shared attention blocks", "mamba blocks"),
           refused="opaque blocks: TransformerLens wraps each Zamba2 block whole, with no attention, q, k or pattern "
                   "hook in its shared attention (which applies RoPE only with use_mem_rope)"),
    Family("recurrent_gemma", ("RecurrentGemmaForCausalLM",), "RecurrentGemma", features=("recurrent blocks",),
           refused="opaque blocks: TransformerLens wraps each RecurrentGemma block whole, with no attention, q, k "
                   "or pattern hook to read the attention from"),
)
"""The families with a record: those psheads is tested on with a tiny look-alike, those whose
quirks need data, and those it refuses (``refused``). Every other RoPE architecture is read with the
common rules (``GENERIC``) and accepted only if the self-check passes."""

GENERIC = Family("rotary", (), "any other RoPE architecture")
"""Any other TransformerBridge model: read with the common rules and accepted only if the self-check
passes. QK-norm is detected on the bridge."""


_REGISTRY: Registry[Family] = Registry(
    "RoPE family", "psheads.rope.families.register_family", group="psheads.families",
    add=lambda name, family: register_family(named(name, family, "family")))
"""The families; installed packages add theirs as entry points of ``psheads.families``,
``name = "module:family"`` (the ``Family``'s ``name`` is the entry point's)."""
for _family in FAMILIES:
    _REGISTRY.register(_family.name, _family)


def register_family(family: Family, *, replace: bool = False) -> Family:
    """Add a family record (returns it): models of its ``architectures`` are then read by it.

    Raises:
        TypeError: ``family`` is not a ``Family``.
        ValueError: its name is taken (pass ``replace=True``), or one of its architectures belongs to
            another registered family.
    """
    if not isinstance(family, Family):
        raise TypeError(f"family must be a psheads.rope.families.Family, got {type(family).__name__}.")
    taken = {architecture: other.name for other in _REGISTRY.values() if other.name != family.name
             for architecture in other.architectures}
    shared = sorted(set(family.architectures) & set(taken))
    if shared:
        raise ValueError(f"Family {family.name!r}: architectures {shared} are read by family "
                         f"{taken[shared[0]]!r} already.")
    return _REGISTRY.register(family.name, family, replace=replace)


def get_family(name: str) -> Family:
    """The registered family ``name``."""
    return _REGISTRY.lookup(name)


def families() -> tuple[str, ...]:
    """Names of the registered families, sorted."""
    return _REGISTRY.names()


def family_titles(chosen: tuple[Family, ...] | None = None) -> str:
    """The supported families' names for people, joined for a sentence (``"GPT-J, GPT-NeoX / Pythia, …"``)."""
    chosen = tuple(family for family in _REGISTRY.values() if not family.refused) if chosen is None else chosen
    return ", ".join(family.title for family in chosen)


def hooked_families() -> tuple[Family, ...]:
    """The families TransformerLens 3.x builds as a ``HookedTransformer`` from a local directory."""
    return tuple(family for family in _REGISTRY.values() if family.hooked)


def family_of(architecture: str) -> Family:
    """The record for a model class name (``GENERIC`` when none matches)."""
    for family in _REGISTRY.values():
        if architecture in family.architectures:
            return family
    return GENERIC


HOOKED_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("use_qk_norm", "normalises q/k after hook_q/hook_k (QK-norm)"),
    ("use_logn_attn", "scales queries by log-n beyond the training length"),
)
"""HookedTransformer config flags psheads refuses: ``(flag, what it does)``."""
