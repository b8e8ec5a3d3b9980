"""The theory rules (psheads.reproduction.theorems.theorems): Theorem 3.2 as an upper bound under both
readings of n, and figure 5A's layer 2 against table 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import psheads
from psheads.reproduction import report
from psheads.reproduction.rules import theorems


def test_theorem_3_2_is_an_upper_bound_read_both_ways() -> None:
    """Read as n = L (the statement's input length), Retrieval's short lengths exceed the bound; read as
    n = L − 1 (the farthest key's distance) they do not: partly, naming the reading."""
    from psheads.models import theory

    retrieval = theory.construct("retrieval")
    rows = [{"length": length, "exact": retrieval.margin(length), "upper (n = L)": retrieval.bound(length + 1).upper,
             "upper (n = L − 1)": retrieval.bound(length).upper} for length in range(2, 12)]
    graded = theorems.theorem_3_2_grade(pd.DataFrame(rows))
    assert graded.verdict == "partly" and "9 of 9 within at n = L − 1" in graded.detail
    assert theorems.theorem_3_2_grade(pd.DataFrame(rows).iloc[:0]).verdict == "not measured"


def test_figure_5a_compares_layer_2_with_table_1() -> None:
    curves = report.figure_5a_curves().set_index(["construction", "n"])
    assert curves.loc[("index", 100), "upper"] == pytest.approx(2 * np.pi**2 / 100**2)  # 2π²/n² below 1 − cos 0.8
    assert curves.loc[("index", 1), "upper"] == pytest.approx(1 - np.cos(0.8))
    omega = 2 * np.pi / 8
    assert curves.loc[("retrieval", 100), "upper"] == pytest.approx(1 - np.cos(omega - 100 * 0.0027))
    assert curves.loc[("retrieval", 100), "lower"] == pytest.approx(np.cos(100 * 0.0027) - np.cos(omega - 100 * 0.0027))
    assert theorems.figure_5a_grade({"number": 1.0, "letter": 40.0}).verdict == "reproduces"  # against 2 and 42
    assert theorems.figure_5a_grade({"number": 1.0, "letter": 42 + 11}).verdict == "partly"
    # the caption's ID 42 is layer 2's: graded at layer 1 (ID 32), the uniform null passed the letter model
    assert theorems.figure_5a_grade({"number": 32.5, "letter": 32.5}).verdict == "does not reproduce"
    assert theorems.figure_5a_grade({"number": 1.0, "letter": 37.0}).verdict == "partly"  # nearer uniform than 42
    assert theorems.figure_5a_grade({"number": 1.0}).verdict == "not measured"
    with pytest.raises(ValueError, match="construction, n and upper"):
        psheads.plotting.theorem_bounds(pd.DataFrame())
