"""The look every figure shares: the template, the colours, axis titles and the panel layout."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
"""The template's colour cycle: the colour of anything no table below names."""
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
        colorway=list(PALETTE),
        legend={"bgcolor": "rgba(255,255,255,0)", "borderwidth": 0, "font": {"size": 12}},
        margin={"l": 70, "r": 30, "t": 70, "b": 60},
    )
    return template


TEMPLATE = _template()
"""The template of every psheads figure: plotly's ``simple_white`` with a paper-sized font."""


def styled(figure: go.Figure, **layout: Any) -> go.Figure:
    """``figure`` with ``TEMPLATE`` and ``layout`` applied (every figure's last step)."""
    figure.update_layout(template=TEMPLATE, **layout)
    return figure


def layer_colors(layers: Iterable[int]) -> dict[int, str]:
    """One colour per layer, sampled from ``LAYER_COLORSCALE`` at ``layer / max(layers)``.

    Layer 0 is dark blue and the last layer yellow-green whatever the depth (12–40 layers and
    more), so a layer keeps its colour in every figure of the same model.
    """
    chosen = sorted({int(layer) for layer in layers})
    top = max(chosen[-1], 1) if chosen else 1
    colors = plotly.colors.sample_colorscale(LAYER_COLORSCALE, [layer / top for layer in chosen])
    return dict(zip(chosen, colors, strict=True))


def rgba(color: str, alpha: float) -> str:
    """``color`` (``#rrggbb`` or ``rgb(...)``) as ``rgba(...)`` with opacity ``alpha``."""
    red, green, blue = (plotly.colors.hex_to_rgb(color) if color.startswith("#")
                        else plotly.colors.unlabel_rgb(color))
    return f"rgba({red:g},{green:g},{blue:g},{alpha})"


def palette_color(name: Any, index: int, table: dict[str, str] | None = None) -> str:
    """``name``'s colour in ``table``, else the ``index``-th colour of ``PALETTE``."""
    table = table or {}
    return table.get(str(name), PALETTE[index % len(PALETTE)])


def score_title(column: str) -> str:
    """The axis title of a score column (its name, for columns other than the two scores)."""
    return {"positional": "positional score s_POS", "symbolic": "symbolic score s_SYM"}.get(column, column)


def hop_order(hops: Iterable[Any]) -> list[str]:
    """Hop counts as strings, numerically, ``"all"`` last."""
    return sorted({str(h) for h in hops}, key=lambda h: (h == "all", int(h) if h.isdigit() else 0, h))


def hop_name(hop: str) -> str:
    """A hop count as a legend entry: ``"2 hops"``, ``"all"``."""
    return "all" if hop == "all" else f"{hop} hops"


def facet_panels(frame: pd.DataFrame) -> tuple[list[tuple[Any, pd.DataFrame]], go.Figure]:
    """One panel per value of a ``model`` (else ``task``) column, side by side with a shared y axis."""
    facet = next((column for column in ("model", "task") if column in frame.columns), None)
    panels: list[tuple[Any, pd.DataFrame]] = ([(None, frame)] if facet is None
                                              else list(frame.groupby(facet, sort=False)))
    figure = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                           subplot_titles=None if facet is None else [f"{facet} {value}" for value, _ in panels])
    return panels, figure
