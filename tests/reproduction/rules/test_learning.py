"""The learning-dynamics rules (psheads.reproduction.rules.learning), with the counter-examples from
the outside referee's read of paper B: hop order, placement, index flow, γ, convergence, entropy."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

import psheads
from psheads.reproduction import report
from psheads.reproduction.references import PAPER_B_FIGURE_2A, PUBLISHED
from psheads.reproduction.rules import Graded, learning


def test_the_placement_rule_fails_what_it_should() -> None:
    """Paper B's figure 2C, read right: number positional L0–L3, symbolic L4–L11; letter symbolic L1–L11
    and no positional layer. Each verdict of the band, with a counter-example."""
    positional = set(PUBLISHED["number_positional_l0_l3"].value)
    assert positional == {0, 1, 2, 3} and set(PUBLISHED["number_symbolic_l4_l11"].value) == set(range(4, 12))
    grade = learning.placement(positional)
    assert grade({"pure": [{0, 1, 2, 3}] * 3}).verdict == "reproduces"
    assert grade({"pure": [{1, 2, 3}, {1, 2, 3, 4}]}).verdict == "partly"  # 75%, ≤ 1 other
    assert grade({"pure": [{1, 2, 3}, {5, 6, 7, 8}]}).verdict == "does not reproduce"  # one seed off
    assert grade({"pure": [{1, 2}]}).verdict == "does not reproduce"  # 50%
    assert grade({"pure": [{0, 1, 2, 3, 4, 5}]}).verdict == "does not reproduce"  # two others
    letter = learning.placement(set(range(1, 12)))
    assert letter({"pure": [set(range(1, 12))], "outside": [0]}).verdict == "reproduces"
    assert letter({"pure": [set(range(1, 12))], "outside": [1]}).verdict == "partly"  # one pure positional layer
    assert letter({"pure": [{0, 1, 2, 3, 4}], "outside": [0]}).verdict == "does not reproduce"
    assert letter({"pure": []}).verdict == "not measured"


def _hops(rows: dict[int, list[float]], steps: tuple[int, ...] = (1500, 2000, 2500, 3000, 3500)) -> pd.DataFrame:
    return pd.DataFrame([{"step": step, "hops": str(hops), "accuracy": value}
                         for hops, values in rows.items() for step, value in zip(steps, values, strict=True)])


def test_hop_by_hop_reads_the_order_at_fixed_steps() -> None:
    """The referee's counter-example: at step 2500 hop 2 leads hops 3–4 in every seed (0.65 against about
    0.40), which is paper B's pattern, though all of 2, 3 and 4 first reach 90% at step 3000. Hops 3 and 4
    rise together, as in paper B's own figure 2A; only hop 4 ahead of hop 3 beyond 0.1 breaks the order."""
    shipped = _hops({1: [0.25, 0.99, 1.0, 1.0, 1.0], 2: [0.14, 0.25, 0.65, 1.0, 1.0], 3: [0.13, 0.24, 0.40, 0.98, 1.0],
                     4: [0.13, 0.27, 0.42, 0.95, 1.0]})
    assert learning.hop_leads(shipped) == [True, True, True]  # 3 and 4 rise together between two checkpoints
    assert learning.hop_by_hop([shipped] * 3).verdict == "reproduces"
    assert learning.hop_by_hop([shipped]).detail == ("1 of 1 seeds keep the order; per seed: 1 over 2 by 0.74, 2 over "
                                                     "3 by 0.25, 4 over 3 by at most 0.03 (yes)")
    reversed_34 = _hops({1: [0.25, 0.99, 1.0, 1.0, 1.0], 2: [0.14, 0.25, 0.65, 1.0, 1.0],
                         3: [0.13, 0.24, 0.25, 0.98, 1.0], 4: [0.13, 0.27, 0.42, 0.95, 1.0]})
    assert learning.hop_leads(reversed_34) == [True, True, False]  # hop 4 ahead of hop 3 by 0.17
    assert learning.hop_by_hop([reversed_34] * 3).verdict == "does not reproduce"
    letter = _hops({1: [0.3, 0.99, 1.0, 1.0, 1.0], 2: [0.1, 0.3, 1.0, 1.0, 1.0], 3: [0.1, 0.3, 0.98, 1.0, 1.0],
                    4: [0.1, 0.3, 0.97, 1.0, 1.0]})
    assert learning.hop_leads(letter) == [True, False, True]
    assert learning.hop_by_hop([letter] * 3).verdict == "does not reproduce"  # 1 hop first, then the rest together
    staircase = _hops({1: [0.9, 1, 1, 1, 1], 2: [0.2, 0.9, 1, 1, 1], 3: [0.1, 0.2, 0.9, 1, 1],
                       4: [0.1, 0.1, 0.2, 0.9, 1]})
    assert learning.hop_by_hop([staircase, staircase, letter]).verdict == "partly"  # two seeds of three
    assert learning.hop_by_hop([staircase, letter]).verdict == "partly"  # half
    assert learning.hop_by_hop([staircase, letter, letter]).verdict == "does not reproduce"
    assert learning.hop_by_hop([staircase] * 2).verdict == "reproduces"
    backwards = _hops({1: [0.1, 0.2, 0.9, 1, 1], 2: [0.9, 1, 1, 1, 1], 3: [0.1, 0.1, 0.2, 0.9, 1],
                       4: [0.1, 0.1, 0.1, 0.2, 0.9]})
    assert learning.hop_leads(backwards)[0] is False  # hop 2 before hop 1 trails by far more than HOP_TRAIL
    assert learning.at_once([letter]).verdict == "reproduces" and learning.at_once([staircase]).verdict != "reproduces"
    assert learning.checkpoint_interval([500, 1000, 1500, 1750]) == 500  # a short last gap does not count


