"""Summaries of per-plane score frames (``score_heads(..., by_frequency=True)``): each score per
frequency ID and per frequency band, the bands by ID or by period.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from psheads.interface import validation
from psheads.interface.reprs import layer_text
from psheads.results import schema
from psheads.results.analysis.statistics import describe, finite_values, quantile_pair
from psheads.results.analysis.summaries import SCORE_COLUMNS, check_scores, column_names

UNROTATED = "unrotated"
"""Band of plane 0 (the unrotated dims, θ = 0)."""


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
        for (name_a, _, last_a), (name_b, first_b, _) in itertools.pairwise(table):
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
    if not edges or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ValueError(f"period_edges must be a non-empty increasing list, got {edges}.")
    bounds = [0.0, *edges, math.inf]
    table = []
    for low, high in itertools.pairwise(bounds):
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
    table: Sequence[tuple[str, float, float]]
    names: list[str | None]
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
        names, ids = [], []
        for plane in planes:
            match = next(((i, name) for i, (name, first, last) in enumerate(table, 1) if first <= plane <= last), None)
            names.append(match[1] if match else None)
            ids.append(match[0] if match else -1)
        index = np.asarray(ids)
    unrotated = planes == 0
    out["band"] = [UNROTATED if zero else name for zero, name in zip(unrotated, names, strict=True)]
    out["band_index"] = np.where(unrotated, len(table) + 1, index).astype(int)
    return out


def _per_plane(scores: pd.DataFrame, what: str, columns: Any, by: Any, quantiles: Any,
               unrotated: Any) -> tuple[pd.DataFrame, tuple[str, ...], tuple[str, ...], tuple[float, float]]:
    """The checked arguments of a per-plane summary: (rows to summarise, columns, by, quantiles)."""
    columns, by = column_names(columns, "columns"), column_names(by, "by")
    q = quantile_pair(quantiles)
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
            rows.append({**dict(zip([*by, "plane"], key, strict=True)), "theta": centre,
                         "theta_min": float(theta.min()), "theta_max": float(theta.max()), "period": period,
                         "score": column, **describe(finite_values(part[column]), q)})
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
            rows.append({**dict(zip(by, key[:-1], strict=True)), "band": part["band"].iloc[0],
                         "band_index": int(key[-1]), "planes": layer_text(planes), "score": column,
                         **describe(finite_values(part[column]), q)})
    out = pd.DataFrame(rows)
    out.attrs["quantiles"] = q
    return out
