"""Figures: pure functions from psheads frames to ``plotly.graph_objects.Figure``.

No computation beyond reshaping, no ``.show()``, no file I/O.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads import schema

LABEL_COLORS = {"positional": "#1f77b4", "symbolic": "#d62728", "uniform": "#7f7f7f", "mixed": "#9467bd"}


def score_plane(frame: pd.DataFrame, gamma: float | None = None) -> go.Figure:
    """Heads on the positional–symbolic plane, coloured by label, with the γ label regions.

    Args:
        frame: a ``psheads.score_heads`` frame (reduced).
        gamma: label threshold (default: the frame's ``attrs["config"]["gamma"]``, else 0.1).
    """
    schema.SCORES.check(frame, ["layer", "head", "positional", "symbolic", "label"], "score_plane")
    gamma = gamma if gamma is not None else frame.attrs.get("config", {}).get("gamma", 0.1)
    figure = go.Figure()
    regions = {"positional": (1 - gamma, 1, 0, gamma), "symbolic": (0, gamma, 1 - gamma, 1),
               "uniform": (1 - gamma, 1, 1 - gamma, 1)}
    for name, (x0, x1, y0, y1) in regions.items():
        figure.add_shape(type="rect", x0=x0, x1=x1, y0=y0, y1=y1, line_width=0, fillcolor=LABEL_COLORS[name],
                         opacity=0.12, layer="below")
    for label, part in frame.groupby("label", sort=True):
        text = [f"L{layer}H{head}" for layer, head in zip(part["layer"], part["head"])]
        if "plane" in part:
            text = [f"{t} f{plane}" for t, plane in zip(text, part["plane"])]
        figure.add_trace(go.Scatter(x=part["positional"], y=part["symbolic"], mode="markers", name=str(label),
                                    text=text, marker={"color": LABEL_COLORS.get(str(label), "#333333")},
                                    hovertemplate="%{text}<br>s_POS=%{x:.3f}<br>s_SYM=%{y:.3f}"))
    figure.update_layout(xaxis_title="positional score s_POS", yaxis_title="symbolic score s_SYM",
                         xaxis_range=[-0.02, 1.02], yaxis_range=[-0.02, 1.02], legend_title="label")
    return figure


def learning_dynamics(dynamics: pd.DataFrame, head: int = 0) -> go.Figure:
    """Positional and symbolic scores of every layer over training steps (one panel each).

    Args:
        dynamics: a dynamics table from ``psheads.training.train`` (``step, layer, head, …``).
        head: the head to show.
    """
    schema.DYNAMICS.check(dynamics, ["step", "layer", "head", "positional", "symbolic"], "learning_dynamics")
    part = dynamics[dynamics["head"] == head].sort_values(["layer", "step"])
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=("positional", "symbolic"))
    for layer, rows in part.groupby("layer", sort=True):
        for row, column in ((1, "positional"), (2, "symbolic")):
            figure.add_trace(go.Scatter(x=rows["step"], y=rows[column], mode="lines+markers", name=f"layer {layer}",
                                        legendgroup=str(layer), showlegend=row == 1), row=row, col=1)
    figure.update_yaxes(range=[-0.02, 1.02])
    figure.update_xaxes(title_text="step", row=2, col=1)
    return figure


def accuracy_by_hops(evaluation: pd.DataFrame) -> go.Figure:
    """Test accuracy per hop count over training steps (``step, hops, accuracy``)."""
    schema.EVALUATION.check(evaluation, ["step", "hops", "accuracy"], "accuracy_by_hops")
    figure = go.Figure()
    for hops, rows in evaluation.groupby("hops", sort=True):
        figure.add_trace(go.Scatter(x=rows["step"], y=rows["accuracy"], mode="lines+markers", name=f"{hops} hops"
                                    if str(hops) != "all" else "all"))
    figure.update_layout(xaxis_title="step", yaxis_title="accuracy", yaxis_range=[0, 1.02])
    return figure


def frequency_usage(planes: pd.DataFrame) -> go.Figure:
    """Heatmap of usage shares: rows (layer, head), columns frequency IDs (plane 0 first).

    Args:
        planes: ``FrequencyProfile.planes`` (``layer, head, plane, usage``).
    """
    schema.PROFILE_PLANES.check(planes, ["layer", "head", "plane", "usage"], "frequency_usage")
    table = planes.pivot_table(index=["layer", "head"], columns="plane", values="usage")
    figure = go.Figure(go.Heatmap(z=table.to_numpy(), x=[str(c) for c in table.columns],
                                  y=[f"L{layer}H{head}" for layer, head in table.index], colorscale="Viridis",
                                  colorbar={"title": "usage"}))
    figure.update_layout(xaxis_title="frequency ID (1 = fastest, 0 = unrotated)", yaxis_title="head",
                         yaxis_autorange="reversed")
    return figure
