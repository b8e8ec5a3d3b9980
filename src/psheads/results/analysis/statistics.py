"""Statistics on arrays of scores, no frames: summaries that skip NaN, bootstrap medians (values
or whole layers resampled), percentile intervals, Pearson r, and a comparison of two medians.

The summaries of score frames (``summaries``, ``frequency``) are built on these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from psheads.interface import validation

MIN_LAYERS = 2
"""Layers a group needs for a layer-bootstrap interval (with one, every resample is that layer)."""


# --------------------------------------------------------------------------------------------
# arguments


def quantile_pair(quantiles: Any) -> tuple[float, float]:
    """The checked (low, high) pair of quantiles, e.g. (0.25, 0.75)."""
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
    """The column name of quantile ``q`` (0.25 → ``q25``)."""
    return f"q{100 * q:g}"


def confidence_level(confidence: Any) -> float:
    """The checked confidence level of an interval, in (0, 1)."""
    return validation.number(confidence, "confidence", above=0.0, below=1.0)


# --------------------------------------------------------------------------------------------
# summaries, bootstraps and intervals


def finite_values(values: Any) -> np.ndarray:
    """``values`` as a float array without its NaN and infinite entries."""
    array = np.asarray(values, dtype=float)
    return array[np.isfinite(array)]


def describe(values: np.ndarray, quantiles: tuple[float, float]) -> dict[str, float]:
    """``n``, ``mean``, ``median``, the two quantiles, ``min`` and ``max`` of finite ``values`` (NaN when empty)."""
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


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of the finite ``samples`` (NaN, NaN when none)."""
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return float(low), float(high)


def pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis (NaN where a variance is zero)."""
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    denominator = np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xc * yc).sum(-1) / denominator
    return np.where(denominator > 0, np.clip(r, -1.0, 1.0), np.nan)


def difference_of_medians(first: Any, second: Any, *, confidence: float = 0.95, n_boot: int = 2000,
                          seed: int = 0, minimum: int = 3) -> dict[str, Any]:
    """``median(second) − median(first)`` with a percentile-bootstrap interval, and a verdict:
    ``"above 0"`` or ``"below 0"`` when the interval excludes 0, ``"inconclusive"`` when it
    contains it, ``"not measured"`` with fewer than ``minimum`` finite values on a side.

    The values are resampled one by one, as independent draws; to compare groups of layers, whose
    heads are not independent, use ``early_late`` or ``local_global`` (whole layers resampled)."""
    confidence, n_boot = confidence_level(confidence), validation.integer(n_boot, "n_boot", minimum=1)
    rng = np.random.default_rng(validation.seed(seed))
    a, b = finite_values(first), finite_values(second)
    out: dict[str, Any] = {"n_first": int(a.size), "n_second": int(b.size)}
    if a.size < minimum or b.size < minimum:
        return {**out, "difference": math.nan, "ci_low": math.nan, "ci_high": math.nan, "verdict": "not measured"}
    low, high = percentile_interval(_bootstrap_medians(b, n_boot, rng) - _bootstrap_medians(a, n_boot, rng),
                                    confidence)
    verdict = "above 0" if low > 0 else "below 0" if high < 0 else "inconclusive"
    return {**out, "difference": float(np.median(b) - np.median(a)), "ci_low": low, "ci_high": high,
            "verdict": verdict}
