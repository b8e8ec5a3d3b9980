"""The report's section on length generalization (paper B, figure 5B and §3.6): the shipped curves,
re-measured live at a few lengths, and Theorem 3.2's bound beside the measured accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd

import psheads.plotting as plotting
from psheads.reproduction.report.claims import Claim, Section, graded, not_measured
from psheads.reproduction.report.inputs import ReportConfig, Run
from psheads.reproduction.rules.length_generalization import decay_points, separation
from psheads.results import analysis


def length_claims(curves: pd.DataFrame) -> list[Claim]:
    """Figure 5B's claims on length curves (column ``model``: the task): the letter model's reach, the
    number model's accuracy at the lengths paper B's curve is read at (L = x + 17), and §3.6's
    letter model generalising far beyond the number model."""
    claims = []
    for key, task in (("letter_length", "letter"), ("number_length", "number")):
        curve = curves[curves["model"] == task]
        if curve.empty:
            claims.append(not_measured(key, f"no {task} curve"))
            continue
        lengths = sorted(curve["length"].unique())
        claims.append(graded(key, f"{task}: ≥ 90% up to {analysis.longest_ready(curve)} tokens; accuracy measured at "
                             f"{len(lengths)} lengths from {lengths[0]} to {lengths[-1]}", curve))
    table = separation(curves) if {"model", "length", "hops", "accuracy", "n"} <= set(curves.columns) else None
    claims.append(graded("letter_beyond_number", "letter − number accuracy: " + (", ".join(
        f"{row['letter − number']:+.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}] at {int(row['length'])}"
        for _, row in table.iterrows()) if table is not None and len(table) else "no length to compare"), curves))
    return claims


def length_section(runs: list[Run], config: ReportConfig) -> Section:
    from psheads.experiments.lengthgen import length_generalization

    section = Section("length", "Length generalization and discrepancy (paper B, figure 5)",
                      "Accuracy against prompt length from the shipped curves (512 prompts per length), re-measured "
                      "live at a few lengths; the worst-case discrepancy of every head from the stored table.")
    curves = []
    shipped_runs = {run.task: run.shipped for run in runs if run.shipped is not None}
    for task, shipped in shipped_runs.items():
        live = length_generalization(shipped.model, shipped.task, lengths=config.check_lengths,
                                     n=config.check_prompts, seed=config.seed + 1, progress=False)
        if shipped.length_generalization is None:  # a retrained model: only the live lengths
            curves.append(live.assign(model=task))
            continue
        curves.append(shipped.length_generalization.assign(model=task))
        stored = shipped.length_generalization
        merged = live[live["hops"] == "all"].merge(stored[stored["hops"] == "all"], on="length",
                                                    suffixes=(" (live)", " (shipped)"))
        se = np.sqrt(merged["accuracy (shipped)"] * (1 - merged["accuracy (shipped)"]) / merged["n (live)"])
        merged["within 3 SE"] = (merged["accuracy (live)"] - merged["accuracy (shipped)"]).abs() <= 3 * se + 1e-9
        section.tables.append((f"{task}: live re-measurement of the shipped curve (fresh prompts)",
                               merged.assign(model=task)[["model", "length", "accuracy (live)", "n (live)",
                                                          "accuracy (shipped)", "n (shipped)", "within 3 SE"]]))
    if not curves:
        section.claims += [not_measured("letter_length", "no shipped curves"),
                           not_measured("number_length", "no shipped curves"),
                           not_measured("letter_beyond_number", "no shipped curves")]
        return section
    stacked = pd.concat(curves, ignore_index=True)
    section.figures.append(("Accuracy against prompt length", plotting.accuracy_vs_length(stacked)))
    section.claims.extend(length_claims(stacked))
    section.claims.append(_theory_decay(stacked, section))
    return section


def _theory_decay(curves: pd.DataFrame, section: Section) -> Claim:
    points = decay_points(curves)
    section.tables.append(("§3.6: Theorem 3.2's upper bound at each model's figure-5A angle beside its measured "
                           "accuracy", points.round(6)))
    lengths = ", ".join(map(str, sorted(points["length"].unique())))
    return graded("theory_decay", f"{len(points)} points (lengths {lengths})", points)
