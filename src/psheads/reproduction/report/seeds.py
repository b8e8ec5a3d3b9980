"""The report's section on seed robustness: every seed of a recipe side by side, and whether the
placement and learning-order verdicts hold in each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

import psheads.plotting as plotting
from psheads.interface.reprs import layer_text
from psheads.reproduction.report.claims import Section
from psheads.reproduction.report.inputs import TASKS, ReportConfig, Run
from psheads.reproduction.report.learning import learning_order, placement
from psheads.results import analysis


def seeds_table(runs: list[Run]) -> pd.DataFrame:
    """Per run: final accuracy (all hops), pure layers, and when each hop count was learned."""
    rows = []
    for run in runs:
        final = run.final_accuracy.set_index(run.final_accuracy["hops"].astype(str))["accuracy"]
        n = run.final_accuracy.set_index(run.final_accuracy["hops"].astype(str))["n"]
        row = {"task": run.task, "seed": run.seed, "accuracy": float(final.get("all", np.nan)),
               "test prompts": int(n.get("all", 0)),
               "pure positional layers": layer_text(analysis.pure_layers(run.dynamics, "positional")),
               "pure symbolic layers": layer_text(analysis.pure_layers(run.dynamics, "symbolic"))}
        row.update({f"{hops} hop learned at": step for hops, step in analysis.learned_at(run.dynamics).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def seeds_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("seeds", "Seed robustness",
                      "Every seed trained with the same recipe. A difference from paper B that holds in every seed "
                      "is a property of the recipe, one that changes with the seed is luck.")
    table = seeds_table(runs)
    section.tables.append(("Per seed: final accuracy, where the pure heads sit, when each hop count was learned",
                           table))
    for task in TASKS:
        stacked = pd.concat([run.dynamics.assign(model=f"{task} seed {run.seed}") for run in runs if run.task == task],
                            ignore_index=True)
        section.figures.append((f"{task}: pure heads over training, per seed", plotting.pure_head_counts(stacked)))
    seeds = {task: sorted(table.loc[table["task"] == task, "seed"]) for task in TASKS}
    section.notes.append("Seeds: " + "; ".join(f"{task} {', '.join(map(str, s))}" for task, s in seeds.items()) + ".")
    if min(len(s) for s in seeds.values()) < 2:
        section.notes.append("Fewer than two seeds per task are stored: nothing can be said about robustness yet.")
    pooled = placement(runs) + learning_order(runs)
    per_seed = seed_verdicts(runs)
    if not per_seed.empty:
        section.tables.append(("Each claim graded on each seed alone (the claims above pool the seeds)", per_seed))
    for claim in pooled:
        verdicts = per_seed[per_seed["claim"] == claim.published.claim].drop(columns=["claim", "task"]).iloc[0] \
            if claim.published.claim in set(per_seed.get("claim", [])) else pd.Series(dtype=object)
        section.notes.append(f"{claim.published.claim}: {seed_agreement(verdicts.dropna().to_dict())} "
                             f"(pooled: {claim.verdict}; {claim.reason})")
    return section


CLAIM_TASKS = ("number", "number", "letter", "number", "letter")
"""The task of each claim ``placement`` and ``learning_order`` return, in their order."""


def seed_verdicts(runs: list[Run]) -> pd.DataFrame:
    """Figure 2's placement and learning-order claims graded on each seed's run alone: one row per claim,
    one column per seed (``seed 0``, …), NaN where the claim's task has no run of that seed."""
    rows = []
    # placement: number positional, number symbolic, letter symbolic; learning order: number, letter
    for index, (claim, task) in enumerate(zip(placement([]) + learning_order([]), CLAIM_TASKS, strict=True)):
        row: dict[str, object] = {"claim": claim.published.claim, "task": task}
        for run in runs:
            if run.task == task:
                alone = placement([run]) + learning_order([run])
                row[f"seed {run.seed}"] = alone[index].verdict
        rows.append(row)
    return pd.DataFrame(rows)


def seed_agreement(verdicts: Mapping[Any, str]) -> str:
    """What per-seed verdicts (``{"seed 0": verdict, …}``) say about robustness, in words."""
    if not verdicts:
        return "no seed measured"
    if len(set(verdicts.values())) == 1:
        verdict = next(iter(verdicts.values()))
        return f"the same in every seed ({len(verdicts)}): {verdict}"
    return "depends on the seed: " + ", ".join(f"{seed} {verdict}" for seed, verdict in verdicts.items())
