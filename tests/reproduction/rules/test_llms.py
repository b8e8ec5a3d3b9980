"""The LLM rules (psheads.reproduction.llms.llms): table 3 per model, only where the number task can
collapse, and paper A's anti-correlation against the metric's own arc."""

from __future__ import annotations

import pandas as pd

from psheads.reproduction.rules import llms


def _llm(number: dict[int, float], letter: dict[int, float], half_width: float = 0.05) -> pd.DataFrame:
    return pd.DataFrame([{"task": task, "window": window, "accuracy": value, "ci_low": value - half_width,
                          "ci_high": value + half_width}
                         for task, cells in (("llm-number", number), ("llm-letter", letter))
                         for window, value in cells.items()])


def test_table_3_is_per_model_and_needs_a_number_task_that_can_collapse() -> None:
    """The zoo LLMs' number task is near chance from 12 items (0.10–0.16, chance 0.04): no collapse
    can be seen, so no verdict; 'partly if any one model passes' is gone."""
    at_chance = _llm({12: 0.10, 32: 0.09, 100: 0.04}, {12: 0.55, 32: 0.37, 100: 0.16})
    assert llms.table_3_grade({"gemma": at_chance}).verdict == "inconclusive"
    collapses = _llm({12: 0.9, 32: 0.4, 100: 0.05}, {12: 0.95, 32: 0.95, 100: 0.85})
    assert llms.table_3_grade({"a": collapses, "gemma": at_chance}).verdict == "reproduces"
    falls = _llm({12: 0.9, 32: 0.4, 100: 0.05}, {12: 0.95, 32: 0.5, 100: 0.3})
    assert llms.table_3_grade({"a": collapses, "b": falls}).verdict == "partly"
    both_hold = _llm({12: 0.9, 32: 0.9, 100: 0.85}, {12: 0.95, 32: 0.95, 100: 0.85})
    assert llms.table_3_grade({"c": both_hold}).verdict == "does not reproduce"
    assert llms.thresholds_grade({"a": collapses}).verdict == "reproduces"
    assert llms.thresholds_grade({"b": falls}).verdict == "partly"  # the number task's two thresholds hold
    assert llms.table_3_grade({}).verdict == "not measured"


def test_a_model_without_the_cells_takes_no_part_in_table_3() -> None:
    """A model whose table lacks the 100-item cells is named and left out, as one whose number task is
    unsolved is: it once turned the others' 'reproduces' into 'partly'."""
    collapses = _llm({12: 0.9, 32: 0.4, 100: 0.05}, {12: 0.95, 32: 0.95, 100: 0.85})
    short = _llm({12: 0.9, 32: 0.4}, {12: 0.95, 32: 0.95})
    graded = llms.table_3_grade({"a": collapses, "b": short})
    assert graded.verdict == "reproduces"
    assert "b: no cell llm-letter at 100 items, llm-number at 100 items (not measured)" in graded.detail
    at_chance = _llm({12: 0.10, 32: 0.09, 100: 0.04}, {12: 0.55, 32: 0.37, 100: 0.16})
    assert llms.table_3_grade({"b": short, "gemma": at_chance}).verdict == "inconclusive"
    assert llms.table_3_grade({"b": short}).verdict == "not measured"


def test_the_correlation_rule_is_judged_against_the_metric_s_arc() -> None:
    """On one prompt at a small τ a head's two scores lie near (cos φ, sin φ): random heads there give
    r ≈ −0.92, so paper A's −0.91 alone says nothing about the model."""
    import numpy as np

    low, high = llms.arc_null(72)
    assert -0.97 < low < high < -0.85
    assert llms.arc_null(72) == llms.arc_null(72)  # seeded
    phi = np.random.default_rng(3).uniform(0, np.pi / 2, 72)
    spread = llms._scores(np.cos(phi), np.sin(phi), ci=0.02)  # r ≈ −0.92
    assert llms.correlation_grade(spread).verdict == "inconclusive"
    split = llms._two_clusters(72)
    assert llms.correlation_grade(split).verdict == "reproduces"
    rising = llms._scores(np.linspace(0.1, 0.9, 72), np.linspace(0.2, 0.8, 72))
    assert llms.correlation_grade(rising).verdict == "does not reproduce"


def test_the_correlation_rule_keeps_each_head_s_radius_and_arc() -> None:
    """The referee's counter-example: every head mixed, on a narrow arc, gives r ≈ −0.99, below the
    quarter-arc null's range, and passed. Under the nearest null (each head's radius kept, its angle
    uniform over the heads' own arc) it is inconclusive; heads split at the two ends still pass."""
    import numpy as np

    narrow = llms._narrow_arc(72)
    assert narrow["r"] < -0.99 and narrow["ci_high"] < llms.arc_null(72)[0]  # it passed the old null
    assert llms.correlation_grade(narrow).verdict == "inconclusive"
    low, _ = llms.radius_null(narrow["positional"], narrow["symbolic"])
    assert low < -0.99
    rng = np.random.default_rng(2)
    ends = np.where(rng.random(72) < 0.5, rng.uniform(0, 0.1, 72), rng.uniform(np.pi / 2 - 0.1, np.pi / 2, 72))
    radius = rng.uniform(0.8, 1.0, 72)
    split = llms._scores(radius * np.cos(ends), radius * np.sin(ends), ci=0.01)
    assert llms.correlation_grade(split).verdict == "reproduces"
    assert llms.correlation_grade({k: v for k, v in split.items() if k != "symbolic"}).verdict == "not measured"


def test_letter_above_number_is_graded_per_window_and_model() -> None:
    """§3.7's "consistently higher": table 3 itself has one window in ten the other way (GPT 5.4 at 12
    items), which the 90% allows; a model equally good at both, or better at numbers, fails."""
    table = llms.table_3_tables()
    assert llms.letter_above_grade(table).verdict == "reproduces"
    assert "not at 12 items" in llms.letter_above_grade({"GPT 5.4": table["GPT 5.4"]}).detail
    equal = _llm({12: 0.9, 32: 0.6, 100: 0.3}, {12: 0.9, 32: 0.6, 100: 0.3})
    assert llms.letter_above_grade({"a": equal}).verdict == "does not reproduce"
    half = _llm({12: 0.9, 32: 0.3, 100: 0.1}, {12: 0.9, 32: 0.6, 100: 0.3})
    assert llms.letter_above_grade({"a": half}).verdict == "partly"  # 2 of 3 windows
    assert llms.letter_above_grade({**table, "a": equal}).verdict == "does not reproduce"  # the weakest model
