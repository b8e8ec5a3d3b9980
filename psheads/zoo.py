"""Models psheads builds or boots: paper B's GPT-J shape, local HF directories, shipped models."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transformers

from psheads.tasks.base import word_tokenizer

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
"""Paper B's GPT-J: 12 layers × 1 head, hidden 128, RoPE over the whole head, dropout 0.1."""


def gptj_config(vocab_size: int, **overrides: Any) -> transformers.GPTJConfig:
    """Paper B's GPT-J config for a vocabulary of ``vocab_size`` tokens (fields overridable)."""
    fields = {**PAPER_B_GPTJ, "vocab_size": vocab_size, "bos_token_id": 0, "eos_token_id": 0, **overrides}
    return transformers.GPTJConfig(**fields)


def boot_local(directory: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> Any:
    """Boot a local Hugging Face model directory as a TransformerBridge (no network needed).

    Only safetensors weights are accepted, so loading never unpickles anything. Set
    ``HF_HUB_OFFLINE=1`` before importing transformers to forbid any hub lookup.
    """
    from transformer_lens.model_bridge import TransformerBridge

    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise ValueError(f"{directory} is not a Hugging Face model directory (no config.json).")
    if not any(directory.glob("*.safetensors")):
        raise ValueError(f"{directory} holds no .safetensors weights. psheads loads only safetensors (no file it "
                         "reads can run code): convert the weights with model.save_pretrained(dir, "
                         "safe_serialization=True), or boot the model yourself if you trust the files.")
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


PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
"""Where the shipped trained models live (inside the package)."""
PRETRAINED = ("number", "letter")
"""Names of the shipped models."""


@dataclass
class Pretrained:
    """A shipped model with its task and training record.

    Attributes:
        model: the model, booted offline as a TransformerBridge.
        task: the task it was trained on.
        evaluation: accuracy per hop count of the shipped weights (``hops, accuracy, n``).
        dynamics: learning dynamics per checkpoint, layer and head (scores, labels, accuracy).
        info: the training record (``training_config.json``).
    """

    model: Any
    task: Any
    evaluation: pd.DataFrame
    dynamics: pd.DataFrame
    info: dict


def load_pretrained(name: str, dtype: torch.dtype = torch.float32, device: str = "cpu") -> Pretrained:
    """Boot a shipped model (``"number"`` or ``"letter"``) offline, with its task and records.

    Raises:
        ValueError: unknown name.
        FileNotFoundError: the model files are missing from the installation.
    """
    from psheads.tasks import get_task

    if name not in PRETRAINED:
        raise ValueError(f"Unknown pretrained model {name!r}; choose one of {PRETRAINED}.")
    directory = PRETRAINED_DIR / name
    if not (directory / "config.json").exists():
        raise FileNotFoundError(f"The shipped model {name!r} is missing from {directory}; reinstall psheads.")
    info = json.loads((directory / "training_config.json").read_text())
    return Pretrained(
        model=boot_local(directory, dtype=dtype, device=device),
        task=get_task(info["task"], **info.get("task_options", {})),
        evaluation=pd.read_csv(directory / "evaluation.csv", dtype={"hops": str}),
        dynamics=pd.read_csv(directory / "dynamics.csv"),
        info=info,
    )


def export_checkpoint(checkpoint: str | Path, destination: str | Path, dtype: torch.dtype = torch.float16) -> Path:
    """Copy a training checkpoint as a lean HF directory (weights cast to ``dtype``, no optimizer)."""
    checkpoint, destination = Path(checkpoint), Path(destination)
    model = transformers.GPTJForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, use_safetensors=True).to(dtype)
    destination.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(destination, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "training_config.json"):
        if (checkpoint / name).exists():
            shutil.copy2(checkpoint / name, destination / name)
    return destination
