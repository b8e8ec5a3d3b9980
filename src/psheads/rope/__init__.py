"""The exact decomposition of a RoPE model's attention logits into one term per frequency plane.

``geometry`` (pure tensor maths), ``layer`` (one attention layer's facts and logits),
``families`` (architecture quirks as data), ``backends`` (the only code that knows
TransformerLens, Hugging Face and torch internals) and ``lens`` (``RopeLens``: self-check,
decompositions, gating, plane hooks).
"""
