"""psheads: positional vs symbolic attention heads in RoPE transformers.

The public surface is small: ``score_heads`` and ``frequency_profile`` (configs: ``ScoreConfig``,
``ProfileConfig``, ``PromptOptions``), ``RopeLens`` for exact per-frequency RoPE logit
decompositions, gating and plane hooks, score-method registration, tasks, training, the shipped
models, ``evaluate``, ablation (``ablate``, ``Intervention``), length generalization
(``length_generalization``, ``discrepancy``; ``theory`` for Theorem 3.1's constructions) and
result frames on disk with their provenance (``save_frame``, ``load_frame``).

The package's folders are the architecture's layers, from the ground up (``LAYERS``); a module
imports only from its own layer and the layers below it, and a test holds that contract. The
architecture page of the docs shows how they fit.

``import psheads`` is cheap: each public name imports its submodule (and torch) the first time
it is used. The flat module names of psheads 0.1 (``psheads.zoo``, ``psheads.scoring``, …) keep
working: ``MOVED`` maps each to its home.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

from psheads.interface.progress import quiet_tqdm_auto  # before transformers imports tqdm.auto
from psheads.interface.version import __version__

quiet_tqdm_auto()

LAYERS = (
    ("data", "files the library reads at run time, shipped inside the package"),
    ("interface", "how every layer meets its caller: the version, argument checks, config dicts, progress bars, "
                  "rich views, files written whole"),
    ("results", "the result frames: their schema, files and summaries"),
    ("rope", "the exact per-plane decomposition of a RoPE model's attention logits"),
    ("tasks", "the task protocol, its registry and the tasks"),
    ("measure", "measurements of a model on prompts: head scores, frequency usage, margins, accuracy"),
    ("models", "models psheads builds, trains or ships: the zoo, training, Theorem 3.1's constructions"),
    ("policy", "head maps as KV-cache policies: files serving stacks read, windowed forwards, the KV kept"),
    ("experiments", "models run on tasks across conditions: lengths, ablations, gated sweeps"),
    ("plotting", "figures: pure functions frame → plotly Figure"),
    ("reproduction", "the papers' published values and the reproduction report"),
    ("cli", "the command line"),
)
"""The layers from the ground up: (name, what it holds). A module imports only from its own layer
and the layers before it (``tests/test_architecture.py``)."""

MOVED = {
    "config": "interface.config",
    "validation": "interface.validation",
    "progress": "interface.progress",
    "reprs": "interface.reprs",
    "schema": "results.schema",
    "frames": "results.files",
    "analysis": "results.analysis",
    "geometry": "rope.geometry",
    "layer": "rope.layer",
    "families": "rope.families",
    "backends": "rope.backends",
    "lens": "rope.lens",
    "prompts": "measure.prompts",
    "engine": "measure.engine",
    "methods": "measure.methods",
    "scoring": "measure.scoring",
    "profile": "measure.frequency_profile",
    "margins": "measure.discrepancy",
    "evaluation": "measure.evaluation",
    "zoo": "models.zoo",
    "training": "models.training",
    "theory": "models.theory",
    "lengthgen": "experiments.lengthgen",
    "ablation": "experiments.ablation",
    "sweep": "experiments.gating_sweep",
    "references": "reproduction.references",
    "report": "reproduction.report",
}
"""Flat module names (``psheads.zoo``) → their homes (``psheads.models.zoo``): the same module
object under both names, so ``import psheads.zoo`` and ``from psheads.zoo import boot_gguf``
keep working. ``zoo``, ``theory``, ``tasks`` and ``plotting`` are the documented public modules."""

_HOMES = {
    "FrequencyProfile": "measure.frequency_profile",
    "Intervention": "experiments.ablation",
    "LayerGeometry": "rope.layer",
    "ProfileConfig": "measure.frequency_profile",
    "PromptOptions": "measure.prompts",
    "RopeLens": "rope.lens",
    "ScoreConfig": "measure.methods.base",
    "ScoreMethod": "measure.methods.base",
    "SelfCheckError": "rope.lens",
    "TrainConfig": "models.training",
    "UnsupportedModelError": "rope.families",
    "ablate": "experiments.ablation",
    "discrepancy": "measure.discrepancy",
    "evaluate": "measure.evaluation",
    "frequency_profile": "measure.frequency_profile",
    "length_generalization": "experiments.lengthgen",
    "load_frame": "results.files",
    "load_pretrained": "models.zoo",
    "register_score_method": "measure.methods.base",
    "save_frame": "results.files",
    "score_heads": "measure.scoring",
    "score_methods": "measure.methods.base",
    "swap_attention": "measure.methods.swap",
    "train": "models.training",
}
"""The module that defines each public function and class."""

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
    "UnsupportedModelError",
    "__version__",
    "ablate",
    "discrepancy",
    "evaluate",
    "frequency_profile",
    "length_generalization",
    "load_frame",
    "load_pretrained",
    "plotting",
    "policy",
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
    from psheads import plotting, policy, tasks
    from psheads.experiments.ablation import Intervention, ablate
    from psheads.experiments.lengthgen import length_generalization
    from psheads.measure.discrepancy import discrepancy
    from psheads.measure.evaluation import evaluate
    from psheads.measure.frequency_profile import FrequencyProfile, ProfileConfig, frequency_profile
    from psheads.measure.methods.base import ScoreConfig, ScoreMethod, register_score_method, score_methods
    from psheads.measure.methods.swap import swap_attention
    from psheads.measure.prompts import PromptOptions
    from psheads.measure.scoring import score_heads
    from psheads.models import theory
    from psheads.models.training import TrainConfig, train
    from psheads.models.zoo import load_pretrained
    from psheads.results.files import load_frame, save_frame
    from psheads.rope.families import UnsupportedModelError
    from psheads.rope.layer import LayerGeometry
    from psheads.rope.lens import RopeLens, SelfCheckError


class _FlatNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``psheads.<flat name>`` as the module ``MOVED`` names (the same object)."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        module = importlib.import_module(f"{__name__}.{MOVED[spec.name.rpartition('.')[2]]}")
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        # the import system has just set the flat name's spec on the module: give it its own back
        module.__spec__ = self._specs[module.__name__]


if not any(isinstance(finder, _FlatNames) for finder in sys.meta_path):
    sys.meta_path.insert(0, _FlatNames())


def __getattr__(name: str) -> Any:
    """Import a public name, a layer or a flat module name (``psheads.zoo``) on first use (PEP 562)."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name in MOVED or any(name == layer for layer, _ in LAYERS) or name == "tasks":
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
