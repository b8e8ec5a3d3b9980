"""Score methods: the protocol, the registry and ``ScoreConfig`` (``base``), and the two built-ins,
each in its own module with its options and arithmetic: ``swap`` (paper B's swap score, and
``swap_attention``, its per-swap view) and ``anova`` (all-permutation shares).

A score method turns a layer's factored logits (``psheads.measure.engine.KeyLogits``) into
per-prompt, per-head columns, at least ``positional`` and ``symbolic``. Register your own; its
options are a frozen dataclass, ``Parameters``, that ``score_heads`` fills from its keyword
arguments and records in ``df.attrs["config"]``::

    @dataclass(frozen=True)
    class TopRowsParameters:
        k: int = 4

    class TopRows:
        name = "toprows"
        columns = ("positional", "symbolic")
        Parameters = TopRowsParameters

        def min_swappable(self, config):
            return config.parameters.k

        def score(self, logits, config):
            M = logits.matrix()                      # [*lead, n, n], soft-capped
            rows = M.mean(-1).var(-1, correction=0)  # spread of the position effects
            cols = M.mean(-2).var(-1, correction=0)  # spread of the token effects
            total = (rows + cols).clamp_min(1e-300)
            return {"positional": rows / total, "symbolic": cols / total}

    psheads.register_score_method(TopRows())
    psheads.score_heads(model, prompts, method="toprows", k=8)

Both built-ins are exact and avoid every |S|³ cost (see their modules).
"""

from psheads.measure.methods.anova import AnovaScore, anova_shares, anova_shares_factored
from psheads.measure.methods.base import (
    NONFINITE,
    ScoreConfig,
    ScoreMethod,
    base_attention,
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
