"""The reproduction report: every claim of both papers beside psheads' own measurement, in one page.

``reproduce()`` measures what is quick on the shipped models when it runs (scores, frequency
profiles, a spot check of the length-generalization curves, the theory constructions) and reads
the stored tables of the long experiments (training dynamics of every seed, length
generalization, discrepancy, the gated training sweep, the Gemma 3 270M analysis). Each claim
gets a verdict by a rule the report states next to it. ``Report.to_html()`` is one
self-contained file: plotly.js inline, no network.

Every number comes from psheads or from a stored table when the report runs; only the papers'
published values (``psheads.reproduction.references.PUBLISHED``) are typed in.

One module per role: ``inputs`` (the config, the runs and the stored tables the report reads),
``claims`` (claims graded by the rules of ``psheads.reproduction.rules``, and sections), one
module per section in the report's order (``learning``, ``frequencies``,
``length_generalization``, ``recipe``, ``theorems``, ``canonical``, ``llms``, ``seeds``,
``predictions``, ``not_tested``), ``build`` (``reproduce``) and ``render`` (the ``Report`` and
its HTML page).
"""

from __future__ import annotations

from psheads.reproduction.report.build import SECTIONS, context, reproduce
from psheads.reproduction.report.canonical import canonical_section
from psheads.reproduction.report.claims import Claim, Section, graded
from psheads.reproduction.report.frequencies import dominant_plane, frequency_section, frequency_table, plane_geometry
from psheads.reproduction.report.inputs import (
    RECIPE,
    RECIPE_FOLDER,
    TASKS,
    ReportConfig,
    Run,
    load_runs,
    psheads_recipe_runs,
    recipe_seeds,
    retrained,
)
from psheads.reproduction.report.learning import (
    index_flow,
    learning_section,
    pure_before_convergence,
    pure_counts,
    relabelled,
)
from psheads.reproduction.report.length_generalization import length_section
from psheads.reproduction.report.llms import LLM_TASK_TABLES, llm_section
from psheads.reproduction.report.not_tested import not_tested_section
from psheads.reproduction.report.predictions import prediction_section
from psheads.reproduction.report.recipe import RECIPE_LENGTHS, recipe_cells, recipe_section
from psheads.reproduction.report.render import Report, render_html
from psheads.reproduction.report.seeds import seeds_section, seeds_table
from psheads.reproduction.report.theorems import figure_5a_curves, second_layer_ids, theory_section
from psheads.reproduction.rules import VERDICT_COLORS

__all__ = [
    "LLM_TASK_TABLES",
    "RECIPE",
    "RECIPE_FOLDER",
    "RECIPE_LENGTHS",
    "SECTIONS",
    "TASKS",
    "VERDICT_COLORS",
    "Claim",
    "Report",
    "ReportConfig",
    "Run",
    "Section",
    "canonical_section",
    "context",
    "dominant_plane",
    "figure_5a_curves",
    "frequency_section",
    "frequency_table",
    "graded",
    "index_flow",
    "learning_section",
    "length_section",
    "llm_section",
    "load_runs",
    "not_tested_section",
    "plane_geometry",
    "prediction_section",
    "psheads_recipe_runs",
    "pure_before_convergence",
    "pure_counts",
    "recipe_cells",
    "recipe_section",
    "recipe_seeds",
    "relabelled",
    "render_html",
    "reproduce",
    "retrained",
    "second_layer_ids",
    "seeds_section",
    "seeds_table",
    "theory_section",
]
