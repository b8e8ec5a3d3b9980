"""The engine on a CUDA model against the same model on the CPU (marked ``gpu``: skipped where no
CUDA device is available; ``pytest -m gpu`` on a GPU machine runs them)."""

from __future__ import annotations

import pytest
import torch

import psheads
from psheads.tasks import checked_batch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def models() -> tuple:
    return psheads.load_pretrained("number"), psheads.load_pretrained("number", device="cuda")


@pytest.mark.parametrize("length", [None, 600])  # task prompts (every pair from M), long ones (heavy rows)
@pytest.mark.parametrize("method", ["swap", "anova"])
def test_scores_on_cuda_equal_the_cpu(models: tuple, method: str, length: int | None) -> None:
    cpu, cuda = models
    if length is None:
        prompts = checked_batch(cpu.task, 64, seed=3).tokens
    else:
        prompts = torch.randint(0, cpu.model.cfg.d_vocab, (4, length), generator=torch.Generator().manual_seed(3))
    on_cpu = psheads.score_heads(cpu.model, prompts, method=method, progress=False)
    on_cuda = psheads.score_heads(cuda.model, prompts, method=method, progress=False)
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
