"""The attention-policy figures: pure, checked, one line per condition, the random maps as a band."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psheads import plotting
from psheads.policy import HeadPolicy
from psheads.results import schema


def frame() -> pd.DataFrame:
    rows = []
    for task in ("needle", "copy"):
        rows.append({"task": task, "budget": 0.0, "condition": "full", "draw": 0, "value": 1.0})
        for budget in (0.25, 0.5, 0.75):
            rows += [{"task": task, "budget": budget, "condition": c, "draw": 0, "value": v}
                     for c, v in (("map", 1 - budget / 4), ("anti", 0.2), ("retrieval", 0.9))]
            rows += [{"task": task, "budget": budget, "condition": "random", "draw": d, "value": 0.3 + 0.02 * d}
                     for d in range(20)]
    out = pd.DataFrame(rows).assign(model="m", length=2048, metric="accuracy", correct=np.nan, total=8,
                                     streamed=0.5, kv_tokens=0)
    return out[schema.POLICY_EVALUATION.names]


def test_policy_curves_draw_one_panel_per_cell_and_the_random_band() -> None:
    data = frame()
    before = data.copy()
    figure = plotting.policy_curves(data)
    pd.testing.assert_frame_equal(data, before)
    assert [a.text for a in figure.layout.annotations if "tokens" in a.text] == ["copy, 2048 tokens",
                                                                                  "needle, 2048 tokens"]
    names = [trace.name for trace in figure.data if trace.showlegend]
    assert names == ["random maps (5–95 %)", "random maps (median)", "map", "anti", "retrieval"]
    line = next(trace for trace in figure.data if trace.name == "map")
    assert list(line.x) == [0.25, 0.5, 0.75] and list(line.y) == [1 - b / 4 for b in (0.25, 0.5, 0.75)]
    median = next(trace for trace in figure.data if trace.name == "random maps (median)")
    assert list(median.y) == pytest.approx([0.49] * 3)


def test_random_distribution_marks_the_map_among_the_random_maps() -> None:
    figure = plotting.random_distribution(frame(), budget=0.5)
    box = figure.data[0]
    assert box.type == "box" and len(box.y) == 40
    assert {trace.name for trace in figure.data[1:]} == {"full", "map", "anti", "retrieval"}
    with pytest.raises(ValueError, match="random maps at budget 0.3"):
        plotting.random_distribution(frame(), budget=0.3)


def test_policy_map_marks_the_streamed_kv_heads() -> None:
    policy = HeadPolicy.from_kv_scores(np.array([[0.1, 0.9], [0.8, 0.2]]), n_heads=4)
    figure = plotting.policy_map(policy.frame(0.5))
    assert figure.data[0].z.tolist() == np.asarray(policy.keep).tolist()
    assert list(figure.data[1].y) == [0, 1] and list(figure.data[1].x) == ["0", "1"]


def test_wrong_frames_are_refused_naming_the_maker() -> None:
    with pytest.raises(ValueError, match="evaluate_policies"):
        plotting.policy_curves(frame().drop(columns="condition"))
    with pytest.raises(ValueError, match="one model"):
        plotting.policy_curves(pd.concat([frame(), frame().assign(model="other")]))
    with pytest.raises(ValueError, match="HeadPolicy.frame"):
        plotting.policy_map(pd.DataFrame({"layer": [0]}))
