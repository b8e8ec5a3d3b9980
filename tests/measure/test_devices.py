"""Models spread over devices: one placement rule for inputs (``backends.input_device``), and a
model dispatched by accelerate's ``device_map`` scored exactly as the same model on one device.

On a CPU machine the dispatched case is offloading: layers mapped to ``"disk"`` keep their
weights on the meta device and accelerate's hooks load them (and move the activations) when the
layer runs, which is the code path of a model split over GPUs. ``tests/measure/test_cuda.py``
splits a model between a GPU and the CPU.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import psheads
from psheads.rope.backends.facts import input_device
from tests import helpers
from tests.conftest import model_state


def test_input_device_skips_offloaded_parameters() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2, device="meta"), torch.nn.Linear(2, 2))
    assert input_device(model) == torch.device("cpu")
    assert input_device(torch.nn.Linear(2, 2, device="meta")) == torch.device("cpu")  # nothing holds data
    assert input_device(torch.nn.Linear(2, 2, dtype=torch.float64)) == torch.device("cpu")


HALF_ON_DISK = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
                "model.layers.1": "disk", "model.norm": "disk", "lm_head": "disk"}
EMBEDDING_ON_DISK = {"model.embed_tokens": "disk", "model.rotary_emb": "cpu", "model.layers.0": "disk",
                     "model.layers.1": "cpu", "model.norm": "cpu", "lm_head": "cpu"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.save_tiny("qwen2", tmp_path_factory.mktemp("d"), seed=1)


@pytest.mark.parametrize("device_map", [HALF_ON_DISK, EMBEDDING_ON_DISK, {"": "disk"}],
                         ids=["half-on-disk", "embedding-on-disk", "all-on-disk"])
def test_a_dispatched_model_scores_as_on_one_device(saved: Path, device_map: dict) -> None:
    one = helpers.boot_bridge(saved)
    with tempfile.TemporaryDirectory() as offload:
        spread = helpers.boot_dispatched(saved, device_map, offload)
        assert any(p.device.type == "meta" for p in spread.parameters())  # really offloaded
        prompts = torch.randint(0, helpers.VOCAB, (5, 19), generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            spread(prompts[:1])  # the bridge adds its own hooks on its first forward
        before = model_state(spread)
        for method in ("swap", "anova"):
            for by_frequency in (False, True):
                ref = psheads.score_heads(one, prompts, method=method, by_frequency=by_frequency, progress=False)
                got = psheads.score_heads(spread, prompts, method=method, by_frequency=by_frequency, progress=False)
                numeric = ref.select_dtypes("number").columns
                assert got["label"].tolist() == ref["label"].tolist()
                assert (got[numeric] - ref[numeric]).abs().max().max() <= 1e-12
        ref = psheads.frequency_profile(one, prompts, progress=False).heads
        got = psheads.frequency_profile(spread, prompts, progress=False).heads
        numeric = ref.select_dtypes("number").columns
        assert (got[numeric] - ref[numeric]).abs().max().max() <= 1e-12
        assert model_state(spread) == before  # every hook psheads added is gone
