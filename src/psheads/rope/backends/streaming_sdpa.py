"""Streamed heads computed without their hidden keys: a Hugging Face model's SDPA attention, split by head.

``masked_keys`` hides keys by narrowing the attention mask, which leaves every head's attention at
full size and makes SDPA read a dense per-head mask. When each streamed head keeps only a sink and a
recent window, its attention can skip the hidden keys instead: ``streamed_sdpa(model, sink, windows)``
runs, inside the model's own SDPA call of each layer, the full heads as they were and the streamed
heads block by block over their queries, each block against the sink and the keys of its window
only (at most ``sink + window + block`` keys). The model's own mask still applies (its causal,
sliding-window and right-padding entries are read off the mask SDPA receives; a left-padded batch is
refused). It gives the logits of ``masked_keys`` with the same keys hidden, up to floating-point
rounding. Steps that extend a KV cache (decoding) narrow the mask instead, as ``masked_keys`` does.

Routing: transformers looks the attention function up in ``ALL_ATTENTION_FUNCTIONS`` at every call;
while active, the ``"sdpa"`` entry is overridden (on that object only, as transformers allows) by a
function that computes the layers of ``model`` it was given this way and hands every other call,
any other model's included, to the function it replaced. The override is removed on exit, also on
error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import transformers
from jaxtyping import Float
from torch import Tensor
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from psheads.rope.backends.key_masks import (
    KeepKeys,
    check_maskable,
    check_unpadded_left,
    hf_attention_modules,
    hf_masked_keys,
)

BLOCK = 256
"""Query rows of a streamed head computed at once (its keys: the sink plus the window of the block)."""


def streamable(model: Any) -> bool:
    """Whether ``streamed_sdpa`` applies: a plain Hugging Face model whose attention runs SDPA."""
    if not isinstance(model, transformers.PreTrainedModel):
        return False
    try:
        modules = hf_attention_modules(model)
        check_maskable(modules)
    except ValueError:
        return False
    return all(str(getattr(module.config, "_attn_implementation", "")) == "sdpa" for module in modules.values())


def _model_mask(mask: Tensor, rows: slice, keys: Tensor) -> Tensor:
    """The model's own visibility of ``keys`` from the query ``rows``: ``[batch or 1, 1 or head, q, k]`` bool."""
    part = mask[:, :, rows][..., keys]
    return part if part.dtype == torch.bool else part == 0


def _blocks(n: int, sink: int, window: int, device: torch.device) -> list[tuple[int, int, int, int, Tensor, Tensor]]:
    """Per block of query rows: ``(start, stop, sink keys, first window key, key positions, visible)`` with
    ``visible [q, k]`` the causal ∩ (sink ∪ window) keys (the same for every layer of one input)."""
    out = []
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        low = max(0, start - window + 1)
        sinks = min(sink, low)
        keys = torch.cat([torch.arange(sinks, device=device), torch.arange(low, stop, device=device)])
        queries = torch.arange(start, stop, device=device)
        visible = (keys[None, :] <= queries[:, None]) & ((keys[None, :] < sink) | (queries[:, None] - keys[None, :]
                                                                                     < window))
        out.append((start, stop, sinks, low, keys, visible))
    return out


def _sink_and_window(x: Tensor, sinks: int, low: int, stop: int) -> Tensor:
    """Positions ``0 … sinks − 1`` and ``low … stop − 1`` of ``x`` (``[batch, head, pos, d]``)."""
    window = x[:, :, low:stop]
    return torch.cat([x[:, :, :sinks], window], dim=2) if sinks else window


def windowed_attention(query: Float[Tensor, "batch head q d"], key: Float[Tensor, "batch head k d"],
                       value: Float[Tensor, "batch head k d"], mask: Tensor | None, scaling: float | None,
                       blocks: list[tuple[int, int, int, int, Tensor, Tensor]]) -> Float[Tensor, "batch head q d"]:
    """SDPA of heads that see only a sink and a recent window (``_blocks``), block by block, within the
    model's own ``mask`` (None: causal)."""
    out = torch.empty_like(query)
    for start, stop, sinks, low, keys, visible in blocks:
        allowed = visible if mask is None else _model_mask(mask, slice(start, stop), keys) & visible
        out[:, :, start:stop] = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, start:stop], _sink_and_window(key, sinks, low, stop), _sink_and_window(value, sinks, low, stop),
            attn_mask=allowed, scale=scaling)
    return out


def _heads(index: list[int]) -> slice | list[int]:
    """A contiguous run of heads as a slice (a view, no copy), else the list."""
    return slice(index[0], index[-1] + 1) if index == list(range(index[0], index[-1] + 1)) else index


