"""``score_heads``: positional–symbolic scores of every head, exactly, from one forward pass per batch.

The swap score of paper B swaps two blocks of hidden states entering a layer and re-runs it.
Every swapped input's logits are entries of ``M[p, m] = scale · q_rotᵀ R_p k̃_m`` (positions p,
tokens m over the swappable set S), so the engine's factored logits give every swap of every
layer and head without re-running anything. The score itself is a registered method
(``psheads.measure.methods``; ``swap_attention``, the per-swap view, lives next to the swap
score there); the score arithmetic runs in the analysis dtype of ``ScoreConfig.precision``
(fp64 on a CPU and on GPUs with full-rate fp64).
"""

from __future__ import annotations

import functools
import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd
from torch import Tensor

from psheads.interface import validation
from psheads.measure import engine
from psheads.measure.engine import KeyLogits
from psheads.measure.methods import (
    ScoreConfig,
    ScoreMethod,
    base_attention,
    get_score_method,
    label,
    score_config,
    swap_attention,
)
from psheads.measure.prompts import prepare_prompts
from psheads.results import schema
from psheads.rope.inputs import layer_indices
from psheads.rope.lens import as_lens
from psheads.rope.precision import analysis_dtype, dtype_name

logger = logging.getLogger(__name__)

__all__ = ["ScoreConfig", "label", "score_heads", "swap_attention"]


def _measure(method: ScoreMethod, config: ScoreConfig, logits: KeyLogits) -> dict[str, Tensor]:
    values = method.score(logits, config)
    values["entropy"] = base_attention(logits)[1]
    return values


def score_heads(model_or_lens: Any, prompts: Any, config: ScoreConfig | None = None, *,
                progress: bool | None = None, model_name: str | None = None, **options: Any) -> pd.DataFrame:
    """Positional and symbolic scores of every head, exactly and without re-running anything.

    Args:
        model_or_lens: a TransformerLens RoPE model, a Hugging Face ``PreTrainedModel`` (booted
            as a bridge on a copy: ``psheads.rope.backends.as_bridge``), or a ``RopeLens``. A model seen
            before and unchanged since reuses its checked lens (no second probe or self-check).
        prompts: strings, a LongTensor ``[n, pos]``, token-id lists or a tokenizer's padded output
            (see ``psheads.measure.prompts``).
        config: a ``ScoreConfig`` (default: paper B's swap score with τ = 1e-4, b = 1, γ = 0.1).
        progress: progress bar (default: in a notebook or on a terminal).
        model_name: if given, the frame starts with a ``model`` column holding it (and
            ``attrs["model_name"]``), so that frames of several models concatenate.
        **options: ``ScoreConfig`` fields overriding ``config``: ``method`` (one of
            ``score_methods()``) and its options (the swap score's ``tau``, ``block_size``), ``gamma``,
            ``by_frequency``, ``reduce``, ``batch_size``, ``layers``, ``heads``; and prompt
            options: ``query`` (default: each prompt's last token; an int or one per prompt),
            ``swappable`` (default: every key before the query except BOS; keys a sliding window
            masks are always dropped), ``exclude_bos``, ``prepend_bos``.

    Returns:
        A tidy frame, one row per (layer, head[, plane]) with ``positional, symbolic,
        positional_std, symbolic_std, [method columns,] entropy, n_prompts, label`` (std over
        prompts, ddof=0; columns in ``psheads.measure.methods.frame_schema(method)``). ``label`` is an
        ordered categorical (``psheads.results.schema.LABEL_ORDER``: positional < mixed < symbolic <
        uniform < non-finite). In a hybrid model each requested block without softmax attention (linear attention,
        state-space, convolution) is one row labelled ``"not attention"``, with no head (``head`` is
        then a nullable integer) and NaN scores.
        ``df.attrs`` holds the full config (``ScoreConfig.from_dict(df.attrs["config"])`` re-runs
        it), model, backend, dtype and versions.
    """
    config = score_config(config).replace(**options)
    progress = validation.optional_boolean(progress, "progress")
    model_name = schema.model_name(model_name)
    method = get_score_method(config.method)
    lens = as_lens(model_or_lens, progress=progress)
    requested = layer_indices(config.layers, lens.n_layers)
    chosen = [layer for layer in requested if layer in lens.layers]
    if not chosen:
        lens.layer(requested[0])  # raises: names the blocks that hold attention
    if config.heads is not None:
        n_heads = min(lens.layers[layer].n_heads for layer in chosen)
        bad = [h for h in config.heads if not 0 <= h < n_heads]
        if bad or not config.heads:
            raise ValueError(f"heads {list(config.heads)} must be a non-empty list of distinct heads in "
                             f"0…{n_heads - 1}.")
    dtype = analysis_dtype(config.precision, lens.backend.device)
    prepared = prepare_prompts(lens.backend, prompts, config.prompt_options)
    minimum = method.min_swappable(config)
    reducer = engine.RunningMean(spread=schema.SCORE_SPREAD, by_frequency=config.by_frequency)
    items = engine.run(lens, prepared, functools.partial(_measure, method, config), layers=chosen,
                       heads=config.heads, min_keys=minimum, need=f"the {minimum} that method {method.name!r} needs",
                       by_frequency=config.by_frequency, batch_size=config.batch_size, progress=progress,
                       desc="score_heads", local=reducer.partial if config.reduce else None, dtype=dtype,
                       settings=config.to_dict())
    extra = [name for name in method.columns if name not in schema.SCORE_SPREAD]  # after the std columns
    if config.reduce:
        for sums in items:
            reducer.merge(sums)
        spread = [f"{name}_std" for name in schema.SCORE_SPREAD]
        frame = reducer.frame([*schema.SCORE_SPREAD, *spread, *extra, "entropy", "n_prompts"])
        if config.by_frequency:
            frame = frame.sort_values(["layer", "head", "plane"], kind="stable").reset_index(drop=True)
    else:
        frame = engine.per_prompt_frame(items, [*schema.SCORE_SPREAD, *extra, "entropy"], config.by_frequency)
    frame["label"] = pd.Categorical([label(p, s, config.gamma)
                                     for p, s in zip(frame["positional"], frame["symbolic"], strict=True)],
                                    dtype=schema.LABEL_DTYPE)
    _check_finite(frame, [*method.columns, "entropy"], config.nonfinite)
    frame = _with_other_blocks(frame, sorted(set(requested) - set(chosen)))
    frame.attrs.update({
        "config": config.to_dict(),
        "model": lens.backend.model_name,
        "backend": lens.backend.kind,
        "dtype": str(lens.backend.dtype),
        "analysis_dtype": dtype_name(dtype),
        "n_prompts": len(prepared),
        "versions": schema.versions(),
    })
    return schema.tag_model(frame, model_name)


