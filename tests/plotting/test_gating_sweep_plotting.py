"""The gating-sweep heatmap: pure, checked, mean over seeds per task × band, annotated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psheads import data, plotting
from psheads.results import schema


def _frame() -> pd.DataFrame:
    accuracy = {("index", "all"): (1.0, 0.9), ("index", "zero"): (0.2, 0.4),
                ("retrieval", "all"): (1.0, 1.0), ("retrieval", "zero"): (0.75, 0.25)}
    planes = {"all": "all", "zero": "0"}
    rows = [{"task": task, "band": band, "planes": planes[band], "seed": seed, "steps": 10, "layer": layer, "head": 0,
             "accuracy": values[seed], "positional": 0.5, "symbolic": 0.5, "positional_std": 0.0,
             "symbolic_std": 0.0, "label": "mixed"}
            for (task, band), values in accuracy.items() for seed in (0, 1) for layer in (0, 1)]
    return pd.DataFrame(rows)[schema.GATING_SWEEP.names]


def test_heatmap_is_the_mean_over_seeds_per_task_and_band() -> None:
    frame = _frame()
    before = frame.copy()
    figure = plotting.accuracy_by_band(frame)
    pd.testing.assert_frame_equal(frame, before)  # pure: the input is untouched
    (heatmap,) = figure.data
    assert list(heatmap.y) == ["index", "retrieval"] and list(heatmap.x) == ["all", "zero"]
    np.testing.assert_allclose(np.asarray(heatmap.z, dtype=float), [[0.95, 0.3], [1.0, 0.5]])
    assert [list(row) for row in heatmap.text] == [["0.95 ± 0.05", "0.30 ± 0.10"], ["1.00 ± 0.00", "0.50 ± 0.25"]]
    assert heatmap.customdata[0][1][0] == "0" and heatmap.customdata[0][1][1] == 2  # planes, seeds
    assert (heatmap.zmin, heatmap.zmax) == (0, 1)
    assert figure.layout.xaxis.title.text.startswith("frequency band")


def test_a_missing_cell_stays_blank() -> None:
    frame = _frame()
    frame = frame[~((frame["task"] == "retrieval") & (frame["band"] == "zero"))]
    heatmap = plotting.accuracy_by_band(frame).data[0]
    assert np.isnan(np.asarray(heatmap.z, dtype=float)[1, 1]) and heatmap.text[1][1] == ""


@pytest.mark.parametrize(("change", "error", "match"), [
    (lambda f: f.drop(columns="accuracy"), ValueError, "accuracy"),
    (lambda f: f.iloc[:0], ValueError, "at least one row"),
    (lambda f: f.assign(accuracy=np.arange(len(f)) / len(f)), ValueError, "several different accuracies"),
    (lambda f: f.to_dict(), TypeError, "DataFrame"),
])
def test_bad_frames_are_refused(change, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        plotting.accuracy_by_band(change(_frame()))


def test_the_shipped_sweep_draws() -> None:
    frame = data.table("gating_sweep")
    assert list(frame.columns) == schema.GATING_SWEEP.names
    heatmap = plotting.accuracy_by_band(frame).data[0]
    assert list(heatmap.y) == list(dict.fromkeys(frame["task"]))
    assert np.isfinite(np.asarray(heatmap.z, dtype=float)).all()
