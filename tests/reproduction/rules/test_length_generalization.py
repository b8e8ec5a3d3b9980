"""The length-generalization rules (psheads.reproduction.rules.length_generalization): figure 5B
read at L = x + 17, and the decay of accuracy with Theorem 3.2's bound within each model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from psheads.reproduction.references import PAPER_B_FIGURE_5B
from psheads.reproduction.rules.length_generalization import (
    decay_grade,
    decay_points,
    figure_5b_curve,
    letter_length_grade,
    number_length_grade,
)


def test_the_length_rules_read_figure_5b_at_x_plus_17_and_are_two_sided() -> None:
    number = figure_5b_curve("number")
    assert number.set_index("length").loc[217, "accuracy"] == PAPER_B_FIGURE_5B["number"][200]
    assert number_length_grade(number).verdict == "reproduces"
    assert number_length_grade(number.assign(accuracy=0.95)).verdict == "does not reproduce"  # better fails too
    ours = pd.DataFrame({"length": [17, 145, 529, 1041], "hops": "all", "accuracy": [1.0, 0.31, 0.10, 0.01]})
    assert number_length_grade(ours).verdict == "does not reproduce"
    assert number_length_grade(ours.head(2)).verdict == "not measured"
    letter = figure_5b_curve("letter")
    assert letter_length_grade(letter).verdict == "reproduces"  # 717 tokens, 83% of 867
    reach_145 = pd.DataFrame({"length": [17, 145, 529], "hops": "all", "accuracy": [1.0, 0.96, 0.55]})
    assert letter_length_grade(reach_145).verdict == "does not reproduce"
    assert letter_length_grade(reach_145.assign(accuracy=1.0)).verdict == "partly"  # 529: within a factor 2


def test_accuracy_at_reads_or_interpolates_the_curve() -> None:
    from psheads.results import analysis

    curve = pd.DataFrame({"length": [145, 289, 145], "hops": ["all", "all", "1"], "accuracy": [0.30, 0.20, 1.0]})
    assert analysis.accuracy_at(curve, 145) == 0.30
    expected = 0.30 + (np.log(200) - np.log(145)) / (np.log(289) - np.log(145)) * (0.20 - 0.30)
    assert analysis.accuracy_at(curve, 200) == pytest.approx(expected, abs=1e-12)
    assert analysis.accuracy_at(curve, 100) is None and analysis.accuracy_at(curve, 1000) is None


def test_the_decay_rule_is_within_each_model() -> None:
    """The referee's counter-example: two flat curves (0.5 and 0.95 at every length) scored ρ = 0.87
    pooled, because the gap between the models drove the ranks."""
    lengths = [17, 33, 65, 145, 289]

    def curves(number: list[float], letter: list[float]) -> pd.DataFrame:
        return pd.DataFrame([{"model": model, "length": length, "hops": "all", "accuracy": accuracy, "n": 512}
                             for model, values in (("number", number), ("letter", letter))
                             for length, accuracy in zip(lengths, values, strict=True)])

    follows = decay_points(curves([1.0, 0.9, 0.5, 0.3, 0.2], [1.0, 0.99, 0.98, 0.96, 0.7]))
    assert sorted(follows["length"].unique()) == [17, 33, 65, 145]  # 289 is past the Retrieval bound's range
    assert decay_grade(follows).verdict == "reproduces"
    flat = decay_points(curves([0.5] * 5, [0.95] * 5))
    pooled = flat["upper bound"].rank().corr(flat["accuracy"].rank())
    assert pooled > 0.8 and decay_grade(flat).verdict == "partly"  # no decay to see; the letter model holds
    rising = decay_points(curves([0.3, 0.5, 0.7, 0.9, 1.0], [0.5, 0.6, 0.7, 0.8, 0.9]))
    assert decay_grade(rising).verdict == "does not reproduce"
    assert decay_grade(follows[follows["length"] < 60]).verdict == "not measured"


def test_the_decay_rule_grades_and_reports_only_the_lengths_it_measured() -> None:
    """A length whose accuracy is NaN (no prompt) used to drop out of ρ but still count in the
    lengths reported; decay_points now leaves it out, and decay_grade names it."""
    curve = pd.DataFrame({"model": "number", "length": [17, 33, 65, 145, 17, 145], "hops": "all", "n": 512,
                          "accuracy": [1.0, np.nan, 0.5, 0.3, 1.0, 1.0]})
    curve.loc[4:, "model"] = "letter"
    points = decay_points(curve)
    assert points.query("model == 'number'")["length"].tolist() == [17, 65, 145]
    assert decay_grade(points).detail.startswith("number: drops 0.700 from 17 to 145 tokens")
    with_nan = pd.concat([points, pd.DataFrame([{**points.iloc[0], "length": 33, "accuracy": np.nan}])])
    assert "number: not finite at 33 tokens, left out" in decay_grade(with_nan).detail


def test_the_decay_rule_is_noise_aware_on_paper_b_s_own_curves() -> None:
    """ρ over a letter curve at its ceiling ranked sampling noise: paper B's own figure-5B curves, read
    at psheads' lengths with 512-prompt binomial noise, got 'does not reproduce' about one time in nine
    and 'reproduces' two in five. Now a drop counts beyond 3 standard errors, and the letter model is
    graded by its gap to the number model."""
    from psheads.reproduction.rules.length_generalization import _ceiling, paper_curves

    rng = np.random.default_rng(1)
    verdicts = [decay_grade(decay_points(_sampled(paper_curves(), [17, 33, 65, 145], rng))).verdict
                for _ in range(300)]
    assert verdicts.count("reproduces") == 300
    # the nearest null: both models at the ceiling, sampling noise only: never a verdict either way
    nulls = [decay_grade(decay_points(_ceiling(seed))).verdict for seed in range(300)]
    assert "reproduces" not in nulls and nulls.count("inconclusive") >= 0.98 * len(nulls)
    # two prompts of 512 no longer flip it: the shipped curves, the letter one at 145 tokens moved by 2/512
    number = pd.DataFrame({"model": "number", "length": [17, 33, 65, 145], "hops": "all", "n": 512,
                           "accuracy": [1.0, 0.996, 0.605, 0.297]})
    letter = pd.DataFrame({"model": "letter", "length": [17, 33, 65, 145], "hops": "all", "n": 512,
                           "accuracy": [0.996, 1.0, 1.0, 0.963]})
    base = decay_grade(decay_points(pd.concat([number, letter])))
    shifted = letter.assign(accuracy=letter["accuracy"] + [0, 0, 0, 2 / 512])
    moved = decay_grade(decay_points(pd.concat([number, shifted])))
    assert base.verdict == moved.verdict == "reproduces"


def _sampled(curves: pd.DataFrame, lengths: list[int], rng: np.random.Generator, n: int = 512) -> pd.DataFrame:
    """Paper B's curves read at ``lengths`` (interpolated in log length) with the binomial noise of ``n`` prompts."""
    from psheads.results import analysis

    rows = []
    for model, curve in curves.groupby("model"):
        for length in lengths:
            p = analysis.accuracy_at(curve, length)
            if p is not None:
                rows.append({"model": model, "length": length, "hops": "all", "n": n,
                             "accuracy": rng.binomial(n, p) / n})
    return pd.DataFrame(rows)


def test_the_separation_rule_passes_paper_b_s_curves_with_sampling_noise_and_fails_the_nearest_null() -> None:
    """§3.6's "the letter model far exceeds the number model": paper B's two figure-5B curves read at
    psheads' lengths, 512 prompts each, reproduce in every draw; the number curve twice never does."""
    from psheads.reproduction.rules.length_generalization import paper_curves, separation_grade

    rng = np.random.default_rng(0)
    lengths = [17, 33, 65, 145, 289, 529, 1041]
    verdicts = [separation_grade(_sampled(paper_curves(), lengths, rng)).verdict for _ in range(200)]
    assert verdicts.count("reproduces") == 200
    number = paper_curves().query("model == 'number'")
    same = pd.concat([number, number.assign(model="letter")])
    nulls = [separation_grade(_sampled(same, lengths, rng)).verdict for _ in range(200)]
    assert nulls.count("reproduces") == 0 and nulls.count("does not reproduce") >= 190
    slightly = paper_curves().query("model == 'number'").assign(model="letter")
    slightly["accuracy"] = (slightly["accuracy"] + 0.03).clip(upper=1.0)
    assert separation_grade(pd.concat([number, slightly])).verdict == "does not reproduce"  # within the noise
