"""Frequency usage: how much of each head's logit variation each RoPE plane carries."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from psheads import geometry
from psheads.backends import LayerCapture
from psheads.lens import as_lens, rotated_keys, rotated_query
from psheads.prompts import batches, layer_groups, prepare_prompts

logger = logging.getLogger(__name__)

USAGE_DEFINITION = (
    "u_f = L2 norm (uncentred) of plane f's logits from the query over the swappable keys S "
    "(before the query, window-visible, BOS excluded); shares normalised over all planes "
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


def frequency_profile(
    model_or_lens: Any,
    prompts: Any,
    *,
    query: int | Sequence[int] | None = None,
    swappable: Sequence[int] | Sequence[Sequence[int]] | slice | None = None,
    exclude_bos: bool | None = None,
    prepend_bos: bool | None = None,
    layers: Sequence[int] | None = None,
    batch_size: int = 32,
    progress: bool | None = None,
) -> FrequencyProfile:
    """Usage share of each RoPE plane per head, averaged over prompts.

    Args:
        model_or_lens: a TransformerLens RoPE model or a ``RopeLens``.
        prompts: strings, a LongTensor ``[n, pos]`` or token-id lists (see ``psheads.prompts``).
        query: query position (default: each prompt's last token), as in ``psheads.score_heads``.
        swappable: the keys whose logits count (default: every key before the query but BOS).
        exclude_bos: drop position 0 (None: when it holds the BOS token).
        prepend_bos: for string prompts (None: the model's default).
        layers: layers to profile (default: all).
        batch_size: prompts per forward pass (memory is bounded by one batch).
        progress: show a progress bar (default: only on a TTY).

    Returns:
        The ``FrequencyProfile``; the usage definition is in ``planes.attrs``.
    """
    lens = as_lens(model_or_lens)
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    chosen = list(range(lens.n_layers)) if layers is None else sorted({lens._layer(l).layer for l in layers})
    if not chosen:
        raise ValueError("No layers requested: pass at least one layer (or None for all).")
    prepared = prepare_prompts(lens, prompts, query=query, swappable=swappable, exclude_bos=exclude_bos,
                               prepend_bos=prepend_bos)
    totals = {layer: torch.zeros(lens.layers[layer].n_heads, lens.layers[layer].n_planes + 1, dtype=torch.float64)
              for layer in chosen}
    n_batches = -(-len(prepared) // batch_size)
    for indices, tokens, query_index in tqdm(batches(prepared, batch_size), total=n_batches,
                                             desc="frequency profile", disable=_no_progress(progress)):
        captures = lens.capture(tokens, chosen, query_index)
        for layer in chosen:
            geo, capture = lens.layers[layer], captures.pop(layer)
            for group in layer_groups(prepared, indices, geo, 1, "one key"):
                rows = torch.tensor(group.rows, device=capture.k.device)
                picked = LayerCapture(q=capture.q[rows], k=capture.k[rows], cos=capture.cos, sin=capture.sin)
                keys = torch.tensor(group.swappable, device=capture.k.device)
                planes = geometry.frequency_logits(rotated_query(geo, picked, group.query),
                                                   rotated_keys(geo, picked, keys), geo.layout, geo.scale)
                norms = planes.norm(dim=-1)  # [prompt, head, plane]
                shares = norms / norms.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
                totals[layer] += shares.sum(dim=0).cpu()
    rows, head_rows = [], []
    for layer in chosen:
        geo = lens.layers[layer]
        usage = totals[layer] / len(prepared)
        plane_ids = list(range(1, geo.n_planes + 1)) + [0]
        thetas = geo.theta.tolist() + [0.0]
        ids = torch.arange(1, geo.n_planes + 1, dtype=torch.float64)
        for head in range(geo.n_heads):
            for slot, (plane, theta) in enumerate(zip(plane_ids, thetas)):
                rows.append({"layer": layer, "head": head, "plane": plane, "theta": theta,
                             "usage": float(usage[head, slot])})
            rotated = usage[head, : geo.n_planes]
            head_rows.append({
                "layer": layer,
                "head": head,
                "dominant_plane": plane_ids[int(usage[head].argmax())],
                "mean_frequency_id": float((rotated * ids).sum() / rotated.sum()) if rotated.sum() > 0 else float("nan"),
            })
    planes_frame, heads_frame = pd.DataFrame(rows), pd.DataFrame(head_rows)
    for frame in (planes_frame, heads_frame):
        frame.attrs.update({"usage_definition": USAGE_DEFINITION, "n_prompts": len(prepared),
                            "model": lens.backend.model_name})
    return FrequencyProfile(planes_frame, heads_frame)


def _no_progress(progress: bool | None) -> bool:
    if progress is None:
        import sys

        return not sys.stderr.isatty()
    return not progress
