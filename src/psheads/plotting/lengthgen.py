"""The length-generalization figure: accuracy against prompt length, one line per hop count."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from psheads.plotting.checks import check_frame
from psheads.plotting.style import HOP_COLORS, PALETTE, facet_panels, hop_name, hop_order, styled
from psheads.results import schema


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
    check_frame(frame, schema.LENGTH_GENERALIZATION, ["length", "hops", "accuracy"], "accuracy_vs_length")
    if (pd.to_numeric(frame["length"]) < 1).any():
        raise ValueError("accuracy_vs_length: every length must be at least 1 (the x axis is logarithmic).")
    panels, figure = facet_panels(frame)
    hops = hop_order(frame["hops"])
    for col, (_, part) in enumerate(panels, start=1):
        for index, hop in enumerate(hops):
            rows = part[part["hops"].astype(str) == hop].sort_values("length")
            if rows.empty:
                continue
            name = hop_name(hop)
            color = HOP_COLORS.get(hop, PALETTE[index % len(PALETTE)])
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
    return styled(figure, legend_title="hops")
