"""The rules of the report's theory section (paper B, Theorems 3.1 and 3.2 and figure 5A): the
constructions' accuracy up to n0, the exact worst cases against Theorem 3.2's upper bounds, and
figure 5A's angle against the trained models' layer 1. Also figure 5A's constructions, which the
length section's decay rule reads its bounds from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from psheads.reproduction.references import PAPER_B_TABLE_1, PUBLISHED
from psheads.reproduction.rules.base import (
    CONTROLS,
    FIRST_REPORT,
    Control,
    Graded,
    Rule,
    finite,
    fixed,
    missing_columns,
    missing_numbers,
    not_measured,
)
from psheads.reproduction.rules.frequencies import FREQUENCY_ID_TOLERANCE, UNIFORM_ID, id_agrees

FIGURE_5A_N = 100
"""Figure 5A's range of n."""
DECAY_MODELS = {"number": "index", "letter": "retrieval"}
"""The construction whose bound stands for each trained model (figure 5A)."""


def figure_5a_config(kind: str) -> Any:
    """Theorem 3.1's construction at figure 5A's angle for ``kind``."""
    from psheads.models import theory

    theta, _ = PUBLISHED["figure_5a"].value[kind]
    # n0 only has to admit θ (Index: θ < 2π/(n0 − 1)); the bounds themselves do not depend on it
    n0 = int(2 * np.pi / theta) if kind == "index" else FIGURE_5A_N
    return theory.ConstructionConfig(kind, theta=theta, n0=n0, n_letters=8)


def theorem_3_1_grade(accuracy: Sequence[float]) -> Graded:
    """Theorem 3.1: accuracy 1 at every (construction, length ≤ n0) cell. No cell, or a cell whose
    accuracy is not finite, is *not measured* (``min`` skips a NaN after the first cell)."""
    if not len(accuracy):
        return not_measured("no cell")
    if unread := sum(not finite(value) for value in accuracy):
        return not_measured(f"{unread} of {len(accuracy)} cells not finite")
    worst_cell = min(accuracy)
    return Graded("reproduces" if worst_cell == 1 else "does not reproduce", f"worst cell {worst_cell:.3f}")


BOUND_SLACK = 1e-9
"""Float rounding allowed when an exact worst case is compared with a closed-form bound."""


def theorem_3_2_grade(margins: pd.DataFrame) -> Graded:
    """Theorem 3.2 as an upper bound ("let n > 1 denote an arbitrary input length") under both
    readings of n: ``length, exact, upper (n = L), upper (n = L − 1)``; n = L is the statement's
    input length, n = L − 1 the farthest key's distance, which the derivation yields. Each reading
    is checked where its n > 1. Reproduces under both, partly under one (named), else does not.
    A reading with no cell (it would hold vacuously), or a cell whose worst case or bound is not
    finite, is *not measured*."""
    readings = {"n = L": 0, "n = L − 1": 1}
    if missing := missing_columns(margins, ("length", "exact", *(f"upper ({reading})" for reading in readings))):
        return not_measured(missing)
    if margins.empty:
        return not_measured("no cell")
    gaps = []
    for reading, shift in readings.items():
        cells = margins[margins["length"] - shift > 1]
        if cells.empty:
            gaps.append(f"no cell with n > 1 under {reading}")
        elif unread := int((~np.isfinite(cells[["exact", f"upper ({reading})"]].astype(float))).any(axis=1).sum()):
            gaps.append(f"{unread} of {len(cells)} cells under {reading} with a worst case or bound not finite")
    if gaps:
        return not_measured("; ".join(gaps))
    within, totals = {}, {}
    for reading, shift in readings.items():
        cells = margins[margins["length"] - shift > 1]
        within[reading] = int((cells["exact"] <= cells[f"upper ({reading})"] + BOUND_SLACK).sum())
        totals[reading] = len(cells)
    held = [reading for reading in within if within[reading] == totals[reading]]
    return Graded("reproduces" if len(held) == 2 else "partly" if held else "does not reproduce",
                  "; ".join(f"{within[r]} of {totals[r]} within at {r}" for r in within))


