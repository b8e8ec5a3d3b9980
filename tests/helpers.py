"""Tiny random RoPE models saved to a temp dir and booted offline, for every supported family."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 64
N_CTX = 1024


def plain_tokenizer(vocab_size: int = VOCAB) -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer over ``t0 … tN`` (no task's words)."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", pad_token="t0")


def prose_bpe_tokenizer(vocab_size: int = 800) -> transformers.PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained here on the shipped prose (no network), with a ``<bos>``."""
    from tokenizers import decoders, trainers

    from psheads import data

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<bos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(data.path("prose.txt").read_text(encoding="utf-8").splitlines(), trainer)
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<bos>")


def save_word_tokenizer(directory: Path, vocab_size: int = VOCAB) -> None:
    """A word-level tokenizer (``t0 … tN``) so every family boots without hub files."""
    fast = plain_tokenizer(vocab_size)
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
        return transformers.MistralConfig(**_common(**_merged(dict(num_key_value_heads=2, sliding_window=5),
                                                              overrides)))
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


def has_tiny(family: str) -> bool:
    """Whether ``hf_config`` builds a tiny look-alike of ``family`` (the rope suite's families)."""
    try:
        hf_config(family)
    except ValueError:
        return False
    return True


def save_tiny(family: str, directory: Path, seed: int = 0, dtype: torch.dtype = torch.float32,
              **overrides: Any) -> Path:
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


def save_task_model(task: Any, directory: Path, seed: int = 0, record: bool = False, **overrides: Any) -> Path:
    """A random tiny GPT-J that records ``task`` as a trained one does: the task's word tokenizer
    (``psheads.tasks.task_tokenizer``) and one embedding per word, ``<unk>`` and ``<bos>``; with
    ``record``, also the training record of a checkpoint (``task`` and ``task_options``)."""
    from psheads.tasks import task_tokenizer
    from psheads.tasks.base import TRAINING_RECORD

    save_tiny("gptj", directory, seed=seed, **{"vocab_size": len(task.vocabulary) + 2, **overrides})
    task_tokenizer(task).save_pretrained(directory)
    if record:
        options = {f.name: getattr(task, f.name) for f in dataclasses.fields(task) if f.init}
        (directory / TRAINING_RECORD).write_text(json.dumps({"task": task.name, "task_options": options}))
    return directory


def boot_bridge(directory: Path, dtype: torch.dtype = torch.float32) -> Any:
    """Boot a saved model offline with TransformerBridge."""
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_transformers(str(directory), device="cpu", dtype=dtype)


def boot_hooked(directory: Path, dtype: torch.dtype = torch.float32) -> Any:
    """Build a HookedTransformer (TransformerLens 3.x) from a local HF directory, offline."""
    from psheads.models import zoo

    return zoo.boot_local(directory, dtype=dtype, backend="hooked")


def boot_dispatched(directory: Path, device_map: dict[str, str | int], offload: str) -> Any:
    """A bridge over ``directory``'s model dispatched by accelerate with ``device_map`` (offloaded
    modules go to ``offload``). TransformerLens 3.9 takes no offload folder and refuses disk
    offload: the test is skipped there."""
    from transformer_lens.model_bridge import TransformerBridge

    if "offload_folder" not in inspect.signature(TransformerBridge.boot_transformers).parameters:
        pytest.skip("this TransformerLens (3.x) refuses a device_map that offloads to disk")
    return TransformerBridge.boot_transformers(str(directory), device_map=device_map, offload_folder=offload,
                                               dtype=torch.float32)


def has_hooked_transformer() -> bool:
    """Whether the installed TransformerLens still ships HookedTransformer (3.x)."""
    try:
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError:
        return False
    return True


def assert_same_predictions(logits: dict[str, torch.Tensor], candidates: torch.Tensor | None = None) -> None:
    """Argmax predictions from several arithmetic paths agree, and not by luck.

    Two paths (a bridge and its HF model, HookedTransformer's own attention, the logits of the
    last position only) give fp32 logits ``[n, vocab]`` that differ in the last bits, so counts
    built on their argmax (accuracies) may be compared exactly only where no prediction is near a
    tie. This checks that every prompt's top-two margin over ``candidates`` (``[c]`` or ``[n, c]``
    token ids; None: the whole vocabulary) exceeds twice the largest logit difference between the
    paths, so that no rounding can flip a prediction, and that the predictions agree.
    """
    logits = {name: value.detach().double() for name, value in logits.items()}
    if candidates is not None:
        index = candidates.expand(next(iter(logits.values())).shape[0], -1) if candidates.ndim == 1 else candidates
        logits = {name: value.gather(1, index) for name, value in logits.items()}
    reference = next(iter(logits.values()))
    spread = max(float((value - reference).abs().max()) for value in logits.values())
    top = reference.topk(2, dim=-1).values
    margin = float((top[:, 0] - top[:, 1]).min())
    assert margin > 2 * spread, f"a prediction is within rounding of a tie (margin {margin:.2e}, paths {spread:.2e})"
    assert all(torch.equal(value.argmax(-1), reference.argmax(-1)) for value in logits.values())


def install_plugin(root: Path, package: str, entry_points: dict[str, dict[str, str]], source: str) -> Path:
    """A plugin distribution laid out as pip installs one, in ``root`` (put it on ``sys.path``): the
    module ``package`` with ``source``, and ``package-0.1.dist-info`` with its METADATA and its
    ``entry_points.txt`` (``{group: {name: "module:object"}}``). Returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{package}.py").write_text(source)
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items()) + "\n"
        for group, points in entry_points.items()))
    return root
