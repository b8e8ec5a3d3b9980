"""Frequency usage: how much of each head's logit variation each RoPE plane carries."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from psheads import engine, schema, validation
from psheads.engine import KeyLogits
from psheads.lens import as_lens
from psheads.prompts import PromptConfig, PromptOptions, layer_indices, prepare_prompts

logger = logging.getLogger(__name__)

USAGE_DEFINITION = (
    "u_f = L2 norm (uncentred) of plane f's logits from the query over the swappable keys S "
    "(before the query, window-visible, BOS excluded); shares normalised over all planes "
    "including plane 0, then averaged over prompts"
)


@dataclass(frozen=True)
class ProfileConfig(PromptConfig):
    """Everything ``frequency_profile`` computes from (recorded in the frames' ``attrs``).

    Attributes:
        layers: layers to profile (None = all).
        batch_size: prompts per forward pass (memory is bounded by one batch).
        prompt_options: query position, the keys whose logits count (``swappable``) and BOS
            handling.
    """

    layers: tuple[int, ...] | None = None
    batch_size: int = 32
    prompt_options: PromptOptions = field(default_factory=PromptOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", validation.integer(self.batch_size, "batch_size", minimum=1))
        if self.layers is not None:
            object.__setattr__(self, "layers", validation.integers(self.layers, "layers"))
        if not isinstance(self.prompt_options, PromptOptions):
            raise TypeError(f"prompt_options must be a PromptOptions, got {type(self.prompt_options).__name__}.")


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


def plane_usage(logits: KeyLogits) -> dict[str, Tensor]:
    """The norms ``u_f = ‖λ_f‖₂`` of a per-plane view's pre-soft-cap logits over S (shares
    ``u_f / Σ u`` need every plane, so they are formed afterwards)."""
    return {"norm": (logits.positions * logits.tokens).sum(-1).norm(dim=-1)}


def frequency_profile(model_or_lens: Any, prompts: Any, config: ProfileConfig | None = None, *,
                      progress: bool | None = None, **options: Any) -> FrequencyProfile:
    """Usage share of each RoPE plane per head, averaged over prompts.

    Args:
        model_or_lens: a TransformerLens RoPE model or a ``RopeLens``.
        prompts: strings, a LongTensor ``[n, pos]`` or token-id lists (see ``psheads.prompts``).
        config: a ``ProfileConfig``.
        progress: show a progress bar (default: only on a TTY).
        **options: ``ProfileConfig`` fields (``layers``, ``batch_size``) and prompt options
            (``query``, ``swappable``: the keys whose logits count, ``exclude_bos``,
            ``prepend_bos``) overriding ``config``.

    Returns:
        The ``FrequencyProfile``; the usage definition and config are in each frame's ``attrs``.
    """
    if config is not None and not isinstance(config, ProfileConfig):
        raise TypeError(f"config must be a psheads.ProfileConfig, got {type(config).__name__}.")
    config = (config or ProfileConfig()).replace(**options)
    progress = validation.optional_boolean(progress, "progress")
    lens = as_lens(model_or_lens)
    chosen = layer_indices(config.layers, lens.n_layers)
    prepared = prepare_prompts(lens.backend, prompts, config.prompt_options)

    def measure(logits: KeyLogits) -> dict[str, Tensor]:
        return plane_usage(logits)

    reducer = engine.RunningMean(by_frequency=True)
    for item in engine.run(lens, prepared, measure, layers=chosen, heads=None, min_keys=1, need="one key",
                           by_frequency=True, batch_size=config.batch_size, progress=progress,
                           desc="frequency profile"):
        norms = item.values.pop("norm")  # [prompt, head, plane]
        item.values["usage"] = norms / norms.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
        reducer.add(item)
    planes = reducer.frame(["usage"])[schema.PROFILE_PLANES.names]
    bad = planes.loc[~np.isfinite(planes["usage"].to_numpy()), ["layer", "head"]].drop_duplicates()
    if len(bad):
        named = ", ".join(f"L{layer}H{head}" for layer, head in bad.itertuples(index=False))
        raise ValueError(f"Frequency usage is not finite for {named}: the model produced inf or NaN on these prompts "
                         "(for example an fp16 overflow); profile it in float32 (model.to(torch.float32)).")
    head_rows = []
    for (layer, head), rows in planes.groupby(["layer", "head"], sort=True):
        rotated = rows[rows["plane"] > 0]
        weight = rotated["usage"].sum()
        head_rows.append({
            "layer": layer,
            "head": head,
            "dominant_plane": int(rows["plane"].iloc[int(rows["usage"].to_numpy().argmax())]),
            "mean_frequency_id": float((rotated["usage"] * rotated["plane"]).sum() / weight) if weight > 0
            else float("nan"),
        })
    heads = pd.DataFrame(head_rows, columns=schema.PROFILE_HEADS.names)
    for frame in (planes, heads):
        frame.attrs.update({"usage_definition": USAGE_DEFINITION, "n_prompts": len(prepared),
                            "model": lens.backend.model_name, "config": config.to_dict()})
    return FrequencyProfile(planes.reset_index(drop=True), heads)
