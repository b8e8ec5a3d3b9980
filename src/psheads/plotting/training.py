"""Figures of models trained on the multi-hop tasks: scores and labels over training, accuracy per
hop count, and the attention each layer puts along the hops."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads.plotting.checks import check_frame, require_columns
from psheads.plotting.style import (
    HOP_COLORS,
    LABEL_COLORS,
    PALETTE,
    SEQUENTIAL,
    facet_panels,
    hop_name,
    hop_order,
    layer_colors,
    score_title,
    styled,
)
from psheads.results import analysis, schema


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
    check_frame(dynamics, schema.DYNAMICS, ["step", "layer", "head", *columns], "learning_dynamics")
    part = dynamics[dynamics["head"] == head].sort_values(["layer", "step"])
    if part.empty:
        raise ValueError(f"learning_dynamics: head {head!r} is not in this table; it has heads "
                         f"{sorted(dynamics['head'].unique().tolist())}.")
    colors = layer_colors(part["layer"])
    figure = make_subplots(rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=[score_title(column) for column in columns])
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
    return styled(figure, title=f"Scores of head {head} over training", legend_title="layer")


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
    check_frame(dynamics, schema.DYNAMICS, ["step", "layer", "head", "label"], "pure_head_counts")
    labels = [labels] if isinstance(labels, str) else list(labels)
    unknown = [name for name in labels if name not in schema.LABEL_ORDER]
    if unknown or not labels:
        raise ValueError(f"labels must be a non-empty list of {list(schema.LABEL_ORDER)}, got {labels!r}.")
    panels, figure = facet_panels(dynamics)
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
    return styled(figure, title=f"Heads per label over training (of {top} heads)", legend_title="label")


def accuracy_by_hops(evaluation: pd.DataFrame) -> go.Figure:
    """Test accuracy per hop count: bars for a final evaluation, lines over training with a ``step`` column.

    Args:
        evaluation: ``hops, accuracy`` (``n`` shows on hover), such as the shipped
            ``Pretrained.evaluation``; several stacked with a ``model`` column give one bar per model
            (or, with ``step``, one panel per model).
    """
    check_frame(evaluation, schema.EVALUATION, ["hops", "accuracy"], "accuracy_by_hops")
    hops = hop_order(evaluation["hops"])
    counts = " (n=%{customdata})" if "n" in evaluation.columns else ""
    if "step" not in evaluation.columns:
        figure = go.Figure()
        groups = list(evaluation.groupby("model", sort=False)) if "model" in evaluation else [("accuracy", evaluation)]
        for index, (name, rows) in enumerate(groups):
            rows = rows.assign(hops=rows["hops"].astype(str)).drop_duplicates("hops").set_index("hops").reindex(hops)
            colors = [HOP_COLORS.get(h, PALETTE[0]) for h in hops] if len(groups) == 1 else PALETTE[index]
            figure.add_trace(go.Bar(x=[hop_name(h) for h in hops], y=rows["accuracy"], name=str(name),
                                    marker_color=colors, texttemplate="%{y:.2f}", textposition="outside",
                                    customdata=rows["n"].to_numpy() if "n" in rows else None,
                                    hovertemplate="%{x}: %{y:.3f}" + counts + "<extra>" + str(name) + "</extra>"))
        figure.update_yaxes(title_text="accuracy", range=[0, 1.1])
        return styled(figure, barmode="group", showlegend=len(groups) > 1, legend_title="model",
                      title="Test accuracy per hop count")
    panels, figure = facet_panels(evaluation)
    for col, (_, part) in enumerate(panels, start=1):
        for index, hop in enumerate(hops):
            rows = part[part["hops"].astype(str) == hop].sort_values("step")
            name = hop_name(hop)
            figure.add_trace(go.Scatter(x=rows["step"], y=rows["accuracy"], mode="lines+markers", name=name,
                                        legendgroup=name, showlegend=col == 1,
                                        line={"color": HOP_COLORS.get(hop, PALETTE[index % len(PALETTE)])},
                                        customdata=rows["n"].to_numpy() if "n" in rows else None,
                                        hovertemplate="step %{x}: %{y:.3f}" + counts + "<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_xaxes(title_text="training step")
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    return styled(figure, legend_title="hops", title="Test accuracy over training")


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
    require_columns(frame, ("hops", "step", "layer", "attention"), "hop_attention")
    mean = frame.groupby(["hops", "step", "layer"])["attention"].mean().unstack("layer").sort_index()
    rows = [f"{hops} hop{'s' if hops > 1 else ''}, hop {step}" for hops, step in mean.index]
    figure = go.Figure(go.Heatmap(
        z=mean.to_numpy(dtype=float), x=[f"L{layer}" for layer in mean.columns], y=rows, zmin=0, zmax=1,
        colorscale=SEQUENTIAL, colorbar={"title": {"text": "attention"}},
        hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    figure.update_xaxes(title_text="layer", showline=False, ticks="")
    figure.update_yaxes(title_text="prompt's hop count, hop (1 at the query)", autorange="reversed", showline=False,
                        ticks="")
    return styled(figure)
