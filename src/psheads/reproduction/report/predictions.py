"""The report's section on psheads' own prediction (not a claim of either paper): the trained
heads' worst-case discrepancy against length, from Theorem 3.2 and Remark 3.2."""

from __future__ import annotations

import psheads.plotting as plotting
from psheads.reproduction.report.claims import Section, graded, not_measured
from psheads.reproduction.report.inputs import TASKS, ReportConfig, Run, stored_table
from psheads.results import analysis


def prediction_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("predictions", "psheads' own predictions (not claims of either paper)",
                      "Paper B never measures trained heads' discrepancy: figure 5A bounds the hand-built "
                      "constructions, and Remark 3.2 promises \"away from zero\" only at θ = 0. What follows is "
                      "psheads' prediction from Theorem 3.2 for the trained models, graded like the papers' claims.")
    shipped_runs = {run.task: run for run in runs if run.shipped is not None}
    margins = stored_table(config.data_folder, "lengthgen_discrepancy.csv", section)
    if margins is None or set(shipped_runs) != set(TASKS):
        section.claims.append(not_measured("margins", "stored discrepancy table or a shipped model missing"))
        return section
    section.figures.append(("Worst-case normalised discrepancy against length",
                            plotting.discrepancy_vs_length(margins)))
    last = margins[margins["length"] == margins["length"].max()]
    positional = last[(last["model"] == "number")
                      & last["layer"].isin(analysis.pure_layers(shipped_runs["number"].dynamics, "positional"))]
    symbolic = margins[(margins["model"] == "letter")
                       & margins["layer"].isin(analysis.pure_layers(shipped_runs["letter"].dynamics, "symbolic"))]
    shrunk = int((positional["normalised"] <= 0).sum())
    kept = symbolic.groupby("layer")["normalised"].min()
    kept_positive = int((kept > 0).sum())
    if not len(positional) or not len(kept):
        section.claims.append(not_measured("margins", "no pure positional number head or pure symbolic letter layer"))
        return section
    section.claims.append(graded(
        "margins", f"at {int(last['length'].iloc[0])} tokens {shrunk} of {len(positional)} pure positional number "
        f"heads have normalised discrepancy ≤ 0; {kept_positive} of {len(kept)} pure symbolic letter layers stay > 0 "
        "at every length", (shrunk / len(positional), kept_positive / len(kept))))
    return section
