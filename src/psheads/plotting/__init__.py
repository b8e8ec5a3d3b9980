"""Figures: pure functions from psheads frames to ``plotly.graph_objects.Figure``.

No computation beyond reshaping and the summaries of ``psheads.results.analysis``, no ``.show()``, no
file I/O. Every figure uses one clean template (``TEMPLATE``, on plotly's ``simple_white``);
figures coloured by layer share one colour per layer (``layer_colors``). Each function checks its
input and names the psheads function that makes the frame it needs.

The figures live in one module per domain (``scores``, ``frequencies``, ``training``, ``lengthgen``,
``theory``, ``ablation``, ``gating_sweep``, ``policy``), on the shared ``style`` and ``checks``; import them from here.
"""

from __future__ import annotations

from psheads.plotting.ablation import accuracy_under_ablation
from psheads.plotting.frequencies import frequency_curves, frequency_scores, frequency_usage, plane_logits
from psheads.plotting.gating_sweep import accuracy_by_band
from psheads.plotting.lengthgen import accuracy_vs_length
from psheads.plotting.policy import policy_curves, policy_map, random_distribution
from psheads.plotting.scores import (
    attention_under_swap,
    layer_distributions,
    local_global,
    score_correlation,
    score_heatmap,
    score_plane,
)
from psheads.plotting.style import HOP_COLORS as HOP_COLORS  # the colour tables: public, outside __all__
from psheads.plotting.style import KIND_COLORS as KIND_COLORS
from psheads.plotting.style import LABEL_COLORS as LABEL_COLORS
from psheads.plotting.style import LAYER_COLORSCALE, TEMPLATE, layer_colors
from psheads.plotting.style import SCORE_COLORS as SCORE_COLORS
from psheads.plotting.style import SEQUENTIAL as SEQUENTIAL
from psheads.plotting.theory import discrepancy_vs_length, theorem_bounds
from psheads.plotting.training import accuracy_by_hops, hop_attention, learning_dynamics, pure_head_counts

__all__ = [
    "LAYER_COLORSCALE", "TEMPLATE", "accuracy_by_band", "accuracy_by_hops", "accuracy_under_ablation",
    "accuracy_vs_length", "attention_under_swap", "discrepancy_vs_length", "frequency_curves", "frequency_scores",
    "frequency_usage", "hop_attention", "layer_colors", "layer_distributions", "learning_dynamics", "local_global",
    "plane_logits", "policy_curves", "policy_map", "pure_head_counts", "random_distribution", "score_correlation",
    "score_heatmap", "score_plane", "theorem_bounds",
]
