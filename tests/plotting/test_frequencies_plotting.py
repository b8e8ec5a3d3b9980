"""Figures per RoPE plane: usage, one curve per head, scores summarised against frequency."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psheads import plotting
from tests.plotting.frames import heads as _heads
from tests.plotting.frames import planes as _planes


def test_frequency_usage_heatmap_has_a_theta_axis() -> None:
    planes = pd.DataFrame({"layer": [0, 0, 0, 0], "head": [0, 0, 1, 1], "plane": [1, 0, 1, 0],
                           "theta": [1.0, 0.0, 1.0, 0.0], "usage": [0.7, 0.3, 0.4, 0.6]})
    figure = plotting.frequency_usage(planes)
    heat = figure.data[0]
    assert list(heat.x) == [0, 1] and heat.z.tolist() == [[0.3, 0.7], [0.6, 0.4]]
    assert figure.layout.xaxis2.overlaying == "x" and list(figure.layout.xaxis2.ticktext) == ["1"]
    assert tuple(figure.layout.xaxis.range) == tuple(figure.layout.xaxis2.range) == (-0.5, 1.5)


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
