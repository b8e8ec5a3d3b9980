"""Summaries of score frames and learning dynamics: pure pandas/numpy functions, no model calls.

Every summary takes a reduced ``score_heads`` frame (one row per (layer, head) or, with
``by_frequency=True``, per (layer, head, plane)) and returns a tidy frame: one row per group and
score column, with the numbers in named columns. Frames scored on different prompt sets or models
can be concatenated with a column telling them apart and summarised together through ``by``.

- ``summaries``: ``layer_summary`` (median and quantiles over the heads of each layer),
  ``label_counts``; ``early_late`` and ``local_global``, two groups of layers compared, with
  bootstrap confidence intervals for each group's median and for the difference of the medians
  (whole layers resampled: ``layer_bootstrap_medians``); ``layer_kinds`` and ``add_layer_kind``
  (which layers are local (sliding window) or global, read from a ``RopeLens``'s geometry or given
  as a list); ``correlation`` (Pearson r with a Fisher or bootstrap interval, and Spearman ρ across
  heads); ``kv_group_agreement`` (whether heads that share a KV head (GQA) share a role, against a
  within-layer shuffle).
- ``frequency``: ``frequency_summary`` and ``band_summary``, per-plane scores of a
  ``by_frequency`` frame per frequency ID and per frequency band (``add_frequency_band``).
- ``statistics``: what those are built on, on plain arrays: ``layer_bootstrap_medians``,
  intervals, Pearson r, and ``difference_of_medians`` (a bootstrap comparison with a verdict).
- ``dynamics``: learning dynamics (a ``dynamics.csv`` table) and length curves: ``hop_accuracy``,
  ``learned_at``, ``pure_layers``, ``first_pure``, ``accuracy_at`` and ``longest_ready``.

Medians and quantiles skip NaN scores (heads labelled ``non-finite``); ``n`` counts the finite
values each row summarises. Every name is importable from here (``psheads.results.analysis.X``).
"""

from __future__ import annotations

# every public name of the package, as before the split; __all__ lists the ones it advertises
from psheads.results.analysis.dynamics import (  # noqa: F401
    READY,
    accuracy_at,
    first_pure,
    hop_accuracy,
    learned_at,
    longest_ready,
    pure_layers,
)
from psheads.results.analysis.frequency import (  # noqa: F401
    UNROTATED,
    add_frequency_band,
    band_summary,
    frequency_summary,
)
from psheads.results.analysis.statistics import (  # noqa: F401
    MIN_LAYERS,
    difference_of_medians,
    layer_bootstrap_medians,
    quantile_name,
)
from psheads.results.analysis.summaries import (  # noqa: F401
    GLOBAL,
    LOCAL,
    SCORE_COLUMNS,
    add_layer_kind,
    check_scores,
    column_names,
    correlation,
    early_late,
    kv_group_agreement,
    label_counts,
    layer_kinds,
    layer_summary,
    local_global,
)

__all__ = [
    "SCORE_COLUMNS",
    "add_frequency_band",
    "add_layer_kind",
    "band_summary",
    "correlation",
    "early_late",
    "frequency_summary",
    "label_counts",
    "layer_kinds",
    "layer_summary",
    "local_global",
]
