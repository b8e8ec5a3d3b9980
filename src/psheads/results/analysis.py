"""Summaries of score frames: pure pandas/numpy functions, no model calls.

Every function takes a reduced ``score_heads`` frame (one row per (layer, head) or, with
``by_frequency=True``, per (layer, head, plane)) and returns a tidy frame: one row per group and
score column, with the numbers in named columns. Frames scored on different prompt sets or models
can be concatenated with a column telling them apart and summarised together through ``by``.

- ``layer_summary``: median and quantiles over the heads of each layer.
- ``early_late`` and ``local_global``: two groups of layers compared, with bootstrap confidence
  intervals for each group's median and for the difference of the medians (whole layers
  resampled: ``layer_bootstrap_medians``).
- ``correlation``: Pearson r (Fisher or bootstrap interval) and Spearman ρ across heads.
- ``frequency_summary`` and ``band_summary``: per-plane scores of a ``by_frequency`` frame, per
  frequency ID and per frequency band.
- ``layer_kinds`` and ``add_layer_kind``: which layers are local (sliding window) or global, read
  from a ``RopeLens``'s geometry or given as a list.
- ``kv_group_agreement``: whether heads that share a KV head (GQA) share a role, against a
  within-layer shuffle; ``difference_of_medians``: a bootstrap comparison with a verdict.
- Learning dynamics (a ``dynamics.csv`` table) and length curves: ``hop_accuracy``,
  ``learned_at``, ``pure_layers``, ``first_pure`` and ``longest_ready``.

Medians and quantiles skip NaN scores (heads labelled ``non-finite``); ``n`` counts the finite
values each row summarises.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from psheads.interface import validation
from psheads.interface.reprs import layer_text
from psheads.results import schema

__all__ = [
    "SCORE_COLUMNS",
    "add_frequency_band",
    "add_layer_kind",
    "band_summary",
    "correlation",
    "early_late",
    "frequency_summary",
    "label_counts",
    "layer_kinds",
    "layer_summary",
    "local_global",
]

SCORE_COLUMNS = ("positional", "symbolic")
"""The score columns summarised by default."""

LOCAL, GLOBAL = "local", "global"
MIN_LAYERS = 2
"""Layers a group needs for a layer-bootstrap interval (with one, every resample is that layer)."""
UNROTATED = "unrotated"
"""Band of plane 0 (the unrotated dims, θ = 0)."""


# --------------------------------------------------------------------------------------------
# validation


def column_names(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a column name or a list of column names, got {type(value).__name__}.")
    names = tuple(value)
    bad = [item for item in names if not isinstance(item, str)]
    if bad:
        raise TypeError(f"{name} must hold column names (strings), got {bad!r}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{name} must not repeat columns, got {list(names)}.")
    return names


def check_scores(frame: Any, what: str, columns: Sequence[str], by: Sequence[str], per_plane: bool | None,
           extra: Sequence[str] = ()) -> pd.DataFrame:
    """Check a reduced score frame (columns, grouping, one row per key); return it unchanged."""
    required = ["layer", "head", *(["plane", "theta"] if per_plane else []), *columns, *extra]
    schema.SCORES.check(frame, list(dict.fromkeys(required)), what)
    missing = [name for name in by if name not in frame.columns]
    if missing:
        raise ValueError(f"{what}: by names the columns {missing}, which this frame lacks; it has "
                         f"{list(frame.columns)}.")
    overlap = [name for name in by if name in ("layer", "head", "plane", *columns)]
    if overlap:
        raise ValueError(f"{what}: by must name extra grouping columns (e.g. a prompt-set or layer-kind column), "
                         f"not {overlap}.")
    if "prompt" in frame.columns:
        raise ValueError(f"{what} needs a reduced frame (score_heads(..., reduce=True)); this one has a 'prompt' "
                         "column, one row per prompt. Average it first, e.g. "
                         "frame.groupby(['layer', 'head'], as_index=False)[['positional', 'symbolic']].mean().")
    if per_plane is False and "plane" in frame.columns:
        raise ValueError(f"{what} needs a per-head frame; this one is per plane (scored with by_frequency=True). "
                         "Use frequency_summary or band_summary on it, or score without by_frequency.")
    if frame.empty:
        raise ValueError(f"{what} got an empty frame.")
    for name in columns:
        if not pd.api.types.is_numeric_dtype(frame[name]) or pd.api.types.is_bool_dtype(frame[name]):
            raise TypeError(f"{what}: column {name!r} must be numeric, got dtype {frame[name].dtype}.")
    keys = [*by, "layer", "head", *(["plane"] if "plane" in frame.columns else [])]
    duplicated = frame.duplicated(keys)
    if duplicated.any():
        first = frame.loc[duplicated, keys].iloc[0].to_dict()
        raise ValueError(f"{what}: {int(duplicated.sum())} row(s) repeat a key {keys} (first: {first}). Frames from "
                         "several prompt sets or models need a column telling them apart, named in by=.")
    return frame


def _quantiles(quantiles: Any) -> tuple[float, float]:
    if isinstance(quantiles, (str, bytes)) or not isinstance(quantiles, Iterable):
        raise TypeError(f"quantiles must be a pair (low, high), e.g. (0.25, 0.75), got {quantiles!r}.")
    values = tuple(quantiles)
    if len(values) != 2:
        raise ValueError(f"quantiles must be a pair (low, high), e.g. (0.25, 0.75), got {len(values)} values.")
    low, high = (validation.number(value, "quantiles item", minimum=0.0, maximum=1.0) for value in values)
    if not low < high:
        raise ValueError(f"quantiles must be increasing (low < high), got {values!r}.")
    return low, high


def quantile_name(q: float) -> str:
    return f"q{100 * q:g}"


def _confidence(confidence: Any) -> float:
    return validation.number(confidence, "confidence", above=0.0, below=1.0)


def _layer(value: Any, name: str) -> int:
    return validation.integer(value, name, minimum=0)


# --------------------------------------------------------------------------------------------
# statistics


def _finite(values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]


def _stats(values: np.ndarray, quantiles: tuple[float, float]) -> dict[str, float]:
    names = [quantile_name(q) for q in quantiles]
    if values.size == 0:
        return {"n": 0, "mean": math.nan, "median": math.nan, names[0]: math.nan, names[1]: math.nan,
                "min": math.nan, "max": math.nan}
    low, high = np.quantile(values, quantiles)
    return {"n": int(values.size), "mean": float(values.mean()), "median": float(np.median(values)),
            names[0]: float(low), names[1]: float(high), "min": float(values.min()), "max": float(values.max())}


def _bootstrap_medians(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    if values.size == 0:
        return np.full(n_boot, math.nan)
    index = rng.integers(0, values.size, size=(n_boot, values.size))
    return np.median(values[index], axis=1)


def layer_bootstrap_medians(values: Any, layers: Any, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of a cluster bootstrap over layers: ``n_boot`` resamples, each one drawing as many
    layers as there are, with replacement, and taking the median of every head of the drawn layers
    pooled (a layer drawn twice counts twice).

    Heads of one layer share their inputs and are not independent; resampling whole layers keeps
    that dependence, where resampling heads would treat a layer of identical heads as many
    independent measurements.

    Args:
        values: one score per head (non-finite values are left out; a layer with none left is not
            a unit).
        layers: each value's layer, the same length as ``values``.
        n_boot: resamples.
        rng: the generator the layers are drawn from.

    Returns:
        ``Float[ndarray, "n_boot"]``, the medians; all NaN with fewer than ``MIN_LAYERS`` layers,
        where resampling layers cannot tell how much the median would move.
    """
    values, layers = np.asarray(values, dtype=float), np.asarray(layers)
    if values.shape != layers.shape or values.ndim != 1:
        raise ValueError(f"values and layers must be 1-d and of one length, got shapes {values.shape} and "
                         f"{layers.shape}.")
    finite = np.isfinite(values)
    values, layers = values[finite], layers[finite]
    order = np.argsort(values, kind="stable")
    values, layers = values[order], layers[order]
    units, member = np.unique(layers, return_inverse=True)
    k = units.size
    if k < MIN_LAYERS:
        return np.full(n_boot, math.nan)
    draws = rng.integers(0, k, size=(n_boot, k))
    counts = np.bincount((draws + k * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * k).reshape(n_boot, k)
    # each resample as weights on the sorted heads: the pooled median without building the pool
    cumulative = counts[:, member].cumsum(axis=1)
    total = cumulative[:, -1:]
    low = (cumulative <= (total - 1) // 2).sum(axis=1)
    high = (cumulative <= total // 2).sum(axis=1)
    return (values[low] + values[high]) / 2


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return float(low), float(high)


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis (NaN where a variance is zero)."""
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    denominator = np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(-1) / denominator
    return np.where(denominator > 0, np.clip(r, -1.0, 1.0), np.nan)


# --------------------------------------------------------------------------------------------
# per layer


def layer_summary(scores: pd.DataFrame, *, columns: Sequence[str] = SCORE_COLUMNS,
                  quantiles: Sequence[float] = (0.25, 0.75), by: str | Sequence[str] = ()) -> pd.DataFrame:
    """Median, quantiles, mean and range of each score over the heads of each layer.

    Args:
        scores: a reduced per-head ``score_heads`` frame.
        columns: the score columns to summarise.
        quantiles: the (low, high) quantiles to report, e.g. (0.25, 0.75) gives ``q25`` and ``q75``.
        by: extra grouping columns (for frames concatenated from several prompt sets).

    Returns:
        One row per ([by,] layer, score): ``n`` (finite values), ``mean``, ``median``, the two
        quantiles, ``min``, ``max``.
    """
    columns, by = column_names(columns, "columns"), column_names(by, "by")
    q = _quantiles(quantiles)
    frame = check_scores(scores, "layer_summary", columns, by, per_plane=False)
    rows = []
    for key, part in frame.groupby([*by, "layer"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for column in columns:
            rows.append({**dict(zip([*by, "layer"], key)), "score": column, **_stats(_finite(part[column]), q)})
    out = pd.DataFrame(rows)
    out["layer"] = out["layer"].astype(int)
    out.attrs["quantiles"] = q
    return out


def label_counts(scores: pd.DataFrame, *, by: str | Sequence[str] = ()) -> pd.DataFrame:
    """How many heads (or planes) carry each label, per group.

    Args:
        scores: a reduced ``score_heads`` frame (per head or per plane).
        by: grouping columns, e.g. ``"layer"`` or a layer-kind column (none: the whole frame).

    Returns:
        One row per ([by,] label): ``n`` and ``share`` (of the group's rows).
    """
    by = column_names(by, "by")
    frame = check_scores(scores, "label_counts", (), [name for name in by if name != "layer"], per_plane=None,
                   extra=["label"])
    groups = frame.groupby(list(by), sort=True) if by else [((), frame)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        counts = part["label"].value_counts(sort=False)
        for label in sorted(counts.index[counts > 0], key=str):
            rows.append({**dict(zip(by, key)), "label": label, "n": int(counts[label]),
                         "share": float(counts[label] / len(part))})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# groups of layers


def _compare(frame: pd.DataFrame, group_of: Mapping[int, str], order: tuple[str, str], columns: tuple[str, ...],
             q: tuple[float, float], by: tuple[str, ...], confidence: float, n_boot: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = frame.assign(_group=frame["layer"].map(lambda layer: group_of.get(int(layer))))
    lo_name, hi_name = (quantile_name(value) for value in q)
    rows = []
    groups = frame.groupby(list(by), sort=True) if by else [((), frame)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        base = dict(zip(by, key))
        for column in columns:
            medians = {}
            for group in order:
                members = part[part["_group"] == group]
                values = _finite(members[column])
                boot = layer_bootstrap_medians(members[column], members["layer"], n_boot, rng)
                medians[group] = (values, boot)
                low, high = _interval(boot, confidence)
                layers = sorted(int(layer) for layer in members["layer"].unique())
                rows.append({**base, "group": group, "layers": layer_text(layers), "n_layers": len(layers),
                             "score": column, **_stats(values, q), "median_ci_low": low, "median_ci_high": high})
            (first, boot_first), (second, boot_second) = medians[order[0]], medians[order[1]]
            difference = (float(np.median(second) - np.median(first)) if first.size and second.size else math.nan)
            low, high = _interval(boot_second - boot_first, confidence)
            rows.append({**base, "group": f"{order[1]} - {order[0]}", "layers": "", "n_layers": 0, "score": column,
                         "n": int(first.size + second.size), "mean": math.nan, "median": difference,
                         lo_name: math.nan, hi_name: math.nan, "min": math.nan, "max": math.nan,
                         "median_ci_low": low, "median_ci_high": high})
    out = pd.DataFrame(rows)
    out.attrs.update({"quantiles": q, "confidence": confidence, "n_boot": n_boot, "seed": seed,
                      "resample": "layer", "min_layers": MIN_LAYERS})
    return out


def early_late(scores: pd.DataFrame, split: int | None = None, *, columns: Sequence[str] = SCORE_COLUMNS,
               quantiles: Sequence[float] = (0.25, 0.75), by: str | Sequence[str] = (), confidence: float = 0.95,
               n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Scores of the early layers against the late ones (paper A: layers 1–13 vs 14–26 of gemma-2-2b).

    Args:
        scores: a reduced per-head ``score_heads`` frame.
        split: the first late layer: layers below it are early. Default: the middle of the layers
            present (``sorted_layers[n // 2]``: 0–8 vs 9–17 for 18 layers, 0–12 vs 13–25 for 26),
            in each ``by`` group (two models of different depths each split their own layers).
            ``attrs["split"]`` is the split, or, when the groups split differently, a dict from
            each group's key tuple to its split.
        columns: the score columns to compare.
        quantiles: the (low, high) quantiles to report.
        by: extra grouping columns.
        confidence: level of the bootstrap intervals.
        n_boot: bootstrap resamples.
        seed: seed of the bootstrap.

    Returns:
        One row per ([by,] group, score) for ``early`` and ``late``: ``layers`` (as text),
        ``n_layers``, ``n`` (heads with a finite score), ``mean``, ``median`` (over the group's
        heads), the two quantiles, ``min``, ``max`` and a percentile-bootstrap interval of the
        median (``median_ci_low``, ``median_ci_high``); then a row ``group = "late - early"`` whose
        ``median`` is the difference of the two medians, with its bootstrap interval.

        The bootstrap resamples whole layers (``layer_bootstrap_medians``; ``attrs["resample"]``
        is ``"layer"``): heads of one layer are not independent, and resampling heads would give
        intervals too narrow. The difference's resamples draw each group's layers
        independently. A group with fewer than ``MIN_LAYERS`` (2) layers has no interval (NaN), nor
        has the difference; with few layers (under about 5 a group) the interval is coarse, as
        there are few distinct resamples. Split so that each group has several layers.
    """
    columns, by = column_names(columns, "columns"), column_names(by, "by")
    q = _quantiles(quantiles)
    confidence = _confidence(confidence)
    n_boot = validation.integer(n_boot, "n_boot", minimum=1)
    seed = validation.seed(seed)
    frame = check_scores(scores, "early_late", columns, by, per_plane=False)
    if split is None and by and frame.groupby(list(by)).ngroups > 1:  # each group splits its own layers
        parts = [early_late(part.assign(**dict(zip(by, key if isinstance(key, tuple) else (key,)))), None,
                            columns=columns, quantiles=quantiles, by=by, confidence=confidence, n_boot=n_boot,
                            seed=seed) for key, part in frame.groupby(list(by), sort=True)]
        out = pd.concat(parts, ignore_index=True)
        out.attrs.update({name: value for name, value in parts[0].attrs.items() if name != "split"})
        splits = {tuple(part[list(by)].iloc[0]): part.attrs["split"] for part in parts}
        out.attrs["split"] = next(iter(splits.values())) if len(set(splits.values())) == 1 else splits
        return out
    layers = sorted(int(layer) for layer in frame["layer"].unique())
    if split is None:
        if len(layers) < 2:
            raise ValueError(f"early_late needs at least 2 layers, this frame has {layers}.")
        split = layers[len(layers) // 2]
    split = _layer(split, "split")
    early = [layer for layer in layers if layer < split]
    if not early or len(early) == len(layers):
        raise ValueError(f"split {split} must leave layers on both sides; the frame has layers {layer_text(layers)}.")
    group_of = {layer: "early" if layer < split else "late" for layer in layers}
    out = _compare(frame, group_of, ("early", "late"), columns, q, by, confidence, n_boot, seed)
    out.attrs["split"] = split
    return out


def layer_kinds(lens: Any) -> dict[int, str]:
    """``{layer: "local" | "global"}`` from a ``RopeLens``'s geometry (local = sliding window).

    Args:
        lens: a ``psheads.RopeLens`` (anything whose ``layers`` iterate over ``LayerGeometry``).
    """
    layers = getattr(lens, "layers", None)
    if layers is None or isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable) or not all(
            hasattr(geo, "window") for geo in layers):
        raise TypeError(f"layer_kinds needs a psheads.RopeLens (its layers' geometry tells the sliding windows), got "
                        f"{type(lens).__name__}; wrap a model first: psheads.RopeLens(model).")
    return {int(getattr(geo, "layer", index)): LOCAL if geo.window is not None else GLOBAL
            for index, geo in enumerate(layers)}


def _kinds_for(local: Any, layers: Sequence[int], what: str) -> dict[int, str]:
    """``{layer: kind}`` for ``layers`` from a lens, a mapping or a list of local layers."""
    if hasattr(local, "layers") and not isinstance(local, Mapping):
        kinds = layer_kinds(local)
    elif isinstance(local, Mapping):
        kinds = {}
        for layer, kind in local.items():
            if kind not in (LOCAL, GLOBAL):
                raise ValueError(f"{what}: layer kinds must be {LOCAL!r} or {GLOBAL!r}, got {kind!r} for layer "
                                 f"{layer}.")
            kinds[_layer(layer, "local key")] = kind
    else:
        listed = validation.integers(local, "local", minimum=0, unique=True)
        unknown = sorted(set(listed) - set(layers))
        if unknown:
            raise ValueError(f"{what}: local names layers {unknown} that the frame lacks (it has "
                             f"{layer_text(layers)}).")
        kinds = {layer: LOCAL if layer in listed else GLOBAL for layer in layers}
    missing = [layer for layer in layers if layer not in kinds]
    if missing:
        raise ValueError(f"{what}: the kind of layers {missing} is unknown (the lens or mapping lacks them).")
    return {layer: kinds[layer] for layer in layers}


def add_layer_kind(scores: pd.DataFrame, local: Any, column: str = "layer_kind") -> pd.DataFrame:
    """A copy of ``scores`` with a column telling local (sliding-window) layers from global ones.

    Args:
        scores: any frame with a ``layer`` column (per head or per plane).
        local: a ``RopeLens`` (read with ``layer_kinds``), a mapping ``{layer: "local" | "global"}``
            or a list of the local layers (the others are global).
        column: name of the new column.
    """
    if not isinstance(column, str):
        raise TypeError(f"column must be a string, got {type(column).__name__}.")
    schema.SCORES.check(scores, ["layer"], "add_layer_kind")
    layers = sorted(int(layer) for layer in scores["layer"].unique())
    kinds = _kinds_for(local, layers, "add_layer_kind")
    out = scores.copy()
    out[column] = [kinds[int(layer)] for layer in out["layer"]]
    return out


def local_global(scores: pd.DataFrame, local: Any, *, columns: Sequence[str] = SCORE_COLUMNS,
                 quantiles: Sequence[float] = (0.25, 0.75), by: str | Sequence[str] = (), confidence: float = 0.95,
                 n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Scores of the local (sliding-window) layers against the global ones.

    Args:
        scores: a reduced per-head ``score_heads`` frame.
        local: a ``RopeLens`` (its geometry says which layers have a window), a mapping
            ``{layer: "local" | "global"}`` or a list of the local layers.
        columns: the score columns to compare.
        quantiles: the (low, high) quantiles to report.
        by: extra grouping columns.
        confidence: level of the bootstrap intervals.
        n_boot: bootstrap resamples.
        seed: seed of the bootstrap.

    Returns:
        One row per ([by,] group, score) for ``local`` and ``global``: ``layers`` (as text),
        ``n_layers``, ``n`` (heads with a finite score), ``mean``, ``median`` (over the group's
        heads), the two quantiles, ``min``, ``max`` and a percentile-bootstrap interval of the
        median (``median_ci_low``, ``median_ci_high``); then a row ``group = "global - local"``
        whose ``median`` is the difference of the two medians, with its bootstrap interval. As in
        ``early_late``, the bootstrap resamples whole layers (``attrs["resample"] == "layer"``),
        and a kind with a single layer has no interval (NaN).
    """
    columns, by = column_names(columns, "columns"), column_names(by, "by")
    q = _quantiles(quantiles)
    confidence = _confidence(confidence)
    n_boot = validation.integer(n_boot, "n_boot", minimum=1)
    seed = validation.seed(seed)
    frame = check_scores(scores, "local_global", columns, by, per_plane=False)
    layers = sorted(int(layer) for layer in frame["layer"].unique())
    kinds = _kinds_for(local, layers, "local_global")
    present = set(kinds.values())
    if present != {LOCAL, GLOBAL}:
        raise ValueError(f"local_global needs both local and global layers; the frame's layers {layer_text(layers)} "
                         f"are all {present.pop()}.")
    return _compare(frame, kinds, (LOCAL, GLOBAL), columns, q, by, confidence, n_boot, seed)


# --------------------------------------------------------------------------------------------
# correlation


def correlation(scores: pd.DataFrame, x: str = "positional", y: str = "symbolic", *, by: str | Sequence[str] = (),
                method: str = "fisher", confidence: float = 0.95, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Pearson correlation of two score columns across heads (paper A: r = −0.91 on gemma-2-2b).

    Rows with a NaN in either column are left out.

    Args:
        scores: a reduced ``score_heads`` frame (per head, or per plane: then across every
            (head, plane) row).
        x: first column.
        y: second column.
        by: grouping columns (e.g. ``"layer_kind"``); none: one row for the whole frame.
        method: the interval: ``"fisher"`` (Fisher z, normal approximation; needs n > 3) or
            ``"bootstrap"`` (percentile bootstrap over rows).
        confidence: level of the interval.
        n_boot: bootstrap resamples (``method="bootstrap"``).
        seed: seed of the bootstrap.

    Returns:
        One row per group: ``x``, ``y``, ``n``, ``r`` (Pearson; NaN when a column is constant),
        ``ci_low``, ``ci_high``, ``ci_method``, ``confidence`` and ``spearman`` (rank correlation).
    """
    if method not in ("fisher", "bootstrap"):
        raise ValueError(f"method must be 'fisher' or 'bootstrap', got {method!r}.")
    x, y = column_names(x, "x"), column_names(y, "y")
    if len(x) != 1 or len(y) != 1:
        raise TypeError("x and y must each be one column name.")
    (x,), (y,) = x, y
    by = column_names(by, "by")
    confidence = _confidence(confidence)
    n_boot = validation.integer(n_boot, "n_boot", minimum=1)
    seed = validation.seed(seed)
    frame = check_scores(scores, "correlation", list(dict.fromkeys([x, y])), [name for name in by if name != "layer"],
                   per_plane=None)
    rng = np.random.default_rng(seed)
    groups = frame.groupby(list(by), sort=True) if by else [((), frame)]
    rows = []
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        pairs = part[[x, y]].to_numpy(dtype=float)
        pairs = pairs[np.isfinite(pairs).all(axis=1)]
        n = len(pairs)
        r = float(_pearson(pairs[:, 0], pairs[:, 1])) if n >= 2 else math.nan
        low = high = math.nan
        if math.isfinite(r) and method == "fisher" and n > 3:
            if abs(r) == 1.0:
                low = high = r
            else:
                z, half = math.atanh(r), NormalDist().inv_cdf((1 + confidence) / 2) / math.sqrt(n - 3)
                low, high = math.tanh(z - half), math.tanh(z + half)
        elif math.isfinite(r) and method == "bootstrap":
            index = rng.integers(0, n, size=(n_boot, n))
            low, high = _interval(_pearson(pairs[index, 0], pairs[index, 1]), confidence)
        if n >= 2:
            ranks = pd.DataFrame(pairs).rank().to_numpy()
            spearman = float(_pearson(ranks[:, 0], ranks[:, 1]))
        else:
            spearman = math.nan
        rows.append({**dict(zip(by, key)), "x": x, "y": y, "n": n, "r": r, "ci_low": low, "ci_high": high,
                     "ci_method": method, "confidence": confidence, "spearman": spearman})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# per frequency


def _band_table(max_plane: int, bands: Any) -> list[tuple[str, int, int]]:
    """``[(name, first_id, last_id)]``, fastest band first."""
    if isinstance(bands, Mapping):
        table = []
        for name, span in bands.items():
            if not isinstance(name, str):
                raise TypeError(f"bands keys must be band names (strings), got {name!r}.")
            if isinstance(span, (str, bytes)) or not isinstance(span, Sequence) or len(span) != 2:
                raise TypeError(f"bands[{name!r}] must be a pair (first_id, last_id), got {span!r}.")
            first, last = (validation.integer(value, f"bands[{name!r}] item", minimum=1) for value in span)
            if first > last:
                raise ValueError(f"bands[{name!r}] must have first_id <= last_id, got {tuple(span)}.")
            table.append((name, first, last))
        if not table:
            raise ValueError("bands must name at least one band.")
        table.sort(key=lambda row: row[1])
        for (name_a, _, last_a), (name_b, first_b, _) in zip(table, table[1:]):
            if first_b <= last_a:
                raise ValueError(f"bands {name_a!r} and {name_b!r} overlap.")
        return table
    count = validation.integer(bands, "bands", minimum=1)
    if count > max_plane:
        raise ValueError(f"bands asks for {count} bands, but there are only {max_plane} rotated planes.")
    table = []
    for part in np.array_split(np.arange(1, max_plane + 1), count):
        first, last = int(part[0]), int(part[-1])
        table.append((f"IDs {first}–{last}" if first != last else f"ID {first}", first, last))
    return table


def _period_table(period_edges: Any) -> list[tuple[str, float, float]]:
    if isinstance(period_edges, (str, bytes)) or not isinstance(period_edges, Iterable):
        raise TypeError(f"period_edges must be a list of periods in tokens, e.g. [16, 256], got {period_edges!r}.")
    edges = [validation.number(value, "period_edges item", above=0.0) for value in period_edges]
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"period_edges must be a non-empty increasing list, got {edges}.")
    bounds = [0.0, *edges, math.inf]
    table = []
    for low, high in zip(bounds, bounds[1:]):
        if low == 0.0:
            name = f"period < {high:g}"
        elif math.isinf(high):
            name = f"period ≥ {low:g}"
        else:
            name = f"period {low:g}–{high:g}"
        table.append((name, low, high))
    return table


def add_frequency_band(scores: pd.DataFrame, bands: int | Mapping[str, tuple[int, int]] = 4,
                       period_edges: Sequence[float] | None = None) -> pd.DataFrame:
    """A copy of a per-plane frame with ``band`` and ``band_index`` (1 = fastest band) columns.

    Plane 0 (the unrotated dims, θ = 0) gets band ``"unrotated"`` and the last index.

    Args:
        scores: a ``by_frequency`` frame (``plane`` and ``theta`` columns), or any frame with them.
        bands: ``n`` equal-width bands of frequency IDs (1 = fastest), or a mapping
            ``{name: (first_id, last_id)}`` (inclusive, not overlapping; planes outside every band
            get band ``None``).
        period_edges: instead of ID bands, band by the period 2π/θ in tokens: edges
            ``[e1, e2, …]`` give bands ``period < e1``, ``period e1–e2``, …, ``period ≥ ek``. The
            period depends on θ, so the same ID can fall in different bands in layers with
            different RoPE bases.
    """
    schema.SCORES.check(scores, ["plane", "theta"], "add_frequency_band")
    planes = scores["plane"].to_numpy()
    rotated = planes[planes > 0]
    out = scores.copy()
    if period_edges is not None:
        table = _period_table(period_edges)
        theta = scores["theta"].to_numpy(dtype=float)
        with np.errstate(divide="ignore"):
            period = np.where(theta > 0, 2 * np.pi / theta, np.inf)
        index = np.searchsorted([high for _, _, high in table[:-1]], period, side="right") + 1
        names = [table[i - 1][0] for i in index]
    else:
        if rotated.size == 0:
            raise ValueError("add_frequency_band: the frame has no rotated planes (plane > 0).")
        table = _band_table(int(rotated.max()), bands)
        names, index = [], []
        for plane in planes:
            match = next(((i, name) for i, (name, first, last) in enumerate(table, 1) if first <= plane <= last), None)
            names.append(match[1] if match else None)
            index.append(match[0] if match else -1)
        index = np.asarray(index)
    unrotated = planes == 0
    out["band"] = [UNROTATED if zero else name for zero, name in zip(unrotated, names)]
    out["band_index"] = np.where(unrotated, len(table) + 1, index).astype(int)
    return out


def _per_plane(scores: pd.DataFrame, what: str, columns: Any, by: Any, quantiles: Any,
               unrotated: Any) -> tuple[pd.DataFrame, tuple[str, ...], tuple[str, ...], tuple[float, float]]:
    """The checked arguments of a per-plane summary: (rows to summarise, columns, by, quantiles)."""
    columns, by = column_names(columns, "columns"), column_names(by, "by")
    q = _quantiles(quantiles)
    frame = check_scores(scores, what, columns, [name for name in by if name != "layer"], per_plane=True)
    if not validation.boolean(unrotated, "unrotated"):
        frame = frame[frame["plane"] > 0]
        if frame.empty:
            raise ValueError(f"{what}: the frame has no rotated planes (plane > 0); pass unrotated=True to keep "
                             "plane 0.")
    return frame, columns, by, q


def frequency_summary(scores: pd.DataFrame, *, columns: Sequence[str] = SCORE_COLUMNS,
                      quantiles: Sequence[float] = (0.25, 0.75), by: str | Sequence[str] = (),
                      bands: int | Mapping[str, tuple[int, int]] = 4, period_edges: Sequence[float] | None = None,
                      unrotated: bool = False) -> pd.DataFrame:
    """Each score per frequency ID: median and quantiles over heads (and layers) of a per-plane frame.

    Args:
        scores: a reduced ``score_heads(..., by_frequency=True)`` frame.
        columns: the score columns to summarise.
        quantiles: the (low, high) quantiles to report.
        by: extra grouping columns, e.g. a layer-kind column from ``add_layer_kind`` (θ of a given
            ID differs between RoPE bases) or ``"layer"`` for one curve per layer.
        bands: the band each ID is reported in (see ``add_frequency_band``).
        period_edges: band by period instead (see ``add_frequency_band``).
        unrotated: keep plane 0 (the unrotated dims). Left out by default: in a fully rotated
            model it has no dims, and constant logits score as uniform (1, 1).

    Returns:
        One row per ([by,] plane, score): ``theta`` (median over the rows; ``theta_min`` and
        ``theta_max`` show whether it varies), ``period`` (2π/θ in tokens), ``band``, ``n``,
        ``mean``, ``median``, the two quantiles, ``min``, ``max``.
    """
    frame, columns, by, q = _per_plane(scores, "frequency_summary", columns, by, quantiles, unrotated)
    rows = []
    for key, part in frame.groupby([*by, "plane"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        theta = part["theta"].to_numpy(dtype=float)
        centre = float(np.median(theta))
        period = 2 * math.pi / centre if centre > 0 else math.inf
        for column in columns:
            rows.append({**dict(zip([*by, "plane"], key)), "theta": centre, "theta_min": float(theta.min()),
                         "theta_max": float(theta.max()), "period": period, "score": column,
                         **_stats(_finite(part[column]), q)})
    out = pd.DataFrame(rows)
    out["plane"] = out["plane"].astype(int)
    banded = add_frequency_band(out, bands=bands, period_edges=period_edges)
    out.insert(out.columns.get_loc("score"), "band", banded["band"])
    out.attrs["quantiles"] = q
    return out


def band_summary(scores: pd.DataFrame, *, columns: Sequence[str] = SCORE_COLUMNS,
                 quantiles: Sequence[float] = (0.25, 0.75), by: str | Sequence[str] = (),
                 bands: int | Mapping[str, tuple[int, int]] = 4, period_edges: Sequence[float] | None = None,
                 unrotated: bool = False) -> pd.DataFrame:
    """Each score per frequency band: median and quantiles over every (head, plane) row of a band.

    Args:
        scores: a reduced ``score_heads(..., by_frequency=True)`` frame.
        columns: the score columns to summarise.
        quantiles: the (low, high) quantiles to report.
        by: extra grouping columns (e.g. a layer-kind column from ``add_layer_kind``).
        bands: ``n`` equal-width ID bands or ``{name: (first_id, last_id)}`` (see
            ``add_frequency_band``).
        period_edges: band by period 2π/θ in tokens instead (see ``add_frequency_band``).
        unrotated: keep plane 0 as its own band ``"unrotated"``.

    Returns:
        One row per ([by,] band, score), fastest band first: ``band_index``, ``planes`` (the IDs
        as text), ``n`` (rows with a finite score), ``mean``, ``median``, the two quantiles,
        ``min``, ``max``. Planes outside every named band are left out.
    """
    frame, columns, by, q = _per_plane(scores, "band_summary", columns, by, quantiles, unrotated)
    frame = add_frequency_band(frame, bands=bands, period_edges=period_edges)
    frame = frame[frame["band_index"] > 0]
    rows = []
    for key, part in frame.groupby([*by, "band_index"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        planes = sorted(int(plane) for plane in part["plane"].unique())
        for column in columns:
            rows.append({**dict(zip(by, key[:-1])), "band": part["band"].iloc[0], "band_index": int(key[-1]),
                         "planes": layer_text(planes), "score": column, **_stats(_finite(part[column]), q)})
    out = pd.DataFrame(rows)
    out.attrs["quantiles"] = q
    return out



# --------------------------------------------------------------------------------------------
# heads that share a KV head, and frequencies by role


def kv_group_agreement(scores: pd.DataFrame, *, by: str | Sequence[str] = (), n_shuffles: int = 2000,
                       seed: int = 0) -> pd.DataFrame:
    """Do query heads that read the same KV head (GQA) share a role?

    The statistic is the share of pairs of heads of one KV group whose labels agree, over every KV
    group of every layer. The baseline shuffles the labels among the heads of each layer
    ``n_shuffles`` times (seeded), which keeps each layer's mix of roles and breaks only the
    grouping. The rule: heads *share a role* when the observed share exceeds the baseline's 95th
    percentile; ``p_value`` is one-sided, ``(1 + #{baseline ≥ observed}) / (1 + n_shuffles)``.

    Args:
        scores: a reduced per-head ``score_heads`` frame with ``kv_head`` and ``label``.
        by: grouping columns (e.g. ``"model"``).
        n_shuffles: shuffles of the baseline.
        seed: seed of the shuffles.

    Returns:
        One row per ``by`` group: ``pairs`` (pairs of heads in a KV group), ``agreement``,
        ``baseline_mean``, ``baseline_q95``, ``p_value``, ``shares_role`` (True or False; None when
        the rule cannot be tested) and ``verdict``: ``"shares a role"``, ``"no more than chance"``
        or ``"not testable"``. The rule cannot be tested without pairs (no GQA: every KV head has
        one query head) or when every layer has a single KV group (MQA: all of a layer's heads
        share it, so shuffling within the layer changes nothing).
    """
    by = column_names(by, "by")
    n_shuffles = validation.integer(n_shuffles, "n_shuffles", minimum=1)
    rng = np.random.default_rng(validation.seed(seed))
    frame = check_scores(scores, "kv_group_agreement", (), by, per_plane=False, extra=("kv_head", "label"))
    rows = []
    for key, part in (frame.groupby(list(by), sort=True) if by else [((), frame)]):
        key = key if isinstance(key, tuple) else (key,)
        layers = [rows_.sort_values("head") for _, rows_ in part.groupby("layer", sort=True)]
        labels = [rows_["label"].astype(str).to_numpy() for rows_ in layers]
        pairs = [np.array([(a, b) for a in range(len(r)) for b in range(a + 1, len(r))
                           if r["kv_head"].iloc[a] == r["kv_head"].iloc[b]], dtype=int).reshape(-1, 2)
                 for r in layers]
        n_pairs = sum(len(p) for p in pairs)

        def share(per_layer: list[np.ndarray]) -> float:
            same = sum(int((values[p[:, 0]] == values[p[:, 1]]).sum()) for values, p in zip(per_layer, pairs))
            return same / n_pairs

        row: dict[str, Any] = {**dict(zip(by, key)), "pairs": n_pairs}
        testable = any(len(p) < len(r) * (len(r) - 1) // 2 for p, r in zip(pairs, layers) if len(p))
        if n_pairs:
            observed = share(labels)
            baseline = np.array([share([rng.permutation(values) for values in labels]) for _ in range(n_shuffles)])
            row.update(agreement=observed, baseline_mean=float(baseline.mean()),
                       baseline_q95=float(np.quantile(baseline, 0.95)),
                       p_value=float((1 + (baseline >= observed).sum()) / (1 + n_shuffles)))
        else:
            row.update(agreement=math.nan, baseline_mean=math.nan, baseline_q95=math.nan, p_value=math.nan)
        shares = bool(row["agreement"] > row["baseline_q95"]) if testable else None
        row.update(shares_role=shares, verdict="not testable" if shares is None
                   else "shares a role" if shares else "no more than chance")
        rows.append(row)
    return pd.DataFrame(rows)


def difference_of_medians(first: Any, second: Any, *, confidence: float = 0.95, n_boot: int = 2000,
                          seed: int = 0, minimum: int = 3) -> dict[str, Any]:
    """``median(second) − median(first)`` with a percentile-bootstrap interval, and a verdict:
    ``"above 0"`` or ``"below 0"`` when the interval excludes 0, ``"inconclusive"`` when it
    contains it, ``"not measured"`` with fewer than ``minimum`` finite values on a side.

    The values are resampled one by one, as independent draws; to compare groups of layers, whose
    heads are not independent, use ``early_late`` or ``local_global`` (whole layers resampled)."""
    confidence, n_boot = _confidence(confidence), validation.integer(n_boot, "n_boot", minimum=1)
    rng = np.random.default_rng(validation.seed(seed))
    a, b = _finite(first), _finite(second)
    out: dict[str, Any] = {"n_first": int(a.size), "n_second": int(b.size)}
    if a.size < minimum or b.size < minimum:
        return {**out, "difference": math.nan, "ci_low": math.nan, "ci_high": math.nan, "verdict": "not measured"}
    low, high = _interval(_bootstrap_medians(b, n_boot, rng) - _bootstrap_medians(a, n_boot, rng), confidence)
    verdict = "above 0" if low > 0 else "below 0" if high < 0 else "inconclusive"
    return {**out, "difference": float(np.median(b) - np.median(a)), "ci_low": low, "ci_high": high,
            "verdict": verdict}

# --- learning dynamics and length curves -----------------------------------------------------------
READY = 0.9
"""Accuracy at which a hop count counts as learned, and a length as still solved."""


def hop_accuracy(dynamics: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per checkpoint and hop count from a dynamics table: ``step, hops, accuracy``."""
    wide = dynamics.drop_duplicates("step").set_index("step")
    columns = sorted(c for c in wide.columns if c.startswith("accuracy_") and c != "accuracy_all")
    long = wide[columns].rename(columns=lambda c: c.removeprefix("accuracy_")).reset_index()
    return long.melt(id_vars="step", var_name="hops", value_name="accuracy")


def learned_at(dynamics: pd.DataFrame, threshold: float = READY) -> dict[str, int | None]:
    """Per hop count: the first checkpoint whose accuracy reaches ``threshold`` (None: never)."""
    out: dict[str, int | None] = {}
    for hops, rows in hop_accuracy(dynamics).groupby("hops", sort=True):
        reached = rows.loc[rows["accuracy"] >= threshold, "step"]
        out[str(hops)] = int(reached.min()) if len(reached) else None
    return out


def pure_layers(dynamics: pd.DataFrame, label: str) -> list[int]:
    """Layers whose heads all carry ``label`` at the last checkpoint."""
    final = dynamics[dynamics["step"] == dynamics["step"].max()]
    pure = final.groupby("layer")["label"].agg(lambda labels: bool((labels.astype(str) == label).all()))
    return [int(layer) for layer in pure.index[pure]]


def first_pure(dynamics: pd.DataFrame, label: str) -> dict[int, int]:
    """Per layer that ends with ``label``: the first checkpoint from which it keeps it."""
    out = {}
    for layer in pure_layers(dynamics, label):
        rows = dynamics[dynamics["layer"] == layer].groupby("step")["label"].agg(
            lambda labels: bool((labels.astype(str) == label).all())).sort_index()
        broken = rows.index[~rows.to_numpy()]
        out[layer] = int(rows.index[rows.index > broken.max()].min()) if len(broken) else int(rows.index.min())
    return out


def accuracy_at(frame: pd.DataFrame, length: int) -> float | None:
    """All-hops accuracy of a length curve at ``length`` tokens: the measured value, or the linear
    interpolation in log length between the two nearest measured lengths; None outside the range."""
    rows = frame[frame["hops"].astype(str) == "all"].groupby("length")["accuracy"].mean().sort_index()
    if rows.empty or not rows.index.min() <= length <= rows.index.max():
        return None
    if length in rows.index:
        return float(rows.loc[length])
    below, above = rows.index[rows.index < length].max(), rows.index[rows.index > length].min()
    share = (np.log(length) - np.log(below)) / (np.log(above) - np.log(below))
    return float(rows.loc[below] + share * (rows.loc[above] - rows.loc[below]))


def longest_ready(frame: pd.DataFrame, threshold: float = READY) -> int | None:
    """The longest prompt length up to which accuracy (all hops) stays ≥ ``threshold``."""
    rows = frame[frame["hops"].astype(str) == "all"].sort_values("length")
    below = rows.loc[rows["accuracy"] < threshold, "length"]
    kept = rows.loc[rows["length"] < below.min(), "length"] if len(below) else rows["length"]
    return int(kept.max()) if len(kept) else None
