"""psheads: positional vs symbolic attention heads in RoPE transformers.

The public surface is small: ``score_heads`` and ``frequency_profile`` (configs: ``ScoreConfig``,
``ProfileConfig``, ``PromptOptions``), ``RopeLens`` for exact per-frequency RoPE logit
decompositions, gating and plane hooks, score-method registration, tasks, training and the
shipped models. Lower layers (``psheads.engine``, ``psheads.methods``, ``psheads.backends``,
``psheads.families``, ``psheads.layer``, ``psheads.geometry``) are reachable by module; the
architecture page of the docs shows how they fit.
"""

from psheads import plotting, tasks
from psheads.evaluation import evaluate
from psheads.layer import LayerGeometry
from psheads.lens import RopeLens, SelfCheckError
from psheads.methods import ScoreMethod, register_score_method, score_methods
from psheads.profile import FrequencyProfile, ProfileConfig, frequency_profile
from psheads.prompts import PromptOptions
from psheads.scoring import ScoreConfig, score_heads, swap_attention
from psheads.training import TrainConfig, train
from psheads.zoo import load_pretrained

__version__ = "0.1.0"

__all__ = [
    "FrequencyProfile",
    "LayerGeometry",
    "ProfileConfig",
    "PromptOptions",
    "RopeLens",
    "ScoreConfig",
    "ScoreMethod",
    "SelfCheckError",
    "TrainConfig",
    "__version__",
    "evaluate",
    "frequency_profile",
    "load_pretrained",
    "plotting",
    "register_score_method",
    "score_heads",
    "score_methods",
    "swap_attention",
    "tasks",
    "train",
]
