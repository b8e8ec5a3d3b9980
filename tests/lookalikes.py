"""Tiny random look-alikes of every RoPE decoder architecture TransformerLens supports, and an oracle of their
attention that does not use psheads.

``rope_architectures()`` lists the architectures; ``tiny_config`` / ``save_lookalike`` build and save a random
2-layer model of one (hidden 64, 4 query heads, 2 KV heads where GQA is allowed, head_dim 16) that keeps every
attention feature of its default Hugging Face config; ``eager_attention`` records the model's own eager attention
probabilities; ``attention_rules`` / ``rebuild`` say what the model applies to the summed pre-softmax logit (soft-cap,
windows, chunks, sinks, query temperature, compressed-KV columns) and apply it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 64
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
WINDOW = 5
"""Sliding windows and attention chunks shrink to this, so they matter on 12–16 tokens."""
N_POSITIONS = 256
QK_STD = 0.16
"""Standard deviation given to every projection that feeds softmax-attention queries and keys (8x the usual 0.02
init; the init differs between architectures): random init leaves attention nearly uniform, this makes it sharp
(max |logit| about 2–30 on random tokens) but finite."""

SIZES: dict[str, Any] = {
    "vocab_size": VOCAB, "vocab_size_per_layer_input": VOCAB,
    "hidden_size": HIDDEN, "n_embd": HIDDEN,
    "intermediate_size": 128, "n_inner": 128, "ffn_hidden_size": 128, "intermediate_size_mlp": 128,
    "num_attention_heads": HEADS, "n_head": HEADS,
    "num_key_value_heads": KV_HEADS, "num_kv_heads": KV_HEADS,
    "head_dim": HEAD_DIM, "kv_channels": HEAD_DIM, "attention_head_dim": HEAD_DIM,
    "max_position_embeddings": N_POSITIONS, "n_positions": N_POSITIONS, "n_ctx": N_POSITIONS,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "shared_intermediate_size": 32,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_k": 2, "top_k_experts": 2,
    "n_shared_experts": 1, "num_shared_experts": 1, "moe_num_shared_experts": 1, "n_group": 1, "topk_group": 1,
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "o_lora_rank": 16, "o_groups": 2, "index_n_heads": 2, "index_head_dim": 16,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "mamba_chunk_size": 16, "mamba_d_ssm": 128,
    "n_mamba_heads": 8, "mamba_headdim": 16, "chunk_size": 16, "lru_width": HIDDEN,
    "hidden_size_per_layer_input": 8, "adapter_rank": 8, "attention_hidden_size": 2 * HIDDEN,
}
"""Tiny value of every size field a default config may carry (set only where the default has the field; the
mamba sizes give ``mamba_n_heads * mamba_d_head == mamba_expand * hidden_size``, which the hybrids check)."""
WINDOW_FIELDS = ("sliding_window", "attention_window_size", "attention_chunk_size")
TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "eod_token_id": 3}
"""Special token ids moved inside the tiny vocabulary (an embedding's ``padding_idx`` must be < ``vocab_size``)."""
LAYER_KINDS = ("layer_types", "layers_block_type", "block_types", "mlp_layer_types", "no_rope_layers")
"""Per-layer patterns: each keeps one layer of every kind its default has, in the default's order."""
DENSE_PREFIX = ("first_k_dense_replace", "num_dense_layers")
"""MoE models whose first layers are dense get one dense layer, then MoE."""

OVERRIDES: dict[str, dict[str, Any]] = {
    # the default has no attention layer at all (attn_layer_indices=None): one mamba layer, then one attention layer
    "bamba": {"attn_layer_indices": [1]},
    # the default rotary_dim (64) exceeds the tiny head; 8 keeps rotary partial, as GPT-J's 64 of 256
    "codegen": {"rotary_dim": 8},
    "gptj": {"rotary_dim": 8},
    # HCA's 128-token compression windows never close within 16 tokens (its compressed keys would never show): 8
    # closes one; the default rope slice (1/8 of a head) would be a single plane here: half the head keeps it partial
    "deepseek_v4": {
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        "partial_rotary_factor": 0.5,
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            "compress": {"rope_type": "default", "rope_theta": 160000.0, "partial_rotary_factor": 0.5},
        },
    },
    # a query scale equal to 1/sqrt(head_dim) would hide a decomposition that ignores query_pre_attn_scalar
    "gemma2": {"query_pre_attn_scalar": 24},
    "gemma3_text": {"query_pre_attn_scalar": 24},
    "vaultgemma": {"query_pre_attn_scalar": 24},
    # full-attention layers have their own head size (global_head_dim, 512 = 2 x 256 by default)
    "gemma4_text": {"global_head_dim": 2 * HEAD_DIM},
    # the default's layers are all mamba ("linear_attention"): one mamba, one attention layer; and RoPE on (NoPE by
    # default, see NOPE_BY_DEFAULT; TransformerLens' adapter cannot boot it without a rotary embedding)
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"], "position_embedding_type": "rope"},
    # one layer per stack: an L and an H decoder layer, run H_cycles * (L_cycles + 1) = 8 times per forward
    "hrm_text": {"num_hidden_layers": 1},
    # the default lists full-attention layers only, but configures sliding layers (window, RoPE parameters)
    "laguna": {"layer_types": ["full_attention", "sliding_attention"]},
    # LFM2 is a conv/attention hybrid (the default lists attention layers only; LFM2-MoE's default lists none,
    # which does not build): one conv layer, one attention layer
    "lfm2": {"layer_types": ["conv", "full_attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    # the NoPE layers' temperature starts at position floor_scale - 1 (8191): start it inside 16 tokens
    "llama4_text": {"floor_scale": 4},
    # llama-4 query scaling steps every original_max_position_embeddings (16384) positions: every 4 here
    "ministral3": {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0,
                                       "original_max_position_embeddings": 4, "beta_fast": 32.0, "beta_slow": 1.0,
                                       "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}},
    # sliding_window is derived as local_attention // 2
    "modernbert-decoder": {"local_attention": 2 * WINDOW},
    # RoPE on in the shared attention block (NoPE by default, see NOPE_BY_DEFAULT)
    "zamba2": {"use_mem_rope": True},
}
"""Per-``model_type`` config fields the generic sizing cannot get right, each with why."""

NOPE_BY_DEFAULT: dict[str, str] = {
    "GraniteMoeHybridForCausalLM": "position_embedding_type defaults to None: no rotary embedding is built and the "
                                   "attention layers (none by default) would run NoPE",
    "Zamba2ForCausalLM": "use_mem_rope defaults to False: the shared attention blocks apply no RoPE",
}
"""Architectures with RoPE parameters whose default config applies no RoPE in attention: left out of
``rope_architectures``. Their look-alikes switch RoPE on (``OVERRIDES``) for whoever wants them anyway."""

LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)\.")
"""The decoder-layer index in a module's qualified name (``model.layers.3.self_attn``, ``transformer.h.3.attn``)."""
QK_PROJECTIONS = ("q_proj", "k_proj", "query_key_value", "qkv_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",
                  "kv_proj", "input_linear")
"""Leaf names, inside a softmax-attention module, of the projections that feed its queries or keys (fused and
latent ones included; a projection behind a norm, as MLA's ``q_a_proj``, would gain nothing)."""


def rope_architectures() -> list[str]:
    """Every causal-LM architecture the installed TransformerLens supports whose default config applies RoPE."""
    from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES

    names = []
    for name in SUPPORTED_ARCHITECTURES:
        cls = getattr(transformers, name, None)
        if not name.endswith("ForCausalLM") or cls is None or name in NOPE_BY_DEFAULT:
            continue
        default = cls.config_class()
        if getattr(default, "rope_parameters", None) or hasattr(default, "rotary_dim"):
            names.append(name)
    return sorted(names)


def tiny_config(architecture: str, **overrides: Any) -> transformers.PretrainedConfig:
    """A tiny config of ``architecture`` keeping every attention feature of its default; ``overrides`` win."""
    cls = getattr(transformers, architecture).config_class
    default = cls()
    fields = default.to_dict()
    kwargs: dict[str, Any] = {key: value for key, value in SIZES.items() if key in fields}
    if "kv_lora_rank" in fields:
        # multi-head latent attention: keys have as many heads as queries; the rotary tables span the rope slice
        kwargs.update(head_dim=SIZES["qk_rope_head_dim"], num_key_value_heads=HEADS)
    kwargs.update({key: WINDOW for key in WINDOW_FIELDS if fields.get(key)})
    kwargs.update({key: [value] if isinstance(fields[key], list) else value
                   for key, value in TOKEN_IDS.items() if fields.get(key) is not None})
    kwargs.update({key: 1 for key in DENSE_PREFIX if fields.get(key)})
    patterns = {key: list(dict.fromkeys(fields[key])) for key in LAYER_KINDS if fields.get(key)}
    n_layers = max([2, *map(len, patterns.values())])
    kwargs.update({key: kinds + kinds[-1:] * (n_layers - len(kinds)) for key, kinds in patterns.items()})
    kwargs.update({key: n_layers for key in ("num_hidden_layers", "n_layer") if key in fields})
    kwargs.update(OVERRIDES.get(default.model_type, {}))
    kwargs.update(overrides)
    return cls(**kwargs)


def _attention_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The softmax-attention modules of ``model`` (each decoder layer's ``*Attention``), with their names."""
    return [(name, module) for name, module in model.named_modules()
            if type(module).__name__.endswith("Attention") and LAYER_INDEX.search(name)]


def save_lookalike(architecture: str, directory: Path, seed: int = 0, dtype: torch.dtype = torch.float32,
                   **overrides: Any) -> Path:
    """Save a random tiny model of ``architecture`` with sharp attention and a word tokenizer; return ``directory``."""
    from tests.helpers import save_word_tokenizer

    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(tiny_config(architecture, **overrides))
    with torch.no_grad():
        for _, attention in _attention_modules(model):
            for name, projection in attention.named_modules():
                if name.rsplit(".", 1)[-1] in QK_PROJECTIONS and projection.weight.std() > 0:
                    projection.weight.mul_(QK_STD / projection.weight.std())
            for name, norm in attention.named_modules():  # QK-norms: weights that differ between dims, so a
                weight = getattr(norm, "weight", None)      # norm read before RoPE instead of after shows
                if "norm" in name.rsplit(".", 1)[-1] and isinstance(weight, torch.nn.Parameter):
                    weight.add_(torch.empty_like(weight).uniform_(-0.5, 0.5))
            if isinstance(getattr(attention, "sinks", None), torch.nn.Parameter):
                torch.nn.init.normal_(attention.sinks)  # initialised to 0: make them differ between heads
    model = model.to(dtype).eval()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    save_word_tokenizer(directory)
    return directory


@dataclass(frozen=True)
class AttentionRules:
    """What one layer applies to its summed pre-softmax logit ``scale * q . k``, in this order.

    Attributes:
        temperature: ``(beta, period, shift)``: logit row ``t`` is multiplied by
            ``1 + beta * ln(1 + floor((t + shift) / period))`` (a query scale that grows with the position:
            Ministral-3's llama-4 scaling, Llama-4's NoPE-layer temperature), or None.
        softcap: logits become ``softcap * tanh(logits / softcap)`` (Gemma-2, VaultGemma), or None.
        window: key ``j`` is visible from query ``t`` iff ``0 <= t - j < window`` (on top of causality), or None.
        chunk: key ``j`` is visible from query ``t`` iff ``j // chunk == t // chunk`` (Llama-4 chunked
            attention, on top of causality), or None.
        compress_rate: the logits carry ``C`` compressed-KV columns after the ``T`` position keys (DeepSeek-V4's
            CSA/HCA); compressed entry ``w`` summarises positions ``[w * rate, (w + 1) * rate)`` and is visible
            from query ``t`` iff ``w < (t + 1) // rate``. Windows and chunks concern position keys only.
        sinks: ``[head]`` sink logits (GPT-OSS, DeepSeek-V4): one extra softmax column per head, whose
            probability is dropped from the returned weights, or None.
    """

    temperature: tuple[float, int, int] | None = None
    softcap: float | None = None
    window: int | None = None
    chunk: int | None = None
    compress_rate: int | None = None
    sinks: torch.Tensor | None = None


# What each architecture applies between q . k and the softmax, as its Hugging Face code (transformers 5.24) does it.
# Masks come from the model's forward, keyed by layer type:
# - `layer_types[i] == "sliding_attention"` gets config.sliding_window (Afmoe, Cohere2, Exaone4, Gemma2/3/4, GPT-OSS,
#   Laguna, ModernBERT-decoder, OLMo-3, Qwen2, Qwen2-MoE, Qwen3, SmolLM3, VaultGemma; RecurrentGemma's attention
#   blocks are "sliding_attention" with attention_window_size), "chunked_attention" gets attention_chunk_size
#   (Llama-4 RoPE layers); every other layer is plainly causal;
# - GLOBAL_WINDOW models slide config.sliding_window over every layer when it is set, whatever layer_types say.
# HF's window keeps key j iff j > t - window: 0 <= t - j < window, no off-by-one anywhere (ModernBERT-decoder derives
# sliding_window = local_attention // 2; Gemma-4 halves it only for bidirectional attention).
# Soft-cap: attn_logit_softcapping (Gemma-2, VaultGemma; Gemma-3 keeps the field, None by default) on the scaled
# logits, before the mask. Sinks: a per-head parameter `sinks` on the attention module (GPT-OSS, DeepSeek-V4).
# Query temperature: Ministral-3 multiplies q by 1 + beta * ln(1 + floor(t / original_max_position_embeddings))
# (rope_parameters.llama_4_scaling_beta) on every layer; Llama-4 multiplies q on its NoPE layers by
# 1 + attn_scale * ln(1 + floor((t + 1) / floor_scale)) when attn_temperature_tuning.
# DeepSeek-V4 appends compressed KV entries after the position keys (every layer type but "sliding_attention").
# Not rules on the logit: GLM-MoE-DSA's indexer keeps the top index_topk (2048) keys per query, a no-op below 2048
# tokens; HRM-Text's prefix-LM block is bidirectional only when token_type_ids are passed; DeepSeek-V4's CSA indexer
# keeps the top index_topk (512) compressed entries, a no-op below 2048 tokens.
# Everything else is inside q . k (and in what psheads must read off the model), notably: adjacent-pair rotary
# (GPT-J, CodeGen, Cohere/Cohere2, GLM/GLM-4, ERNIE-4.5, DeepSeek-V2/V3, GLM-4-MoE-Lite, GLM-MoE-DSA, Youtu, Llama-4,
# DeepSeek-V4, the last on the trailing rope slice), NanoChat's rotation by -theta (rotate_half with flipped signs),
# Gemma-4's "proportional" rotary (whole-head tables, zero frequency on the last planes of each half), QK-norm after
# RoPE (Llama-4), NoPE layers (SmolLM3, Llama-4; the full-attention layers of Afmoe, Cohere2 and Exaone4), scales other
# than 1/sqrt(head_dim) (Granite attention_multiplier = 1.0, Gemma-2/3/Vault query_pre_attn_scalar, Gemma-4 1.0 after
# QK-norm, MLA's yarn mscale, Zamba2 (head_dim/2)^-0.5), Falcon-H1's key_multiplier, JetMoE's per-token routed query
# experts (a head is an (expert slot, KV head) pair), and DeepSeek-V4's shared K = V with RoPE undone on the output.
GLOBAL_WINDOW = ("deepseek_v4", "ministral3", "mistral", "mixtral", "phi3", "qwen3_moe", "starcoder2")


def _sinks(directory: Path, layer: int) -> torch.Tensor | None:
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    found = [module.sinks for name, module in _attention_modules(model)
             if int(LAYER_INDEX.search(name).group(1)) == layer and getattr(module, "sinks", None) is not None]
    return found[0].detach().double() if found else None


def attention_rules(directory_or_config: Path | str | transformers.PretrainedConfig, layer: int) -> AttentionRules:
    """What decoder layer ``layer`` applies to its summed pre-softmax logit, read from the saved model (or, for
    an architecture without sinks, from its config alone)."""
    if isinstance(directory_or_config, transformers.PretrainedConfig):
        config, directory = directory_or_config, None
    else:
        directory = Path(directory_or_config)
        config = transformers.AutoConfig.from_pretrained(directory)
    kind = (getattr(config, "layer_types", None) or [None] * (layer + 1))[layer]
    size = getattr(config, "sliding_window", None)
    window = size if size and size > 0 and (kind == "sliding_attention" or config.model_type in GLOBAL_WINDOW) else None
    chunk = config.attention_chunk_size if kind == "chunked_attention" else None
    temperature = None
    rope = getattr(config, "rope_parameters", None) or {}
    if rope.get("llama_4_scaling_beta") is not None:
        temperature = (float(rope["llama_4_scaling_beta"]), int(rope["original_max_position_embeddings"]), 0)
    if getattr(config, "attn_temperature_tuning", False) and not config.no_rope_layers[layer]:
        temperature = (float(config.attn_scale), int(config.floor_scale), 1)
    compress_rate = (getattr(config, "compress_rates", None) or {}).get(kind)
    sinks = None
    if config.model_type in ("gpt_oss", "deepseek_v4"):
        if directory is None:
            raise ValueError(f"{config.model_type} has learned attention sinks: pass the saved model's directory")
        sinks = _sinks(directory, layer)
    return AttentionRules(temperature=temperature, softcap=getattr(config, "attn_logit_softcapping", None),
                          window=window, chunk=chunk, compress_rate=compress_rate, sinks=sinks)


def rebuild(logits: torch.Tensor, rules: AttentionRules) -> torch.Tensor:
    """Attention probabilities ``[batch, head, query, key]`` (fp64) from the summed pre-softmax logits of every query
    position ``0 … T-1`` (scale included; no temperature, soft-cap or mask; compressed columns after the T keys)."""
    logits = logits.double()
    n_query, n_key = logits.shape[-2:]
    t = torch.arange(n_query)[:, None]
    j = torch.arange(n_query)[None, :]
    if rules.temperature is not None:
        beta, period, shift = rules.temperature
        logits = logits * (1 + beta * torch.log1p(torch.floor((t + shift) / period))).double()
    if rules.softcap is not None:
        logits = rules.softcap * torch.tanh(logits / rules.softcap)
    visible = j <= t
    if rules.window is not None:
        visible = visible & (t - j < rules.window)
    if rules.chunk is not None:
        visible = visible & (t // rules.chunk == j // rules.chunk)
    if n_key > n_query:
        if rules.compress_rate is None:
            raise ValueError(f"{n_key} keys for {n_query} queries, but the layer has no compressed columns")
        entries = torch.arange(n_key - n_query)[None, :]
        visible = torch.cat([visible, entries < (t + 1) // rules.compress_rate], dim=-1)
    logits = logits.masked_fill(~visible, -math.inf)
    if rules.sinks is None:
        return logits.softmax(dim=-1)
    sinks = rules.sinks.double().view(1, -1, 1, 1).expand(*logits.shape[:-1], 1)
    return torch.cat([logits, sinks], dim=-1).softmax(dim=-1)[..., :-1]


def eager_attention(directory: Path, tokens: torch.LongTensor) -> dict[int, torch.Tensor]:
    """Per decoder layer, the attention probabilities ``[batch, head, query, key]`` (fp64) that the saved model's
    own eager attention computes on ``tokens``; layers without softmax attention are absent.

    A layer's index is the ``i`` of its ``layers.{i}`` (or ``h.{i}``) module, plus the ``cycle_offset`` HRM-Text
    passes when it runs its L and H stacks again (its cache slot: the order in which the attention ran).
    """
    model = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager",
                                                              dtype=torch.float32).eval()
    weights: dict[int, torch.Tensor] = {}

    def record(name: str) -> Any:
        def hook(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if isinstance(output, tuple) and len(output) > 1 and torch.is_tensor(output[1]) and output[1].ndim == 4:
                index = int(LAYER_INDEX.search(name).group(1)) + int(kwargs.get("cycle_offset", 0))
                weights[index] = output[1].detach().double()
        return hook

    handles = [module.register_forward_hook(record(name), with_kwargs=True)
               for name, module in _attention_modules(model)]
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return dict(sorted(weights.items()))
