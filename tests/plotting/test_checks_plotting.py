"""Figures refuse a wrong frame and name the psheads function that makes the right one."""

from __future__ import annotations

import pandas as pd
import pytest

from psheads import plotting
from psheads.models import zoo
from psheads.results import schema

SHIPPED = zoo.PRETRAINED_DIR


def test_figures_name_the_columns_they_miss_and_who_makes_the_frame() -> None:
    with pytest.raises(ValueError,
                       match=r"score_plane needs the columns \['label'\].*Make it with psheads.score_heads"):
        plotting.score_plane(pd.DataFrame({"layer": [0], "head": [0], "positional": [0.5], "symbolic": [0.5]}))
    with pytest.raises(ValueError, match=r"accuracy_by_hops needs the columns \['hops'\].*load_pretrained"):
        plotting.accuracy_by_hops(pd.DataFrame({"accuracy": [1.0]}))
    with pytest.raises(TypeError, match=r"needs a pandas DataFrame.*frequency_profile\(...\).planes"):
        plotting.frequency_usage([1, 2, 3])
    with pytest.raises(ValueError, match="at least one row.*psheads.swap_attention"):
        plotting.attention_under_swap(pd.DataFrame(columns=schema.SWAPS.names))
    with pytest.raises(ValueError, match=r"pure_head_counts needs the columns \['label'\].*psheads.train"):
        plotting.pure_head_counts(pd.read_csv(SHIPPED / "number" / "dynamics.csv").drop(columns="label"))
