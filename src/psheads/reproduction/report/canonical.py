"""The report's section on paper A's canonical tasks under frequency gating, from the stored gated
training sweep (and psheads' causal tests on the shipped models)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import psheads.plotting as plotting
from psheads.reproduction.report.claims import Section, graded, not_measured
from psheads.reproduction.report.inputs import ReportConfig, Run, stored_table
from psheads.reproduction.rules.canonical import SINGLE_BANDS


def _band_accuracy(sweep: pd.DataFrame) -> pd.Series:
    runs = sweep.drop_duplicates(["task", "band", "seed"])
    return runs.groupby(["task", "band"])["accuracy"].mean()


def canonical_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("canonical", "Canonical tasks under frequency gating (paper A)",
                      "Two-layer GPT-J models trained with only some RoPE planes open (gated training sweep: 8 bands × "
                      "3 tasks × 3 seeds), from the stored sweep table.")
    sweep = stored_table(config.data_folder, "gating_sweep.csv", section)
    if sweep is None:
        section.claims += [not_measured(k, "stored sweep table missing")
                           for k in ("index_fast", "retrieval_slow", "induction_both")]
        return section
    section.figures.append(("Accuracy per task and band", plotting.accuracy_by_band(sweep)))
    acc = _band_accuracy(sweep)
    section.tables.append(("Mean accuracy over seeds", acc.unstack("band").reset_index()))

    def at(task: str, band: str) -> float:
        return float(acc.get((task, band), np.nan))

    index = {band: at("index", band) for band in ("fast", "slow", "zero")}
    section.claims.append(graded("index_fast", f"Index: fast planes {index['fast']:.3f}, slow {index['slow']:.3f}, "
                                 f"zero {index['zero']:.3f}", index))
    retrieval = {band: at("retrieval", band) for band in ("slow", "zero", "fast")}
    section.claims.append(graded("retrieval_slow", f"Retrieval: slow {retrieval['slow']:.3f}, zero "
                                 f"{retrieval['zero']:.3f}, fast {retrieval['fast']:.3f}", retrieval))
    # np.max, not max: a missing band (NaN) must stay NaN, whatever its place
    singles = {band: at("partial-induction", band) for band in SINGLE_BANDS}
    induction = {"both": float(np.max([at("partial-induction", "fast+zero"), at("partial-induction", "middle+zero")])),
                 "alone": float(np.max(list(singles.values())))}
    section.claims.append(graded("induction_both", f"partial induction: rotating + static {induction['both']:.3f}, "
                                 "single bands " + ", ".join(f"{band} {value:.3f}" for band, value in singles.items()),
                                 induction))
    causal = stored_table(config.data_folder, "causal_tests.csv", section)
    if causal is not None:
        section.figures.append(("psheads' own causal test on the shipped models (no published counterpart): "
                                "accuracy under interventions", plotting.accuracy_under_ablation(causal)))
    return section
