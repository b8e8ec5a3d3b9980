"""psheads: positional vs symbolic attention heads in RoPE transformers.

The public surface is small: ``score_heads`` and ``frequency_profile`` (configs: ``ScoreConfig``,
``ProfileConfig``, ``PromptOptions``), ``RopeLens`` for exact per-frequency RoPE logit
decompositions, gating and plane hooks, score-method registration, tasks, training, the shipped
models, ``evaluate``, ablation (``ablate``, ``Intervention``) and length generalization
(``length_generalization``, ``discrepancy``; ``theory`` for Theorem 3.1's constructions). Lower
layers (``psheads.engine``, ``psheads.methods``, ``psheads.backends``, ``psheads.families``,
``psheads.layer``, ``psheads.geometry``) are reachable by module; the architecture page of the
docs shows how they fit.
"""

from psheads import plotting, tasks, theory
from psheads.ablation import Intervention, ablate
from psheads.evaluation import evaluate
from psheads.layer import LayerGeometry
from psheads.lengthgen import length_generalization
from psheads.lens import RopeLens, SelfCheckError
from psheads.margins import discrepancy
from psheads.methods import ScoreMethod, register_score_method, score_methods
from psheads.profile import FrequencyProfile, ProfileConfig, frequency_profile
from psheads.prompts import PromptOptions
from psheads.scoring import ScoreConfig, score_heads, swap_attention
from psheads.training import TrainConfig, train
from psheads.zoo import load_pretrained

__version__ = "0.1.0"

__all__ = [
    "FrequencyProfile",
    "Intervention",
    "LayerGeometry",
    "ProfileConfig",
    "PromptOptions",
    "RopeLens",
    "ScoreConfig",
    "ScoreMethod",
    "SelfCheckError",
    "TrainConfig",
    "__version__",
    "ablate",
    "discrepancy",
    "evaluate",
    "frequency_profile",
    "length_generalization",
    "load_pretrained",
    "plotting",
    "register_score_method",
    "score_heads",
    "score_methods",
    "swap_attention",
    "tasks",
    "theory",
    "train",
]
