"""Figures: pure functions from psheads frames to ``plotly.graph_objects.Figure``.

No computation beyond reshaping and the summaries of ``psheads.analysis``, no ``.show()``, no
file I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads import analysis, schema

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


SCORE_COLORS = {"positional": "#1f77b4", "symbolic": "#d62728", "interaction": "#2ca02c", "entropy": "#7f7f7f"}
KIND_COLORS = {"local": "#1f77b4", "global": "#ff7f0e"}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")


def _score_title(column: str) -> str:
    return {"positional": "positional score s_POS", "symbolic": "symbolic score s_SYM"}.get(column, column)


def _color(name: Any, index: int, table: dict[str, str] | None = None) -> str:
    table = table or {}
    return table.get(str(name), _PALETTE[index % len(_PALETTE)])


def _rgba(color: str, alpha: float) -> str:
    red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def layer_distributions(scores: pd.DataFrame, columns: Sequence[str] = analysis.SCORE_COLUMNS) -> go.Figure:
    """Each score's distribution over the heads of every layer: a box per layer, every head drawn.

    Layers of a ``layer_kind`` column's ``"global"`` kind (``psheads.analysis.add_layer_kind``)
    are shaded.

    Args:
        scores: a reduced per-head ``score_heads`` frame.
        columns: the score columns to draw, side by side per layer.
    """
    columns = analysis._names(columns, "columns")
    analysis._check(scores, "layer_distributions", columns, (), per_plane=False)
    figure = go.Figure()
    text = [f"L{layer}H{head}" for layer, head in zip(scores["layer"], scores["head"])]
    for index, column in enumerate(columns):
        figure.add_trace(go.Box(x=scores["layer"], y=scores[column], name=_score_title(column), text=text,
                                boxpoints="all", jitter=0.3, pointpos=0, offsetgroup=column,
                                marker={"color": _color(column, index, SCORE_COLORS), "size": 5},
                                hovertemplate="%{text}<br>" + column + "=%{y:.3f}<extra></extra>"))
    if "layer_kind" in scores.columns:
        for layer in sorted(scores.loc[scores["layer_kind"] == "global", "layer"].unique()):
            figure.add_vrect(x0=layer - 0.5, x1=layer + 0.5, fillcolor=KIND_COLORS["global"], opacity=0.12,
                             line_width=0, layer="below")
    figure.update_layout(boxmode="group", xaxis_title="layer" + (" (shaded: global)" if "layer_kind" in scores.columns
                                                                  else ""),
                         yaxis_title="score", yaxis_range=[-0.02, 1.02], legend_title="score")
    figure.update_xaxes(dtick=1)
    return figure


def score_correlation(scores: pd.DataFrame, x: str = "positional", y: str = "symbolic",
                      color: str | None = "layer") -> go.Figure:
    """One score against the other across heads, with Pearson r, its 95% Fisher interval and n.

    Args:
        scores: a reduced ``score_heads`` frame (per head, or per plane).
        x: column on the x axis.
        y: column on the y axis.
        color: colour the points by this column: ``"layer"`` (a colour scale), a categorical
            column (``"label"``, ``"layer_kind"``: one trace each) or None.
    """
    if color is not None and not isinstance(color, str):
        raise TypeError(f"color must be a column name or None, got {type(color).__name__}.")
    result = analysis.correlation(scores, x, y).iloc[0]
    if color is not None:
        schema.SCORES.check(scores, [color], "score_correlation")
    text = [f"L{layer}H{head}" for layer, head in zip(scores["layer"], scores["head"])]
    if "plane" in scores.columns:
        text = [f"{t} f{plane}" for t, plane in zip(text, scores["plane"])]
    text = pd.Series(text, index=scores.index)
    hover = "%{text}<br>" + x + "=%{x:.3f}<br>" + y + "=%{y:.3f}<extra></extra>"
    figure = go.Figure()
    if color is None or pd.api.types.is_numeric_dtype(scores[color]) and not pd.api.types.is_bool_dtype(scores[color]):
        marker: dict[str, Any] = {"size": 7}
        if color is not None:
            marker.update(color=scores[color], colorscale="Viridis", showscale=True, colorbar={"title": color})
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
    figure.update_layout(title=f"Pearson r = {result['r']:.2f}{interval}, n = {int(result['n'])}",
                         xaxis_title=_score_title(x), yaxis_title=_score_title(y), xaxis_range=[-0.02, 1.02],
                         yaxis_range=[-0.02, 1.02], legend_title=color or "")
    return figure


def frequency_scores(scores: pd.DataFrame, columns: Sequence[str] = analysis.SCORE_COLUMNS, by: str | None = None,
                     quantiles: Sequence[float] = (0.25, 0.75), x: str = "plane") -> go.Figure:
    """Per-plane scores against frequency: the median over heads as a line, a quantile band around it.

    Args:
        scores: a reduced ``score_heads(..., by_frequency=True)`` frame.
        columns: the score columns, one panel each.
        by: one line per value of this column (e.g. ``"layer_kind"`` from
            ``psheads.analysis.add_layer_kind``, or ``"layer"``); None: one line over every head.
        quantiles: the (low, high) quantiles of the band.
        x: ``"plane"`` (frequency ID, 1 = fastest) or ``"period"`` (2π/θ in tokens, log axis).
    """
    if x not in ("plane", "period"):
        raise ValueError(f"x must be 'plane' or 'period', got {x!r}.")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by must be a column name or None, got {type(by).__name__}.")
    columns = analysis._names(columns, "columns")
    summary = analysis.frequency_summary(scores, columns=columns, quantiles=quantiles, by=() if by is None else (by,))
    low, high = (analysis._quantile_name(q) for q in summary.attrs["quantiles"])
    figure = make_subplots(rows=len(columns), cols=1, shared_xaxes=True,
                           subplot_titles=[_score_title(column) for column in columns])
    groups = summary.groupby(by, sort=True) if by is not None else [("all heads", summary)]
    for index, (value, part) in enumerate(groups):
        value = value[0] if isinstance(value, tuple) else value
        name = f"{by} {value}" if by == "layer" else str(value)
        color = _color(value, index, KIND_COLORS if by == "layer_kind" else None)
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
    title = "frequency ID (1 = fastest)" if x == "plane" else "period 2π/θ (tokens)"
    figure.update_xaxes(title_text=title, row=len(columns), col=1)
    if x == "period":
        figure.update_xaxes(type="log")
    figure.update_layout(title=f"median over heads, band {low}–{high}", legend_title=by or "")
    return figure


def local_global(scores: pd.DataFrame, local: Any = None, columns: Sequence[str] = analysis.SCORE_COLUMNS) -> go.Figure:
    """Each score over the heads of the local (sliding-window) layers and of the global ones.

    Args:
        scores: a reduced per-head ``score_heads`` frame, with a ``layer_kind`` column
            (``psheads.analysis.add_layer_kind``) unless ``local`` is given.
        local: a ``RopeLens``, a mapping ``{layer: "local" | "global"}`` or the list of local
            layers (see ``psheads.analysis.add_layer_kind``).
        columns: the score columns, one box pair each.
    """
    columns = analysis._names(columns, "columns")
    if local is not None:
        scores = analysis.add_layer_kind(scores, local)
    analysis._check(scores, "local_global", columns, (), per_plane=False, extra=["layer_kind"])
    figure = go.Figure()
    text = [f"L{layer}H{head}" for layer, head in zip(scores["layer"], scores["head"])]
    text = pd.Series(text, index=scores.index)
    for kind in (analysis.LOCAL, analysis.GLOBAL):
        part = scores[scores["layer_kind"] == kind]
        if part.empty:
            continue
        layers = analysis._layer_text(sorted(int(layer) for layer in part["layer"].unique()))
        xs = [_score_title(column) for column in columns for _ in range(len(part))]
        ys = [value for column in columns for value in part[column]]
        figure.add_trace(go.Box(x=xs, y=ys, name=f"{kind} (layers {layers})", boxpoints="all", jitter=0.3,
                                pointpos=0, text=[t for _ in columns for t in text[part.index]],
                                marker={"color": KIND_COLORS[kind], "size": 5},
                                hovertemplate="%{text}: %{y:.3f}<extra></extra>"))
    figure.update_layout(boxmode="group", yaxis_title="score", yaxis_range=[-0.02, 1.02], legend_title="layers")
    return figure


HOP_COLORS = {"1": "#1f77b4", "2": "#ff7f0e", "3": "#2ca02c", "4": "#d62728", "all": "#222222"}


def accuracy_vs_length(frame: pd.DataFrame) -> go.Figure:
    """Accuracy against prompt length (log axis): one line per hop count and one for "all".

    A ``model`` column (else a ``task`` column) puts each value in its own panel, side by side.

    Args:
        frame: a ``psheads.lengthgen.length_generalization`` frame (``length, hops, accuracy``;
            ``n`` shows on hover), or several stacked with a ``model`` or ``task`` column, such as
            the shipped ``Pretrained.length_generalization`` frames.

    Raises:
        ValueError: missing columns, no rows, or a length below 1.
    """
    schema.LENGTH_GENERALIZATION.check(frame, ["length", "hops", "accuracy"], "accuracy_vs_length")
    if frame.empty:
        raise ValueError("accuracy_vs_length needs at least one row.")
    if (pd.to_numeric(frame["length"]) < 1).any():
        raise ValueError("accuracy_vs_length: every length must be at least 1 (the x axis is logarithmic).")
    facet = next((column for column in ("model", "task") if column in frame.columns), None)
    panels = [(None, frame)] if facet is None else list(frame.groupby(facet, sort=False))
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                           subplot_titles=None if facet is None else [f"{facet} {value}" for value, _ in panels])
    hops = sorted({str(h) for h in frame["hops"]}, key=lambda h: (h == "all", int(h) if h.isdigit() else 0, h))
    for col, (_, part) in enumerate(panels, start=1):
        for index, hop in enumerate(hops):
            rows = part[part["hops"].astype(str) == hop].sort_values("length")
            if rows.empty:
                continue
            name = "all" if hop == "all" else f"{hop} hops"
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
    figure.update_layout(legend_title="hops")
    return figure


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
    schema.DISCREPANCY.check(frame, ["length", "layer", "head", "normalised"], "discrepancy_vs_length")
    if frame.empty:
        raise ValueError("discrepancy_vs_length needs at least one row.")
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
    figure.update_layout(xaxis_title="prompt length (tokens)", yaxis_title="normalised discrepancy Δ",
                         legend_title="head")
    return figure


def accuracy_under_ablation(frame: pd.DataFrame) -> go.Figure:
    """Accuracy per hop count under each intervention: grouped bars, the unchanged model first.

    A ``model`` column (else a ``task`` column) puts each value in its own panel, side by side;
    interventions keep their order in the frame, so the baseline ``"none"`` comes first as
    ``ablate`` writes it.

    Args:
        frame: a ``psheads.ablation.ablate`` frame (``intervention, hops, accuracy``; ``n`` shows on
            hover), or several stacked with a ``model`` or ``task`` column, such as
            ``docs/data/causal_tests.csv``.

    Raises:
        ValueError: missing columns, no rows, or two rows for one (panel, intervention, hop count).
    """
    schema.ABLATION.check(frame, ["intervention", "hops", "accuracy"], "accuracy_under_ablation")
    if frame.empty:
        raise ValueError("accuracy_under_ablation needs at least one row.")
    facet = next((column for column in ("model", "task") if column in frame.columns), None)
    keys = ["intervention", "hops"] if facet is None else [facet, "intervention", "hops"]
    if frame.duplicated(keys).any():
        raise ValueError(f"accuracy_under_ablation needs one row per {tuple(keys)}; this frame repeats some.")
    panels = [(None, frame)] if facet is None else list(frame.groupby(facet, sort=False))
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                           subplot_titles=None if facet is None else [f"{facet} {value}" for value, _ in panels])
    hops = sorted({str(h) for h in frame["hops"]}, key=lambda h: (h == "all", int(h) if h.isdigit() else 0, h))
    names = list(dict.fromkeys(frame["intervention"].astype(str)))
    for col, (_, part) in enumerate(panels, start=1):
        for index, name in enumerate(names):
            rows = part[part["intervention"].astype(str) == name]
            rows = rows.assign(hops=rows["hops"].astype(str)).set_index("hops").reindex(hops)
            color = "#7f7f7f" if name == "none" else _PALETTE[index % len(_PALETTE)]
            counts = " (n=%{customdata})" if "n" in rows else ""
            figure.add_trace(go.Bar(x=[h if h == "all" else f"{h} hops" for h in hops], y=rows["accuracy"],
                                    name=name, legendgroup=name, showlegend=col == 1, marker_color=color,
                                    customdata=rows["n"].to_numpy() if "n" in rows else None,
                                    hovertemplate="%{x}: %{y:.3f}" + counts + "<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    figure.update_layout(barmode="group", legend_title="intervention")
    return figure


def accuracy_by_band(frame: pd.DataFrame) -> go.Figure:
    """Test accuracy per task and frequency band of a gated training sweep: an annotated heatmap.

    Each cell is the mean over seeds of the runs' accuracy (each run counted once, however many
    heads it has), annotated ``mean ± spread`` where the spread is half the range over seeds;
    hovering shows the band's planes and the number of seeds. Tasks (rows) and bands (columns)
    keep their order in the frame.

    Args:
        frame: a ``psheads.sweep.gating_sweep`` frame (``task, band, seed, accuracy``; ``planes``
            shows on hover), such as ``docs/data/gating_sweep.csv``.

    Raises:
        ValueError: missing columns, no rows, or one run with two different accuracies.
    """
    schema.GATING_SWEEP.check(frame, ["task", "band", "seed", "accuracy"], "accuracy_by_band")
    if frame.empty:
        raise ValueError("accuracy_by_band needs at least one row.")
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
        z=mean.to_numpy(), x=bands, y=tasks, zmin=0, zmax=1, colorscale="Viridis", text=text,
        texttemplate="%{text}", customdata=custom, colorbar={"title": "accuracy"},
        hovertemplate="%{y}, band %{x} (planes %{customdata[0]}): %{z:.3f} over %{customdata[1]} seeds<extra></extra>"))
    figure.update_layout(xaxis_title="frequency band the heads may use", yaxis_title="task",
                         yaxis={"autorange": "reversed"})
    return figure
