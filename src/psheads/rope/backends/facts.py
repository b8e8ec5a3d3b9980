"""Facts about a model that the measurements and experiments read, whatever its kind: where its
inputs go, its vocabulary, context and tokenizer, its last-position logits, and a fingerprint of its
weights; and ``preserved_state``, which runs code in eval mode and restores every training flag.

Works on TransformerBridge, HookedTransformer and plain Hugging Face models alike, and knows no
family beyond ``psheads.rope.families``' records.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import Tensor

from psheads.rope.families import family_of


def module_tree(*roots: Any) -> list[torch.nn.Module]:
    """Every module under ``roots`` (those that are modules), each once, parents first.

    Walks ``_modules`` directly: ``Module.modules()`` builds a name for every module, which on a
    TransformerBridge (hundreds of hook points) cost milliseconds per call.
    """
    seen: dict[int, torch.nn.Module | None] = {}  # by id, in visiting order (None: an empty child slot)
    stack: list[torch.nn.Module | None] = [root for root in reversed(roots) if isinstance(root, torch.nn.Module)]
    while stack:
        module = stack.pop()
        if id(module) not in seen:
            seen[id(module)] = module
            if module is not None:
                stack.extend(reversed(module._modules.values()))
    return [module for module in seen.values() if module is not None]



def input_device(model: torch.nn.Module) -> torch.device:
    """Where ``model``'s inputs go: the device of its first parameter that holds data (the CPU if
    none does).

    The one device-placement rule for inputs. A model dispatched over devices (accelerate's
    ``device_map``, TransformerLens' ``n_devices``) moves activations between its layers itself,
    and psheads reads each layer's q and k̃ on that layer's device. Parameters offloaded to CPU or
    disk sit on the meta device until their layer runs, so they are skipped.
    """
    return next((p.device for p in model.parameters() if p.device.type != "meta"), torch.device("cpu"))



class _Values:
    """A copy of some tensors' bytes, equal to another exactly when every byte, shape and dtype
    matches (NaNs included): a full comparison, no hash."""

    def __init__(self, tensors: list[Tensor]) -> None:
        self.meta = tuple((t.shape, t.dtype) for t in tensors)
        self.data = tuple(t.detach().reshape(-1).view(torch.uint8).to("cpu", copy=True).numpy() for t in tensors)

    def __eq__(self, other: object) -> bool:  # numpy compares bytes several times faster than torch
        return (isinstance(other, _Values) and self.meta == other.meta
                and all(np.array_equal(a, b) for a, b in zip(self.data, other.data, strict=True)))

    __hash__ = None  # type: ignore[assignment]


def weights_state(model: torch.nn.Module) -> tuple:
    """Changes whenever a parameter or buffer of ``model`` is replaced, written, cast or moved.

    Built from each tensor's identity, storage, torch version counter (bumped by every in-place
    write, optimizer steps and ``load_state_dict`` included), dtype and device, and from a copy
    of every buffer's values: a write through ``buffer.data`` (``embed_positions.data.copy_(…)``)
    bumps no counter, and the buffers hold the rotation tables psheads reads θ from. Parameters
    written through ``.data`` are not seen (comparing every weight on each call would cost more
    than a forward): after such an edit, build a new ``RopeLens``.
    """
    modules = module_tree(model)
    tensors = [t for module in modules for tensors in (module._parameters, module._buffers)
               for t in tensors.values() if t is not None]
    identity = tuple((id(t), t.data_ptr(), t._version, t.dtype, t.device) for t in tensors)
    buffers = [t.contiguous() for module in modules for t in module._buffers.values()
               if t is not None and t.numel() and t.device.type != "meta"]  # meta: offloaded, no data
    return identity, _Values(buffers)


def all_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's modules plus those of a bridge's HF model, each once."""
    return module_tree(model, getattr(model, "original_model", None))


