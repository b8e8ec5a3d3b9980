"""Tiny random RoPE models saved to a temp dir and booted offline, for every supported family."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 64
N_CTX = 1024


def save_word_tokenizer(directory: Path, vocab_size: int = VOCAB) -> None:
    """A word-level tokenizer (``t0 … tN``) so every family boots without hub files."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", pad_token="t0")
    fast.save_pretrained(directory)


def _merged(defaults: dict, overrides: dict) -> dict:
    return {**defaults, **overrides}


def _common(**overrides: Any) -> dict:
    cfg = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=N_CTX,
    )
    cfg.update(overrides)
    return cfg


def hf_config(family: str, **overrides: Any) -> transformers.PretrainedConfig:
    """Tiny config of ``family``; ``overrides`` replace any field."""
    if family == "gptj":
        base = dict(vocab_size=VOCAB, n_positions=N_CTX, n_embd=32, n_layer=2, n_head=4, rotary_dim=4,
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        return transformers.GPTJConfig(**_merged(base, overrides))
    if family == "neox":
        return transformers.GPTNeoXConfig(**_common(**_merged(dict(rotary_pct=0.5), overrides)))
    if family == "llama":
        return transformers.LlamaConfig(**_common(**_merged(dict(num_key_value_heads=2), overrides)))
    if family == "mistral":
        return transformers.MistralConfig(**_common(**_merged(dict(num_key_value_heads=2, sliding_window=5), overrides)))
    if family == "qwen2":
        return transformers.Qwen2Config(**_common(**_merged(dict(num_key_value_heads=2), overrides)))
    if family == "gemma":
        return transformers.GemmaConfig(**_common(**_merged(dict(num_key_value_heads=1, head_dim=8), overrides)))
    if family == "gemma2":
        return transformers.Gemma2Config(
            **_common(**_merged(dict(num_key_value_heads=2, head_dim=8, sliding_window=5, query_pre_attn_scalar=12,
                                     attn_logit_softcapping=2.0), overrides))
        )
    if family == "gemma3":
        return transformers.Gemma3TextConfig(
            **_common(**_merged(dict(num_key_value_heads=2, head_dim=8, sliding_window=5, query_pre_attn_scalar=12,
                                     sliding_window_pattern=2), overrides))
        )
    if family == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_positions=N_CTX, n_embd=32, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=0)
    raise ValueError(f"unknown family {family}")


def save_tiny(family: str, directory: Path, seed: int = 0, dtype: torch.dtype = torch.float32, **overrides: Any) -> Path:
    """Build a random tiny HF model of ``family``, save it with a tokenizer, return the dir."""
    torch.manual_seed(seed)
    config = hf_config(family, **overrides)
    model = transformers.AutoModelForCausalLM.from_config(config)
    # random init leaves q/k tiny; scale them up so attention is far from uniform
    with torch.no_grad():
        for name, param in model.named_parameters():
            if any(key in name for key in ("q_proj", "k_proj", "query_key_value")) and param.ndim == 2:
                param.mul_(8.0)
    model = model.to(dtype).eval()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    save_word_tokenizer(directory)
    return directory


def boot_bridge(directory: Path, dtype: torch.dtype = torch.float32) -> Any:
    """Boot a saved model offline with TransformerBridge."""
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_transformers(str(directory), device="cpu", dtype=dtype)


_GEMMA_ARCHITECTURES = ("GemmaForCausalLM", "Gemma2ForCausalLM")


def _rope_theta(hf_config: transformers.PretrainedConfig) -> float:
    params = getattr(hf_config, "rope_parameters", None) or {}
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return float(theta if theta is not None else getattr(hf_config, "rope_theta", 10000.0))


def _gemma_hooked_config(directory: Path, hf_config: transformers.PretrainedConfig) -> dict:
    """A HookedTransformerConfig dict for a local Gemma / Gemma-2 directory.

    TransformerLens 3.9 only knows Gemma configs by official hub name (its ``google/gemma-2b``,
    ``google/gemma-2-2b`` … templates) and ``convert_hf_model_config(local_dir)`` raises
    NotImplementedError for them, so mirror those templates from the saved HF config.
    """
    architecture = hf_config.architectures[0]
    n_heads = hf_config.num_attention_heads
    d_head = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads
    cfg = {
        "d_model": hf_config.hidden_size,
        "d_head": d_head,
        "n_heads": n_heads,
        "n_key_value_heads": hf_config.num_key_value_heads,
        "d_mlp": hf_config.intermediate_size,
        "n_layers": hf_config.num_hidden_layers,
        "n_ctx": hf_config.max_position_embeddings,
        "eps": hf_config.rms_norm_eps,
        "d_vocab": hf_config.vocab_size,
        # HF maps Gemma-1's legacy "gelu" to the tanh approximation; follow HF, not TL's template
        "act_fn": getattr(hf_config, "hidden_activation", None) or hf_config.hidden_act,
        "initializer_range": hf_config.initializer_range,
        "normalization_type": "RMS",
        "rotary_base": _rope_theta(hf_config),
        "rotary_dim": d_head,
        "positional_embedding_type": "rotary",
        "use_attn_scale": True,
        "gated_mlp": True,
        "final_rms": True,
        # sqrt(d_model) embedding scaling is folded into embed.W_E by convert_gemma_weights
        "original_architecture": architecture,
        "tokenizer_name": str(directory),
        "model_name": Path(directory).name,
        "init_weights": False,
    }
    if architecture == "Gemma2ForCausalLM":
        layer_types = getattr(hf_config, "layer_types", None) or [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(hf_config.num_hidden_layers)
        ]
        sliding = hf_config.sliding_window is not None and "sliding_attention" in layer_types
        cfg.update(
            # HF scales q by query_pre_attn_scalar**-0.5; TL divides scores by attn_scale
            attn_scale=float(hf_config.query_pre_attn_scalar) ** 0.5,
            use_local_attn=sliding,
            window_size=hf_config.sliding_window if sliding else None,
            attn_types=["local" if t == "sliding_attention" else "global" for t in layer_types] if sliding else None,
            use_normalization_before_and_after=True,
        )
        if hf_config.attn_logit_softcapping is not None:
            cfg["attn_scores_soft_cap"] = float(hf_config.attn_logit_softcapping)
        if hf_config.final_logit_softcapping is not None:
            cfg["output_logits_soft_cap"] = float(hf_config.final_logit_softcapping)
    return cfg


def boot_hooked(directory: Path, dtype: torch.dtype = torch.float32) -> Any:
    """Build a HookedTransformer (TransformerLens 3.x) from a local HF directory, offline."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens import loading_from_pretrained as loading

    hf_model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    if hf_model.config.architectures[0] in _GEMMA_ARCHITECTURES:
        cfg_dict = _gemma_hooked_config(directory, hf_model.config)
    else:
        cfg_dict = loading.convert_hf_model_config(str(directory))
    cfg = HookedTransformerConfig(**cfg_dict, dtype=dtype)
    state = loading.get_pretrained_state_dict(str(directory), cfg, hf_model=hf_model)
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(
        state, fold_ln=False, center_writing_weights=False, center_unembed=False,
        fold_value_biases=False, refactor_factored_attn_matrices=False,
    )
    return model.to(dtype).eval()


def has_hooked_transformer() -> bool:
    """Whether the installed TransformerLens still ships HookedTransformer (3.x)."""
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True
