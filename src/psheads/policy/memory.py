"""The KV cache a policy keeps, computed analytically: bytes of keys and values at a given length.

A KV head keeps ``min(length, w)`` tokens of keys and values, ``w`` being the model's own sliding
window on its layer (or unbounded) for a full head, and ``sink + window`` (capped by the model's own
window) for a streamed one. Each token costs ``2 · d_head`` numbers (a key and a value) in ``dtype``.
"""

from __future__ import annotations

import pandas as pd
import torch

from psheads.interface import validation
from psheads.policy.head_policy import HeadPolicy, check_budget


def kept_tokens(policy: HeadPolicy, length: int, budget: float | None = None) -> pd.DataFrame:
    """One row per (layer, KV head): ``layer, kv_head, streamed, tokens`` kept at ``length`` tokens."""
    length = validation.integer(length, "length", minimum=1)
    windows = policy.windows(budget)
    own = policy.model_windows or (None,) * len(policy.layers)
    rows = []
    for i, layer in enumerate(policy.layers):
        window = own[i]
        limit = length if window is None else min(length, window)
        for kv in range(policy.n_kv_heads):
            recent = int(windows[i, kv])
            tokens = limit if recent == 0 else min(limit, policy.sink + recent)
            rows.append({"layer": layer, "kv_head": kv, "streamed": recent > 0, "tokens": tokens})
    return pd.DataFrame(rows)


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
