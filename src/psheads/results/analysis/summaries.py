"""Summaries of score frames per layer and per group of layers.

Every function takes a reduced ``score_heads`` frame (one row per (layer, head)) and returns a
tidy frame: one row per group and score column, with the numbers in named columns. Frames scored
on different prompt sets or models can be concatenated with a column telling them apart and
summarised together through ``by``. ``column_names`` and ``check_scores`` check such arguments
(the per-plane summaries of ``frequency`` and the figures use them too).
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
from psheads.results.analysis.statistics import (
    MIN_LAYERS,
    confidence_level,
    describe,
    finite_values,
    layer_bootstrap_medians,
    pearson,
    percentile_interval,
    quantile_name,
    quantile_pair,
)

SCORE_COLUMNS = ("positional", "symbolic")
"""The score columns summarised by default."""

LOCAL, GLOBAL = "local", "global"


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


def _layer(value: Any, name: str) -> int:
    return validation.integer(value, name, minimum=0)


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
    q = quantile_pair(quantiles)
    frame = check_scores(scores, "layer_summary", columns, by, per_plane=False)
    rows = []
    for key, part in frame.groupby([*by, "layer"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for column in columns:
            rows.append({**dict(zip([*by, "layer"], key, strict=True)), "score": column,
                         **describe(finite_values(part[column]), q)})
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
            rows.append({**dict(zip(by, key, strict=True)), "label": label, "n": int(counts[label]),
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
        base = dict(zip(by, key, strict=True))
        for column in columns:
            medians = {}
            for group in order:
                members = part[part["_group"] == group]
                values = finite_values(members[column])
                boot = layer_bootstrap_medians(members[column], members["layer"], n_boot, rng)
                medians[group] = (values, boot)
                low, high = percentile_interval(boot, confidence)
                layers = sorted(int(layer) for layer in members["layer"].unique())
                rows.append({**base, "group": group, "layers": layer_text(layers), "n_layers": len(layers),
                             "score": column, **describe(values, q), "median_ci_low": low, "median_ci_high": high})
            (first, boot_first), (second, boot_second) = medians[order[0]], medians[order[1]]
            difference = (float(np.median(second) - np.median(first)) if first.size and second.size else math.nan)
            low, high = percentile_interval(boot_second - boot_first, confidence)
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
    q = quantile_pair(quantiles)
    confidence = confidence_level(confidence)
    n_boot = validation.integer(n_boot, "n_boot", minimum=1)
    seed = validation.seed(seed)
    frame = check_scores(scores, "early_late", columns, by, per_plane=False)
    if split is None and by and frame.groupby(list(by)).ngroups > 1:  # each group splits its own layers
        parts = []
        for key, part in frame.groupby(list(by), sort=True):
            values: dict[str, Any] = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
            parts.append(early_late(part.assign(**values), None, columns=columns, quantiles=quantiles, by=by,
                                    confidence=confidence, n_boot=n_boot, seed=seed))
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
    q = quantile_pair(quantiles)
    confidence = confidence_level(confidence)
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
    xs, ys = column_names(x, "x"), column_names(y, "y")
    if len(xs) != 1 or len(ys) != 1:
        raise TypeError("x and y must each be one column name.")
    (x,), (y,) = xs, ys
    by = column_names(by, "by")
    confidence = confidence_level(confidence)
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
        r = float(pearson(pairs[:, 0], pairs[:, 1])) if n >= 2 else math.nan
        low = high = math.nan
        if math.isfinite(r) and method == "fisher" and n > 3:
            if abs(r) == 1.0:
                low = high = r
            else:
                z, half = math.atanh(r), NormalDist().inv_cdf((1 + confidence) / 2) / math.sqrt(n - 3)
                low, high = math.tanh(z - half), math.tanh(z + half)
        elif math.isfinite(r) and method == "bootstrap":
            index = rng.integers(0, n, size=(n_boot, n))
            low, high = percentile_interval(pearson(pairs[index, 0], pairs[index, 1]), confidence)
        if n >= 2:
            ranks = pd.DataFrame(pairs).rank().to_numpy()
            spearman = float(pearson(ranks[:, 0], ranks[:, 1]))
        else:
            spearman = math.nan
        rows.append({**dict(zip(by, key, strict=True)), "x": x, "y": y, "n": n, "r": r, "ci_low": low, "ci_high": high,
                     "ci_method": method, "confidence": confidence, "spearman": spearman})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# heads that share a KV head


def _agreement(labels: list[np.ndarray], pairs: list[np.ndarray]) -> float:
    """The share of ``pairs`` (per layer, ``[n, 2]`` head indices) whose two heads' ``labels`` agree."""
    same = sum(int((values[p[:, 0]] == values[p[:, 1]]).sum()) for values, p in zip(labels, pairs, strict=True))
    return same / sum(len(p) for p in pairs)


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
        row: dict[str, Any] = {**dict(zip(by, key, strict=True)), "pairs": n_pairs}
        testable = any(len(p) < len(r) * (len(r) - 1) // 2 for p, r in zip(pairs, layers, strict=True) if len(p))
        if n_pairs:
            observed = _agreement(labels, pairs)
            baseline = np.array([_agreement([rng.permutation(values) for values in labels], pairs)
                                 for _ in range(n_shuffles)])
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