def _with_other_blocks(frame: pd.DataFrame, layers: list[int]) -> pd.DataFrame:
    """``frame`` with one row per block of ``layers`` (blocks without softmax attention, in a hybrid
    model), labelled ``"not attention"``: no head (``head`` and the other keys become nullable
    integers), NaN scores, no prompts. Rows stay sorted by layer."""
    if not layers:
        return frame
    rows = pd.DataFrame({"layer": layers, **({"n_prompts": 0} if "n_prompts" in frame.columns else {})})
    labels = [*frame["label"], *[schema.NOT_ATTENTION] * len(layers)]
    out = pd.concat([frame, rows], ignore_index=True)
    keys = [name for name in ("prompt", "layer", "head", "plane") if name in frame.columns]
    out = out.astype({name: "Int64" if name not in ("layer", "n_prompts") else dtype
                      for name, dtype in frame.dtypes.items() if pd.api.types.is_integer_dtype(dtype)})
    out["label"] = pd.Categorical(labels, dtype=schema.LABEL_DTYPE)
    return out.sort_values(keys, kind="stable", na_position="first").reset_index(drop=True)


def _check_finite(frame: pd.DataFrame, columns: list[str], nonfinite: str) -> None:
    """Raise (or warn) when scores are not finite, naming the heads."""
    if all(np.isfinite(frame[name].to_numpy(dtype=float)).all() for name in columns):  # no frame copy
        return
    finite = np.isfinite(frame[columns].to_numpy(dtype=float)).all(axis=1)
    keys = [name for name in ("layer", "head", "plane") if name in frame.columns]
    bad = sorted({tuple(int(v) for v in row) for row in frame.loc[~finite, keys].itertuples(index=False)})
    named = ", ".join("L{}H{}".format(*row[:2]) + (f" plane {row[2]}" if len(row) > 2 else "") for row in bad[:12])
    more = f" and {len(bad) - 12} more" if len(bad) > 12 else ""
    message = (f"Scores are not finite for {len(bad)} head(s): {named}{more}. The model produced inf or NaN on "
               "these prompts (for example an fp16 overflow); score it in float32 (model.to(torch.float32)).")
    if nonfinite == "raise":
        raise ValueError(message + " Pass nonfinite='nan' to keep them as NaN, labelled 'non-finite'.")
    warnings.warn(message + " They are kept as NaN and labelled 'non-finite'.", stacklevel=3)
