"""The report's section on Theorem 3.1's constructions and Theorem 3.2's bounds (paper B): both
constructions measured live, and figure 5A's bounds beside the trained models' layer 2."""

from __future__ import annotations

import numpy as np
import pandas as pd

import psheads.plotting as plotting
from psheads.reproduction.references import PUBLISHED
from psheads.reproduction.report.claims import Claim, Section, graded, not_measured
from psheads.reproduction.report.inputs import ReportConfig, Run, task_prompts
from psheads.reproduction.rules.theorems import BOUND_SLACK, FIGURE_5A_LAYER, FIGURE_5A_N, figure_5a_config


def theory_section(runs: list[Run], config: ReportConfig) -> Section:
    from psheads.measure.evaluation import evaluate
    from psheads.models import theory

    section = Section("theory", "Theorem 3.1's constructions and Theorem 3.2's bounds (paper B)",
                      "Both constructions built as real one-layer models and measured live: accuracy on "
                      f"{config.theory_prompts} prompts per length, and the exact worst-case discrepancy against the "
                      "closed-form bounds.")
    rows, bounds = [], []
    for kind in theory.CONSTRUCTIONS:
        construction = theory.construct(kind)
        n0 = construction.n0
        for length in (2, 3, n0 // 2, n0):
            row = evaluate(construction.model, construction.config.task(length), n=config.theory_prompts,
                           seed=config.seed, batch_size=config.theory_prompts, progress=False).iloc[-1]
            rows.append({"construction": kind, "length": length, "accuracy": row["accuracy"], "n": int(row["n"])})
        for length in range(2, n0 + 1):  # every length, under both readings of n
            at_distance, at_length = construction.bound(length), construction.bound(length + 1)
            bounds.append({"construction": kind, "length": length, "exact": construction.margin(length),
                           "upper (n = L)": at_length.upper, "upper (n = L − 1)": at_distance.upper,
                           "lower (n = L − 1)": at_distance.lower})
    accuracy, margins = pd.DataFrame(rows), pd.DataFrame(bounds)
    section.tables += [("Accuracy up to n0", accuracy),
                       ("Exact worst-case discrepancy and Theorem 3.2's upper bound under both readings of n (the "
                        "lower bound is psheads' own, from the derivation)", margins)]
    section.claims.append(graded("theorem_3_1", f"accuracy {accuracy['accuracy'].min():.3f} at worst over "
                                 f"{len(accuracy)} (construction, length) cells", accuracy["accuracy"].tolist()))
    above = margins[margins["exact"] > margins["upper (n = L)"] + BOUND_SLACK]
    section.claims.append(graded(
        "theorem_3_2", "exact worst cases at L = 2…n0 for both constructions; above the bound at n = L: "
        + (", ".join(f"{kind} L = {length}"
                     for kind, length in zip(above["construction"], above["length"], strict=True)) or "none"),
        margins))
    section.claims.append(_figure_5a(runs, config, section))
    return section


def figure_5a_curves() -> pd.DataFrame:
    """Theorem 3.2's bounds at paper B's angles for n = 1 … ``FIGURE_5A_N`` (``construction, n, upper, lower``)."""
    rows = []
    for kind in PUBLISHED["figure_5a"].value:
        config = figure_5a_config(kind)
        for n in range(1, FIGURE_5A_N + 1):
            bound = config.bound(n + 1)
            rows.append({"construction": kind, "n": n, "upper": bound.upper,
                         "lower": np.nan if bound.lower is None else bound.lower})
    return pd.DataFrame(rows)


def second_layer_ids(runs: list[Run], config: ReportConfig) -> dict[str, float]:
    """Per shipped model: the frequency ID of figure 5A's layer (``FIGURE_5A_LAYER``, layer 2, whose
    table-1 IDs are the caption's 2 and 42) by paper B's definition (softmax over each plane's
    maximum logit, no 1/√d scale), table 1's quantity."""
    from psheads.measure.frequency_profile import frequency_profile

    out = {}
    for run in runs:
        if run.shipped is None:
            continue
        heads = frequency_profile(run.shipped.model, task_prompts(run.shipped, config), layers=[FIGURE_5A_LAYER],
                                  progress=False,
                                  weighting="softmax", scale=False).heads
        out[run.task] = float(heads["mean_frequency_id"].mean())
    return out


def _figure_5a(runs: list[Run], config: ReportConfig, section: Section) -> Claim:
    curves = figure_5a_curves()
    section.figures.append((f"Figure 5A: Theorem 3.2's bounds for n ≤ {FIGURE_5A_N} at paper B's angles (Index "
                            "θ = 0.8; Retrieval θ = 0.0027, |ALPH| = 8)", plotting.theorem_bounds(curves)))
    last = curves[curves["n"] == FIGURE_5A_N].set_index("construction")
    ids = second_layer_ids(runs, config)
    if not ids:
        return not_measured("figure_5a", "no shipped model")
    return graded("figure_5a", f"at n = {FIGURE_5A_N} the Index upper bound is {last.loc['index', 'upper']:.4f} "
                  f"and the Retrieval bounds [{last.loc['retrieval', 'lower']:.4f}, "
                  f"{last.loc['retrieval', 'upper']:.4f}]; layer {FIGURE_5A_LAYER}'s frequency ID: "
                  + ", ".join(f"{task} {value:.1f}" for task, value in ids.items()), ids)
