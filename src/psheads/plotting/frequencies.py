"""Figures per RoPE plane: usage shares, a value per plane per head, scores summarised over heads
against frequency, and one plane's logits against distance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import SupportsInt, cast

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads.plotting.checks import check_frame, require_columns
from psheads.plotting.style import (
    KIND_COLORS,
    PALETTE,
    SEQUENTIAL,
    layer_colors,
    palette_color,
    rgba,
    score_title,
    styled,
)
from psheads.results import analysis, schema


def _theta_text(values: np.ndarray) -> str:
    distinct = sorted(set(np.round(values.astype(float), 12)))
    if len(distinct) == 1:
        return f"{distinct[0]:.2g}"
    if len(distinct) == 2:
        return " / ".join(f"{value:.2g}" for value in distinct)
    return f"{distinct[0]:.2g}–{distinct[-1]:.2g}"


def _theta_axis(figure: go.Figure, frame: pd.DataFrame, overlay: str = "x", anchor: str = "y") -> None:
    """A top axis giving θ (radians per token) at up to 6 planes, over the plane axis ``overlay``.

    Both axes get the range of the planes; a plane whose θ differs between layers (local and
    global RoPE bases) shows every value.
    """
    planes = sorted(int(plane) for plane in frame["plane"].unique())
    rotated = [plane for plane in planes if plane > 0]
    if not rotated:
        return
    picks = [rotated[int(round(k))] for k in np.unique(np.linspace(0, len(rotated) - 1, min(6, len(rotated))).round())]
    text = [_theta_text(frame.loc[frame["plane"] == plane, "theta"].to_numpy()) for plane in picks]
    name = f"x{len(list(figure.select_xaxes())) + 1}"
    span = [planes[0] - 0.5, planes[-1] + 0.5]
    figure.add_trace(go.Scatter(x=picks, y=[None] * len(picks), xaxis=name, yaxis=anchor, mode="markers",
                                showlegend=False, hoverinfo="skip", name="θ axis"))
    figure.update_layout({f"xaxis{name[1:]}": {"overlaying": overlay, "side": "top", "anchor": anchor,
                                               "tickvals": picks, "ticktext": text, "range": span,
                                               "title": {"text": "θ (radians per token)"}, "showgrid": False}})
    figure.update_layout({f"xaxis{overlay[1:]}": {"range": span}}, margin={"t": 130},
                         title={"y": 0.98, "yanchor": "top", "yref": "container"})


def frequency_usage(planes: pd.DataFrame) -> go.Figure:
    """Heatmap of usage shares: rows (layer, head), columns frequency IDs (plane 0 first), θ on top.

    Args:
        planes: ``FrequencyProfile.planes`` (``layer, head, plane, theta, usage``).
    """
    check_frame(planes, schema.PROFILE_PLANES, ["layer", "head", "plane", "theta", "usage"], "frequency_usage")
    table = planes.pivot_table(index=["layer", "head"], columns="plane", values="usage")
    figure = go.Figure(go.Heatmap(z=table.to_numpy(), x=[int(c) for c in table.columns],
                                  y=[f"L{layer}H{head}" for layer, head in table.index], colorscale=SEQUENTIAL,
                                  zmin=0, colorbar={"title": {"text": "usage"}},
                                  hovertemplate="%{y}, plane %{x}: usage %{z:.3f}<extra></extra>"))
    _theta_axis(figure, planes)
    figure.update_layout(xaxis={"title": {"text": "frequency ID (0 = unrotated, 1 = fastest)"}, "showline": False,
                                "ticks": ""})
    figure.update_yaxes(title_text="head", autorange="reversed", showline=False, ticks="")
    return styled(figure, title="Usage share of every plane")


def frequency_curves(frame: pd.DataFrame, column: str | None = None) -> go.Figure:
    """One value per plane against the frequency ID, one curve per head, θ on a top axis.

    Heads are coloured by layer (``layer_colors``, one legend entry per layer). Plane 0 (the
    unrotated dimensions) is drawn as a point, not joined to the rotated planes.

    Args:
        frame: a reduced ``score_heads(..., by_frequency=True)`` frame, or ``FrequencyProfile.planes``.
        column: the value to draw (default: ``usage`` for a profile frame, else ``positional``).
    """
    is_profile = isinstance(frame, pd.DataFrame) and "usage" in frame.columns
    column = column if column is not None else ("usage" if is_profile else "positional")
    if not isinstance(column, str):
        raise TypeError(f"column must be a column name, got {type(column).__name__}.")
    check_frame(frame, schema.PROFILE_PLANES if is_profile else schema.SCORES,
           ["layer", "head", "plane", "theta", column], "frequency_curves")
    if "prompt" in frame.columns:
        raise ValueError("frequency_curves needs a reduced frame (score_heads(..., reduce=True)); this one has a "
                         "'prompt' column.")
    colors = layer_colors(frame["layer"])
    figure = go.Figure()
    shown: set[int] = set()
    for key, rows in frame.groupby(["layer", "head"], sort=True):
        layer, head = cast("tuple[SupportsInt, SupportsInt]", key)  # integer columns (pandas-stubs: Hashable)
        rows = rows.sort_values("plane")
        xs, ys = rows["plane"].tolist(), rows[column].tolist()
        thetas = rows["theta"].tolist()
        if xs and xs[0] == 0 and len(xs) > 1:  # plane 0 is not a neighbour of the fastest plane
            xs, ys, thetas = [0, None, *xs[1:]], [ys[0], None, *ys[1:]], [thetas[0], None, *thetas[1:]]
        name = f"layer {layer}"
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=name, legendgroup=name,
                                    showlegend=int(layer) not in shown, customdata=thetas,
                                    line={"color": colors[int(layer)], "width": 1.5}, marker={"size": 4},
                                    hovertemplate=f"L{layer}H{head}, plane %{{x}} (θ = %{{customdata:.3g}}): "
                                                  f"{column} %{{y:.3f}}<extra></extra>"))
        shown.add(int(layer))
    _theta_axis(figure, frame)
    figure.update_layout(xaxis_title="frequency ID (0 = unrotated, 1 = fastest)")
    bounded = frame[column].dropna().between(0, 1).all()  # scores and usage shares; logits are not
    figure.update_yaxes(title_text=score_title(column), range=[-0.02, 1.02] if bounded else None)
    return styled(figure, title=f"{score_title(column)} per plane", legend_title="layer")


def frequency_scores(scores: pd.DataFrame, columns: Sequence[str] = analysis.SCORE_COLUMNS, by: str | None = None,
                     quantiles: Sequence[float] = (0.25, 0.75), x: str = "plane") -> go.Figure:
    """Per-plane scores against frequency: the median over heads as a line, a quantile band around it.

    Args:
        scores: a reduced ``score_heads(..., by_frequency=True)`` frame.
        columns: the score columns, one panel each.
        by: one line per value of this column (e.g. ``"layer_kind"`` from
            ``psheads.results.analysis.add_layer_kind``, or ``"layer"``, coloured by ``layer_colors``); None:
            one line over every head.
        quantiles: the (low, high) quantiles of the band.
        x: ``"plane"`` (frequency ID, 1 = fastest, with θ on a top axis) or ``"period"`` (2π/θ in
            tokens, log axis).
    """
    if x not in ("plane", "period"):
        raise ValueError(f"x must be 'plane' or 'period', got {x!r}.")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by must be a column name or None, got {type(by).__name__}.")
    columns = analysis.column_names(columns, "columns")
    check_frame(scores, schema.SCORES, ["layer", "head", "plane", "theta", *columns], "frequency_scores")
    summary = analysis.frequency_summary(scores, columns=columns, quantiles=quantiles, by=() if by is None else (by,))
    low, high = (analysis.quantile_name(q) for q in summary.attrs["quantiles"])
    figure = make_subplots(rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.08)
    groups = summary.groupby(by, sort=True) if by is not None else [("all heads", summary)]
    colors = layer_colors(summary["layer"]) if by == "layer" else {}
    for index, (value, part) in enumerate(groups):
        value = value[0] if isinstance(value, tuple) else value
        name = f"{by} {value!s}" if by == "layer" else str(value)
        color = (colors[int(cast(SupportsInt, value))] if by == "layer"  # a layer number (pandas-stubs: any scalar)
                 else palette_color(value, index, KIND_COLORS if by == "layer_kind" else None))
        for row, column in enumerate(columns, start=1):
            rows = part[part["score"] == column].sort_values(x)
            xs = rows[x].tolist()
            figure.add_trace(go.Scatter(x=xs + xs[::-1], y=rows[high].tolist() + rows[low].tolist()[::-1],
                                        fill="toself", fillcolor=rgba(color, 0.18), line={"width": 0},
                                        hoverinfo="skip", showlegend=False, legendgroup=name), row=row, col=1)
            figure.add_trace(go.Scatter(x=xs, y=rows["median"], mode="lines", name=name, legendgroup=name,
                                        showlegend=row == 1, line={"color": color},
                                        customdata=rows[["plane", "period"]].to_numpy(),
                                        hovertemplate="ID %{customdata[0]}, period %{customdata[1]:.3g}<br>"
                                                      "median %{y:.3f}<extra>" + name + "</extra>"),
                             row=row, col=1)
    figure.update_yaxes(range=[-0.02, 1.02])
    for row, column in enumerate(columns, start=1):
        figure.update_yaxes(title_text=score_title(column), row=row, col=1)
    title = "frequency ID (1 = fastest)" if x == "plane" else "period 2π/θ (tokens)"
    figure.update_xaxes(title_text=title, row=len(columns), col=1)
    if x == "period":
        figure.update_xaxes(type="log")
    else:
        _theta_axis(figure, scores[scores["plane"] > 0])
    return styled(figure, title=f"median over heads, band {low}–{high}", legend_title=by or "")


def plane_logits(frame: pd.DataFrame) -> go.Figure:
    """One RoPE plane's logits against the key's distance from the query: points per prompt, and
    each prompt's fitted curve as a line of the same colour (paper B, figure 4B–C).

    Args:
        frame: ``prompt, offset, logit`` and optionally ``fit``, such as the report's layer-1
            geometry of the number model.

    Raises:
        ValueError: missing columns or no rows.
    """
    require_columns(frame, ("prompt", "offset", "logit"), "plane_logits", " (optionally fit)")
    figure = go.Figure()
    for index, (prompt, rows) in enumerate(frame.groupby("prompt", sort=True)):
        rows = rows.sort_values("offset")
        color = PALETTE[index % len(PALETTE)]
        figure.add_trace(go.Scatter(x=rows["offset"], y=rows["logit"], mode="markers", name=f"prompt {prompt}",
                                    legendgroup=str(prompt), marker={"color": color, "size": 6},
                                    hovertemplate="distance %{x}: %{y:.3g}<extra>prompt " + str(prompt) + "</extra>"))
        if "fit" in rows:
            figure.add_trace(go.Scatter(x=rows["offset"], y=rows["fit"], mode="lines", showlegend=False,
                                        legendgroup=str(prompt), line={"color": color, "width": 1},
                                        hovertemplate="fit at %{x}: %{y:.3g}<extra>prompt " + str(prompt) + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return styled(figure, xaxis_title="distance from the query to the key (positions)",
                  yaxis_title="the plane's logit", legend_title="prompt")
