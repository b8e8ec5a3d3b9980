"""Figures of head scores: the plane, the heatmap, distributions, correlation, local/global, a swap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from psheads import plotting
from psheads.results import schema
from tests.plotting.frames import heads as _heads
from tests.plotting.frames import planes as _planes


def _plane_frame(method: str = "swap") -> pd.DataFrame:
    frame = pd.DataFrame({"layer": [0, 1, 2], "head": [0, 0, 1], "positional": [0.95, 0.1, 0.5],
                          "symbolic": [0.05, 0.97, 0.5], "label": ["positional", "symbolic", "mixed"]})
    frame.attrs["config"] = {"gamma": 0.2, "method": method}
    return frame


def test_score_plane_swap_regions_frontier_and_square_axes() -> None:
    frame = _plane_frame()
    figure = plotting.score_plane(frame)
    assert isinstance(figure, go.Figure)
    frontier, *heads = figure.data
    assert [trace.name for trace in heads] == ["positional", "mixed", "symbolic"]  # schema.LABEL_ORDER
    assert frontier.name.startswith("frontier for a peaked head")
    np.testing.assert_allclose(np.hypot(frontier.x, frontier.y), 1.0)  # arccos s_POS + arccos s_SYM = π/2
    assert [shape.path for shape in figure.layout.shapes] == [
        "M 0.8,0 L 1,0 L 1,0.2 L 0.8,0.2 Z", "M 0,0.8 L 0.2,0.8 L 0.2,1 L 0,1 Z", "M 0.8,0.8 L 1,0.8 L 1,1 L 0.8,1 Z"]
    assert figure.layout.yaxis.scaleanchor == "x" and figure.layout.yaxis.scaleratio == 1
    assert tuple(figure.layout.xaxis.range) == tuple(figure.layout.yaxis.range) == (-0.03, 1.03)
    assert "swap" in figure.layout.title.text and "γ = 0.2" in figure.layout.title.text
    assert figure.layout.template.layout.font.family.startswith("Helvetica")
    assert heads[0].mode == "markers" and list(heads[1].text) == ["L2H1"]
    assert list(frame.columns) == ["layer", "head", "positional", "symbolic", "label"]  # not mutated


def test_score_plane_anova_has_no_uniform_region_and_a_straight_frontier() -> None:
    figure = plotting.score_plane(_plane_frame("anova"), labels=True)
    assert [shape.path for shape in figure.layout.shapes] == ["M 0.8,0 L 1,0 L 0.8,0.2 Z", "M 0,0.8 L 0,1 L 0.2,0.8 Z"]
    assert list(figure.data[0].x) == [0.0, 1.0] and list(figure.data[0].y) == [1.0, 0.0]  # s_POS + s_SYM = 1
    *_, spots = figure.data
    assert figure.data[1].mode == "markers" and list(figure.data[1].text) == ["L0H0"]  # hover keeps each name
    assert spots.mode == "text" and not spots.showlegend and list(spots.text) == ["L0H0", "L1H0", "L2H1"]
    custom = plotting.score_plane(_plane_frame(), method="my_method", gamma=0.1, title="mine")
    assert len(custom.layout.shapes) == 3 and [t.name for t in custom.data][0] == "positional"  # no frontier
    assert custom.layout.title.text == "mine" and custom.layout.shapes[0].path.startswith("M 0.9,0 ")
    with pytest.raises(TypeError, match="labels must be True or False"):
        plotting.score_plane(_plane_frame(), labels="yes")


def test_score_plane_labels_at_one_corner_do_not_overprint() -> None:
    """Heads at the same corner share one label (the first head's name and how many others), and no two
    labels' boxes overlap; hovering a label lists its heads."""
    frame = pd.DataFrame({"layer": [3, 1, 2, 0, 4], "head": [0, 0, 0, 1, 0],
                          "positional": [1.0, 1.0, 0.999, 0.02, 0.5], "symbolic": [0.0, 0.0, 0.004, 0.98, 0.5],
                          "label": ["positional"] * 3 + ["symbolic", "mixed"]})
    *_, spots = plotting.score_plane(frame, labels=True).data
    assert list(spots.text) == ["L0H1", "L1H0 +2", "L4H0"]  # by layer, then head
    assert list(spots.hovertext) == ["L0H1", "L1H0, L2H0, L3H0", "L4H0"]
    assert len({(x, y) for x, y in zip(spots.x, spots.y, strict=True)}) == 3
    assert (spots.x[1], spots.y[1]) == (1.0, 0.0)


def test_label_spots_never_overlap() -> None:
    from psheads.plotting.scores import LABEL_BOX, label_spots

    rng = np.random.default_rng(0)
    x, y = rng.random(200).round(2), rng.random(200).round(2)
    x[:20], y[:20] = 1.0, 0.0  # a crowded corner
    x[20], y[20] = np.nan, 0.5  # non-finite: no label
    names = [f"L{i // 8}H{i % 8}" for i in range(200)]
    spots = label_spots(x.tolist(), y.tolist(), names)
    assert sorted(name for *_, members in spots for name in members) == sorted(names[:20] + names[21:])
    width = LABEL_BOX[0] * (max(map(len, names)) + 4)
    for i, (xa, ya, _) in enumerate(spots):
        for xb, yb, _ in spots[i + 1:]:
            assert abs(xa - xb) >= width or abs(ya - yb) >= LABEL_BOX[1]
    assert label_spots([], [], []) == []


def test_score_heatmap_is_layer_by_head_on_a_fixed_range() -> None:
    frame = _heads()
    figure = plotting.score_heatmap(frame, "symbolic")
    (heat,) = figure.data
    assert list(heat.y) == [0, 1, 2, 3] and list(heat.x) == [0, 1, 2] and (heat.zmin, heat.zmax) == (0, 1)
    expected = frame.pivot(index="layer", columns="head", values="symbolic").to_numpy()
    np.testing.assert_allclose(np.asarray(heat.z, dtype=float), expected)
    assert "%{z:.4f}" in heat.hovertemplate and heat.customdata[1][2] == "mixed"
    assert figure.layout.yaxis.autorange == "reversed"
    with pytest.raises(ValueError, match="per-head frame"):
        plotting.score_heatmap(_planes())
    with pytest.raises(ValueError, match=r"needs the columns \['interaction'\]"):
        plotting.score_heatmap(frame, "interaction")


def _swaps() -> pd.DataFrame:
    d = [0.1, 0.6, 0.3]
    rows = [{"block_i": i, "block_j": j, "positions_i": (2 * i + 1, 2 * i + 2), "positions_j": (2 * j + 1, 2 * j + 2),
             "d_i": d[i], "d_j": d[j], "d_i_swapped": d[j] * 0.9, "d_j_swapped": d[i] * 0.9,
             "weight": abs(d[i] - d[j]), "cos_positional": 0.2, "cos_symbolic": 0.99}
            for i, j in ((0, 1), (0, 2), (1, 2))]
    frame = pd.DataFrame(rows)[schema.SWAPS.names]
    frame.attrs.update({"layer": 3, "head": 1})
    return frame


def test_attention_under_swap_shows_the_dominant_swap() -> None:
    figure = plotting.attention_under_swap(_swaps())
    every, before, after, symbolic = figure.data
    assert list(every.x) == ["1–2", "3–4", "5–6"] and list(every.y) == [0.1, 0.6, 0.3]
    assert list(before.x) == ["1–2", "3–4"] and list(before.y) == [0.1, 0.6]  # α largest for blocks 0 and 1
    assert list(after.y) == pytest.approx([0.54, 0.09]) and list(symbolic.y) == [0.6, 0.1]
    assert figure.layout.title.text.startswith("L3H1: swap of blocks 0 and 1 (α = 0.500")
    chosen = plotting.attention_under_swap(_swaps(), pair=(2, 1))
    assert list(chosen.data[1].y) == [0.6, 0.3]
    with pytest.raises(ValueError, match=r"pair \(0, 5\) is not a swap"):
        plotting.attention_under_swap(_swaps(), pair=(0, 5))
    with pytest.raises(TypeError, match="pair must be two block indices"):
        plotting.attention_under_swap(_swaps(), pair=3)


def test_layer_distributions() -> None:
    from psheads.results import analysis

    frame = analysis.add_layer_kind(_heads(), [0, 2])
    figure = plotting.layer_distributions(frame)
    assert [trace.type for trace in figure.data] == ["box", "box"]
    assert [trace.name for trace in figure.data] == ["positional score s_POS", "symbolic score s_SYM"]
    assert list(figure.data[0].x) == frame["layer"].tolist() and list(figure.data[1].y) == frame["symbolic"].tolist()
    assert figure.data[0].text[4] == "L1H1"
    assert [shape.x0 for shape in figure.layout.shapes] == [0.5, 2.5]  # global layers 1 and 3 shaded
    assert len(plotting.layer_distributions(_heads(), columns=["positional"]).layout.shapes) == 0


def test_score_correlation() -> None:
    from psheads.results import analysis

    frame = _heads()
    frame.loc[0, "symbolic"] = 0.2  # not a perfect line
    figure = plotting.score_correlation(frame)
    r = np.corrcoef(frame["positional"], frame["symbolic"])[0, 1]
    title = figure.layout.title.text
    assert title.startswith(f"Pearson r = {r:.2f}, 95% CI [") and "n = 12" in title
    assert figure.data[0].marker.colorscale is not None and list(figure.data[0].marker.color) == frame["layer"].tolist()
    assert figure.data[-1].name == "least squares"
    by_kind = plotting.score_correlation(analysis.add_layer_kind(frame, [0, 1]), color="layer_kind")
    assert [trace.name for trace in by_kind.data] == ["global", "local", "least squares"]
    plain = plotting.score_correlation(frame, color=None)
    assert plain.data[0].marker.colorscale is None


def test_local_global_figure() -> None:
    figure = plotting.local_global(_heads(), local=[0, 1, 2])
    assert [trace.name for trace in figure.data] == ["local (layers 0–2)", "global (layers 3)"]
    assert len(figure.data[0].y) == 2 * 9 and figure.data[1].y[:3] == (0.25, 0.2, 0.15)
    with pytest.raises(ValueError, match=r"local_global needs the columns \['layer_kind'\]"):
        plotting.local_global(_heads())
    with pytest.raises(ValueError, match="per plane"):
        plotting.layer_distributions(_planes())
