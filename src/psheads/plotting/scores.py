"""Figures of head scores: the positional–symbolic plane, a layer × head heatmap, distributions and
correlations over heads, local against global layers, and one head's attention under a swap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads.interface.reprs import layer_text
from psheads.plotting.checks import check_frame
from psheads.plotting.style import (
    KIND_COLORS,
    LABEL_COLORS,
    LAYER_COLORSCALE,
    PALETTE,
    SCORE_COLORS,
    SEQUENTIAL,
    palette_color,
    score_title,
    styled,
)
from psheads.results import analysis, schema


def _head_text(frame: pd.DataFrame) -> pd.Series:
    """``L{layer}H{head}`` (and `` f{plane}`` for per-plane frames) per row."""
    text = [f"L{layer}H{head}" for layer, head in zip(frame["layer"], frame["head"], strict=True)]
    if "plane" in frame.columns:
        text = [f"{t} f{plane}" for t, plane in zip(text, frame["plane"], strict=True)]
    return pd.Series(text, index=frame.index, dtype=object)


# --- the positional–symbolic plane -----------------------------------------------------------------
_FRONTIERS = {
    "swap": ("frontier for a peaked head: s_POS² + s_SYM² = 1",
             [math.cos(k * math.pi / 80) for k in range(41)], [math.sin(k * math.pi / 80) for k in range(41)]),
    "anova": ("frontier: s_POS + s_SYM = 1 (shares sum to 1)", [0.0, 1.0], [1.0, 0.0]),
}
"""The frontier drawn per method: for the swap score, arccos s_POS + arccos s_SYM ≥ Σ α·|π/2 − 2 atan(d_j/d_i)|,
which for a head whose top swap moves all its attention (d_j/d_i → 0) is the quarter circle; the ANOVA
shares add up to 1 with the interaction."""


def _regions(method: str, gamma: float) -> dict[str, list[tuple[float, float]]]:
    """The label regions (polygons) on the plane; ANOVA frames reach only s_POS + s_SYM ≤ 1 (no uniform)."""
    low, high = gamma, 1 - gamma
    if method == "anova":
        return {"positional": [(high, 0), (1, 0), (high, low)], "symbolic": [(0, high), (0, 1), (low, high)]}
    return {"positional": [(high, 0), (1, 0), (1, low), (high, low)],
            "symbolic": [(0, high), (low, high), (low, 1), (0, 1)],
            "uniform": [(high, high), (1, high), (1, 1), (high, 1)]}


LABEL_BOX = (0.015, 0.04)
"""Size of a head label on the plane, in axis units: width per character and height (10-px text on a
plane drawn about 400 px a side, as at the Figures page's 620 x 560). Labels closer than one box are
merged (see ``label_spots``)."""


def label_spots(x: Sequence[float], y: Sequence[float], names: Sequence[str]) -> list[tuple[float, float, list[str]]]:
    """Where to write head labels on the plane so that no two overprint: ``(x, y, names)`` per label.

    Points are taken in the given order (the frame's: layer, then head); a point whose label box
    would overlap that of an earlier label's point (closer than one box in both x and y, the box
    wide enough for the longest name and a ``+n`` count) joins that label instead of getting its
    own. Each label sits on its first point; two labels' boxes never overlap. Non-finite points
    get no label.
    """
    width = LABEL_BOX[0] * (max((len(name) for name in names), default=0) + 4)
    spots: list[tuple[float, float, list[str]]] = []
    for px, py, name in zip(x, y, names, strict=True):
        if not (math.isfinite(px) and math.isfinite(py)):
            continue
        near = next((spot for spot in spots if abs(spot[0] - px) < width and abs(spot[1] - py) < LABEL_BOX[1]),
                    None)
        if near is None:
            spots.append((float(px), float(py), [name]))
        else:
            near[2].append(name)
    return spots


def score_plane(frame: pd.DataFrame, gamma: float | None = None, *, labels: bool = False,
                method: str | None = None, title: str | None = None) -> go.Figure:
    """Heads on the positional–symbolic plane, coloured by label, with the label regions and the frontier.

    The plane is square (equal axes, [0, 1] with a small margin). The regions and frontier follow
    the scoring method: the swap score's regions are positional, symbolic and uniform, and a head
    whose attention sits on one block lies inside the quarter circle s_POS² + s_SYM² ≤ 1; the ANOVA
    shares add up to 1 with the interaction, so they lie below s_POS + s_SYM = 1 and are never
    uniform (except constant logits, scored (1, 1)).

    Args:
        frame: a reduced ``psheads.score_heads`` frame (per head, or per plane).
        gamma: label threshold (default: the frame's ``attrs["config"]["gamma"]``, else 0.1).
        labels: write ``L{layer}H{head}`` above the points (for static exports, where hover is gone).
            Heads whose labels would overprint (at a corner, say) share one: the first head's name
            (lowest layer, then head) and ``+n`` for the n others there; hovering it lists them all
            (``label_spots``).
        method: ``"swap"``, ``"anova"`` or another registered method (default: the frame's
            ``attrs["config"]["method"]``, else ``"swap"``); other methods get no frontier.
        title: the figure title (default: names the method and γ).
    """
    check_frame(frame, schema.SCORES, ["layer", "head", "positional", "symbolic", "label"], "score_plane")
    if not isinstance(labels, bool):
        raise TypeError(f"labels must be True or False, got {labels!r}.")
    config = frame.attrs.get("config", {})
    gamma = gamma if gamma is not None else config.get("gamma", 0.1)
    method = method if method is not None else config.get("method", "swap")
    figure = go.Figure()
    for name, corners in _regions(method, gamma).items():
        path = "M " + " L ".join(f"{x:g},{y:g}" for x, y in corners) + " Z"
        figure.add_shape(type="path", path=path, line_width=0, fillcolor=LABEL_COLORS[name], opacity=0.12,
                         layer="below")
    if method in _FRONTIERS:
        name, xs, ys = _FRONTIERS[method]
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name, hoverinfo="skip",
                                    line={"color": "#444444", "dash": "dash", "width": 1.2}))
    text = _head_text(frame)
    order = [name for name in schema.LABEL_ORDER if name in set(frame["label"])]
    order += sorted(set(frame["label"].astype(str)) - set(order))
    for name in order:
        part = frame[frame["label"] == name]
        figure.add_trace(go.Scatter(
            x=part["positional"], y=part["symbolic"], mode="markers", name=name, text=text[part.index],
            cliponaxis=False,
            marker={"color": LABEL_COLORS.get(name, "#333333"), "size": 8, "line": {"color": "white", "width": 0.5}},
            hovertemplate="%{text}<br>s_POS=%{x:.4f}<br>s_SYM=%{y:.4f}<extra>" + name + "</extra>"))
    if labels:
        keys = [column for column in ("layer", "head", "plane") if column in frame.columns]
        ordered = frame.sort_values(keys, kind="stable")
        spots = label_spots(pd.to_numeric(ordered["positional"], errors="coerce").astype(float).tolist(),
                            pd.to_numeric(ordered["symbolic"], errors="coerce").astype(float).tolist(),
                            text[ordered.index].tolist())
        figure.add_trace(go.Scatter(
            x=[spot[0] for spot in spots], y=[spot[1] for spot in spots], mode="text", name="labels",
            text=[names[0] + (f" +{len(names) - 1}" if len(names) > 1 else "") for _, _, names in spots],
            hovertext=[", ".join(names) for _, _, names in spots], hoverinfo="text", textposition="top center",
            textfont={"size": 10}, cliponaxis=False, showlegend=False))
    title = title if title is not None else f"Heads on the positional–symbolic plane ({method}, γ = {gamma:g})"
    axis = {"range": [-0.03, 1.03], "constrain": "domain", "dtick": 0.2}
    figure.update_xaxes(title_text="positional score s_POS", **axis)
    figure.update_yaxes(title_text="symbolic score s_SYM", scaleanchor="x", scaleratio=1, **axis)
    return styled(figure, title=title, legend={"title": {"text": ""}, "orientation": "h", "x": 0.5, "xanchor": "center",
                                               "y": -0.16, "yanchor": "top"})


def score_heatmap(scores: pd.DataFrame, column: str = "positional") -> go.Figure:
    """One score of every head as a layer × head heatmap (the view for LLMs with many heads).

    The colour range is [0, 1]; hovering shows the exact value (and the label when the frame has one).

    Args:
        scores: a reduced per-head ``psheads.score_heads`` frame.
        column: the score to show (``positional``, ``symbolic``, ``interaction``, ``entropy``, …).
    """
    if not isinstance(column, str):
        raise TypeError(f"column must be a column name, got {type(column).__name__}.")
    check_frame(scores, schema.SCORES, ["layer", "head", column], "score_heatmap")
    analysis.check_scores(scores, "score_heatmap", (column,), (), per_plane=False)
    values = scores.pivot(index="layer", columns="head", values=column).sort_index().sort_index(axis=1)
    labels = (scores.assign(label=scores["label"].astype(str)).pivot(index="layer", columns="head", values="label")
              .reindex_like(values).fillna("")
              if "label" in scores.columns else pd.DataFrame("", index=values.index, columns=values.columns))
    figure = go.Figure(go.Heatmap(
        z=values.to_numpy(dtype=float), x=values.columns.tolist(), y=values.index.tolist(), zmin=0, zmax=1,
        colorscale=SEQUENTIAL, customdata=labels.to_numpy(), colorbar={"title": {"text": column}},
        hovertemplate="L%{y}H%{x}: " + column + " = %{z:.4f} %{customdata}<extra></extra>"))
    figure.update_xaxes(title_text="head", dtick=1, showline=False, ticks="")
    figure.update_yaxes(title_text="layer", dtick=1 if len(values) <= 24 else None, autorange="reversed",
                        showline=False, ticks="")
    return styled(figure, title=score_title(column))


# --- distributions over heads --------------------------------------------------------------------
def layer_distributions(scores: pd.DataFrame, columns: Sequence[str] = analysis.SCORE_COLUMNS) -> go.Figure:
    """Each score's distribution over the heads of every layer: a box per layer, every head drawn.

    Layers of a ``layer_kind`` column's ``"global"`` kind (``psheads.results.analysis.add_layer_kind``)
    are shaded.

    Args:
        scores: a reduced per-head ``score_heads`` frame.
        columns: the score columns to draw, side by side per layer.
    """
    columns = analysis.column_names(columns, "columns")
    check_frame(scores, schema.SCORES, ["layer", "head", *columns], "layer_distributions")
    analysis.check_scores(scores, "layer_distributions", columns, (), per_plane=False)
    figure = go.Figure()
    text = _head_text(scores).tolist()
    for index, column in enumerate(columns):
        figure.add_trace(go.Box(x=scores["layer"], y=scores[column], name=score_title(column), text=text,
                                boxpoints="all", jitter=0.3, pointpos=0, offsetgroup=column,
                                marker={"color": palette_color(column, index, SCORE_COLORS), "size": 5},
                                hovertemplate="%{text}<br>" + column + "=%{y:.3f}<extra></extra>"))
    if "layer_kind" in scores.columns:
        for layer in sorted(scores.loc[scores["layer_kind"] == "global", "layer"].unique()):
            figure.add_vrect(x0=layer - 0.5, x1=layer + 0.5, fillcolor=KIND_COLORS["global"], opacity=0.12,
                             line_width=0, layer="below")
    figure.update_xaxes(dtick=1)
    return styled(figure, boxmode="group", xaxis_title="layer" + (" (shaded: global)" if "layer_kind" in scores.columns
                                                                   else ""),
                  yaxis_title="score", yaxis_range=[-0.02, 1.02], legend_title="score")


def score_correlation(scores: pd.DataFrame, x: str = "positional", y: str = "symbolic",
                      color: str | None = "layer") -> go.Figure:
    """One score against the other across heads, with Pearson r, its 95% Fisher interval and n.

    Args:
        scores: a reduced ``score_heads`` frame (per head, or per plane).
        x: column on the x axis.
        y: column on the y axis.
        color: colour the points by this column: ``"layer"`` (``LAYER_COLORSCALE``), another
            numeric column (Viridis), a categorical column (``"label"``, ``"layer_kind"``: one
            trace each) or None.
    """
    if color is not None and not isinstance(color, str):
        raise TypeError(f"color must be a column name or None, got {type(color).__name__}.")
    check_frame(scores, schema.SCORES, ["layer", "head", x, y, *([color] if color else [])], "score_correlation")
    result = analysis.correlation(scores, x, y).iloc[0]
    text = _head_text(scores)
    hover = "%{text}<br>" + x + "=%{x:.3f}<br>" + y + "=%{y:.3f}<extra></extra>"
    figure = go.Figure()
    if color is None or pd.api.types.is_numeric_dtype(scores[color]) and not pd.api.types.is_bool_dtype(scores[color]):
        marker: dict[str, Any] = {"size": 7}
        if color == "layer":
            marker.update(color=scores[color], colorscale=LAYER_COLORSCALE, cmin=0,
                          cmax=max(int(scores[color].max()), 1), showscale=True, colorbar={"title": {"text": color}})
        elif color is not None:
            marker.update(color=scores[color], colorscale=SEQUENTIAL, showscale=True,
                          colorbar={"title": {"text": color}})
        figure.add_trace(go.Scatter(x=scores[x], y=scores[y], mode="markers", text=text, marker=marker,
                                    name="heads", hovertemplate=hover))
    else:
        for index, (value, part) in enumerate(scores.groupby(color, sort=True)):
            table = LABEL_COLORS if color == "label" else KIND_COLORS
            figure.add_trace(go.Scatter(x=part[x], y=part[y], mode="markers", text=text[part.index], name=str(value),
                                        marker={"size": 7, "color": palette_color(value, index, table)},
                                        hovertemplate=hover))
    finite = scores[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    if len(finite) >= 2 and math.isfinite(result["r"]):
        xs, ys = finite[x].to_numpy(dtype=float), finite[y].to_numpy(dtype=float)
        slope = ((xs - xs.mean()) * (ys - ys.mean())).sum() / ((xs - xs.mean()) ** 2).sum()
        ends = [float(xs.min()), float(xs.max())]
        figure.add_trace(go.Scatter(x=ends, y=[ys.mean() + slope * (e - xs.mean()) for e in ends], mode="lines",
                                    name="least squares", line={"color": "#333333", "dash": "dash"}))
    interval = (f", 95% CI [{result['ci_low']:.2f}, {result['ci_high']:.2f}]"
                if math.isfinite(result["ci_low"]) else "")
    return styled(figure, title=f"Pearson r = {result['r']:.2f}{interval}, n = {int(result['n'])}",
                  xaxis_title=score_title(x), yaxis_title=score_title(y), xaxis_range=[-0.02, 1.02],
                  yaxis_range=[-0.02, 1.02], legend_title=color or "")


def local_global(scores: pd.DataFrame, local: Any = None, columns: Sequence[str] = analysis.SCORE_COLUMNS) -> go.Figure:
    """Each score over the heads of the local (sliding-window) layers and of the global ones.

    Args:
        scores: a reduced per-head ``score_heads`` frame, with a ``layer_kind`` column
            (``psheads.results.analysis.add_layer_kind``) unless ``local`` is given.
        local: a ``RopeLens``, a mapping ``{layer: "local" | "global"}`` or the list of local
            layers (see ``psheads.results.analysis.add_layer_kind``).
        columns: the score columns, one box pair each.
    """
    columns = analysis.column_names(columns, "columns")
    check_frame(scores, schema.SCORES, ["layer", "head", *columns], "local_global")
    if local is not None:
        scores = analysis.add_layer_kind(scores, local)
    analysis.check_scores(scores, "local_global", columns, (), per_plane=False, extra=["layer_kind"])
    figure = go.Figure()
    text = _head_text(scores)
    for kind in (analysis.LOCAL, analysis.GLOBAL):
        part = scores[scores["layer_kind"] == kind]
        if part.empty:
            continue
        layers = layer_text(sorted(int(layer) for layer in part["layer"].unique()))
        xs = [score_title(column) for column in columns for _ in range(len(part))]
        ys = [value for column in columns for value in part[column]]
        figure.add_trace(go.Box(x=xs, y=ys, name=f"{kind} (layers {layers})", boxpoints="all", jitter=0.3,
                                pointpos=0, text=[t for _ in columns for t in text[part.index]],
                                marker={"color": KIND_COLORS[kind], "size": 5},
                                hovertemplate="%{text}: %{y:.3f}<extra></extra>"))
    return styled(figure, boxmode="group", yaxis_title="score", yaxis_range=[-0.02, 1.02], legend_title="layers")


# --- one head, one prompt ------------------------------------------------------------------------
def _positions_text(positions: Any) -> str:
    if isinstance(positions, (tuple, list)):
        first, last = positions[0], positions[-1]
        return f"{first}" if len(positions) == 1 else f"{first}–{last}"
    return str(positions).strip("()[], ")


def attention_under_swap(swaps: pd.DataFrame, pair: tuple[int, int] | None = None) -> go.Figure:
    """One head's attention on one prompt, before and after swapping two blocks of keys.

    Left: the attention mass of every swappable block on the input (keys on x), the swapped
    blocks dark. Right: those two blocks before and after the swap, with what a purely
    symbolic head would give (their masses exchanged); a purely positional head keeps them as before.

    Args:
        swaps: a ``psheads.swap_attention`` frame (one row per swap of one prompt and head).
        pair: the swapped blocks ``(block_i, block_j)`` (default: the swap of largest weight α, the
            one that dominates the score).
    """
    check_frame(swaps, schema.SWAPS, ["block_i", "block_j", "positions_i", "positions_j", "d_i", "d_j", "d_i_swapped",
                                 "d_j_swapped", "weight"], "attention_under_swap")
    if pair is None:
        row = swaps.iloc[swaps["weight"].argmax()]
    else:
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(isinstance(b, (int, np.integer)) and not isinstance(b, bool) for b in pair)):
            raise TypeError(f"pair must be two block indices (block_i, block_j), got {pair!r}.")
        match = swaps[(swaps["block_i"] == min(pair)) & (swaps["block_j"] == max(pair))]
        if match.empty:
            raise ValueError(f"pair {tuple(pair)} is not a swap of this frame; its blocks are "
                             f"{sorted(set(swaps['block_i']) | set(swaps['block_j']))}.")
        row = match.iloc[0]
    columns = ["block", "positions", "d"]
    blocks = pd.concat([swaps[["block_i", "positions_i", "d_i"]].set_axis(columns, axis=1),
                        swaps[["block_j", "positions_j", "d_j"]].set_axis(columns, axis=1)])
    blocks = blocks.drop_duplicates("block").sort_values("block")
    names = [_positions_text(p) for p in blocks["positions"]]
    i, j = int(row["block_i"]), int(row["block_j"])
    name_i, name_j = _positions_text(row["positions_i"]), _positions_text(row["positions_j"])
    figure = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.64, 0.36], horizontal_spacing=0.06,
                           subplot_titles=("every block, before", f"blocks at {name_i} and {name_j}"))
    colors = ["#444444" if b in (i, j) else "#bbbbbb" for b in blocks["block"]]
    figure.add_trace(go.Bar(x=names, y=blocks["d"], marker_color=colors, name="input", showlegend=False,
                            hovertemplate="key %{x}: %{y:.4f}<extra>input</extra>"), row=1, col=1)
    figure.add_trace(go.Bar(x=[name_i, name_j], y=[row["d_i"], row["d_j"]], name="before",
                            marker_color="#bbbbbb",
                            hovertemplate="key %{x}: %{y:.4f}<extra>before</extra>"), row=1, col=2)
    figure.add_trace(go.Bar(x=[name_i, name_j], y=[row["d_i_swapped"], row["d_j_swapped"]], name="after the swap",
                            marker_color=PALETTE[0],
                            hovertemplate="key %{x}: %{y:.4f}<extra>after the swap</extra>"), row=1, col=2)
    figure.add_trace(go.Scatter(x=[name_i, name_j], y=[row["d_j"], row["d_i"]], mode="markers",
                                name="a symbolic head after", marker={"symbol": "diamond-open", "size": 11,
                                                                       "color": "#222222", "line": {"width": 2}},
                                hovertemplate="key %{x}: %{y:.4f}<extra>symbolic</extra>"), row=1, col=2)
    where = (f"L{swaps.attrs['layer']}H{swaps.attrs['head']}: " if {"layer", "head"} <= set(swaps.attrs) else "")
    cosines = (f", cos_POS = {row['cos_positional']:.3f}, cos_SYM = {row['cos_symbolic']:.3f}"
               if {"cos_positional", "cos_symbolic"} <= set(swaps.columns) else "")
    figure.update_xaxes(title_text="key position", type="category")
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="attention at the query", row=1, col=1)
    return styled(figure, barmode="group", legend_title="blocks",
                  title=f"{where}swap of blocks {i} and {j} (α = {row['weight']:.3f}{cosines})")
