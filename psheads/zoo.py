"""Models psheads can build or boot itself: paper B's GPT-J shape and local HF directories."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
import transformers

from psheads.tasks.base import word_tokenizer

#: Paper B's GPT-J (DESIGN.md §4): 12 layers × 1 head, hidden 128, RoPE over the whole head.
PAPER_B_GPTJ: dict[str, Any] = dict(
    n_layer=12,
    n_head=1,
    n_embd=128,
    rotary_dim=128,
    n_positions=8192,
    activation_function="gelu_new",
    resid_pdrop=0.1,
    embd_pdrop=0.1,
    attn_pdrop=0.1,
)


def gptj_config(vocab_size: int, **overrides: Any) -> transformers.GPTJConfig:
    """Paper B's GPT-J config for a vocabulary of ``vocab_size`` tokens (fields overridable)."""
    fields = {**PAPER_B_GPTJ, "vocab_size": vocab_size, "bos_token_id": 0, "eos_token_id": 0, **overrides}
    return transformers.GPTJConfig(**fields)


def boot_local(directory: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> Any:
    """Boot a local Hugging Face model directory as a TransformerBridge (no network needed).

    Set ``HF_HUB_OFFLINE=1`` before importing transformers to forbid any hub lookup.
    """
    from transformer_lens.model_bridge import TransformerBridge

    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise ValueError(f"{directory} is not a Hugging Face model directory (no config.json).")
    return TransformerBridge.boot_transformers(str(directory), device=device, dtype=dtype)


def random_gptj(seed: int = 0, vocab_size: int = 128, **overrides: Any) -> Any:
    """A randomly initialised paper-B GPT-J (seeded), booted offline as a TransformerBridge.

    Its words are ``w0 … w{vocab_size-3}`` plus ``<unk>`` and ``<bos>`` (the last id, which string
    prompts get prepended by default). The caller's global RNG state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.GPTJForCausalLM(gptj_config(vocab_size, **overrides)).eval()
    with tempfile.TemporaryDirectory() as directory:
        model.save_pretrained(directory)
        word_tokenizer([f"w{i}" for i in range(vocab_size - 2)]).save_pretrained(directory)
        return boot_local(directory)
