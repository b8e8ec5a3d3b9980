"""Figures of trained models: scores and labels over training, accuracy per hop count."""

from __future__ import annotations

import pandas as pd
import pytest

from psheads import plotting
from psheads.models import zoo

SHIPPED = zoo.PRETRAINED_DIR


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
    assert list(figure.data[6].y) == layer_3["positional"].tolist()
    assert list(figure.data[7].y) == layer_3["symbolic"].tolist()
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
    assert [t.name for t in lines] == ["1 hops", "all"]
    assert list(lines[0].x) == [1, 2] and list(lines[0].y) == [0.5, 1.0]


def test_pure_head_counts_count_the_labels_per_step() -> None:
    number = pd.read_csv(SHIPPED / "number" / "dynamics.csv")
    figure = plotting.pure_head_counts(number)
    positional, symbolic = figure.data
    assert positional.name == "pure positional" and list(positional.x) == sorted(number["step"].unique())
    expected = number.groupby("step")["label"].apply(lambda labels: int((labels == "symbolic").sum()))
    assert list(symbolic.y) == expected.tolist() and symbolic.y[0] == 0 and positional.y[-1] == 4
    letter = pd.read_csv(SHIPPED / "letter" / "dynamics.csv")
    both = pd.concat([number.assign(model="number"), letter.assign(model="letter")])
    panels = plotting.pure_head_counts(both, labels=["symbolic", "uniform"])
    assert [a.text for a in panels.layout.annotations] == ["model number", "model letter"]
    assert [t.name for t in panels.data] == ["pure symbolic", "uniform"] * 2 and panels.data[2].xaxis == "x2"
    with pytest.raises(ValueError, match="labels must be a non-empty list"):
        plotting.pure_head_counts(number, labels=["pure"])