@contextlib.contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Run in eval mode (dropout off) and restore every module's own training flag afterwards.

    A TransformerBridge's ``train``/``eval`` also reach its HF model, which is not a registered
    submodule: its modules are restored too.
    """
    flags = [(module, module.training) for module in all_modules(model)]
    if not any(was_training for _, was_training in flags):  # already in eval mode: nothing to switch
        yield
        return
    model.eval()
    try:
        yield
    finally:
        for module, was_training in flags:
            module.training = was_training



def model_kind(model: Any) -> str:
    """``"bridge"`` (a TransformerBridge), ``"hooked"`` (a HookedTransformer) or ``"hf"`` (any other module)."""
    if hasattr(model, "original_model") and hasattr(model, "blocks"):
        return "bridge"
    if hasattr(model, "blocks") and hasattr(model, "cfg") and hasattr(model, "run_with_hooks"):
        return "hooked"
    return "hf"


def vocab_size(model: Any) -> int | None:
    """The model's vocabulary size (``cfg.d_vocab`` or the HF config's ``vocab_size``); None when it declares none."""
    for owner, name in ((getattr(model, "cfg", None), "d_vocab"), (getattr(model, "config", None), "vocab_size")):
        value = getattr(owner, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def context_length(model: Any) -> int | None:
    """The model's context in tokens (``cfg.n_ctx``, or the HF config's ``max_position_embeddings`` or
    ``n_positions``); None when the model declares none."""
    for owner, name in ((getattr(model, "cfg", None), "n_ctx"),
                        (getattr(model, "config", None), "max_position_embeddings"),
                        (getattr(model, "config", None), "n_positions")):
        value = getattr(owner, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def input_limit(model: Any) -> int | None:
    """The longest input ``model`` can run at all: its ``context_length`` where the family precomputes
    its rotation tables up to the context (GPT-J), None where they are computed per input."""
    kind = model_kind(model)
    if kind == "bridge":
        architecture = type(model.original_model).__name__
    elif kind == "hooked":
        architecture = str(getattr(model.cfg, "original_architecture", ""))
    else:
        architecture = type(model).__name__
    return context_length(model) if family_of(architecture).fixed_context else None


def tokenizer_of(model: Any) -> Any:
    """The tokenizer a TransformerLens model carries (``model.tokenizer``); None for a plain HF model."""
    return getattr(model, "tokenizer", None)


def _keeps_logits(model: Any, kind: str) -> bool:
    """Whether the HF forward under ``model`` takes ``logits_to_keep``."""
    hf = model.original_model if kind == "bridge" else model
    try:
        return "logits_to_keep" in inspect.signature(hf.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover - a forward without a signature
        return False


def _logits(out: Any) -> Tensor:
    return out.logits if hasattr(out, "logits") else out  # HF output or TransformerLens tensor


def last_logits(model: Any, tokens: Tensor, max_bytes: int) -> Tensor:
    """``[batch, vocab]`` logits after the last token of each row, with at most ``max_bytes`` of fp32 logits.

    Runs ``model(tokens)`` and reads the last position while the batch's full logits fit in
    ``max_bytes``; beyond that computes only the last position's logits: by ``logits_to_keep=1``
    where the Hugging Face forward takes it, on a ``HookedTransformer`` by cutting the residual
    stream to the last position before the unembedding, and otherwise by running fewer rows at once.
    """
    vocab = vocab_size(model)
    rows, positions = tokens.shape
    if vocab is None or rows * positions * vocab * 4 <= max_bytes:
        return _logits(model(tokens))[:, -1]
    kind = model_kind(model)
    if kind == "hooked":
        last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
        return model.run_with_hooks(tokens, fwd_hooks=[(last, lambda resid, hook: resid[:, -1:])])[:, -1]
    if _keeps_logits(model, kind):
        out = model(tokens, logits_to_keep=1) if kind == "bridge" else model(input_ids=tokens, logits_to_keep=1)
        return _logits(out)[:, -1]
    step = max(1, max_bytes // (positions * vocab * 4))
    return torch.cat([_logits(model(tokens[start:start + step]))[:, -1] for start in range(0, rows, step)])



def logits_at(model: Any, tokens: Tensor, positions: Tensor) -> Tensor:
    """``[batch, k, vocab]`` logits after the tokens at ``positions`` (``[batch, k]``) of each row.

    A Hugging Face forward that takes ``logits_to_keep`` computes only those positions' logits (one row
    at a time when rows ask for different positions), so a long prompt over a large vocabulary never
    forms its full logits; other models compute every position and pick.
    """
    kind = model_kind(model)
    if kind == "hf" and _keeps_logits(model, kind):
        if bool((positions == positions[:1]).all()):
            return _logits(model(input_ids=tokens, logits_to_keep=positions[0]))
        return torch.cat([_logits(model(input_ids=tokens[row:row + 1], logits_to_keep=positions[row]))
                          for row in range(tokens.shape[0])])
    logits = _logits(model(tokens) if kind != "hf" else model(input_ids=tokens))
    return logits.gather(1, positions.to(logits.device)[..., None].expand(-1, -1, logits.shape[-1]))
