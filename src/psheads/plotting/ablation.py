"""The ablation figure: accuracy per hop count under each intervention."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from psheads.plotting.checks import check_frame
from psheads.plotting.style import PALETTE, facet_panels, hop_name, hop_order, styled
from psheads.results import schema


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
    check_frame(frame, schema.ABLATION, ["intervention", "hops", "accuracy"], "accuracy_under_ablation")
    facet = [column for column in ("model", "task") if column in frame.columns][:1]
    keys = [*facet, "intervention", "hops"]
    if frame.duplicated(keys).any():
        raise ValueError(f"accuracy_under_ablation needs one row per {tuple(keys)}; this frame repeats some.")
    panels, figure = facet_panels(frame)
    hops = hop_order(frame["hops"])
    names = list(dict.fromkeys(frame["intervention"].astype(str)))
    for col, (_, part) in enumerate(panels, start=1):
        for index, name in enumerate(names):
            rows = part[part["intervention"].astype(str) == name]
            rows = rows.assign(hops=rows["hops"].astype(str)).set_index("hops").reindex(hops)
            color = "#7f7f7f" if name == "none" else PALETTE[index % len(PALETTE)]
            counts = " (n=%{customdata})" if "n" in rows else ""
            figure.add_trace(go.Bar(x=[hop_name(h) for h in hops], y=rows["accuracy"],
                                    name=name, legendgroup=name, showlegend=col == 1, marker_color=color,
                                    customdata=rows["n"].to_numpy() if "n" in rows else None,
                                    hovertemplate="%{x}: %{y:.3f}" + counts + "<extra>" + name + "</extra>"),
                             row=1, col=col)
    figure.update_yaxes(range=[0, 1.02])
    figure.update_yaxes(title_text="accuracy", row=1, col=1)
    return styled(figure, barmode="group", legend_title="intervention")