def _split_call(original: Callable, plan: tuple[int, tuple[int, ...]], cache: dict) -> Callable:
    """The SDPA function of one layer whose query heads keep ``plan``'s windows (0: full); ``cache`` holds the
    blocks of each (length, window), shared by the layers of one context."""
    sink, given = plan

    def attention(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                  **kwargs: Any) -> tuple[Tensor, None]:
        if kwargs.get("softcap") is not None or kwargs.get("s_aux") is not None:
            raise ValueError("streamed_sdpa computes SDPA without soft-capping or attention sinks; use "
                             "psheads.rope.backends.masked_keys for this model.")
        n = query.shape[2]
        if n != key.shape[2]:  # a step that extends a cache: its mask is narrowed by streamed_sdpa's pre-hooks
            return original(module, query, key, value, attention_mask, **kwargs)
        positions = torch.arange(n, device=query.device)
        check_unpadded_left(module, attention_mask, positions, positions)
        windows = [0 if window >= n else window for window in given]  # a window over the input: the full cache
        if not any(windows):
            return original(module, query, key, value, attention_mask, **kwargs)
        groups = query.shape[1] // key.shape[1]
        scaling = kwargs.get("scaling")
        out = torch.empty(query.shape[0], n, query.shape[1], value.shape[-1], dtype=query.dtype,
                          device=query.device)  # [batch, q, head, d], as SDPA's attention returns it
        full = [head for head, window in enumerate(windows) if window == 0]
        if full:
            kv = sorted({head // groups for head in full})
            if full == [head for group in kv for head in range(group * groups, (group + 1) * groups)]:
                part, _ = original(module, query[:, _heads(full)], key[:, _heads(kv)], value[:, _heads(kv)],
                                   attention_mask, **kwargs)
            else:  # whole groups are not full (query-level windows): the full heads alone, by the mask
                blocks = [(0, n, 0, 0, torch.arange(n, device=query.device),
                           torch.ones(n, n, dtype=torch.bool, device=query.device).tril())]
                part = windowed_attention(query[:, full], key[:, [h // groups for h in full]],
                                          value[:, [h // groups for h in full]], attention_mask, scaling,
                                          blocks).transpose(1, 2)
            out[:, :, _heads(full)] = part
        for window in sorted(set(windows) - {0}):
            chosen = [head for head, each in enumerate(windows) if each == window]
            if (n, window) not in cache:
                cache[n, window] = _blocks(n, sink, window, query.device)
            kv = [head // groups for head in chosen]
            part = windowed_attention(query[:, _heads(chosen)], key[:, kv], value[:, kv], attention_mask, scaling,
                                      cache[n, window])
            out[:, :, _heads(chosen)] = part.transpose(1, 2)
        return out, None

    return attention


@contextlib.contextmanager
def streamed_sdpa(model: transformers.PreTrainedModel, sink: int, windows: Mapping[int, tuple[int, ...]],
                  keep: KeepKeys) -> Iterator[None]:
    """While active, each layer in ``windows`` of ``model`` computes its query heads with the recent
    windows given (``windows[layer][head]``; 0: the full cache) and the first ``sink`` tokens (see the
    module docstring). Layers not in ``windows`` run as they are. A call that extends a KV cache
    (decoding) hides the same keys through the mask instead: ``keep`` says which
    (``key_masks.hf_masked_keys``).

    Raises:
        ValueError: ``model`` does not run SDPA attention (``streamable``).
    """
    if not streamable(model):
        raise ValueError("streamed_sdpa needs a Hugging Face model running SDPA attention; use "
                         "psheads.rope.backends.masked_keys otherwise.")
    modules = hf_attention_modules(model)
    previous = ALL_ATTENTION_FUNCTIONS["sdpa"]
    blocks: dict[tuple[int, int], list] = {}
    plans = {id(modules[layer]): _split_call(previous, (sink, tuple(heads)), blocks)
             for layer, heads in windows.items() if layer in modules and any(heads)}

    def route(module: Any, *args: Any, **kwargs: Any) -> Any:
        call = plans.get(id(module))
        return previous(module, *args, **kwargs) if call is None else call(module, *args, **kwargs)

    had_local = "sdpa" in ALL_ATTENTION_FUNCTIONS._local_mapping  # transformers' own per-object override slot
    ALL_ATTENTION_FUNCTIONS["sdpa"] = route
    try:
        with hf_masked_keys(modules, keep, decoding_only=True):
            yield
    finally:
        if had_local:
            ALL_ATTENTION_FUNCTIONS["sdpa"] = previous
        else:
            del ALL_ATTENTION_FUNCTIONS["sdpa"]
