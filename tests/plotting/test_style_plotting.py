"""The shared look: one colour per layer, stable across depths."""

from __future__ import annotations

from psheads import plotting


def test_layer_colors_are_distinct_and_stable_for_deep_models() -> None:
    deep = plotting.layer_colors(range(40))
    assert len(set(deep.values())) == 40
    assert plotting.layer_colors(range(12))[0] == deep[0] == plotting.LAYER_COLORSCALE[0][1]
    assert plotting.layer_colors([3, 11])[3] == plotting.layer_colors(range(12))[3]  # by index, not by rank
