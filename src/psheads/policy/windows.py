"""Per-head windows from RoPE: a streamed head keeps as many recent tokens as its rotation reaches.

A head's logit use is spread over RoPE planes (``psheads.frequency_profile``: the usage share of each
plane). Take the fewest planes that carry at least ``share`` of it (by usage, largest first); the
slowest of them (smallest θ) sets the head's *wavelength* ``2π/θ`` in positions (plane 0, θ = 0:
unbounded). A KV head takes the largest wavelength among its query heads (a group is streamed
together). At a budget, the streamed heads then share the total recent tokens a uniform window would
keep (``count × recent``) in proportion to their wavelengths (each at least 1, none above the total),
so the comparison with uniform windows is at the same total KV. No anchor chooses windows this way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from psheads.interface import validation
from psheads.results import schema

DEFAULT_SHARE = 0.5
"""The share of a head's logit use whose slowest plane sets its wavelength ("most of its use")."""


def head_wavelength(planes: pd.DataFrame, share: float = DEFAULT_SHARE) -> float:
    """Positions per turn of the slowest plane among the fewest carrying ``share`` of one head's usage.

    Args:
        planes: one head's rows of ``FrequencyProfile.planes`` (``theta``, ``usage``).
        share: the share of usage those planes must reach.
    """
    ordered = planes.sort_values(["usage", "theta"], ascending=[False, False], kind="stable")
    usage = ordered["usage"].to_numpy(float)
    total = usage.sum()
    if not np.isfinite(total) or total <= 0:
        return math.inf
    reached = int(np.searchsorted(np.cumsum(usage) / total, share - 1e-12)) + 1
    slowest = float(ordered["theta"].to_numpy(float)[:reached].min())
    return math.inf if slowest <= 0 else 2 * math.pi / slowest


def wavelengths(profile: Any, kv_head_of: tuple[int, ...], layers: tuple[int, ...],
                share: float = DEFAULT_SHARE) -> np.ndarray:
    """``[layer, kv_head]`` wavelengths from a frequency profile (its ``planes`` frame, or the frame itself).

    Raises:
        ValueError: the profile lacks a layer or head of the policy.
    """
    share = validation.number(share, "share", above=0.0, maximum=1.0)
    planes = getattr(profile, "planes", profile)
    schema.PROFILE_PLANES.check(planes, ["layer", "head", "theta", "usage"], "wavelengths")
    n_kv = max(kv_head_of) + 1
    out = np.zeros((len(layers), n_kv))
    grouped = dict(tuple(planes.groupby(["layer", "head"], sort=False)))
    for i, layer in enumerate(layers):
        for head, kv in enumerate(kv_head_of):
            rows = grouped.get((layer, head))
            if rows is None:
                raise ValueError(f"The frequency profile has no planes for layer {layer}, head {head}; profile every "
                                 "layer and head of the policy (frequency_profile(model, prompts)).")
            out[i, kv] = max(out[i, kv], head_wavelength(rows, share))
    return out


def proportional_windows(lengths: np.ndarray, streamed: np.ndarray, recent: int, cap: int | None = None) -> np.ndarray:
    """Integer windows for the ``streamed`` heads, in proportion to ``lengths``, summing to what uniform windows keep.

    Uniform windows keep ``count × min(recent, cap)`` recent tokens in all. Each head gets at least 1
    and at most ``cap`` (the longest window an input allows, its length minus the sink; None: no
    cap), the share above a cap going to the other heads in proportion (water-filling); the integer
    parts are apportioned by largest remainders (ties to the earlier head). Heads not streamed get 0.
    """
    count = int(streamed.sum())
    out = np.zeros(streamed.shape, dtype=np.int64)
    if count == 0:
        return out
    limit = float("inf") if cap is None else max(1, int(cap))
    total = count * int(min(recent, limit))
    weights = np.minimum(np.asarray(lengths, dtype=float)[streamed], total)
    share = np.zeros(count)
    free = np.ones(count, dtype=bool)
    left = float(total)
    while free.any():  # water-filling: heads over the cap get it, the rest share what is left
        share[free] = left * weights[free] / weights[free].sum()
        over = free & (share > limit)
        if not over.any():
            break
        share[over] = limit
        free &= ~over
        left = total - share[~free].sum()
    base = np.maximum(1, np.floor(share)).astype(np.int64)
    spare = total - int(base.sum())
    room = (limit - base) if cap is not None else np.full(count, np.inf)
    order = [i for i in np.lexsort((np.arange(count), -(share - np.floor(share)))) if room[i] >= 1]
    base[order[:max(0, spare)]] += 1
    out[streamed] = base
    return out
