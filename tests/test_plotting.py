"""Figures are pure functions of frames."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from psheads import plotting


def test_score_plane() -> None:
    frame = pd.DataFrame({"layer": [0, 1, 2], "head": [0, 0, 1], "positional": [0.95, 0.1, 0.5],
                          "symbolic": [0.05, 0.97, 0.5], "label": ["positional", "symbolic", "mixed"]})
    frame.attrs["config"] = {"gamma": 0.2}
    figure = plotting.score_plane(frame)
    assert isinstance(figure, go.Figure)
    assert sorted(trace.name for trace in figure.data) == ["mixed", "positional", "symbolic"]
    assert len(figure.layout.shapes) == 3 and figure.layout.shapes[0].x0 == 0.8
    assert list(frame.columns) == ["layer", "head", "positional", "symbolic", "label"]  # not mutated


def test_dynamics_accuracy_and_usage() -> None:
    dynamics = pd.DataFrame({"step": [1, 2, 1, 2], "layer": [0, 0, 1, 1], "head": [0] * 4,
                             "positional": [0.1, 0.9, 0.2, 0.3], "symbolic": [0.9, 0.1, 0.8, 0.7]})
    figure = plotting.learning_dynamics(dynamics)
    assert len(figure.data) == 4 and list(figure.data[0].y) == [0.1, 0.9]
    evaluation = pd.DataFrame({"step": [1, 1, 2, 2], "hops": ["1", "all", "1", "all"],
                               "accuracy": [0.5, 0.4, 1.0, 0.9]})
    assert [t.name for t in plotting.accuracy_by_hops(evaluation).data] == ["1 hops", "all"]
    planes = pd.DataFrame({"layer": [0, 0, 0, 0], "head": [0, 0, 1, 1], "plane": [1, 0, 1, 0],
                           "usage": [0.7, 0.3, 0.4, 0.6]})
    heat = plotting.frequency_usage(planes).data[0]
    assert list(heat.x) == ["0", "1"] and heat.z.tolist() == [[0.3, 0.7], [0.6, 0.4]]


def test_figures_name_the_columns_they_miss() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"score_plane needs the columns \['label'\]"):
        plotting.score_plane(pd.DataFrame({"layer": [0], "head": [0], "positional": [0.5], "symbolic": [0.5]}))
    shipped_evaluation = pd.DataFrame({"hops": ["1", "all"], "accuracy": [1.0, 1.0], "n": [4, 4]})
    with pytest.raises(ValueError, match=r"accuracy_by_hops needs the columns \['step'\]"):
        plotting.accuracy_by_hops(shipped_evaluation)
    with pytest.raises(TypeError, match="needs a pandas DataFrame"):
        plotting.frequency_usage([1, 2, 3])
