"""Score methods: the protocol, the registry and ``ScoreConfig`` (``base``), and the built-ins,
each in its own module with its options and arithmetic (``score_methods()`` lists every registered
method; ``swap_attention``, the swap score's per-swap view, lives next to it).

A score method turns a layer's factored logits (``psheads.measure.engine.KeyLogits``) into
per-prompt, per-head columns, at least ``positional`` and ``symbolic``, each described by the method
(``ScoreMethod``); its options are a frozen dataclass, ``Parameters``. The scoring page's "Your own
score method" is the worked example. The built-ins are exact and avoid every |S|³ cost (see their
modules).
"""

from psheads.measure.methods.anova import AnovaScore, anova_shares, anova_shares_factored
from psheads.measure.methods.base import (
    NONFINITE,
    ScoreConfig,
    ScoreMethod,
    base_attention,
    column_meanings,
    frame_schema,
    get_score_method,
    label,
    parameter_names,
    register_score_method,
    score_config,
    score_methods,
)
from psheads.measure.methods.swap import (
    TILES,
    SwapAttention,
    SwapParameters,
    SwapScore,
    block_attention,
    block_pairs,
    make_blocks,
    skip_threshold,
    swap_attention,
    swap_attention_detail,
    swap_scores,
)

__all__ = [
    "NONFINITE",
    "TILES",
    "AnovaScore",
    "ScoreConfig",
    "ScoreMethod",
    "SwapAttention",
    "SwapParameters",
    "SwapScore",
    "anova_shares",
    "anova_shares_factored",
    "base_attention",
    "block_attention",
    "block_pairs",
    "column_meanings",
    "frame_schema",
    "get_score_method",
    "label",
    "make_blocks",
    "parameter_names",
    "register_score_method",
    "score_config",
    "score_methods",
    "skip_threshold",
    "swap_attention",
    "swap_attention_detail",
    "swap_scores",
]
