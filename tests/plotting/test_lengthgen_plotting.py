"""The length-generalization figure: pure, checked, one line per hop count."""

from __future__ import annotations

import pandas as pd
import pytest

from psheads import plotting


def _frame(lengths=(17, 65, 1041), accuracy=(1.0, 0.5, 0.25)) -> pd.DataFrame:
    rows = []
    for length, acc in zip(lengths, accuracy, strict=True):
        for hops in ("1", "2", "all"):
            rows.append({"length": length, "hops": hops, "accuracy": acc / (2 if hops == "2" else 1), "n": 8})
    return pd.DataFrame(rows)


def test_one_line_per_hop_count_on_a_log_axis() -> None:
    frame = _frame()
    before = frame.copy()
    figure = plotting.accuracy_vs_length(frame)
    pd.testing.assert_frame_equal(frame, before)  # pure: the input is untouched
    assert [trace.name for trace in figure.data] == ["1 hops", "2 hops", "all"]
    assert list(figure.data[1].x) == [17, 65, 1041] and list(figure.data[1].y) == [0.5, 0.25, 0.125]
    assert list(figure.data[2].y) == [1.0, 0.5, 0.25] and figure.data[2].line.width == 3
    assert list(figure.data[0].customdata) == [8, 8, 8]
    assert figure.layout.xaxis.type == "log" and list(figure.layout.xaxis.tickvals) == [17, 65, 1041]
    assert figure.layout.yaxis.title.text == "accuracy"


def test_hop_counts_sort_numerically_and_rows_by_length() -> None:
    frame = pd.DataFrame({"length": [65, 17, 17, 17, 17], "hops": ["all", "10", "all", "2", "1"],
                          "accuracy": [0.4, 0.1, 0.9, 0.2, 0.3]})
    figure = plotting.accuracy_vs_length(frame)  # no n column: no counts on hover
    assert [trace.name for trace in figure.data] == ["1 hops", "2 hops", "10 hops", "all"]
    assert list(figure.data[-1].x) == [17, 65] and list(figure.data[-1].y) == [0.9, 0.4]
    assert "n=" not in figure.data[0].hovertemplate


def test_a_model_column_gives_one_panel_each() -> None:
    frame = pd.concat([_frame().assign(model="number"), _frame(accuracy=(1.0, 1.0, 0.5)).assign(model="letter")])
    figure = plotting.accuracy_vs_length(frame)
    assert [annotation.text for annotation in figure.layout.annotations] == ["model number", "model letter"]
    assert len(figure.data) == 6
    assert [trace.showlegend for trace in figure.data] == [True] * 3 + [False] * 3
    assert figure.data[5].xaxis == "x2" and list(figure.data[5].y) == [1.0, 1.0, 0.5]
    task_figure = plotting.accuracy_vs_length(_frame().assign(task="letter"))
    assert [annotation.text for annotation in task_figure.layout.annotations] == ["task letter"]


def test_bad_input_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"accuracy_vs_length needs the columns \['accuracy'\]"):
        plotting.accuracy_vs_length(_frame().drop(columns="accuracy"))
    with pytest.raises(ValueError, match=r"\['length', 'hops'\]"):
        plotting.accuracy_vs_length(pd.DataFrame({"accuracy": [1.0]}))
    with pytest.raises(ValueError, match="at least one row"):
        plotting.accuracy_vs_length(_frame().iloc[:0])
    with pytest.raises(ValueError, match="at least 1"):
        plotting.accuracy_vs_length(_frame(lengths=(0, 17, 65)))
    with pytest.raises(TypeError, match="pandas DataFrame"):
        plotting.accuracy_vs_length({"length": [17]})
