"""Degenerate input is *not measured*, never a verdict: every rule fed empty, all-NaN, too short or
incomplete measurements of its own kind, with a detail that names what is missing.

``DEGENERATE`` holds, per claim, the inputs that fit that rule's measurement (derived from its
positive control where it has one); a rule added to ``RULES`` without an entry here fails
``test_every_rule_has_degenerate_inputs``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from psheads.reproduction import rules
from psheads.reproduction.references import PAPER_B_TABLE_1
from psheads.reproduction.rules import learning

NAN = float("nan")

Case = tuple[str, Any, str]
"""(what the input is, the measurement, a phrase the detail must contain)."""


def _positive(claim: str) -> Any:
    return rules.RULES[claim].positive.measurement


def _curves(good: pd.DataFrame) -> list[Case]:
    """Figure 2A's per-seed ``step, hops, accuracy`` curves with a hop count or a checkpoint missing."""
    return [("no seed", [], "no seed"),
            ("an empty curve", [good.iloc[:0]], "no finite accuracy for 1, 2, 3, 4 hops"),
            ("no accuracy column", [good.drop(columns="accuracy")], "no column accuracy"),
            ("hop 4 missing", [good[good["hops"] != "4"]], "4 hops"),
            ("hop 4 all NaN", [good.assign(accuracy=good["accuracy"].where(good["hops"] != "4"))], "4 hops"),
            ("one seed of two without hop 4", [good, good[good["hops"] != "4"]], "curve 2 of 2"),
            ("one checkpoint", [good[good["step"] == 2000]], "two checkpoints")]


def _placement(claim: str) -> list[Case]:
    good = _positive(claim)["pure"]
    return [("nothing", {}, "pure layers"),
            ("no seed", {"pure": []}, "no seed"),
            ("a seed without its pure layers", {"pure": [None, *good[1:]]}, "seed 1 of 3"),
            ("other layers counted for one seed of three", {"pure": good, "outside": [0]}, "other layers"),
            ("a NaN count of other layers", {"pure": good, "outside": [0, NAN, 0]}, "other layers")]


def _index_flow() -> list[Case]:
    good = _positive("index_flow")
    return [("empty", good.head(0), "no Index hop"),
            ("all NaN", good.assign(maximal=NAN), "no Index hop"),
            ("no maximal column", good.drop(columns="maximal"), "no column maximal"),
            ("one-hop prompts only: no hop before the last", learning._flow(learning._figure_3a, hops=1),
             "no previous hop")]


def _propagation() -> list[Case]:
    good = _positive("index_flow_propagate")
    return [("empty", good.head(0), "no Index hop"),
            ("all NaN", good.assign(maximal=NAN), "no Index hop"),
            ("no layer column", good.drop(columns="layer"), "no column layer"),
            ("layers 4-11 missing", good[good["layer"] < 4], "layers 4–11 not measured"),
            ("layer 11 missing", good[good["layer"] < 11], "layers 11 not measured")]


def _frequency_id(task: str) -> list[Case]:
    table = list(PAPER_B_TABLE_1[task])
    return [("empty", [], "0 layers"),
            ("one layer", table[:1], "1 layer measured"),
            ("a layer too many", [*table, 32.0], "13 layers"),
            ("all NaN", [NAN] * len(table), "L0"),
            ("the last layer NaN", [*table[:-1], NAN], f"L{len(table) - 1}")]


def _length_curve(claim: str) -> list[Case]:
    good = _positive(claim)
    third = int(good["length"].iloc[2])
    return [("empty", good.iloc[:0], "no all-hops accuracy"),
            ("all NaN", good.assign(accuracy=NAN), "not finite"),
            ("one length NaN", good.assign(accuracy=good["accuracy"].where(good["length"] != third)), f"{third}"),
            ("no all-hops rows", good.assign(hops="1"), "no all-hops accuracy"),
            ("no accuracy column", good.drop(columns="accuracy"), "no column accuracy")]


def _decay() -> list[Case]:
    good = _positive("theory_decay")
    number = good["model"] == "number"
    return [("empty", good.iloc[:0], "number: 0 lengths, too few"),
            ("all NaN", good.assign(accuracy=NAN), "too few"),
            ("NaN leaves the number model two lengths",
             good.assign(accuracy=good["accuracy"].where(~number | (good["length"] < 60))), "too few"),
            ("no letter length", good[number], "no length both models measure"),
            ("no prompt counts", good.assign(n=NAN), "too few"),
            ("no bound column", good.drop(columns="upper bound"), "no column upper bound"),
            ("no n column", good.drop(columns="n"), "no column n")]


