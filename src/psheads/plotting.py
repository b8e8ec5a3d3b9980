"""Figures: pure functions from psheads frames to ``plotly.graph_objects.Figure``.

No computation beyond reshaping and the summaries of ``psheads.results.analysis``, no ``.show()``, no
file I/O. Every figure uses one clean template (``TEMPLATE``, on plotly's ``simple_white``);
figures coloured by layer share one colour per layer (``layer_colors``). Each function checks its
input and names the psheads function that makes the frame it needs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from psheads.interface.reprs import layer_text
from psheads.results import analysis, schema

__all__ = [
    "LAYER_COLORSCALE", "TEMPLATE", "accuracy_by_band", "accuracy_by_hops", "accuracy_under_ablation",
    "accuracy_vs_length", "attention_under_swap", "discrepancy_vs_length", "frequency_curves", "frequency_scores",
    "frequency_usage", "hop_attention", "layer_colors", "layer_distributions", "learning_dynamics", "local_global",
    "plane_logits", "pure_head_counts", "score_correlation", "score_heatmap", "score_plane", "theorem_bounds",
]

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")
LABEL_COLORS = {"positional": "#1f77b4", "symbolic": "#d62728", "uniform": "#7f7f7f", "mixed": "#9467bd"}
SCORE_COLORS = {"positional": "#1f77b4", "symbolic": "#d62728", "interaction": "#2ca02c", "entropy": "#7f7f7f"}
KIND_COLORS = {"local": "#1f77b4", "global": "#ff7f0e"}
HOP_COLORS = {"1": "#1f77b4", "2": "#ff7f0e", "3": "#2ca02c", "4": "#d62728", "all": "#222222"}
SEQUENTIAL = "Viridis"
"""Colour scale of every [0, 1] heatmap (scores, usage, accuracy)."""

LAYER_COLORSCALE = [[k / 10, color] for k, color in
                    enumerate(plotly.colors.sample_colorscale("Viridis", [0.9 * k / 10 for k in range(11)]))]
"""Layer colours: Viridis up to 90% (its last yellows are too light for lines on white)."""

def _template() -> go.layout.Template:
    template = go.layout.Template(pio.templates["simple_white"])
    template.layout.update(
        font={"family": "Helvetica, Arial, sans-serif", "size": 13, "color": "#222222"},
        title={"font": {"size": 15}, "x": 0.5, "xanchor": "center"},
        colorway=list(_PALETTE),
        legend={"bgcolor": "rgba(255,255,255,0)", "borderwidth": 0, "font": {"size": 12}},
        margin={"l": 70, "r": 30, "t": 70, "b": 60},
    )
    return template


TEMPLATE = _template()
"""The template of every psheads figure: plotly's ``simple_white`` with a paper-sized font."""

_PRODUCERS = {
    schema.SCORES.name: "psheads.score_heads",
    schema.DYNAMICS.name: "psheads.train (its dynamics.csv), or psheads.load_pretrained(name).dynamics",
    schema.EVALUATION.name: "psheads.models.training.evaluate, or psheads.load_pretrained(name).evaluation",
    schema.PROFILE_PLANES.name: "psheads.frequency_profile(...).planes",
    schema.SWAPS.name: "psheads.swap_attention",
    schema.DISCREPANCY.name: "psheads.discrepancy",
    schema.ABLATION.name: "psheads.experiments.ablation.ablate",
    schema.LENGTH_GENERALIZATION.name: "psheads.experiments.lengthgen.length_generalization",
    schema.GATING_SWEEP.name: "psheads.experiments.gating_sweep.gating_sweep",
}


def _check(frame: Any, frame_schema: schema.FrameSchema, required: Sequence[str], what: str) -> None:
    """Refuse a non-frame, missing columns or no rows, naming the psheads function that makes the right frame."""
    producer = _PRODUCERS[frame_schema.name]
    try:
        frame_schema.check(frame, list(dict.fromkeys(required)), what)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} Make it with {producer}.") from None
    if frame.empty:
        raise ValueError(f"{what} needs at least one row; this frame is empty. Make it with {producer}.")


def _require(frame: Any, columns: Sequence[str], what: str, optional: str = "") -> None:
    """Refuse anything but a non-empty DataFrame with ``columns`` (for frames no schema describes)."""
    if not isinstance(frame, pd.DataFrame) or not set(columns) <= set(frame.columns) or frame.empty:
        names = ", ".join(columns[:-1]) + f" and {columns[-1]}" if len(columns) > 1 else columns[0]
        raise ValueError(f"{what} needs a non-empty DataFrame with the columns {names}{optional}.")


