"""The ablation figure: pure, checked, one bar group per hop count and one bar per intervention."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from psheads import plotting


def _frame() -> pd.DataFrame:
    accuracy = {"none": (1.0, 1.0, 1.0), "positional heads": (0.5, 0.25, 0.375), "fast planes": (0.75, 0.5, 0.625)}
    return pd.DataFrame([{"intervention": name, "hops": hops, "accuracy": value, "n": 8 if hops != "all" else 16}
                         for name, values in accuracy.items()
                         for hops, value in zip(("1", "2", "all"), values, strict=True)])


def test_one_bar_per_intervention_in_frame_order_grouped_by_hops() -> None:
    frame = _frame()
    before = frame.copy()
    figure = plotting.accuracy_under_ablation(frame)
    pd.testing.assert_frame_equal(frame, before)  # pure: the input is untouched
    assert [trace.name for trace in figure.data] == ["none", "positional heads", "fast planes"]
    assert list(figure.data[0].x) == ["1 hops", "2 hops", "all"]
    assert list(figure.data[1].y) == [0.5, 0.25, 0.375] and list(figure.data[2].y) == [0.75, 0.5, 0.625]
    assert list(figure.data[1].customdata) == [8, 8, 16] and "n=" in figure.data[1].hovertemplate
    assert figure.data[0].marker.color == "#7f7f7f"  # the unchanged model in grey
    assert figure.layout.barmode == "group" and figure.layout.yaxis.title.text == "accuracy"
    assert tuple(figure.layout.yaxis.range) == (0, 1.02)


def test_a_model_column_gives_one_panel_per_model_and_missing_bars_stay_empty() -> None:
    number = _frame().assign(model="number")
    letter = _frame().assign(model="letter")
    letter = letter[~((letter["intervention"] == "fast planes") & (letter["hops"] == "2"))]  # one bar missing
    figure = plotting.accuracy_under_ablation(pd.concat([number, letter], ignore_index=True).drop(columns="n"))
    assert [annotation.text for annotation in figure.layout.annotations] == ["model number", "model letter"]
    assert len(figure.data) == 6 and [trace.showlegend for trace in figure.data] == [True] * 3 + [False] * 3
    assert figure.data[5].xaxis == "x2" and math.isnan(figure.data[5].y[1]) and figure.data[5].y[2] == 0.625
    assert "n=" not in figure.data[0].hovertemplate


def test_bad_frames_are_refused() -> None:
    with pytest.raises(ValueError, match=r"needs the columns \['intervention'\]"):
        plotting.accuracy_under_ablation(_frame().drop(columns="intervention"))
    with pytest.raises(ValueError, match="at least one row"):
        plotting.accuracy_under_ablation(_frame().iloc[:0])
    with pytest.raises(ValueError, match="repeats"):
        plotting.accuracy_under_ablation(pd.concat([_frame(), _frame()]))
    with pytest.raises(TypeError, match="DataFrame"):
        plotting.accuracy_under_ablation(_frame().to_dict())
