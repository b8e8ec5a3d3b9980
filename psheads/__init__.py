"""psheads: positional vs symbolic attention heads in RoPE transformers.

The public surface is small: ``RopeLens`` wraps a TransformerLens model and exposes
exact per-frequency RoPE logit decompositions. Lower-level pieces live in
``psheads.geometry`` (pure tensor functions) and ``psheads.backends``.
"""

from psheads import plotting, tasks
from psheads.lens import LayerGeometry, RopeLens, SelfCheckError
from psheads.profile import FrequencyProfile, frequency_profile
from psheads.scoring import ScoreConfig, score_heads, swap_attention
from psheads.training import TrainConfig, train
from psheads.zoo import load_pretrained

__version__ = "0.1.0"

__all__ = [
    "FrequencyProfile",
    "LayerGeometry",
    "RopeLens",
    "ScoreConfig",
    "SelfCheckError",
    "TrainConfig",
    "__version__",
    "frequency_profile",
    "load_pretrained",
    "plotting",
    "score_heads",
    "swap_attention",
    "tasks",
    "train",
]
