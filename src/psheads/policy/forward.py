"""Running a model under a policy: streamed heads see only sink ∪ recent keys, in the model's own forward.

``windowed(model, policy, budget=0.5)`` is a context manager: inside it, every forward of ``model``
hides from each streamed head the keys that are neither among the first ``sink`` tokens nor among
the last ``recent`` ones before (and including) the query — StreamingLLM's pattern, on top of the
model's own causal and sliding-window masks. Outside it, the model is as it was.

* ``mode="prefill"``: every query row is windowed (DuoAttention's deployment: streaming heads keep
  sink + recent tokens in prefill and decoding). ``mode="decode"``: only rows at positions
  ``>= context`` (the tokens after the context; kvpress's ``DuoAttentionPress`` streams in decoding only).
* ``level="kv"``: all query heads of a streamed KV head are windowed together (a GQA group shares
  its cache: the real memory saving). ``level="query"``: query heads are ranked and windowed one at a
  time (an interpretability test; it saves no memory under GQA).

It works on TransformerLens models (TransformerBridge, HookedTransformer) through the pre-softmax
score hook, and on Hugging Face models through their attention's mask (eager, or SDPA in decode mode
or at the query level) or, in prefill at the KV level on SDPA, by computing each streamed head on its
sink and window keys only (``psheads.rope.backends.streaming_sdpa``: the fast path, cheaper than the
plain forward); all give the same logits up to rounding. A layer with no streamed head, or a window that
covers every key, runs untouched: a budget of 0 or a window at least the length gives the plain
forward bit for bit. Masking leaves the computation at full size (no memory is freed here):
``kv_bytes`` says what a serving stack would keep.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import torch
from jaxtyping import Bool
from torch import Tensor

from psheads.interface import validation
from psheads.policy.head_policy import HeadPolicy, Level, check_budget, check_fits
from psheads.rope.backends import AttentionShape, KeepKeys, attention_shape, masked_keys
from psheads.rope.backends.streaming_sdpa import streamable, streamed_sdpa

Mode = Literal["prefill", "decode"]


def check_rope(model: Any) -> None:
    """Raise ``ValueError`` for a Hugging Face model whose config declares no rotary embedding (TransformerLens
    models are checked by their backend)."""
    config = getattr(model, "config", None)
    if config is None or hasattr(model, "cfg"):
        return
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not any(getattr(text, name, None) for name in ("rope_parameters", "rope_theta", "rotary_dim", "rope_scaling")):
        raise ValueError(f"{type(model).__name__} does not use rotary position embeddings; psheads' head maps come "
                         "from RoPE planes and apply to RoPE models only.")


def window_keep(positions: tuple[Tensor, Tensor], sink: int, window: int, context: int | None
                ) -> Bool[Tensor, "query key"]:
    """``[query, key]``: which keys a streamed head keeps (first ``sink`` positions, the last ``window``
    up to the query; with ``context``, every key for query rows before it)."""
    queries, keys = positions
    keep = (keys[None, :] < sink) | (queries[:, None] - keys[None, :] < window)
    if context is not None:
        keep |= queries[:, None] < context
    return keep


def keep_keys(policy: HeadPolicy, budget: float | None = None, mode: Mode = "prefill", level: Level = "kv",
              context: int | None = None) -> KeepKeys:
    """The ``KeepKeys`` function of ``policy`` at ``budget`` (see the module docstring)."""
    windows = policy.windows(budget, level)
    per_head = windows[:, list(policy.kv_head_of)] if level == "kv" else windows
    rows = {layer: per_head[i] for i, layer in enumerate(policy.layers) if per_head[i].any()}
    cached: dict[tuple, Tensor] = {}

    def keep(layer: int, queries: Tensor, keys: Tensor) -> Tensor | None:
        heads = rows.get(layer)
        if heads is None:
            return None
        span = (int(queries[0]), len(queries), int(keys[0]), len(keys), str(keys.device))
        distinct = sorted(set(heads.tolist()))
        masks = []
        for window in distinct:
            key = (*span, window)
            if key not in cached:
                if len(cached) > 16:  # a new shape: the earlier ones will not come back in this forward
                    cached.clear()
                cached[key] = torch.ones(len(queries), len(keys), dtype=torch.bool, device=keys.device) if window == 0 \
                    else window_keep((queries, keys), policy.sink, window, context if mode == "decode" else None)
            masks.append(cached[key])
        if len(distinct) == 1:
            return masks[0][None]
        index = torch.as_tensor([distinct.index(w) for w in heads.tolist()], device=keys.device)
        return torch.stack(masks)[index]

    return keep


def check_mode(mode: Any, context: Any) -> int | None:
    """Validate ``mode`` and ``context`` (decode needs the context's length in tokens)."""
    if mode not in ("prefill", "decode"):
        raise ValueError(f"mode must be 'prefill' (every query row windowed) or 'decode' (only rows after the "
                         f"context), got {mode!r}.")
    if mode == "prefill":
        if context is not None:
            raise ValueError("context is the decode mode's boundary; with mode='prefill' leave it out.")
        return None
    if context is None:
        raise ValueError("mode='decode' windows only the rows after the context: pass context=<tokens in the "
                         "context>.")
    return validation.integer(context, "context", minimum=0)


def applicable(model: Any, policy: HeadPolicy) -> AttentionShape:
    """The model's attention shape, after checking that ``policy`` fits it and that it uses RoPE.

    Raises:
        TypeError: not a policy, or not a model psheads can run.
        ValueError: a policy for another model, or a model without RoPE.
    """
    if not isinstance(policy, HeadPolicy):
        raise TypeError(f"policy must be a psheads.policy.HeadPolicy, got {type(policy).__name__}.")
    check_rope(model)
    shape = attention_shape(model)
    check_fits(policy, shape)
    return shape


@contextlib.contextmanager
def windowed(model: Any, policy: HeadPolicy, budget: float | None = None, mode: Mode = "prefill",
             level: Level = "kv", context: int | None = None) -> Iterator[HeadPolicy]:
    """Run ``model`` under ``policy`` while the block runs; yields the policy at the budget used.

    Args:
        model: a TransformerLens RoPE model or a Hugging Face ``PreTrainedModel`` (SDPA or eager attention).
        policy: a ``HeadPolicy`` made for this model.
        budget: the share of heads streamed (default: the policy's), in [0, 1].
        mode: ``"prefill"`` or ``"decode"`` (then ``context`` = the tokens of the context).
        level: ``"kv"`` (a GQA group streamed together) or ``"query"`` (one query head at a time).
        context: the decode mode's boundary, in tokens.

    Raises:
        TypeError: not a policy or a model psheads can run.
        ValueError: a policy for another model, a budget outside [0, 1], a bad mode, level or
            context, or a model without RoPE — all before anything is hooked.
    """
    applicable(model, policy)  # first: the type of policy, the model's RoPE, the policy's fit
    budget = policy.budget if budget is None else check_budget(budget)
    context = check_mode(mode, context)
    if level not in ("kv", "query"):
        raise ValueError(f"level must be 'kv' (a KV group streamed together) or 'query' (one query head at a time), "
                         f"got {level!r}.")
    keep = keep_keys(policy, budget, mode, level, context)
    if mode == "prefill" and level == "kv" and streamable(model):  # the fast path: streamed heads skip their keys
        windows = policy.windows(budget, level)[:, list(policy.kv_head_of)]
        plan = {layer: tuple(int(w) for w in windows[i]) for i, layer in enumerate(policy.layers)}
        computed = streamed_sdpa(model, policy.sink, plan, keep)
    else:
        computed = masked_keys(model, keep)
    with computed:
        yield policy.with_changes(budget=budget)
