"""The report's section on real LLMs: paper B's table 3 and §3.7 on the zoo LLMs' stored task
tables, and paper A's analysis on the stored Gemma 3 270M tables."""

from __future__ import annotations

import pandas as pd

import psheads.plotting as plotting
from psheads.reproduction.report.claims import Claim, Section, graded, not_measured
from psheads.reproduction.report.inputs import ReportConfig, Run, stored_table

LLM_TASK_TABLES = {"gemma-3-270m": "gemma_llm_tasks.csv", "smollm2-135m": "smollm2_llm_tasks.csv",
                   "qwen2.5-coder-0.5b": "qwen2.5_llm_tasks.csv"}
"""The stored LLM-task tables of the zoo LLMs (``scripts/llm_tasks.py``)."""
PAPER_A_PROMPTS = "binding"
"""The stored Gemma rows paper A's claims are graded on: its setting, binding prompts (not prose windows)."""


def llm_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("llm", "Real LLMs (paper B: frontier LLMs; paper A: gemma-2-2b-it; psheads: the zoo LLMs)",
                      "Paper B's table 3 beside the zoo LLMs on the same kind of 1-hop prompts (stored tables of "
                      "scripts/llm_tasks.py), and paper A's analysis on Gemma 3 270M (swap score on binding prompts, "
                      "paper A's setting; the figures show the same rows). Different and much smaller models than "
                      "the papers', so agreement in direction is what can be asked.")
    section.claims += _llm_task_claims(config)
    summary = stored_table(config.data_folder, "gemma_summary.csv", section)
    correlation = stored_table(config.data_folder, "gemma_correlation.csv", section)
    scores = stored_table(config.data_folder, "gemma_scores.csv", section)
    if summary is None or correlation is None:
        section.claims += [not_measured("llm_early_late", "stored Gemma tables missing"),
                           not_measured("llm_correlation", "stored Gemma tables missing")]
        return section
    other_model = "psheads measures Gemma 3 270M (base) where paper A measures gemma-2-2b-it"
    rows = summary[(summary["comparison"] == "early vs late") & (summary["prompts"] == PAPER_A_PROMPTS)
                   & (summary["method"] == "swap") & (summary["score"] == "positional")].set_index("group")
    early, late = float(rows.loc["early", "median"]), float(rows.loc["late", "median"])
    low, high = float(rows.loc["late - early", "median_ci_low"]), float(rows.loc["late - early", "median_ci_high"])
    section.claims.append(graded("llm_early_late", f"binding prompts: median s_POS {early:.3f} (layers "
                                 f"{rows.loc['early', 'layers']}) vs {late:.3f} (layers {rows.loc['late', 'layers']}), "
                                 f"late − early 95% CI [{low:.3f}, {high:.3f}]", (low, high), comparable=other_model))
    r = correlation[(correlation["prompts"] == PAPER_A_PROMPTS) & (correlation["method"] == "swap")
                    & (correlation["layer_kind"] == "all")].iloc[0]
    heads = scores[(scores["prompts"] == PAPER_A_PROMPTS) & (scores["method"] == "swap")] if scores is not None \
        and {"prompts", "method"} <= set(scores.columns) else None
    section.claims.append(graded("llm_correlation", f"binding prompts: r = {r['r']:.3f} over {int(r['n'])} heads "
                                 f"(95% CI {r['ci_low']:.3f} to {r['ci_high']:.3f})",
                                 {"r": float(r["r"]), "ci_high": float(r["ci_high"]), "n": int(r["n"]),
                                  **({"positional": heads["positional"].tolist(),
                                      "symbolic": heads["symbolic"].tolist()} if heads is not None else {})},
                                 comparable=other_model))
    if scores is not None:
        shown = scores[(scores["prompts"] == PAPER_A_PROMPTS) & (scores["method"] == "swap")] \
            if {"prompts", "method"} <= set(scores.columns) else scores
        section.figures.append(("s_POS of every head", plotting.score_heatmap(shown, "positional")))
        section.figures.append(("Scores per layer", plotting.layer_distributions(shown)))
        section.figures.append(("s_POS against s_SYM", plotting.score_correlation(shown)))
    return section


def _llm_task_claims(config: ReportConfig) -> list[Claim]:
    """Table 3's pattern and §3.7's thresholds on the zoo LLMs' stored task tables."""
    tables = {model: pd.read_csv(config.data_folder / name) for model, name in LLM_TASK_TABLES.items()
              if (config.data_folder / name).is_file()}
    if not tables:
        return [not_measured(key, "no stored LLM-task table")
                for key in ("llm_table_3", "llm_thresholds", "llm_letter_above_number")]

    def cell(table: pd.DataFrame, task: str, window: int) -> str:
        row = table[(table["task"] == task) & (table["window"] == window)]
        return "—" if row.empty else f"{float(row['accuracy'].iloc[0]):.2f}"

    measured = "; ".join(f"{model}: number {cell(t, 'llm-number', 12)} / {cell(t, 'llm-number', 32)} / "
                         f"{cell(t, 'llm-number', 100)}, letter {cell(t, 'llm-letter', 12)} / "
                         f"{cell(t, 'llm-letter', 32)} / {cell(t, 'llm-letter', 100)} at 12 / 32 / 100 items"
                         for model, t in tables.items())
    return [graded("llm_table_3", measured, tables), graded("llm_thresholds", measured, tables),
            graded("llm_letter_above_number", measured, tables)]
