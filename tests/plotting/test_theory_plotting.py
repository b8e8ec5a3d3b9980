"""The discrepancy figure: one line per head, the bound curves, and its input checks."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import pytest

from psheads.measure.discrepancy import COLUMNS
from psheads.models import theory
from psheads.plotting import discrepancy_vs_length


def frame() -> pd.DataFrame:
    rows = [{"length": length, "layer": layer, "head": head, "discrepancy": 2.0 * value, "normalised": value,
             "mean_margin": 3.0, "mean_normalised": 1.5, "n": 8}
            for layer, head, scale in ((0, 0, 1.0), (1, 2, -0.5))
            for length, value in ((40, 0.1 * scale), (8, 0.3 * scale))]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_one_line_per_head_sorted_by_length_with_bounds() -> None:
    bounds = theory.ConstructionConfig("retrieval", n0=8).bounds([8, 20, 40])
    figure = discrepancy_vs_length(frame(), bounds=bounds)
    assert isinstance(figure, go.Figure)
    heads = {trace.name: trace for trace in figure.data if trace.name.startswith("L")}
    assert list(heads) == ["L0H0", "L1H2"]
    assert list(heads["L0H0"].x) == [8, 40] and list(heads["L0H0"].y) == pytest.approx([0.3, 0.1])
    assert list(heads["L1H2"].y) == pytest.approx([-0.15, -0.05])
    curves = {trace.name: trace for trace in figure.data if not trace.name.startswith("L")}
    assert set(curves) == {"upper bound", "lower bound", "exact worst case"}
    assert list(curves["upper bound"].y) == pytest.approx(bounds["upper"].tolist())
    assert curves["lower bound"].line.dash == "dash" and curves["exact worst case"].line.dash == "dot"
    assert figure.layout.yaxis.title.text == "normalised discrepancy Δ"


def test_index_bounds_draw_no_lower_curve_and_no_bounds_draw_none() -> None:
    bounds = theory.ConstructionConfig("index", n0=8).bounds([4, 8, 9])
    assert bounds["lower"].isna().all()
    names = [trace.name for trace in discrepancy_vs_length(frame(), bounds=bounds).data]
    assert "lower bound" not in names and "upper bound" in names
    plain = discrepancy_vs_length(frame())
    assert [trace.name for trace in plain.data] == ["L0H0", "L1H2"]
    assert math.isclose(plain.layout.shapes[0].y0, 0.0)  # the zero line


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match=r"needs the columns \['normalised'\]"):
        discrepancy_vs_length(frame().drop(columns=["normalised"]))
    with pytest.raises(ValueError, match="at least one row"):
        discrepancy_vs_length(frame().iloc[:0])
    with pytest.raises(ValueError, match="bounds must be a DataFrame with the columns length and upper"):
        discrepancy_vs_length(frame(), bounds=pd.DataFrame({"length": [1]}))


def test_stacked_models_get_one_line_per_model_and_head() -> None:
    stacked = pd.concat([frame().assign(model="number"), frame().assign(model="letter")], ignore_index=True)
    stacked.loc[stacked["model"] == "letter", "normalised"] += 1.0
    names = {trace.name: trace for trace in discrepancy_vs_length(stacked).data}
    assert set(names) == {"letter L0H0", "letter L1H2", "number L0H0", "number L1H2"}
    assert list(names["letter L0H0"].y) == pytest.approx([1.3, 1.1])
    assert list(names["number L0H0"].y) == pytest.approx([0.3, 0.1])