def test_the_gamma_rule_passes_figure_7_and_fails_a_collapse() -> None:
    """The old rule (final counts within 1) graded paper B's own figure 7 'does not reproduce'."""
    paper = {0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": 2, "symbolic": 7}}
    assert learning.gamma_grade([paper]).verdict == "reproduces"
    three_of_four_lost = {0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": 1, "symbolic": 8}}
    assert learning.gamma_grade([three_of_four_lost]).verdict == "does not reproduce"
    assert learning.gamma_grade([paper, three_of_four_lost]).verdict == "partly"
    no_positional = {0.1: {"positional": 0, "symbolic": 11}, 0.05: {"positional": 0, "symbolic": 10}}
    assert learning.gamma_grade([no_positional]).verdict == "reproduces"  # a role without pure heads is not judged


def test_a_run_without_pure_heads_is_not_judged_by_the_gamma_rule() -> None:
    """A run with no pure head at γ = 0.1 has nothing to keep: it used to count as a run that kept
    half its heads, turning one failing run of two into 'partly'."""
    lost = {0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": 1, "symbolic": 8}}
    none = {0.1: {"positional": 0, "symbolic": 0}, 0.05: {"positional": 0, "symbolic": 0}}
    graded = learning.gamma_grade([lost, none])
    assert graded == Graded("does not reproduce", "0 of 1 runs keep half their pure heads; 1 without a "
                                     "pure head at γ = 0.1, not judged")


def _dynamics(rows: list[tuple[int, int, float, float, float]]) -> pd.DataFrame:
    """step, layer, s_POS, s_SYM, accuracy_all → a dynamics table (one head per layer, labels at γ = 0.1)."""
    from psheads.measure.methods import label

    frame = pd.DataFrame(rows, columns=["step", "layer", "positional", "symbolic", "accuracy_all"])
    labels = [label(p, s) for p, s in zip(frame["positional"], frame["symbolic"], strict=True)]
    return frame.assign(head=0, label=labels)


def test_the_report_relabels_stored_scores_for_figure_7() -> None:
    """A head at s_POS 0.93 is pure at γ = 0.1 and mixed at 0.05."""
    dynamics = _dynamics([(500, 0, 0.5, 0.5, 0.1)] + [(1000, layer, 0.93, 0.02, 1.0) for layer in range(3)]
                         + [(1000, 3, 0.99, 0.01, 1.0)])
    run = report.Run("number", 0, dynamics, pd.DataFrame())
    claim = report.learning._gamma_robustness([run], report.Section("t", "t", "t"))
    assert "positional 4 → 1" in claim.measured and claim.verdict == "does not reproduce"


def test_the_convergence_rule_fails_heads_that_purify_late() -> None:
    early = _dynamics([(500, 0, 0.5, 0.5, 0.3), (1000, 0, 0.99, 0.01, 0.995), (1500, 0, 0.99, 0.01, 1.0),
                       (500, 1, 0.5, 0.5, 0.3), (1000, 1, 0.01, 0.99, 0.995), (1500, 1, 0.01, 0.99, 1.0)])
    assert report.pure_before_convergence(early) == (1000, 1.0)
    late = _dynamics([(500, 0, 0.5, 0.5, 0.3), (1000, 0, 0.5, 0.5, 0.995), (1500, 0, 0.99, 0.01, 1.0),
                      (500, 1, 0.5, 0.5, 0.3), (1000, 1, 0.5, 0.5, 0.995), (1500, 1, 0.01, 0.99, 1.0)])
    assert report.pure_before_convergence(late) == (1000, 0.0)
    assert report.pure_before_convergence(early.assign(accuracy_all=0.5)) == (None, 0.0)
    assert learning.convergence_grade([(1000, 1.0), (1000, 0.0)]).verdict == "partly"
    # no layer pure at the end: nothing to time (NaN, once 0.0, which failed the run)
    mixed = early.assign(positional=0.5, symbolic=0.5, label="mixed")
    step, share = report.pure_before_convergence(mixed)
    assert step == 1000 and np.isnan(share)
    graded = learning.convergence_grade([(1000, 1.0), (step, share)])
    assert graded == Graded("reproduces", "1 of 1 runs; 1 with no pure layer at the end, not judged")


def test_the_entropy_rule() -> None:
    assert learning.entropy_grade((0.95, [0.99, 0.99])).verdict == "reproduces"
    assert learning.entropy_grade((0.6, [0.95, 0.92])).verdict == "partly"
    assert learning.entropy_grade((0.3, [0.95, 0.5])).verdict == "does not reproduce"


def test_the_index_flow_follows_the_hops_and_its_rule_fails_what_it_should() -> None:
    number = psheads.load_pretrained("number")
    from psheads.tasks import checked_batch

    batch = checked_batch(number.task, 8, seed=2)
    flow = report.index_flow(number.model, number.task, batch.tokens)
    assert flow.groupby("prompt")["step"].max().tolist() == batch.hops.tolist()  # every hop of every prompt
    assert sorted(flow["layer"].unique()) == list(range(12)) and flow["attention"].between(0, 1).all()
    assert (flow.loc[flow["maximal"], "attention"] > 1 / 17).all()  # the most attended key gets more than uniform
    ideal = learning._flow(learning._figure_3a)
    assert learning.index_flow_grade(ideal).verdict == "reproduces"
    late = learning._flow(lambda layer, step, from_end: learning._figure_3a(layer, step, from_end) or layer == 6)
    assert learning.index_flow_grade(late).verdict == "reproduces"  # later layers are not paper B's claim
    outcome = learning.propagation_grade(late)
    assert outcome.verdict == "partly" and outcome.detail == "1 of 8 layers follow an Index hop (6)"
    no_layer_0 = learning._flow(lambda layer, step, from_end: learning._figure_3a(layer, step, from_end) and layer != 0)
    assert learning.index_flow_grade(no_layer_0).verdict == "partly"
    no_query = learning._flow(lambda layer, step, from_end: learning._figure_3a(layer, step, from_end) and layer != 0
                              and step != 1)
    assert learning.index_flow_grade(no_query).verdict == "does not reproduce"
    assert learning.index_flow_grade(flow.head(0)).verdict == "not measured"


def test_part_c_of_the_index_flow_is_psheads_reading_and_fails_the_every_hop_model() -> None:
    """The referee's nearest null: a model where every layer follows every hop got the same 'partly' as
    the measurement. §3.2 names no layer for 'from there on … only propagated', so part (c) is
    psheads' reading, graded as its prediction; paper B's parts (a) and (b) cannot tell the two apart."""
    every = learning._flow(lambda *_: True)
    assert learning.index_flow_grade(every).verdict == "reproduces"
    assert learning.propagation_grade(every).verdict == "does not reproduce"
    assert PUBLISHED["index_flow_propagate"].locator.startswith("psheads' prediction")
    assert learning.propagation_grade(learning._flow(learning._figure_3a)).verdict == "reproduces"


def test_figure_2a_is_read_from_the_pdf() -> None:
    """Paper B's figure 2A (number task), its vertices every 50 steps: hop 1 first, then hop 2, and hops
    3 and 4 together, hop 3 ahead by at most 0.077 (step 2,850)."""
    curve = learning.figure_2a_curve()
    wide = curve.assign(hops=curve["hops"].astype(int)).pivot(index="step", columns="hops", values="accuracy")
    assert list(wide.index) == list(range(50, 6751, 50)) and list(wide.columns) == [1, 2, 3, 4]
    for hops, points in PAPER_B_FIGURE_2A.items():
        assert all(step % 50 == 0 for step in points)
        assert np.allclose(wide.loc[list(points), hops], list(points.values()))  # the vertices themselves
    assert (wide.iloc[-1] == 1.0).all() and wide.min().min() > 0
    assert [int(wide.index[wide[hops] >= 0.9][0]) for hops in (1, 2, 3, 4)] == [2050, 2750, 3250, 3400]
    lead = wide[3] - wide[4]
    assert round(lead.max(), 3) == 0.077 and lead.idxmax() == 2850
    assert learning.figure_2a_curve(500)["step"].min() == 500


def _sampled(curve: pd.DataFrame, rng: np.random.Generator, prompts: int = learning.PAPER_PROMPTS) -> pd.DataFrame:
    """``curve`` as a measurement on ``prompts`` prompts per hop count and checkpoint: binomial noise."""
    return curve.assign(accuracy=rng.binomial(prompts, curve["accuracy"].to_numpy()) / prompts)


def test_hop_by_hop_passes_figure_2a_with_its_sampling_noise_and_fails_the_nulls() -> None:
    """Paper B's figure 2A, with the binomial noise of 512 prompts per hop count and checkpoint (the panel
    does not say its count; 512 is psheads' own and fewer than either of paper B's candidate sets), three
    seeds per draw, every 50 steps (135 checkpoints: the most chances for noise to reverse a pair) and at
    psheads' 500-step checkpoints: reproduces in at least 97% of the draws, partly in the rest. The old
    rule could not pass it (hop 3 leads hop 4 by at most 0.077). The nulls with the paper's timing fail
    in every draw: every hop count at once, and the nearest, 1 hop first and then the rest at once."""
    rng = np.random.default_rng(47)
    paper, coarse = learning.figure_2a_curve(), learning.figure_2a_curve(500)
    assert learning.hop_by_hop([paper]) == Graded("reproduces", "1 of 1 seeds keep the order; per seed: 1 over 2 by "
                                                  "0.80, 2 over 3 by 0.50, 4 over 3 by at most 0.02 (yes)")
    for curve, draws in ((paper, 150), (coarse, 100)):
        verdicts = Counter(learning.hop_by_hop([_sampled(curve, rng) for _ in range(3)]).verdict for _ in range(draws))
        # a single seed's pair reverses beyond 0.1 about once in 400 curves at 135 checkpoints (hops 2 and 3
        # near step 2,200, 3 and 4 near 2,600, where the paper's own gap is within 0.06): 'partly', never worse
        assert verdicts["reproduces"] >= 0.97 * draws and set(verdicts) <= {"reproduces", "partly"}
    for null in (learning.figure_2a_together(), learning.figure_2a_together((1,))):
        assert learning.hop_by_hop([null]).verdict == "does not reproduce"
        for _ in range(50):
            seeds = [_sampled(null, rng) for _ in range(3)]
            assert learning.hop_by_hop(seeds).verdict == "does not reproduce"
            assert not any(learning.hop_leads(seed)[1] for seed in seeds)  # hop 2 never leads hop 3 by 0.2
    assert learning.hop_by_hop([learning.TOGETHER]).verdict == "does not reproduce"