def _style(figure: go.Figure, **layout: Any) -> go.Figure:
    figure.update_layout(template=TEMPLATE, **layout)
    return figure


def layer_colors(layers: Iterable[int]) -> dict[int, str]:
    """One colour per layer, sampled from ``LAYER_COLORSCALE`` at ``layer / max(layers)``.

    Layer 0 is dark blue and the last layer yellow-green whatever the depth (12–40 layers and
    more), so a layer keeps its colour in every figure of the same model.
    """
    chosen = sorted({int(layer) for layer in layers})
    top = max(chosen[-1], 1) if chosen else 1
    return dict(zip(chosen, plotly.colors.sample_colorscale(LAYER_COLORSCALE, [layer / top for layer in chosen])))


def _rgba(color: str, alpha: float) -> str:
    red, green, blue = (plotly.colors.hex_to_rgb(color) if color.startswith("#")
                        else plotly.colors.unlabel_rgb(color))
    return f"rgba({red:g},{green:g},{blue:g},{alpha})"


def _color(name: Any, index: int, table: dict[str, str] | None = None) -> str:
    table = table or {}
    return table.get(str(name), _PALETTE[index % len(_PALETTE)])


def _score_title(column: str) -> str:
    return {"positional": "positional score s_POS", "symbolic": "symbolic score s_SYM"}.get(column, column)


def _head_text(frame: pd.DataFrame) -> pd.Series:
    """``L{layer}H{head}`` (and `` f{plane}`` for per-plane frames) per row."""
    text = [f"L{layer}H{head}" for layer, head in zip(frame["layer"], frame["head"])]
    if "plane" in frame.columns:
        text = [f"{t} f{plane}" for t, plane in zip(text, frame["plane"])]
    return pd.Series(text, index=frame.index, dtype=object)


def _hop_order(hops: Iterable[Any]) -> list[str]:
    """Hop counts as strings, numerically, ``"all"`` last."""
    return sorted({str(h) for h in hops}, key=lambda h: (h == "all", int(h) if h.isdigit() else 0, h))


def _hop_name(hop: str) -> str:
    return "all" if hop == "all" else f"{hop} hops"


