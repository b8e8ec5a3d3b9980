"""Frequency usage: how much of each head's logit variation each RoPE plane carries."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from psheads.interface import reprs, validation
from psheads.measure import engine
from psheads.measure.engine import KeyLogits
from psheads.measure.prompts import PromptConfig, PromptOptions, prepare_prompts
from psheads.results import schema
from psheads.rope.lens import as_lens
from psheads.rope.precision import analysis_dtype, check_precision, dtype_name

logger = logging.getLogger(__name__)

Weighting = Literal["usage", "softmax"]

SOFTMAX_DEFINITION = (
    "paper B's table-1 frequency ID (no formula published; recovered from its figure-8 data): "
    "sum_f f * softmax(v / temperature)_f over the rotated planes f = 1..F, where v_f is plane f's maximum "
    "logit from the query over the swappable keys S (pre-soft-cap; divided by the attention scale when "
    "scale=False), averaged over prompts before the softmax"
)

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
        weighting: how ``mean_frequency_id`` weights the rotated planes: ``"usage"`` (default; the
            usage shares) or ``"softmax"`` (paper B's table-1 ID: ``softmax(v / temperature)``
            with ``v_f`` the plane's maximum logit over the keys, averaged over prompts first).
        temperature: the softmax temperature (``"softmax"`` only; paper B: 1).
        scale: keep the attention scale (1/√d_head for GPT-J) in ``v_f`` (``"softmax"`` only;
            paper B's values are reproduced without it, ``scale=False``).
        precision: the analysis dtype policy, as ``ScoreConfig.precision`` (``"auto"``,
            ``"float64"`` or ``"float32"``; ``psheads.rope.precision``).
        prompt_options: query position, the keys whose logits count (``swappable``) and BOS
            handling.
    """

    layers: tuple[int, ...] | None = None
    batch_size: int = 32
    weighting: Weighting = "usage"
    temperature: float = 1.0
    scale: bool = True
    precision: str = "auto"
    prompt_options: PromptOptions = field(default_factory=PromptOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", validation.integer(self.batch_size, "batch_size", minimum=1))
        if self.weighting not in get_args(Weighting):
            raise ValueError(f"weighting must be one of {get_args(Weighting)}, got {self.weighting!r}: 'usage' is "
                             "psheads' usage-weighted mean, 'softmax' paper B's table-1 frequency ID.")
        object.__setattr__(self, "temperature", validation.number(self.temperature, "temperature", above=0))
        object.__setattr__(self, "scale", validation.boolean(self.scale, "scale"))
        check_precision(self.precision)
        if self.layers is not None:
            object.__setattr__(self, "layers", validation.integers(self.layers, "layers"))
        if not isinstance(self.prompt_options, PromptOptions):
            raise TypeError(f"prompt_options must be a PromptOptions, got {type(self.prompt_options).__name__}.")


@dataclass(frozen=True)
class FrequencyProfile:
    """Frequency usage of every head.

    Attributes:
        planes: one row per (layer, head, plane): ``theta`` (radians/position, 0 for plane 0)
            ``usage`` (mean share over prompts; sums to 1 per head) and ``max_logit`` (mean over
            prompts of the plane's largest logit over the keys).
        heads: one row per (layer, head): ``dominant_plane`` and ``mean_frequency_id`` (usage-
            weighted over the rotated planes 1…F).
    """

    planes: pd.DataFrame
    heads: pd.DataFrame

    def _facts(self) -> list[tuple[str, Any]]:
        attrs = self.heads.attrs
        return [("model", attrs.get("model", "unknown")), ("prompts", attrs.get("n_prompts", "unknown")),
                ("layers", self.heads["layer"].nunique()), ("heads per layer", self.heads["head"].nunique()),
                ("rotated planes", int(self.planes["plane"].max()) if len(self.planes) else 0)]

    def __repr__(self) -> str:
        return reprs.text("FrequencyProfile", self._facts())

    def _repr_html_(self) -> str:
        """Notebook view: the facts, each layer's three most used planes, the first 12 heads."""
        usage = self.planes.groupby(["layer", "plane"])["usage"].mean().reset_index()
        top = usage.sort_values(["layer", "usage"], ascending=[True, False]).groupby("layer").head(3)
        per_layer = pd.DataFrame([
            {"layer": layer, "top planes (mean usage share)": ", ".join(
                f"{plane} ({share:.2f})" for plane, share in zip(rows["plane"], rows["usage"], strict=True))}
            for layer, rows in top.groupby("layer")])
        shown = self.heads.head(12)
        return reprs.html("FrequencyProfile", self._facts(), [
            ("top planes per layer", per_layer),
            (f"heads ({len(shown)} of {len(self.heads)} rows)", shown)])


def plane_usage(logits: KeyLogits) -> dict[str, Tensor]:
    """The norms ``u_f = ‖λ_f‖₂`` of a per-plane view's pre-soft-cap logits over S (shares
    ``u_f / Σ u`` need every plane, so they are formed afterwards) and each plane's maximum
    logit over S (paper B's frequency ID), both ``[*lead]``."""
    own = (logits.positions * logits.tokens).sum(-1)  # the model's own per-plane logits on S
    return {"norm": own.norm(dim=-1), "max_logit": own.amax(dim=-1)}


def frequency_id(planes: pd.DataFrame, config: ProfileConfig) -> float:
    """One head's mean frequency ID over its rotated planes (``planes``: its rows of
    ``FrequencyProfile.planes``), weighted as ``config.weighting`` says; NaN when no weight."""
    rotated = planes[planes["plane"] > 0]
    if config.weighting == "softmax":
        weights = torch.softmax(torch.tensor(rotated["max_logit"].to_numpy()) / config.temperature, 0).numpy()
    else:
        weights = rotated["usage"].to_numpy()
    total = weights.sum()
    return float((weights * rotated["plane"].to_numpy()).sum() / total) if total > 0 else float("nan")


def frequency_profile(model_or_lens: Any, prompts: Any, config: ProfileConfig | None = None, *,
                      progress: bool | None = None, model_name: str | None = None,
                      **options: Any) -> FrequencyProfile:
    """Usage share of each RoPE plane per head, averaged over prompts.

    Args:
        model_or_lens: a TransformerLens RoPE model, a Hugging Face ``PreTrainedModel`` (see
            ``psheads.rope.backends.as_bridge``) or a ``RopeLens``.
        prompts: strings, a LongTensor ``[n, pos]``, token-id lists or a tokenizer's padded output
            (see ``psheads.measure.prompts``).
        config: a ``ProfileConfig``.
        progress: show a progress bar (default: in a notebook or on a terminal).
        model_name: if given, both frames start with a ``model`` column holding it (and
            ``attrs["model_name"]``), so that profiles of several models concatenate.
        **options: ``ProfileConfig`` fields (``layers``, ``batch_size``, ``weighting``,
            ``temperature``, ``scale``, ``precision``) and prompt options
            (``query``, ``swappable``: the keys whose logits count, ``exclude_bos``,
            ``prepend_bos``) overriding ``config``.

    Returns:
        The ``FrequencyProfile``; the usage definition and config are in each frame's ``attrs``.
    """
    if config is not None and not isinstance(config, ProfileConfig):
        raise TypeError(f"config must be a psheads.ProfileConfig, got {type(config).__name__}.")
    config = (config or ProfileConfig()).replace(**options)
    progress = validation.optional_boolean(progress, "progress")
    model_name = schema.model_name(model_name)
    lens = as_lens(model_or_lens, progress=progress)
    chosen = lens.attention_layers(config.layers)
    dtype = analysis_dtype(config.precision, lens.backend.device)
    prepared = prepare_prompts(lens.backend, prompts, config.prompt_options)

    reducer = engine.RunningMean(by_frequency=True)

    def usage_sums(item: engine.Measured) -> engine.Sums:  # on the rank that measured the item
        norms = item.values.pop("norm")  # [prompt, layer · head, plane]
        item.values["usage"] = norms / norms.sum(-1, keepdim=True).clamp_min(torch.finfo(norms.dtype).tiny)
        if not config.scale:
            per_layer = torch.tensor([geo.scale for geo in item.layers], dtype=norms.dtype)
            item.values["max_logit"] = item.values["max_logit"] / per_layer.repeat_interleave(len(item.heads))[:, None]
        return reducer.partial(item)

    for sums in engine.run(lens, prepared, plane_usage, layers=chosen, heads=None, min_keys=1, need="one key",
                           by_frequency=True, batch_size=config.batch_size, progress=progress,
                           desc="frequency profile", local=usage_sums, dtype=dtype, settings=config.to_dict()):
        reducer.merge(sums)
    planes = reducer.frame(["usage", "max_logit"])[schema.PROFILE_PLANES.names]
    finite = np.isfinite(planes[["usage", "max_logit"]].to_numpy()).all(1)
    bad = planes.loc[~finite, ["layer", "head"]].drop_duplicates()
    if len(bad):
        named = ", ".join(f"L{layer}H{head}" for layer, head in bad.itertuples(index=False))
        raise ValueError(f"Frequency usage is not finite for {named}: the model produced inf or NaN on these prompts "
                         "(for example an fp16 overflow); profile it in float32 (model.to(torch.float32)).")
    head_rows = []
    for (layer, head), rows in planes.groupby(["layer", "head"], sort=True):
        head_rows.append({
            "layer": layer,
            "head": head,
            "dominant_plane": int(rows["plane"].iloc[int(rows["usage"].to_numpy().argmax())]),
            "mean_frequency_id": frequency_id(rows, config),
        })
    heads = pd.DataFrame(head_rows, columns=schema.PROFILE_HEADS.names)
    for frame in (planes, heads):
        frame.attrs.update({"usage_definition": USAGE_DEFINITION, "n_prompts": len(prepared),
                            "frequency_id_definition": SOFTMAX_DEFINITION if config.weighting == "softmax"
                            else "usage-weighted mean over the rotated planes f = 1..F",
                            "model": lens.backend.model_name, "config": config.to_dict(),
                            "analysis_dtype": dtype_name(dtype)})
    return FrequencyProfile(schema.tag_model(planes.reset_index(drop=True), model_name),
                            schema.tag_model(heads, model_name))
