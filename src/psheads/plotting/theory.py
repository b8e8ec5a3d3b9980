"""Figures of the theory: measured discrepancy against prompt length, and Theorem 3.2's bounds."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from psheads.plotting.checks import check_frame, require_columns
from psheads.plotting.style import PALETTE, styled
from psheads.results import schema


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
    check_frame(frame, schema.DISCREPANCY, ["length", "layer", "head", "normalised"], "discrepancy_vs_length")
    figure = go.Figure()
    keys = (["model"] if "model" in frame.columns else []) + ["layer", "head"]
    for index, (key, rows) in enumerate(frame.groupby(keys, sort=True)):
        *model, layer, head = key
        name = " ".join([*map(str, model), f"L{layer}H{head}"])
        rows = rows.sort_values("length")
        figure.add_trace(go.Scatter(x=rows["length"], y=rows["normalised"], mode="lines+markers",
                                    name=name, line={"color": PALETTE[index % len(PALETTE)]},
                                    hovertemplate="%{x} tokens: Δ = %{y:.4g}<extra>" + name + "</extra>"))
    if bounds is not None:
        if not isinstance(bounds, pd.DataFrame) or not {"length", "upper"} <= set(bounds.columns):
            raise ValueError("discrepancy_vs_length: bounds must be a DataFrame with the columns length and upper "
                             "(and optionally lower and margin), such as Construction.bounds(lengths).")
        curves = bounds.sort_values("length")
        styles = {"upper": ("upper bound", "dash"), "lower": ("lower bound", "dash"),
                  "margin": ("exact worst case", "dot")}
        for column, (name, dash) in styles.items():
            if column in curves and curves[column].notna().any():
                figure.add_trace(go.Scatter(x=curves["length"], y=curves[column], mode="lines", name=name,
                                            line={"color": "#222222", "dash": dash, "width": 1.5},
                                            hovertemplate="%{x} tokens: %{y:.4g}<extra>" + name + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return styled(figure, xaxis_title="prompt length (tokens)", yaxis_title="normalised discrepancy Δ",
                  legend_title="head")


def theorem_bounds(frame: pd.DataFrame) -> go.Figure:
    """Theorem 3.2's bounds against the distance n, one colour per construction (paper B, figure 5A).

    Args:
        frame: ``construction, n, upper`` and optionally ``lower`` (NaN where there is none), such
            as the report's curves for paper B's angles.

    Raises:
        ValueError: missing columns or no rows.
    """
    require_columns(frame, ("construction", "n", "upper"), "theorem_bounds", " (optionally lower)")
    figure = go.Figure()
    for index, (kind, rows) in enumerate(frame.groupby("construction", sort=True)):
        rows = rows.sort_values("n")
        color = PALETTE[index % len(PALETTE)]
        for column, dash in (("upper", "solid"), ("lower", "dash")):
            if column in rows and rows[column].notna().any():
                name = f"{kind}: {column} bound"
                figure.add_trace(go.Scatter(x=rows["n"], y=rows[column], mode="lines", name=name,
                                            line={"color": color, "dash": dash},
                                            hovertemplate="n = %{x}: %{y:.4g}<extra>" + name + "</extra>"))
    figure.add_hline(y=0, line={"color": "#888888", "dash": "dot", "width": 1})
    return styled(figure, xaxis_title="n (distance from the query to the farthest key)",
                  yaxis_title="bound on the discrepancy Δ(n)", legend_title="Theorem 3.2")