def _bounds_table(shift: float) -> pd.DataFrame:
    """The Index and Retrieval upper bounds at figure 5A's angles for L = 2 … 40, with an ``exact``
    column at the n = L bound plus ``shift`` (0: the theorem's own closed forms)."""
    rows = []
    for kind in DECAY_MODELS.values():
        config = figure_5a_config(kind)
        for length in range(2, 41):
            at_length, at_distance = config.bound(length + 1).upper, config.bound(length).upper
            rows.append({"construction": kind, "length": length, "exact": min(at_length, at_distance) + shift,
                         "upper (n = L)": at_length, "upper (n = L − 1)": at_distance})
    return pd.DataFrame(rows)


FIGURE_5A_LAYER = 2
"""The layer whose angles figure 5A's caption uses: θ₂ = 0.8 and θ₄₂ = 0.0027 are table 1's IDs at
layer 2 (number 2, letter 42; layer 1's are 2 and 32)."""


def figure_5a_grade(measured: Mapping[str, float]) -> Graded:
    """Figure 5A's angles are table 1's layer 2 (``FIGURE_5A_LAYER``): each model's layer-2 frequency ID
    (paper B's softmax definition, table 1's quantity) agrees with table 1's layer 2 as table 1's rule
    has it (``frequencies.id_agrees``: within the tolerance and nearer it than the uniform ID).
    Without both models' IDs, or with one that is not finite, it is *not measured*."""
    published = {task: PAPER_B_TABLE_1[task][FIGURE_5A_LAYER] for task in ("number", "letter")}
    if set(measured) != set(published):
        return not_measured("both models are needed")
    if missing := missing_numbers(measured, tuple(published)):
        return not_measured(missing)
    close = {task: id_agrees(measured[task], value) for task, value in published.items()}
    return Graded("reproduces" if all(close.values()) else "partly" if any(close.values()) else "does not reproduce",
                  ", ".join(f"{task} {measured[task]:.1f} (table 1: {published[task]})" for task in published))


# ------------------------------------------------------------------------------------ the family

FAMILY: tuple[Rule, ...] = (
    Rule("theorem_3_1", "accuracy 1 at every length up to n0, both constructions.", "none: exact",
         fixed((FIRST_REPORT, "")),
         theorem_3_1_grade, Control("the theorem's statement: every cell exact", [1.0] * 8),
         Control("a construction read past its n0", [1.0, 1.0, 0.8, 0.5]),
         cannot_fail="the constructions are psheads' own, built to satisfy the theorem: it fails only on a bug in "
                     "psheads' code, never on the paper's claim"),
    Rule("theorem_3_2",
         "Theorem 3.2 gives upper bounds: the exact worst case at or below the bound at every length from 2 to n0, "
         "under both readings of n (the statement's input length n = L, and n = L − 1, the farthest key's distance, "
         "which the derivation yields), each where its n > 1 as the statement asks: reproduces under both, partly "
         "under one (named).",
         f"float rounding ({BOUND_SLACK:g})", fixed((CONTROLS, "upper bound only, both readings shown")),
         theorem_3_2_grade, Control("the closed forms themselves", _bounds_table(0.0)),
         Control("worst cases 0.05 above the bound", _bounds_table(0.05))),
    Rule("figure_5a",
         f"figure 5A's angles (θ₂ = 0.8, θ₄₂ = 0.0027) are table 1's layer {FIGURE_5A_LAYER}, as its caption and §3.6 "
         f"say: each model's layer-{FIGURE_5A_LAYER} frequency ID (paper B's softmax definition, table 1's quantity) "
         f"within ±{FREQUENCY_ID_TOLERANCE} IDs of table 1's layer {FIGURE_5A_LAYER} (number 2, letter 42) and nearer "
         f"it than the uniform {UNIFORM_ID}; both reproduce, one partly. The curves themselves are closed forms, "
         "computed, not judged.",
         f"±{FREQUENCY_ID_TOLERANCE} IDs",
         fixed((CONTROLS, "layer 1 against ID 32, the same quantity as table 1"),
               ("da2749e", "layer 2, where the caption's ID 42 is (at layer 1 the uniform 32.5 passed the letter "
                           "model); written with the measured layer-1 and layer-2 IDs known")), figure_5a_grade,
         Control(f"table 1's layer {FIGURE_5A_LAYER}",
                 {task: PAPER_B_TABLE_1[task][FIGURE_5A_LAYER] for task in ("number", "letter")}),
         Control(f"every plane used equally (ID {UNIFORM_ID})", {"number": UNIFORM_ID, "letter": UNIFORM_ID})),
)
"""The theory rules, in the report's order."""
