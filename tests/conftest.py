"""Shared fixtures: seeded RNGs and tiny booted models, cached per session."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from psheads.backends import all_modules
from tests import helpers

FAMILIES = ["gptj", "neox", "llama", "mistral", "qwen2", "gemma", "gemma2", "gemma3"]
# Families TransformerLens 3.9 can build as a HookedTransformer from a local directory.
HOOKED_FAMILIES = ["gptj", "neox", "llama", "mistral", "qwen2", "gemma", "gemma2"]


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """``model_factory(family, backend="bridge", **overrides)`` → booted tiny model (cached)."""
    cache: dict[tuple, Any] = {}

    def make(family: str, backend: str = "bridge", dtype: torch.dtype = torch.float32, **overrides: Any) -> Any:
        key = (family, backend, dtype, repr(sorted(overrides.items())))
        if key not in cache:
            directory: Path = tmp_path_factory.mktemp("m")  # no family name: TL 3.9 path quirk
            helpers.save_tiny(family, directory, dtype=dtype, **copy.deepcopy(overrides))
            if backend == "bridge":
                cache[key] = helpers.boot_bridge(directory, dtype=dtype)
            elif backend == "hooked":
                if not helpers.has_hooked_transformer():
                    pytest.skip("this TransformerLens has no HookedTransformer (4.x)")
                cache[key] = helpers.boot_hooked(directory, dtype=dtype)
            else:
                raise ValueError(backend)
            # the bridge attaches its own internal hooks on the first forward: warm up once so
            # that model_state snapshots only see what psheads does
            with torch.no_grad():
                cache[key](torch.zeros(1, 2, dtype=torch.long))
        return cache[key]

    return make


def model_state(model: torch.nn.Module) -> dict:
    """What psheads must never change: hooks, training flags, dtypes."""
    modules = all_modules(model)  # a bridge's HF model too: its train()/eval() reach it
    return {
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for m in modules],
        "training": [m.training for m in modules],
        "hook_names": sorted(model.hook_dict),
        "dtypes": [p.dtype for p in model.parameters()],
    }
