"""The KV cache a policy keeps, computed analytically: bytes of keys and values at a given length.

A KV head keeps the keys its last query can see: its layer's own sliding window (or every token) for
a full head, and the intersection of that window with the first ``sink`` tokens and the last
``window`` ones for a streamed head (past its own window, a layer's sinks are gone). Each token
costs ``2 · d_head`` numbers (a key and a value) in ``dtype``.
"""

from __future__ import annotations

import pandas as pd
import torch

from psheads.interface import validation
from psheads.policy.head_policy import HeadPolicy, check_budget


def _overlap(first: tuple[int, int], second: tuple[int, int]) -> int:
    return max(0, min(first[1], second[1]) - max(first[0], second[0]))


def head_tokens(length: int, own_window: int | None, sink: int, window: int) -> int:
    """Keys a head keeps at the last of ``length`` tokens: ``own_window`` ∩ (the first ``sink`` ∪ the last
    ``window``); ``window`` 0 keeps its whole own window (a full head)."""
    own = (length - min(own_window or length, length), length)
    if window == 0:
        return own[1] - own[0]
    sinks, recent = (0, min(sink, length)), (length - min(window, length), length)
    both = (recent[0], sinks[1])  # the positions that are both sink and recent, when they overlap
    return _overlap(sinks, own) + _overlap(recent, own) - (_overlap(both, own) if both[0] < both[1] else 0)


def kept_tokens(policy: HeadPolicy, length: int, budget: float | None = None) -> pd.DataFrame:
    """One row per (layer, KV head): ``layer, kv_head, streamed, tokens`` kept at ``length`` tokens."""
    length = validation.integer(length, "length", minimum=1)
    windows = policy.windows(budget)
    own = policy.model_windows or (None,) * len(policy.layers)
    rows = [{"layer": layer, "kv_head": kv, "streamed": bool(windows[i, kv] > 0),
             "tokens": head_tokens(length, own[i], policy.sink, int(windows[i, kv]))}
            for i, layer in enumerate(policy.layers) for kv in range(policy.n_kv_heads)]
    return pd.DataFrame(rows, columns=["layer", "kv_head", "streamed", "tokens"])


def kv_bytes(policy: HeadPolicy, length: int, dtype: torch.dtype = torch.float16, budget: float | None = None,
             batch: int = 1) -> int:
    """Bytes of keys and values the policy keeps for ``batch`` sequences of ``length`` tokens.

    ``budget`` 0 gives the full cache (with the model's own sliding windows).

    Raises:
        ValueError: the policy does not know the model's head width (build it with ``shape=``).
    """
    if policy.d_head is None:
        raise ValueError("kv_bytes needs the model's head width: build the policy with "
                         "shape=psheads.policy.attention_shape(model), or policy.with_changes(d_head=...).")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch dtype (torch.float16, torch.bfloat16, …), got {dtype!r}.")
    budget = None if budget is None else check_budget(budget)
    batch = validation.integer(batch, "batch", minimum=1)
    tokens = int(kept_tokens(policy, length, budget)["tokens"].sum())
    element = torch.empty((), dtype=dtype).element_size()
    return batch * tokens * 2 * policy.d_head * element


def streaming_everywhere(policy: HeadPolicy, length: int, budget: float) -> HeadPolicy:
    """StreamingLLM at the same total KV as ``policy`` at ``budget`` on ``length`` tokens: every KV head
    streamed, with the window whose kept tokens (``kept_tokens``, the model's own windows included) come
    closest to the policy's."""
    length = validation.integer(length, "length", minimum=1)
    budget = check_budget(budget)
    target = int(kept_tokens(policy, length, budget)["tokens"].sum())
    base = policy.with_changes(budget=1.0, wavelengths=None)

    def total(window: int) -> int:
        return int(kept_tokens(base.with_changes(recent=window), length, 1.0)["tokens"].sum())

    low, high = 1, max(1, length)
    while low < high:  # the smallest window keeping at least the target (totals grow with the window)
        middle = (low + high) // 2
        if total(middle) < target:
            low = middle + 1
        else:
            high = middle
    window = min((low, max(1, low - 1)), key=lambda w: (abs(total(w) - target), w))
    return base.with_changes(recent=window, provenance={**policy.provenance, "streaming_everywhere": {
        "length": length, "budget": budget, "kv_tokens": target}})
