"""Figures are pure functions of frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from psheads import plotting
from psheads.models import zoo
from psheads.results import schema

SHIPPED = zoo.PRETRAINED_DIR


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
    assert figure.data[1].mode == "markers+text" and list(figure.data[1].text) == ["L0H0"]
    custom = plotting.score_plane(_plane_frame(), method="my_method", gamma=0.1, title="mine")
    assert len(custom.layout.shapes) == 3 and [t.name for t in custom.data][0] == "positional"  # no frontier
    assert custom.layout.title.text == "mine" and custom.layout.shapes[0].path.startswith("M 0.9,0 ")
    with pytest.raises(TypeError, match="labels must be True or False"):
        plotting.score_plane(_plane_frame(), labels="yes")


def test_layer_colors_are_distinct_and_stable_for_deep_models() -> None:
    deep = plotting.layer_colors(range(40))
    assert len(set(deep.values())) == 40
    assert plotting.layer_colors(range(12))[0] == deep[0] == plotting.LAYER_COLORSCALE[0][1]
    assert plotting.layer_colors([3, 11])[3] == plotting.layer_colors(range(12))[3]  # by index, not by rank


def test_learning_dynamics_one_colour_and_legend_entry_per_layer() -> None:
    dynamics = pd.read_csv(SHIPPED / "number" / "dynamics.csv")
    figure = plotting.learning_dynamics(dynamics)
    assert len(figure.data) == 24
    first, second = figure.data[0::2], figure.data[1::2]  # positional and symbolic panel of each layer
    assert len({trace.line.color for trace in first}) == 12
    assert [t.line.color for t in first] == [t.line.color for t in second]
    assert [t.legendgroup for t in first] == [t.legendgroup for t in second]
    assert all(t.showlegend for t in first) and not any(t.showlegend for t in second)
    layer_3 = dynamics[dynamics["layer"] == 3].sort_values("step")
    assert list(figure.data[6].y) == layer_3["positional"].tolist() and list(figure.data[7].y) == layer_3["symbolic"].tolist()
    with pytest.raises(ValueError, match=r"head 2 is not in this table; it has heads \[0\]"):
        plotting.learning_dynamics(dynamics, head=2)
    three = plotting.learning_dynamics(dynamics, columns=("positional", "symbolic", "entropy"))
    assert len(three.data) == 36 and list(three.data[11].y) == layer_3["entropy"].tolist()  # layer 3, third panel
    assert [a.text for a in three.layout.annotations][-1] == "entropy"
    with pytest.raises(ValueError, match=r"needs the columns \['accuracy'\]"):
        plotting.learning_dynamics(dynamics, columns=["accuracy"])


def test_accuracy_by_hops_takes_the_shipped_table_and_a_training_record() -> None:
    shipped = pd.read_csv(SHIPPED / "letter" / "evaluation.csv", dtype={"hops": str})
    (bars,) = plotting.accuracy_by_hops(shipped).data
    assert bars.type == "bar" and list(bars.x) == ["1 hops", "2 hops", "3 hops", "4 hops", "all"]
    assert list(bars.y) == shipped["accuracy"].tolist() and list(bars.customdata) == shipped["n"].tolist()
    stacked = pd.concat([shipped.assign(model="letter"), shipped.assign(model="number", accuracy=0.5)])
    assert [trace.name for trace in plotting.accuracy_by_hops(stacked).data] == ["letter", "number"]
    evaluation = pd.DataFrame({"step": [2, 1, 1, 2], "hops": ["1", "all", "1", "all"],
                               "accuracy": [1.0, 0.4, 0.5, 0.9]})
    lines = plotting.accuracy_by_hops(evaluation).data
    assert [t.name for t in lines] == ["1 hops", "all"] and list(lines[0].x) == [1, 2] and list(lines[0].y) == [0.5, 1.0]


def test_frequency_usage_heatmap_has_a_theta_axis() -> None:
    planes = pd.DataFrame({"layer": [0, 0, 0, 0], "head": [0, 0, 1, 1], "plane": [1, 0, 1, 0],
                           "theta": [1.0, 0.0, 1.0, 0.0], "usage": [0.7, 0.3, 0.4, 0.6]})
    figure = plotting.frequency_usage(planes)
    heat = figure.data[0]
    assert list(heat.x) == [0, 1] and heat.z.tolist() == [[0.3, 0.7], [0.6, 0.4]]
    assert figure.layout.xaxis2.overlaying == "x" and list(figure.layout.xaxis2.ticktext) == ["1"]
    assert tuple(figure.layout.xaxis.range) == tuple(figure.layout.xaxis2.range) == (-0.5, 1.5)


def test_figures_name_the_columns_they_miss_and_who_makes_the_frame() -> None:
    with pytest.raises(ValueError, match=r"score_plane needs the columns \['label'\].*Make it with psheads.score_heads"):
        plotting.score_plane(pd.DataFrame({"layer": [0], "head": [0], "positional": [0.5], "symbolic": [0.5]}))
    with pytest.raises(ValueError, match=r"accuracy_by_hops needs the columns \['hops'\].*load_pretrained"):
        plotting.accuracy_by_hops(pd.DataFrame({"accuracy": [1.0]}))
    with pytest.raises(TypeError, match=r"needs a pandas DataFrame.*frequency_profile\(...\).planes"):
        plotting.frequency_usage([1, 2, 3])
    with pytest.raises(ValueError, match="at least one row.*psheads.swap_attention"):
        plotting.attention_under_swap(pd.DataFrame(columns=schema.SWAPS.names))
    with pytest.raises(ValueError, match=r"pure_head_counts needs the columns \['label'\].*psheads.train"):
        plotting.pure_head_counts(pd.read_csv(SHIPPED / "number" / "dynamics.csv").drop(columns="label"))


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


def test_frequency_curves_one_curve_per_head_coloured_by_layer() -> None:
    planes = _planes()
    figure = plotting.frequency_curves(planes, "symbolic")
    curves = [trace for trace in figure.data if trace.name != "θ axis"]
    assert len(curves) == 4 and [t.showlegend for t in curves] == [True, False, True, False]
    assert curves[0].line.color == curves[1].line.color != curves[2].line.color
    assert list(curves[1].x) == [0, None, 1, 2, 3, 4]  # plane 0 apart from the rotated planes
    assert list(curves[1].y[2:]) == pytest.approx([0.85, 0.6, 0.35, 0.1]) and curves[1].y[0] == 1.1
    theta = figure.layout.xaxis2
    assert theta.side == "top" and list(theta.tickvals) == [1, 2, 3, 4]
    assert list(theta.ticktext) == ["1", "0.032 / 0.1", "0.001 / 0.01", "3.2e-05 / 0.001"]  # two RoPE bases
    profile = planes.drop(columns=["positional", "symbolic", "label"]).assign(usage=0.2)
    assert plotting.frequency_curves(profile).layout.yaxis.title.text == "usage"
    assert tuple(plotting.frequency_curves(profile).layout.yaxis.range) == (-0.02, 1.02)  # shares lie in [0, 1]
    logits = profile.assign(max_logit=np.linspace(-2.0, 5.0, len(profile)))
    assert plotting.frequency_curves(logits, "max_logit").layout.yaxis.range is None  # logits: the data's range
    with pytest.raises(ValueError, match=r"needs the columns \['plane', 'theta'\]"):
        plotting.frequency_curves(_heads())


def test_pure_head_counts_count_the_labels_per_step() -> None:
    number = pd.read_csv(SHIPPED / "number" / "dynamics.csv")
    figure = plotting.pure_head_counts(number)
    positional, symbolic = figure.data
    assert positional.name == "pure positional" and list(positional.x) == sorted(number["step"].unique())
    expected = number.groupby("step")["label"].apply(lambda labels: int((labels == "symbolic").sum()))
    assert list(symbolic.y) == expected.tolist() and symbolic.y[0] == 0 and positional.y[-1] == 4
    both = pd.concat([number.assign(model="number"), pd.read_csv(SHIPPED / "letter" / "dynamics.csv").assign(model="letter")])
    panels = plotting.pure_head_counts(both, labels=["symbolic", "uniform"])
    assert [a.text for a in panels.layout.annotations] == ["model number", "model letter"]
    assert [t.name for t in panels.data] == ["pure symbolic", "uniform"] * 2 and panels.data[2].xaxis == "x2"
    with pytest.raises(ValueError, match="labels must be a non-empty list"):
        plotting.pure_head_counts(number, labels=["pure"])


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


def _heads() -> pd.DataFrame:
    rows = []
    for layer in range(4):
        for head in range(3):
            positional = 1 - layer / 4 - 0.05 * head
            rows.append({"layer": layer, "head": head, "positional": positional, "symbolic": 1 - positional,
                         "label": "mixed"})
    return pd.DataFrame(rows)


def _planes() -> pd.DataFrame:
    rows = []
    for layer, base in ((0, 1e4), (1, 1e6)):
        for head in range(2):
            for plane in range(5):
                rows.append({"layer": layer, "head": head, "plane": plane,
                             "theta": 0.0 if plane == 0 else base ** (-(plane - 1) / 4),
                             "positional": plane / 4, "symbolic": 1 - plane / 4 + 0.1 * head, "label": "mixed"})
    return pd.DataFrame(rows)


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


def test_frequency_scores() -> None:
    from psheads.results import analysis

    planes = analysis.add_layer_kind(_planes(), [0])
    figure = plotting.frequency_scores(planes, by="layer_kind")
    lines = [trace for trace in figure.data if trace.mode == "lines"]
    assert [trace.name for trace in lines] == ["global", "global", "local", "local"]  # positional, symbolic panels
    assert list(lines[0].x) == [1, 2, 3, 4] and list(lines[0].y) == [0.25, 0.5, 0.75, 1.0]
    bands = [trace for trace in figure.data if trace.fill == "toself"]
    assert len(bands) == 4 and len(bands[0].x) == 8
    assert list(lines[1].y) == [0.8, 0.55, 0.3, 0.05]  # median over 2 heads of symbolic, global layer
    by_period = plotting.frequency_scores(planes, columns=["positional"], x="period")
    assert by_period.layout.xaxis.type == "log" and len(by_period.data) == 2
    with pytest.raises(ValueError, match="x must be 'plane' or 'period'"):
        plotting.frequency_scores(planes, x="theta")
    with pytest.raises(ValueError, match=r"frequency_scores needs the columns \['plane', 'theta'\]"):
        plotting.frequency_scores(_heads())


def test_local_global_figure() -> None:
    figure = plotting.local_global(_heads(), local=[0, 1, 2])
    assert [trace.name for trace in figure.data] == ["local (layers 0–2)", "global (layers 3)"]
    assert len(figure.data[0].y) == 2 * 9 and figure.data[1].y[:3] == (0.25, 0.2, 0.15)
    with pytest.raises(ValueError, match=r"local_global needs the columns \['layer_kind'\]"):
        plotting.local_global(_heads())
    with pytest.raises(ValueError, match="per plane"):
        plotting.layer_distributions(_planes())
