"""psheads: positional vs symbolic attention heads in RoPE transformers.

The public surface is small: ``score_heads`` and ``frequency_profile`` (configs: ``ScoreConfig``,
``ProfileConfig``, ``PromptOptions``), ``RopeLens`` for exact per-frequency RoPE logit
decompositions, gating and plane hooks, score-method registration, tasks, training, the shipped
models, ``evaluate``, ablation (``ablate``, ``Intervention``), length generalization
(``length_generalization``, ``discrepancy``; ``theory`` for Theorem 3.1's constructions) and
result frames on disk with their provenance (``save_frame``, ``load_frame``). Lower layers
(``psheads.engine``, ``psheads.methods``, ``psheads.backends``, ``psheads.families``,
``psheads.layer``, ``psheads.geometry``) are reachable by module; the architecture page of the
docs shows how they fit.

``import psheads`` is cheap: each public name imports its submodule (and torch) the first time
it is used.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from psheads.progress import quiet_tqdm_auto  # noqa: E402  (before transformers imports tqdm.auto)

quiet_tqdm_auto()

_SUBMODULES = ("plotting", "tasks", "theory")
"""Public names that are submodules."""

_HOMES = {
    "FrequencyProfile": "profile",
    "Intervention": "ablation",
    "LayerGeometry": "layer",
    "ProfileConfig": "profile",
    "PromptOptions": "prompts",
    "RopeLens": "lens",
    "ScoreConfig": "scoring",
    "ScoreMethod": "methods",
    "SelfCheckError": "lens",
    "TrainConfig": "training",
    "ablate": "ablation",
    "discrepancy": "margins",
    "evaluate": "evaluation",
    "frequency_profile": "profile",
    "length_generalization": "lengthgen",
    "load_frame": "frames",
    "load_pretrained": "zoo",
    "register_score_method": "methods",
    "save_frame": "frames",
    "score_heads": "scoring",
    "score_methods": "methods",
    "swap_attention": "scoring",
    "train": "training",
}
"""The submodule that defines each public function and class."""

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
    "load_frame",
    "load_pretrained",
    "plotting",
    "register_score_method",
    "save_frame",
    "score_heads",
    "score_methods",
    "swap_attention",
    "tasks",
    "theory",
    "train",
]

if TYPE_CHECKING:
    from psheads import plotting, tasks, theory
    from psheads.ablation import Intervention, ablate
    from psheads.evaluation import evaluate
    from psheads.frames import load_frame, save_frame
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


def __getattr__(name: str) -> Any:
    """Import a public name (or any submodule, e.g. ``psheads.zoo``) on first use (PEP 562)."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in _SUBMODULES or (not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}")):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
