"""The engine on a CUDA model, and on a model dispatched by accelerate onto the GPU, against the
same model on the CPU (marked ``gpu``: skipped where no CUDA device is available; ``pytest -m gpu``
on a GPU machine runs them)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import psheads
from psheads.rope import precision as precision_module
from psheads.rope.backends.facts import input_device
from psheads.tasks import checked_batch
from tests import helpers

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def models() -> tuple:
    return psheads.load_pretrained("number"), psheads.load_pretrained("number", device="cuda")


@pytest.mark.parametrize("precision", ["auto", "float32"])  # auto: float64 on a full-rate GPU (H100/H200)
@pytest.mark.parametrize("length", [None, 600])  # task prompts (every pair from M), long ones (heavy rows)
@pytest.mark.parametrize("method", ["swap", "anova"])
def test_scores_on_cuda_equal_the_cpu(models: tuple, method: str, length: int | None, precision: str) -> None:
    cpu, cuda = models
    if length is None:
        prompts = checked_batch(cpu.task, 64, seed=3).tokens
    else:
        prompts = torch.randint(0, cpu.model.cfg.d_vocab, (4, length), generator=torch.Generator().manual_seed(3))
    on_cpu = psheads.score_heads(cpu.model, prompts, method=method, progress=False)
    on_cuda = psheads.score_heads(cuda.model, prompts, method=method, precision=precision, progress=False)
    expected = precision_module.analysis_dtype(precision, torch.device("cuda"))
    assert on_cuda.attrs["analysis_dtype"] == precision_module.dtype_name(expected)
    assert on_cuda["label"].tolist() == on_cpu["label"].tolist()
    numeric = on_cpu.select_dtypes("number").columns
    # fp32 forwards differ in rounding between the devices; the scores are fp64 after the capture
    assert (on_cuda[numeric] - on_cpu[numeric]).abs().max().max() < 1e-4


def test_frequency_profile_on_cuda_equals_the_cpu(models: tuple) -> None:
    cpu, cuda = models
    prompts = checked_batch(cpu.task, 64, seed=4).tokens
    on_cpu = psheads.frequency_profile(cpu.model, prompts, progress=False).heads
    on_cuda = psheads.frequency_profile(cuda.model, prompts, progress=False).heads
    numeric = on_cpu.select_dtypes("number").columns
    assert (on_cuda[numeric] - on_cpu[numeric]).abs().max().max() < 1e-4


def test_a_model_dispatched_by_device_map_scores_as_on_the_cpu(tmp_path: Path) -> None:
    """accelerate's dispatch onto the GPU (TransformerLens 4.3 refuses maps that mix a GPU with CPU
    or disk offload; ``test_devices.py`` covers offloading on the CPU)."""
    directory = helpers.save_tiny("qwen2", tmp_path / "m", seed=1)
    on_cpu = helpers.boot_bridge(directory)
    with tempfile.TemporaryDirectory() as offload:
        spread = helpers.boot_dispatched(directory, {"": 0}, offload)
        assert input_device(spread).type == "cuda"
        prompts = torch.randint(0, helpers.VOCAB, (5, 300), generator=torch.Generator().manual_seed(2))
        for method in ("swap", "anova"):
            ref = psheads.score_heads(on_cpu, prompts, method=method, progress=False)
            got = psheads.score_heads(spread, prompts, method=method, progress=False)
            numeric = ref.select_dtypes("number").columns
            assert got["label"].tolist() == ref["label"].tolist()
            assert (got[numeric] - ref[numeric]).abs().max().max() < 1e-4
        ref = psheads.frequency_profile(on_cpu, prompts, progress=False).heads
        got = psheads.frequency_profile(spread, prompts, progress=False).heads
        numeric = ref.select_dtypes("number").columns
        assert (got[numeric] - ref[numeric]).abs().max().max() < 1e-4
