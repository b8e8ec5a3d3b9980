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
    from psheads import analysis

    frame = analysis.add_layer_kind(_heads(), [0, 2])
    figure = plotting.layer_distributions(frame)
    assert [trace.type for trace in figure.data] == ["box", "box"]
    assert [trace.name for trace in figure.data] == ["positional score s_POS", "symbolic score s_SYM"]
    assert list(figure.data[0].x) == frame["layer"].tolist() and list(figure.data[1].y) == frame["symbolic"].tolist()
    assert figure.data[0].text[4] == "L1H1"
    assert [shape.x0 for shape in figure.layout.shapes] == [0.5, 2.5]  # global layers 1 and 3 shaded
    assert len(plotting.layer_distributions(_heads(), columns=["positional"]).layout.shapes) == 0


def test_score_correlation() -> None:
    import numpy as np

    from psheads import analysis

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
    from psheads import analysis

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
    import pytest

    with pytest.raises(ValueError, match="x must be 'plane' or 'period'"):
        plotting.frequency_scores(planes, x="theta")
    with pytest.raises(ValueError, match=r"frequency_summary needs the columns \['plane', 'theta'\]"):
        plotting.frequency_scores(_heads())


def test_local_global_figure() -> None:
    import pytest

    figure = plotting.local_global(_heads(), local=[0, 1, 2])
    assert [trace.name for trace in figure.data] == ["local (layers 0–2)", "global (layers 3)"]
    assert len(figure.data[0].y) == 2 * 9 and figure.data[1].y[:3] == (0.25, 0.2, 0.15)
    with pytest.raises(ValueError, match=r"local_global needs the columns \['layer_kind'\]"):
        plotting.local_global(_heads())
    with pytest.raises(ValueError, match="per plane"):
        plotting.layer_distributions(_planes())