def _bounds() -> list[Case]:
    good = _positive("theorem_3_2")
    return [("empty", good.iloc[:0], "no cell"),
            ("NaN worst cases", good.assign(exact=NAN), "not finite"),
            ("one NaN worst case", good.assign(exact=good["exact"].where(good.index != 5)), "not finite"),
            ("only L = 2: no cell for n = L - 1", good[good["length"] == 2], "no cell with n > 1 under n = L − 1"),
            ("no bound column", good.drop(columns="upper (n = L)"), "no column upper (n = L)")]


def _llm_tables(claim: str) -> list[Case]:
    model, table = next(iter(_positive(claim).items()))
    return [("no model", {}, "no model"),
            ("an empty table", {model: table.iloc[:0]}, "no cell llm-number at 12 items"),
            ("NaN cells", {model: table.assign(accuracy=NAN, ci_low=NAN, ci_high=NAN)}, "not finite"),
            ("no cells at 100 items", {model: table[table["window"] != 100]}, "at 100 items"),
            ("no ci_low column", {model: table.drop(columns="ci_low")}, "no column ci_low")]


DEGENERATE: dict[str, list[Case]] = {
    "number_hop_by_hop": _curves(learning.STAIRCASE),
    "letter_at_once": _curves(learning.TOGETHER),
    "number_positional_l0_l3": _placement("number_positional_l0_l3"),
    "number_symbolic_l4_l11": _placement("number_symbolic_l4_l11"),
    "letter_symbolic_1_11": _placement("letter_symbolic_1_11"),
    "index_flow": _index_flow(),
    "index_flow_propagate": _propagation(),
    "purity_gamma": [
        ("no run", [], "no run"),
        ("no pure head at gamma 0.1", [{0.1: {"positional": 0, "symbolic": 0}, 0.05: {"positional": 0, "symbolic": 0}}],
         "no pure head"),
        ("no counts at gamma 0.05", [{0.1: {"positional": 4, "symbolic": 8}}], "no counts at γ = 0.05"),
        ("a NaN count", [{0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": NAN, "symbolic": 7}}],
         "not finite")],
    "pure_before_convergence": [
        ("no run", [], "no run"),
        ("no pure layer at the end of any run", [(1000, NAN), (1500, NAN)], "no pure layer")],
    "entropy_at_init": [
        ("nothing", (), "no entropy"),
        ("all NaN", (NAN, [NAN, NAN]), "not finite"),
        ("no model's median", (0.95, []), "median"),
        ("no model's median, a low entropy", (0.6, []), "median"),
        ("a NaN median", (0.95, [0.99, NAN]), "not finite")],
    "frequency_id_number": _frequency_id("number"),
    "frequency_id_letter": _frequency_id("letter"),
    "layer_1_geometry": [
        ("nothing", {}, "no plane, fit, peak, routes"),
        ("a NaN plane", {**_positive("layer_1_geometry"), "plane": NAN}, "plane not finite"),
        ("all NaN", dict.fromkeys(("plane", "fit", "peak", "routes"), NAN), "not finite"),
        ("no routing", {k: v for k, v in _positive("layer_1_geometry").items() if k != "routes"}, "no routes")],
    "letter_length": _length_curve("letter_length"),
    "number_length": _length_curve("number_length"),
    "letter_beyond_number": [
        ("empty", _positive("letter_beyond_number").iloc[:0], "no number or letter curve"),
        ("no letter curve", _positive("letter_beyond_number").query("model == 'number'"), "no letter curve"),
        ("all NaN", _positive("letter_beyond_number").assign(accuracy=NAN), "no length"),
        ("no prompt counts", _positive("letter_beyond_number").drop(columns="n"), "no column n"),
        ("both at the training length only", _positive("letter_beyond_number").query("length == 17"), "no length")],
    "theory_decay": _decay(),
    "margins": [("nothing", (), "no share"), ("all NaN", (NAN, NAN), "not finite"),
                ("the symbolic share NaN", (1.0, NAN), "symbolic share not finite")],
    "theorem_3_1": [("empty", [], "no cell"), ("all NaN", [NAN, NAN], "2 of 2 cells not finite"),
                    ("one NaN after a 1", [1.0, NAN, 1.0], "1 of 3 cells not finite")],
    "theorem_3_2": _bounds(),
    "figure_5a": [("nothing", {}, "both models"), ("one model", {"number": 2.0}, "both models"),
                  ("all NaN", {"number": NAN, "letter": NAN}, "not finite"),
                  ("the letter model NaN", {"number": 2.0, "letter": NAN}, "letter not finite")],
    "index_fast": [("nothing", {}, "no fast, slow, zero"),
                   ("all NaN", {"fast": NAN, "slow": NAN, "zero": NAN}, "not finite"),
                   ("no zero band", {"fast": 1.0, "slow": 0.04}, "no zero")],
    "retrieval_slow": [("nothing", {}, "no slow, zero, fast"),
                       ("all NaN", {"slow": NAN, "zero": NAN, "fast": NAN}, "not finite"),
                       ("the zero band NaN", {"slow": 1.0, "zero": NAN, "fast": 0.04}, "zero not finite"),
                       ("no fast band", {"slow": 1.0, "zero": 1.0}, "no fast")],
    "induction_both": [("nothing", {}, "no both, alone"), ("all NaN", {"both": NAN, "alone": NAN}, "not finite"),
                       ("no single kind", {"both": 1.0}, "no alone")],
    "llm_table_3": _llm_tables("llm_table_3"),
    "llm_thresholds": _llm_tables("llm_thresholds"),
    "llm_letter_above_number": [
        ("no model", {}, "no model"),
        ("an empty table", {"a": _positive("llm_table_3")["GPT 5.4"].iloc[:0]}, "no window with both tasks"),
        ("the letter task only", {"a": _positive("llm_table_3")["GPT 5.4"].query("task == 'llm-letter'")},
         "no window with both tasks"),
        ("NaN intervals", {"a": _positive("llm_table_3")["GPT 5.4"].assign(ci_low=NAN, ci_high=NAN)},
         "no window with both tasks"),
        ("no ci_low column", {"a": _positive("llm_table_3")["GPT 5.4"].drop(columns="ci_low")}, "no column ci_low")],
    "llm_early_late": [("nothing", (), "no interval"), ("all NaN", (NAN, NAN), "not finite"),
                       ("the upper bound NaN", (-0.5, NAN), "not finite")],
    "llm_correlation": [
        ("nothing", {}, "no r, ci_high, n"),
        ("all NaN", {"r": NAN, "ci_high": NAN, "n": NAN}, "not finite"),
        ("r NaN", {**_positive("llm_correlation"), "r": NAN, "ci_high": NAN}, "r, ci_high not finite"),
        ("two heads", {"r": -1.0, "ci_high": -1.0, "n": 2}, "2 heads"),
        ("no per-head scores", {"r": -1.0, "ci_high": -1.0, "n": 64}, "no per-head scores"),
        ("a NaN head", {**_positive("llm_correlation"), "positional": [NAN] * 64}, "not one finite pair")],
}
"""Per claim: degenerate inputs of that rule's measurement type, and what the detail must name."""


def test_every_rule_has_degenerate_inputs() -> None:
    assert set(DEGENERATE) == set(rules.RULES), "add the new rule's degenerate inputs to DEGENERATE"
    assert all(len(cases) >= 2 for cases in DEGENERATE.values())


@pytest.mark.parametrize(("claim", "measurement", "missing"),
                         [pytest.param(claim, measurement, missing, id=f"{claim}: {case}")
                          for claim, cases in DEGENERATE.items() for case, measurement, missing in cases])
def test_degenerate_input_is_not_measured(claim: str, measurement: Any, missing: str) -> None:
    graded = rules.RULES[claim].grade(measurement)
    assert graded.verdict == "not measured", graded
    assert missing in graded.detail, graded


def test_misused_rules_say_what_they_take() -> None:
    """A measurement of the wrong kind, or a reversed interval, is the caller's mistake: an error, not a verdict."""
    with pytest.raises(TypeError, match="mapping with keys plane, fit, peak, routes"):
        rules.RULES["layer_1_geometry"].grade([1, 0.9, 2.0, 0.8])
    with pytest.raises(TypeError, match="DataFrame with columns"):
        rules.RULES["theorem_3_2"].grade([0.1, 0.2])
    with pytest.raises(TypeError, match="placement takes"):
        rules.RULES["number_positional_l0_l3"].grade([{0, 1, 2, 3}])
    with pytest.raises(ValueError, match="low ≤ high"):
        rules.RULES["llm_early_late"].grade((0.2, -0.2))
