"""Shared fixtures: seeded RNGs and tiny booted models, cached per session."""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from psheads.rope import families
from psheads.rope.backends.facts import all_modules
from tests import helpers

SUITE_THREADS = 2
"""torch threads the suite runs at, whatever the machine's core count (CI's machines have 2 cores).

fp32 matrix products are deterministic for a fixed thread count and batch shape, but not across
thread counts: pinning the count makes the suite's numbers the same on every machine, and child
processes (docs, notebook, training faults) inherit it through ``OMP_NUM_THREADS``. The
numerically sensitive modules also run at 1 thread (``torch_threads``), so a test that compares
results across batch shapes or thread counts fails here, not only on another machine."""
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(SUITE_THREADS)
torch.set_num_threads(SUITE_THREADS)

FAMILIES = [family.name for family in families.FAMILIES if helpers.has_tiny(family.name)]
"""The family records with a tiny look-alike in ``tests/helpers.py``, which the rope suite's consistency
tests run on (every record's architectures also go through the coverage test, ``tests/coverage.py``)."""
HOOKED_FAMILIES = [family.name for family in families.hooked_families()]
"""The families TransformerLens 3.x builds as a HookedTransformer from a local directory."""


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _restore_threads():
    """A test that changes torch's thread count does not change it for the next one."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", params=[1, SUITE_THREADS], ids=lambda n: f"threads{n}")
def torch_threads(request: pytest.FixtureRequest):
    """Run a module's tests at 1 thread and at ``SUITE_THREADS`` (``pytestmark = usefixtures``).

    Module-scoped, so the module's reference fixtures that request it are computed at the same
    count as the tests that compare against them.
    """
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(SUITE_THREADS)


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


@pytest.fixture(scope="session")
def number_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny GPT-J folder that records the default number task (its word tokenizer), 200 positions."""
    from psheads.tasks import NumberTask

    return helpers.save_task_model(NumberTask(), tmp_path_factory.mktemp("number"), n_positions=200)


def model_state(model: torch.nn.Module) -> dict:
    """What psheads must never change: hooks, training flags, dtypes."""
    modules = all_modules(model)  # a bridge's HF model too: its train()/eval() reach it
    return {
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for m in modules],
        "training": [m.training for m in modules],
        "hook_names": sorted(model.hook_dict),
        "dtypes": [p.dtype for p in model.parameters()],
    }
