"""Frequency usage: how much of each head's logit variation each RoPE plane carries (DESIGN.md §2.4)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from psheads import geometry
from psheads.lens import RopeLens

logger = logging.getLogger(__name__)

USAGE_DEFINITION = (
    "u_f = L2 norm of plane f's logits from the query over the swappable keys (before the query, "
    "window-visible, first token excluded when skip_first); shares normalised over all planes "
    "including plane 0, then averaged over prompts"
)


@dataclass(frozen=True)
class FrequencyProfile:
    """Frequency usage of every head.

    Attributes:
        planes: one row per (layer, head, plane): ``theta`` (radians/position, 0 for plane 0)
            and ``usage`` (mean share over prompts; sums to 1 per head).
        heads: one row per (layer, head): ``dominant_plane`` and ``mean_frequency_id`` (usage-
            weighted over the rotated planes 1…F).
    """

    planes: pd.DataFrame
    heads: pd.DataFrame


def as_lens(model_or_lens: Any) -> RopeLens:
    """Return a :class:`RopeLens` (wrapping a model, or the lens itself)."""
    return model_or_lens if isinstance(model_or_lens, RopeLens) else RopeLens(model_or_lens)


def frequency_profile(
    model_or_lens: Any,
    tokens: Any,
    layers: Sequence[int] | None = None,
    query: int = -1,
    skip_first: bool = False,
    batch_size: int = 32,
    progress: bool | None = None,
) -> FrequencyProfile:
    """Usage share of each RoPE plane per head, averaged over prompts.

    Args:
        model_or_lens: a TransformerLens RoPE model or a :class:`RopeLens`.
        tokens: ``[n_prompts, pos]`` token ids (equal lengths).
        layers: layers to profile (default: all).
        query: query position.
        skip_first: exclude position 0 (a BOS token) from the keys.
        batch_size: prompts per forward pass (memory is bounded by one batch).
        progress: show a progress bar (default: only on a TTY).

    Returns:
        A :class:`FrequencyProfile`; the usage definition is in ``planes.attrs``.
    """
    lens = as_lens(model_or_lens)
    tokens = lens._tokens(tokens)
    t = lens._query(query, tokens.shape[1])
    first = 1 if skip_first else 0
    if t - first < 1:
        raise ValueError(f"No keys to profile: the query at {t} has no key before it (skip_first={skip_first}).")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    chosen = list(range(lens.n_layers)) if layers is None else [lens._layer(l).layer for l in layers]
    totals = {layer: torch.zeros(lens.layers[layer].n_heads, lens.layers[layer].n_planes + 1, dtype=torch.float64)
              for layer in chosen}
    batches = range(0, tokens.shape[0], batch_size)
    for start in tqdm(batches, desc="frequency profile", disable=_no_progress(progress)):
        batch = tokens[start : start + batch_size]
        for layer, planes in lens.frequency_logits_by_layer(batch, chosen, query=t):
            geo = lens.layers[layer]
            keys = torch.arange(first, t, device=planes.device)
            visible = geometry.visible_keys(torch.tensor([t], device=planes.device), t + 1, geo.window)[0, keys]
            norms = planes[..., keys[visible]].norm(dim=-1)  # [batch, head, plane]
            shares = norms / norms.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
            totals[layer] += shares.sum(dim=0).cpu()
    rows, head_rows = [], []
    for layer in chosen:
        geo = lens.layers[layer]
        usage = totals[layer] / tokens.shape[0]
        plane_ids = list(range(1, geo.n_planes + 1)) + [0]
        thetas = geo.theta.tolist() + [0.0]
        for head in range(geo.n_heads):
            for slot, (plane, theta) in enumerate(zip(plane_ids, thetas)):
                rows.append({"layer": layer, "head": head, "plane": plane, "theta": theta,
                             "usage": float(usage[head, slot])})
            rotated = usage[head, : geo.n_planes]
            ids = torch.arange(1, geo.n_planes + 1, dtype=torch.float64)
            head_rows.append({
                "layer": layer,
                "head": head,
                "dominant_plane": plane_ids[int(usage[head].argmax())],
                "mean_frequency_id": float((rotated * ids).sum() / rotated.sum()) if rotated.sum() > 0 else float("nan"),
            })
    planes_frame, heads_frame = pd.DataFrame(rows), pd.DataFrame(head_rows)
    for frame in (planes_frame, heads_frame):
        frame.attrs.update({"usage_definition": USAGE_DEFINITION, "query": t, "skip_first": skip_first,
                            "n_prompts": int(tokens.shape[0]), "model": lens.backend.model_name})
    return FrequencyProfile(planes_frame, heads_frame)


def _no_progress(progress: bool | None) -> bool:
    if progress is None:
        import sys

        return not sys.stderr.isatty()
    return not progress
