"""The report's section on paper B's training recipe against psheads' own, and its ablations
(paper B, figures 2 and 5B), from the stored cells of ``scripts/train_paper_b.py``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

import psheads.plotting as plotting
from psheads.interface.reprs import layer_text
from psheads.reproduction.report.claims import Claim, Section
from psheads.reproduction.report.inputs import RECIPE, RECIPE_FOLDER, ReportConfig, Run, psheads_recipe_runs
from psheads.reproduction.report.learning import placement
from psheads.reproduction.report.length_generalization import length_claims
from psheads.reproduction.report.seeds import seeds_table
from psheads.results import analysis, schema

RECIPE_LENGTHS = (200, 850, 1000)
"""The lengths paper B's figure 5B is read at."""


def recipe_cells(folder: Path) -> pd.DataFrame:
    """One row per stored cell of ``scripts/train_paper_b.py``: recipe variant, seed, device, the
    best-validation and final steps and, for each of the two checkpoints, the reach (≥ 90%) and
    the accuracy at ``RECIPE_LENGTHS``; the pure layers at the last checkpoint."""
    rows = []
    for path in sorted(folder.glob("*_run.json")):
        stem = path.name.removesuffix("_run.json")
        curves = folder / f"{stem}_lengthgen.csv"
        if not curves.is_file():  # a cell still running: its length table is written last
            continue
        record = json.loads(path.read_text())
        curve, dynamics = pd.read_csv(curves), schema.ordered_labels(pd.read_csv(folder / f"{stem}_dynamics.csv"))
        row = {"task": record["task"], "variant": record["variant"], "seed": record["training"]["seed"],
               "device": record["machine"].get("device", "cpu"), "best step": record["best_step"],
               "final step": record["final_step"]}
        for checkpoint in ("best", "final"):
            part = curve[curve["checkpoint"] == checkpoint]
            row[f"≥ 90% up to ({checkpoint})"] = analysis.longest_ready(part)
            row.update({f"at {length} ({checkpoint})": analysis.accuracy_at(part, length) for length in RECIPE_LENGTHS})
        row["pure positional layers"] = layer_text(analysis.pure_layers(dynamics, "positional"))
        row["pure symbolic layers"] = layer_text(analysis.pure_layers(dynamics, "symbolic"))
        rows.append(row | {"_dynamics": dynamics, "_curve": curve})
    return pd.DataFrame(rows)


def _psheads_recipe_claims(runs: list[Run]) -> list[Claim]:
    """Figure 5B's length claims (the shipped ``-psheads`` curves) and figure 2C's placement claims
    (every stored seed) for psheads' own recipe, labelled as such."""
    curves = [run.shipped.length_generalization.assign(model=run.task) for run in runs
              if run.shipped is not None and run.shipped.length_generalization is not None]
    claims = (length_claims(pd.concat(curves, ignore_index=True)) if curves else []) + list(placement(runs))
    return [replace(claim, measured="psheads' recipe: " + claim.measured, psheads_recipe=True) for claim in claims]


def _ablation_notes(cells: pd.DataFrame) -> list[str]:
    """Per letter ablation (seed 0): the change at 850 tokens against the whole recipe, beside the
    seed-to-seed spread of the whole recipe."""
    letter = cells[cells["task"] == "letter"]
    recipe = letter[letter["variant"] == RECIPE]
    base = recipe[recipe["seed"] == 0]
    if base.empty:
        return []
    notes = []
    for checkpoint in ("best", "final"):
        column = f"at 850 ({checkpoint})"
        reference = float(base[column].iloc[0])
        changes = {row["variant"]: float(row[column]) - reference
                   for row in letter[(letter["seed"] == 0) & (letter["variant"] != RECIPE)].to_dict("records")}
        if not changes:
            continue
        spread = float(recipe[column].max() - recipe[column].min())
        beyond = [name for name, change in changes.items() if abs(change) > spread]
        notes.append(f"Letter accuracy at 850 tokens, {checkpoint} checkpoint, seed 0: {reference:.2f} with the whole "
                     "recipe; switching one part back changes it by "
                     + ", ".join(f"{change:+.2f} ({name})" for name, change in changes.items())
                     + f". Beyond the whole recipe's spread over its {len(recipe)} seeds ({spread:.2f}): "
                     + (", ".join(beyond) if beyond else "none") + ".")
    return notes


def recipe_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("recipe", "Paper B's recipe against psheads' own, and its ablations (paper B, figures 2 and 5B)",
                      "The shipped number and letter models and every seed above were trained by "
                      "scripts/train_paper_b.py with TrainConfig.paper_b() and the letter task's paper-b sampling "
                      "(gradient clipping, no decay on biases and LayerNorm, a fixed set of 432,000 prompts, the "
                      "best-validation checkpoint, exact GELU); each ablation switches one part back. Each model's "
                      "length curve: 128 prompts per length, hop counts 1–4 in equal shares. The claims below apply "
                      "the same rules to psheads' own recipe (the shipped number-psheads and letter-psheads models "
                      "and their stored seeds), for comparison.")
    folder = config.data_folder / RECIPE_FOLDER
    cells = recipe_cells(folder) if folder.is_dir() else pd.DataFrame()
    if cells.empty:
        section.notes.append(f"No finished cell of scripts/train_paper_b.py in {folder}; nothing is measured here.")
    else:
        shown = [column for column in cells.columns if not column.startswith("_")]
        section.tables.append(("Per cell: checkpoints, reach and accuracy at paper B's lengths, pure layers",
                               cells[shown].round(3)))
        recipe = cells[cells["variant"] == RECIPE]
        curves = pd.concat([row["_curve"][row["_curve"]["checkpoint"] == "best"]
                            .assign(model=f"{row['task']} seed {row['seed']}") for row in recipe.to_dict("records")],
                           ignore_index=True)
        section.figures.append(("Paper B's recipe: accuracy against prompt length (best-validation checkpoints)",
                                plotting.accuracy_vs_length(curves[["model", "length", "hops", "accuracy", "n"]])))
        section.notes.extend(_ablation_notes(cells))
        section.notes.append(f"Trained on: {', '.join(sorted(set(cells['device'])))} (fp32 throughout).")
    ours = psheads_recipe_runs(config)
    section.tables.append(("psheads' recipe: the number-psheads and letter-psheads models (seed 0) and stored seeds",
                           seeds_table(ours)))
    section.claims.extend(_psheads_recipe_claims(ours))
    return section