def _panels(frame: pd.DataFrame) -> tuple[list[tuple[Any, pd.DataFrame]], go.Figure]:
    """One panel per value of a ``model`` (else ``task``) column, side by side with a shared y axis."""
    facet = next((column for column in ("model", "task") if column in frame.columns), None)
    panels = [(None, frame)] if facet is None else list(frame.groupby(facet, sort=False))
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                           subplot_titles=None if facet is None else [f"{facet} {value}" for value, _ in panels])
    return panels, figure


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
        labels: write ``L{layer}H{head}`` beside every point (for static exports, where hover is gone).
        method: ``"swap"``, ``"anova"`` or another registered method (default: the frame's
            ``attrs["config"]["method"]``, else ``"swap"``); other methods get no frontier.
        title: the figure title (default: names the method and γ).
    """
    _check(frame, schema.SCORES, ["layer", "head", "positional", "symbolic", "label"], "score_plane")
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
            x=part["positional"], y=part["symbolic"], mode="markers+text" if labels else "markers", name=name,
            text=text[part.index], textposition="top center", textfont={"size": 10}, cliponaxis=False,
            marker={"color": LABEL_COLORS.get(name, "#333333"), "size": 8, "line": {"color": "white", "width": 0.5}},
            hovertemplate="%{text}<br>s_POS=%{x:.4f}<br>s_SYM=%{y:.4f}<extra>" + name + "</extra>"))
    title = title if title is not None else f"Heads on the positional–symbolic plane ({method}, γ = {gamma:g})"
    axis = {"range": [-0.03, 1.03], "constrain": "domain", "dtick": 0.2}
    figure.update_xaxes(title_text="positional score s_POS", **axis)
    figure.update_yaxes(title_text="symbolic score s_SYM", scaleanchor="x", scaleratio=1, **axis)
    return _style(figure, title=title, legend={"title": {"text": ""}, "orientation": "h", "x": 0.5, "xanchor": "center",
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
    _check(scores, schema.SCORES, ["layer", "head", column], "score_heatmap")
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
    return _style(figure, title=_score_title(column))


# --- training ------------------------------------------------------------------------------------
def learning_dynamics(dynamics: pd.DataFrame, head: int = 0,
                      columns: Sequence[str] = ("positional", "symbolic")) -> go.Figure:
    """Scores of every layer over training steps, one panel per column (all in [0, 1]).

    Every layer has one colour (``layer_colors``) and one legend entry that shows or hides it in
    every panel.

    Args:
        dynamics: a dynamics table from ``psheads.train`` (``step, layer, head, …``).
        head: the head to show.
        columns: the panels, top to bottom (``positional``, ``symbolic``, ``entropy``, …).
    """
    columns = analysis.column_names(columns, "columns")
    if not columns:
        raise ValueError("columns must name at least one column of the dynamics table.")
    _check(dynamics, schema.DYNAMICS, ["step", "layer", "head", *columns], "learning_dynamics")
    part = dynamics[dynamics["head"] == head].sort_values(["layer", "step"])
    if part.empty:
        raise ValueError(f"learning_dynamics: head {head!r} is not in this table; it has heads "
                         f"{sorted(dynamics['head'].unique().tolist())}.")
    colors = layer_colors(part["layer"])
    figure = make_subplots(rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=[_score_title(column) for column in columns])
    for layer, rows in part.groupby("layer", sort=True):
        name = f"layer {layer}"
        for row, column in enumerate(columns, start=1):
            figure.add_trace(go.Scatter(x=rows["step"], y=rows[column], mode="lines+markers", name=name,
                                        legendgroup=name, showlegend=row == 1,
                                        line={"color": colors[int(layer)], "width": 1.5}, marker={"size": 4},
                                        hovertemplate="step %{x}: %{y:.3f}<extra>" + name + "</extra>"),
                             row=row, col=1)
    figure.update_yaxes(range=[-0.02, 1.02])
    figure.update_xaxes(title_text="training step", row=len(columns), col=1)
    return _style(figure, title=f"Scores of head {head} over training", legend_title="layer")


def pure_head_counts(dynamics: pd.DataFrame, labels: Sequence[str] = ("positional", "symbolic")) -> go.Figure:
    """How many heads carry each pure label at every checkpoint of a training run.

    Counts the ``label`` column of the dynamics table (the labelling rule of ``score_heads`` with
    the run's γ, 0.1 by default); a label absent at a step counts 0. A ``model`` (else ``task``)
    column puts each value in its own panel.

    Args:
        dynamics: a dynamics table from ``psheads.train`` (``step, layer, head, label``), or several
            stacked with a ``model`` column, such as the shipped ``Pretrained.dynamics``.
        labels: the labels to count (any of ``positional``, ``symbolic``, ``uniform``, ``mixed``).
    """
    _check(dynamics, schema.DYNAMICS, ["step", "layer", "head", "label"], "pure_head_counts")
    labels = [labels] if isinstance(labels, str) else list(labels)
    unknown = [name for name in labels if name not in schema.LABEL_ORDER]
    if unknown or not labels:
        raise ValueError(f"labels must be a non-empty list of {list(schema.LABEL_ORDER)}, got {labels!r}.")
    panels, figure = _panels(dynamics)
    top = 0
    for col, (_, part) in enumerate(panels, start=1):
        counts = analysis.label_counts(part, by="step").pivot(index="step", columns="label", values="n")
        counts = counts.reindex(columns=labels).fillna(0).astype(int)
        top = max(top, int(part.groupby("step").size().max()))
        for name in labels:
            figure.add_trace(go.Scatter(x=counts.index, y=counts[name], mode="lines+markers", name=f"pure {name}"
                                        if name in ("positional", "symbolic") else name, legendgroup=name,
                                        showlegend=col == 1, line={"color": LABEL_COLORS[name], "shape": "hv"},
                                        hovertemplate="step %{x}: %{y} heads<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_xaxes(title_text="training step")
    figure.update_yaxes(range=[-0.3, top + 0.3])
    figure.update_yaxes(title_text="heads", row=1, col=1)
    return _style(figure, title=f"Heads per label over training (of {top} heads)", legend_title="label")


def accuracy_by_hops(evaluation: pd.DataFrame) -> go.Figure:
    """Test accuracy per hop count: bars for a final evaluation, lines over training with a ``step`` column.

    Args:
        evaluation: ``hops, accuracy`` (``n`` shows on hover), such as the shipped
            ``Pretrained.evaluation``; several stacked with a ``model`` column give one bar per model
            (or, with ``step``, one panel per model).
    """
    _check(evaluation, schema.EVALUATION, ["hops", "accuracy"], "accuracy_by_hops")
    hops = _hop_order(evaluation["hops"])
    counts = " (n=%{customdata})" if "n" in evaluation.columns else ""
    if "step" not in evaluation.columns:
        figure = go.Figure()
        groups = list(evaluation.groupby("model", sort=False)) if "model" in evaluation else [("accuracy", evaluation)]
        for index, (name, rows) in enumerate(groups):
            rows = rows.assign(hops=rows["hops"].astype(str)).drop_duplicates("hops").set_index("hops").reindex(hops)
            colors = [HOP_COLORS.get(h, _PALETTE[0]) for h in hops] if len(groups) == 1 else _PALETTE[index]
            figure.add_trace(go.Bar(x=[_hop_name(h) for h in hops], y=rows["accuracy"], name=str(name),
                                    marker_color=colors, texttemplate="%{y:.2f}", textposition="outside",
                                    customdata=rows["n"].to_numpy() if "n" in rows else None,
                                    hovertemplate="%{x}: %{y:.3f}" + counts + "<extra>" + str(name) + "</extra>"))
        figure.update_yaxes(title_text="accuracy", range=[0, 1.1])
        return _style(figure, barmode="group", showlegend=len(groups) > 1, legend_title="model",
                      title="Test accuracy per hop count")
    panels, figure = _panels(evaluation)
    for col, (_, part) in enumerate(panels, start=1):
        for index, hop in enumerate(hops):
            rows = part[part["hops"].astype(str) == hop].sort_values("step")
            name = _hop_name(hop)
            figure.add_trace(go.Scatter(x=rows["step"], y=rows["accuracy"], mode="lines+markers", name=name,
                                        legendgroup=name, showlegend=col == 1,
                                        line={"color": HOP_COLORS.get(hop, _PALETTE[index % len(_PALETTE)])},
                                        customdata=rows["n"].to_numpy() if "n" in rows else None,
                                        hovertemplate="step %{x}: %{y:.3f}" + counts + "<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_xaxes(title_text="training step")
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    return _style(figure, legend_title="hops", title="Test accuracy over training")


# --- frequencies ---------------------------------------------------------------------------------
def frequency_usage(planes: pd.DataFrame) -> go.Figure:
    """Heatmap of usage shares: rows (layer, head), columns frequency IDs (plane 0 first), θ on top.

    Args:
        planes: ``FrequencyProfile.planes`` (``layer, head, plane, theta, usage``).
    """
    _check(planes, schema.PROFILE_PLANES, ["layer", "head", "plane", "theta", "usage"], "frequency_usage")
    table = planes.pivot_table(index=["layer", "head"], columns="plane", values="usage")
    figure = go.Figure(go.Heatmap(z=table.to_numpy(), x=[int(c) for c in table.columns],
                                  y=[f"L{layer}H{head}" for layer, head in table.index], colorscale=SEQUENTIAL,
                                  zmin=0, colorbar={"title": {"text": "usage"}},
                                  hovertemplate="%{y}, plane %{x}: usage %{z:.3f}<extra></extra>"))
    _theta_axis(figure, planes)
    figure.update_layout(xaxis={"title": {"text": "frequency ID (0 = unrotated, 1 = fastest)"}, "showline": False,
                                "ticks": ""})
    figure.update_yaxes(title_text="head", autorange="reversed", showline=False, ticks="")
    return _style(figure, title="Usage share of every plane")


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
    _check(frame, schema.PROFILE_PLANES if is_profile else schema.SCORES,
           ["layer", "head", "plane", "theta", column], "frequency_curves")
    if "prompt" in frame.columns:
        raise ValueError("frequency_curves needs a reduced frame (score_heads(..., reduce=True)); this one has a "
                         "'prompt' column.")
    colors = layer_colors(frame["layer"])
    figure = go.Figure()
    shown: set[int] = set()
    for (layer, head), rows in frame.groupby(["layer", "head"], sort=True):
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
    figure.update_yaxes(title_text=_score_title(column), range=[-0.02, 1.02] if bounded else None)
    return _style(figure, title=f"{_score_title(column)} per plane", legend_title="layer")


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
    _check(scores, schema.SCORES, ["layer", "head", "plane", "theta", *columns], "frequency_scores")
    summary = analysis.frequency_summary(scores, columns=columns, quantiles=quantiles, by=() if by is None else (by,))
    low, high = (analysis.quantile_name(q) for q in summary.attrs["quantiles"])
    figure = make_subplots(rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.08)
    groups = summary.groupby(by, sort=True) if by is not None else [("all heads", summary)]
    colors = layer_colors(summary["layer"]) if by == "layer" else {}
    for index, (value, part) in enumerate(groups):
        value = value[0] if isinstance(value, tuple) else value
        name = f"{by} {value}" if by == "layer" else str(value)
        color = colors[int(value)] if by == "layer" else _color(value, index, KIND_COLORS if by == "layer_kind"
                                                                else None)
        for row, column in enumerate(columns, start=1):
            rows = part[part["score"] == column].sort_values(x)
            xs = rows[x].tolist()
            figure.add_trace(go.Scatter(x=xs + xs[::-1], y=rows[high].tolist() + rows[low].tolist()[::-1],
                                        fill="toself", fillcolor=_rgba(color, 0.18), line={"width": 0},
                                        hoverinfo="skip", showlegend=False, legendgroup=name), row=row, col=1)
            figure.add_trace(go.Scatter(x=xs, y=rows["median"], mode="lines", name=name, legendgroup=name,
                                        showlegend=row == 1, line={"color": color},
                                        customdata=rows[["plane", "period"]].to_numpy(),
                                        hovertemplate="ID %{customdata[0]}, period %{customdata[1]:.3g}<br>"
                                                      "median %{y:.3f}<extra>" + name + "</extra>"),
                             row=row, col=1)
    figure.update_yaxes(range=[-0.02, 1.02])
    for row, column in enumerate(columns, start=1):
        figure.update_yaxes(title_text=_score_title(column), row=row, col=1)
    title = "frequency ID (1 = fastest)" if x == "plane" else "period 2π/θ (tokens)"
    figure.update_xaxes(title_text=title, row=len(columns), col=1)
    if x == "period":
        figure.update_xaxes(type="log")
    else:
        _theta_axis(figure, scores[scores["plane"] > 0])
    return _style(figure, title=f"median over heads, band {low}–{high}", legend_title=by or "")


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
    _check(scores, schema.SCORES, ["layer", "head", *columns], "layer_distributions")
    analysis.check_scores(scores, "layer_distributions", columns, (), per_plane=False)
    figure = go.Figure()
    text = _head_text(scores).tolist()
    for index, column in enumerate(columns):
        figure.add_trace(go.Box(x=scores["layer"], y=scores[column], name=_score_title(column), text=text,
                                boxpoints="all", jitter=0.3, pointpos=0, offsetgroup=column,
                                marker={"color": _color(column, index, SCORE_COLORS), "size": 5},
                                hovertemplate="%{text}<br>" + column + "=%{y:.3f}<extra></extra>"))
    if "layer_kind" in scores.columns:
        for layer in sorted(scores.loc[scores["layer_kind"] == "global", "layer"].unique()):
            figure.add_vrect(x0=layer - 0.5, x1=layer + 0.5, fillcolor=KIND_COLORS["global"], opacity=0.12,
                             line_width=0, layer="below")
    figure.update_xaxes(dtick=1)
    return _style(figure, boxmode="group", xaxis_title="layer" + (" (shaded: global)" if "layer_kind" in scores.columns
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
    _check(scores, schema.SCORES, ["layer", "head", x, y, *([color] if color else [])], "score_correlation")
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
                                        marker={"size": 7, "color": _color(value, index, table)}, hovertemplate=hover))
    finite = scores[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    if len(finite) >= 2 and math.isfinite(result["r"]):
        xs, ys = finite[x].to_numpy(dtype=float), finite[y].to_numpy(dtype=float)
        slope = ((xs - xs.mean()) * (ys - ys.mean())).sum() / ((xs - xs.mean()) ** 2).sum()
        ends = [float(xs.min()), float(xs.max())]
        figure.add_trace(go.Scatter(x=ends, y=[ys.mean() + slope * (e - xs.mean()) for e in ends], mode="lines",
                                    name="least squares", line={"color": "#333333", "dash": "dash"}))
    interval = (f", 95% CI [{result['ci_low']:.2f}, {result['ci_high']:.2f}]"
                if math.isfinite(result["ci_low"]) else "")
    return _style(figure, title=f"Pearson r = {result['r']:.2f}{interval}, n = {int(result['n'])}",
                  xaxis_title=_score_title(x), yaxis_title=_score_title(y), xaxis_range=[-0.02, 1.02],
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
    _check(scores, schema.SCORES, ["layer", "head", *columns], "local_global")
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
        xs = [_score_title(column) for column in columns for _ in range(len(part))]
        ys = [value for column in columns for value in part[column]]
        figure.add_trace(go.Box(x=xs, y=ys, name=f"{kind} (layers {layers})", boxpoints="all", jitter=0.3,
                                pointpos=0, text=[t for _ in columns for t in text[part.index]],
                                marker={"color": KIND_COLORS[kind], "size": 5},
                                hovertemplate="%{text}: %{y:.3f}<extra></extra>"))
    return _style(figure, boxmode="group", yaxis_title="score", yaxis_range=[-0.02, 1.02], legend_title="layers")


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
    _check(swaps, schema.SWAPS, ["block_i", "block_j", "positions_i", "positions_j", "d_i", "d_j", "d_i_swapped",
                                 "d_j_swapped", "weight"], "attention_under_swap")
    if pair is None:
        row = swaps.loc[swaps["weight"].idxmax()]
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
                            marker_color=_PALETTE[0],
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
    return _style(figure, barmode="group", legend_title="blocks",
                  title=f"{where}swap of blocks {i} and {j} (α = {row['weight']:.3f}{cosines})")


# --- length generalization, theory, causality ----------------------------------------------------
def accuracy_vs_length(frame: pd.DataFrame) -> go.Figure:
    """Accuracy against prompt length (log axis): one line per hop count and one for "all".

    A ``model`` column (else a ``task`` column) puts each value in its own panel, side by side.

    Args:
        frame: a ``psheads.experiments.lengthgen.length_generalization`` frame (``length, hops, accuracy``;
            ``n`` shows on hover), or several stacked with a ``model`` or ``task`` column, such as
            the shipped ``Pretrained.length_generalization`` frames.

    Raises:
        ValueError: missing columns, no rows, or a length below 1.
    """
    _check(frame, schema.LENGTH_GENERALIZATION, ["length", "hops", "accuracy"], "accuracy_vs_length")
    if (pd.to_numeric(frame["length"]) < 1).any():
        raise ValueError("accuracy_vs_length: every length must be at least 1 (the x axis is logarithmic).")
    panels, figure = _panels(frame)
    hops = _hop_order(frame["hops"])
    for col, (_, part) in enumerate(panels, start=1):
        for index, hop in enumerate(hops):
            rows = part[part["hops"].astype(str) == hop].sort_values("length")
            if rows.empty:
                continue
            name = _hop_name(hop)
            color = HOP_COLORS.get(hop, _PALETTE[index % len(_PALETTE)])
            counts = " (n=%{customdata})" if "n" in rows else ""
            figure.add_trace(go.Scatter(x=rows["length"], y=rows["accuracy"], mode="lines+markers", name=name,
                                        legendgroup=name, showlegend=col == 1,
                                        customdata=rows["n"].to_numpy() if "n" in rows else None,
                                        line={"color": color, "width": 3 if hop == "all" else 1.5,
                                              "dash": "solid" if hop == "all" else "dot"},
                                        hovertemplate="%{x} tokens: %{y:.3f}" + counts + "<extra>" + name
                                                      + "</extra>"), row=1, col=col)
    lengths = sorted({int(length) for length in frame["length"]})
    figure.update_xaxes(type="log", title_text="prompt length (tokens)", tickvals=lengths,
                        ticktext=[str(length) for length in lengths])
    figure.update_yaxes(range=[-0.02, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    return _style(figure, legend_title="hops")


def discrepancy_vs_length(frame: pd.DataFrame, bounds: pd.DataFrame | None = None) -> go.Figure:
    """Normalised discrepancy against prompt length: one line per (layer, head), zero dotted.

    Args:
        frame: a ``psheads.discrepancy`` frame (``length, layer, head, normalised``); with a
            ``model`` column (frames of several models stacked), one line per model, layer and head.
        bounds: closed-form curves to draw dashed, such as ``Construction.bounds(lengths)``:
            ``length`` and ``upper``, optionally ``lower`` and ``margin`` (NaN where undefined).

    Raises:
        ValueError: missing columns or no rows.
    """
    _check(frame, schema.DISCREPANCY, ["length", "layer", "head", "normalised"], "discrepancy_vs_length")
    figure = go.Figure()
    keys = (["model"] if "model" in frame.columns else []) + ["layer", "head"]
    for index, (key, rows) in enumerate(frame.groupby(keys, sort=True)):
        *model, layer, head = key
        name = " ".join([*map(str, model), f"L{layer}H{head}"])
        rows = rows.sort_values("length")
        figure.add_trace(go.Scatter(x=rows["length"], y=rows["normalised"], mode="lines+markers",
                                    name=name, line={"color": _PALETTE[index % len(_PALETTE)]},
                                    hovertemplate="%{x} tokens: Δ = %{y:.4g}<extra>" + name + "</extra>"))
    if bounds is not None:
        if not isinstance(bounds, pd.DataFrame) or not {"length", "upper"} <= set(bounds.columns):
            raise ValueError("discrepancy_vs_length: bounds must be a DataFrame with the columns length and upper "
                             "(and optionally lower and margin), such as Construction.bounds(lengths).")
        curves = bounds.sort_values("length")
        styles = {"upper": ("upper bound", "dash"), "lower": ("lower bound", "dash"), "margin": ("exact worst case", "dot")}
        for column, (name, dash) in styles.items():
            if column in curves and curves[column].notna().any():
                figure.add_trace(go.Scatter(x=curves["length"], y=curves[column], mode="lines", name=name,
                                            line={"color": "#222222", "dash": dash, "width": 1.5},
                                            hovertemplate="%{x} tokens: %{y:.4g}<extra>" + name + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return _style(figure, xaxis_title="prompt length (tokens)", yaxis_title="normalised discrepancy Δ",
                  legend_title="head")


def theorem_bounds(frame: pd.DataFrame) -> go.Figure:
    """Theorem 3.2's bounds against the distance n, one colour per construction (paper B, figure 5A).

    Args:
        frame: ``construction, n, upper`` and optionally ``lower`` (NaN where there is none), such
            as the report's curves for paper B's angles.

    Raises:
        ValueError: missing columns or no rows.
    """
    _require(frame, ("construction", "n", "upper"), "theorem_bounds", " (optionally lower)")
    figure = go.Figure()
    for index, (kind, rows) in enumerate(frame.groupby("construction", sort=True)):
        rows = rows.sort_values("n")
        color = _PALETTE[index % len(_PALETTE)]
        for column, dash in (("upper", "solid"), ("lower", "dash")):
            if column in rows and rows[column].notna().any():
                name = f"{kind}: {column} bound"
                figure.add_trace(go.Scatter(x=rows["n"], y=rows[column], mode="lines", name=name,
                                            line={"color": color, "dash": dash},
                                            hovertemplate="n = %{x}: %{y:.4g}<extra>" + name + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return _style(figure, xaxis_title="n (distance from the query to the farthest key)",
                  yaxis_title="bound on the discrepancy Δ(n)", legend_title="Theorem 3.2")


def hop_attention(frame: pd.DataFrame) -> go.Figure:
    """Each layer's mean attention along each hop of multi-hop prompts, as a (hop × layer) heatmap
    (paper B, figure 3A): rows are hop counts and the hop from the query (1 at the query), columns
    layers, colours in [0, 1].

    Args:
        frame: ``hops, step, layer, attention`` (one row per prompt or already averaged), such as
            ``psheads.reproduction.report.index_flow``'s.

    Raises:
        ValueError: missing columns or no rows.
    """
    _require(frame, ("hops", "step", "layer", "attention"), "hop_attention")
    mean = frame.groupby(["hops", "step", "layer"])["attention"].mean().unstack("layer").sort_index()
    rows = [f"{hops} hop{'s' if hops > 1 else ''}, hop {step}" for hops, step in mean.index]
    figure = go.Figure(go.Heatmap(
        z=mean.to_numpy(dtype=float), x=[f"L{layer}" for layer in mean.columns], y=rows, zmin=0, zmax=1,
        colorscale=SEQUENTIAL, colorbar={"title": {"text": "attention"}},
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    figure.update_xaxes(title_text="layer", showline=False, ticks="")
    figure.update_yaxes(title_text="prompt's hop count, hop (1 at the query)", autorange="reversed", showline=False,
                        ticks="")
    return _style(figure)


def plane_logits(frame: pd.DataFrame) -> go.Figure:
    """One RoPE plane's logits against the key's distance from the query: points per prompt, and
    each prompt's fitted curve as a line of the same colour (paper B, figure 4B–C).

    Args:
        frame: ``prompt, offset, logit`` and optionally ``fit``, such as the report's layer-1
            geometry of the number model.

    Raises:
        ValueError: missing columns or no rows.
    """
    _require(frame, ("prompt", "offset", "logit"), "plane_logits", " (optionally fit)")
    figure = go.Figure()
    for index, (prompt, rows) in enumerate(frame.groupby("prompt", sort=True)):
        rows = rows.sort_values("offset")
        color = _PALETTE[index % len(_PALETTE)]
        figure.add_trace(go.Scatter(x=rows["offset"], y=rows["logit"], mode="markers", name=f"prompt {prompt}",
                                    legendgroup=str(prompt), marker={"color": color, "size": 6},
                                    hovertemplate="distance %{x}: %{y:.3g}<extra>prompt " + str(prompt) + "</extra>"))
        if "fit" in rows:
            figure.add_trace(go.Scatter(x=rows["offset"], y=rows["fit"], mode="lines", showlegend=False,
                                        legendgroup=str(prompt), line={"color": color, "width": 1},
                                        hovertemplate="fit at %{x}: %{y:.3g}<extra>prompt " + str(prompt) + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return _style(figure, xaxis_title="distance from the query to the key (positions)",
                  yaxis_title="the plane's logit", legend_title="prompt")


def accuracy_under_ablation(frame: pd.DataFrame) -> go.Figure:
    """Accuracy per hop count under each intervention: grouped bars, the unchanged model first.

    A ``model`` column (else a ``task`` column) puts each value in its own panel, side by side;
    interventions keep their order in the frame, so the baseline ``"none"`` comes first as
    ``ablate`` writes it.

    Args:
        frame: a ``psheads.experiments.ablation.ablate`` frame (``intervention, hops, accuracy``; ``n`` shows on
            hover), or several stacked with a ``model`` or ``task`` column, such as
            ``psheads.data.table("causal_tests", dtype={"hops": str})``.

    Raises:
        ValueError: missing columns, no rows, or two rows for one (panel, intervention, hop count).
    """
    _check(frame, schema.ABLATION, ["intervention", "hops", "accuracy"], "accuracy_under_ablation")
    facet = [column for column in ("model", "task") if column in frame.columns][:1]
    keys = [*facet, "intervention", "hops"]
    if frame.duplicated(keys).any():
        raise ValueError(f"accuracy_under_ablation needs one row per {tuple(keys)}; this frame repeats some.")
    panels, figure = _panels(frame)
    hops = _hop_order(frame["hops"])
    names = list(dict.fromkeys(frame["intervention"].astype(str)))
    for col, (_, part) in enumerate(panels, start=1):
        for index, name in enumerate(names):
            rows = part[part["intervention"].astype(str) == name]
            rows = rows.assign(hops=rows["hops"].astype(str)).set_index("hops").reindex(hops)
            color = "#7f7f7f" if name == "none" else _PALETTE[index % len(_PALETTE)]
            counts = " (n=%{customdata})" if "n" in rows else ""
            figure.add_trace(go.Bar(x=[_hop_name(h) for h in hops], y=rows["accuracy"],
                                    name=name, legendgroup=name, showlegend=col == 1, marker_color=color,
                                    customdata=rows["n"].to_numpy() if "n" in rows else None,
                                    hovertemplate="%{x}: %{y:.3f}" + counts + "<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    return _style(figure, barmode="group", legend_title="intervention")


def accuracy_by_band(frame: pd.DataFrame) -> go.Figure:
    """Test accuracy per task and frequency band of a gated training sweep: an annotated heatmap.

    Each cell is the mean over seeds of the runs' accuracy (each run counted once, however many
    heads it has), annotated ``mean ± spread`` where the spread is half the range over seeds;
    hovering shows the band's planes and the number of seeds. Tasks (rows) and bands (columns)
    keep their order in the frame.

    Args:
        frame: a ``psheads.experiments.gating_sweep.gating_sweep`` frame (``task, band, seed, accuracy``; ``planes``
            shows on hover), such as ``psheads.data.table("gating_sweep")``.

    Raises:
        ValueError: missing columns, no rows, or one run with two different accuracies.
    """
    _check(frame, schema.GATING_SWEEP, ["task", "band", "seed", "accuracy"], "accuracy_by_band")
    runs = frame.drop_duplicates(["task", "band", "seed", "accuracy"])
    if runs.duplicated(["task", "band", "seed"]).any():
        raise ValueError("accuracy_by_band: a (task, band, seed) run has several different accuracies.")
    summary = runs.groupby(["task", "band"], sort=False)["accuracy"].agg(["mean", "min", "max", "count"])
    tasks = list(dict.fromkeys(runs["task"]))
    bands = list(dict.fromkeys(runs["band"]))
    mean = summary["mean"].unstack("band").reindex(index=tasks, columns=bands)
    spread = ((summary["max"] - summary["min"]) / 2).unstack("band").reindex(index=tasks, columns=bands)
    count = summary["count"].unstack("band").reindex(index=tasks, columns=bands)
    planes = (runs.drop_duplicates("band").set_index("band")["planes"].reindex(bands).astype(str).tolist()
              if "planes" in runs else [""] * len(bands))
    text = [["" if pd.isna(m) else f"{m:.2f} ± {s:.2f}" for m, s in zip(mean.loc[t], spread.loc[t])] for t in tasks]
    custom = [[[planes[j], "" if pd.isna(count.loc[t].iloc[j]) else int(count.loc[t].iloc[j])]
               for j in range(len(bands))] for t in tasks]
    figure = go.Figure(go.Heatmap(
        z=mean.to_numpy(), x=bands, y=tasks, zmin=0, zmax=1, colorscale=SEQUENTIAL, text=text,
        texttemplate="%{text}", customdata=custom, colorbar={"title": {"text": "accuracy"}},
        hovertemplate="%{y}, band %{x} (planes %{customdata[0]}): %{z:.3f} over %{customdata[1]} seeds<extra></extra>"))
    figure.update_xaxes(showline=False, ticks="")
    figure.update_yaxes(showline=False, ticks="")
    return _style(figure, xaxis_title="frequency band the heads may use", yaxis_title="task",
                  yaxis_autorange="reversed")
