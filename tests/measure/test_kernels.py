"""Fused kernels: when they compile, that compiled and eager agree, and that a failed compiler falls
back to the exact eager function."""

from __future__ import annotations

import logging

import pytest
import torch

from psheads.measure import kernels, methods
from psheads.measure.engine import KeyLogits


def _double_plus_one(x: torch.Tensor) -> torch.Tensor:
    return 2 * x + 1


def test_the_compile_setting_is_validated(monkeypatch) -> None:
    monkeypatch.setenv(kernels.COMPILE_ENV, "yes")
    with pytest.raises(ValueError, match="PSHEADS_COMPILE must be 0"):
        kernels.Fused(_double_plus_one).compiles(1)


@pytest.mark.parametrize(("setting", "work", "expected"), [
    ("", kernels.MIN_COMPILED_WORK - 1, False), ("", kernels.MIN_COMPILED_WORK, True),
    ("0", 10 * kernels.MIN_COMPILED_WORK, False), ("1", 1, True),
])
def test_large_work_compiles_unless_switched_off(monkeypatch, setting, work, expected) -> None:
    monkeypatch.setenv(kernels.COMPILE_ENV, setting)
    assert kernels.Fused(_double_plus_one).compiles(work) is expected


def test_eager_calls_never_reach_the_compiler(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile was called")

    monkeypatch.setattr(torch, "compile", refuse)
    monkeypatch.setenv(kernels.COMPILE_ENV, "0")
    x = torch.arange(4.0)
    assert torch.equal(kernels.Fused(_double_plus_one)(x, work=10**12), 2 * x + 1)


def test_a_failing_compiler_falls_back_to_eager_with_one_warning(monkeypatch, caplog) -> None:
    calls = []

    def broken_compile(fn, **options):
        calls.append(options)

        def run(*args):
            raise RuntimeError("no C++ compiler found\nlong details")

        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    monkeypatch.setenv(kernels.COMPILE_ENV, "1")
    fused = kernels.Fused(_double_plus_one)
    x = torch.arange(4.0)
    with caplog.at_level(logging.WARNING, logger="psheads.measure.kernels"):
        first, second = fused(x, work=1), fused(x, work=1)
    assert torch.equal(first, 2 * x + 1) and torch.equal(second, 2 * x + 1)
    assert len(calls) == 1 and not fused.compiles(10**12)  # never retried
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and "no C++ compiler found" in warnings[0] and "long details" not in warnings[0]


def _plane_like(n_lead: int, n: int, softcap: float | None, seed: int) -> KeyLogits:
    """Near-uniform single-plane logits (every pair carries weight), as ``by_frequency`` gives."""
    generator = torch.Generator().manual_seed(seed)
    angle = torch.arange(n, dtype=torch.float64)[:, None] * 1e-3
    positions = torch.cat([angle.cos(), angle.sin()], -1)
    tokens = torch.randn(n_lead, n, 2, generator=generator, dtype=torch.float64) * 0.5
    tokens[-1] *= 40.0  # one peaked entry among diffuse ones: entries drop out of tiles on their own
    other = torch.randn(n_lead, 2, generator=generator, dtype=torch.float64)
    return KeyLogits(positions, tokens, other, softcap)


@pytest.mark.parametrize(("block_size", "softcap"), [(1, None), (2, 30.0)])
def test_the_compiled_swap_kernel_equals_the_eager_one(monkeypatch, block_size, softcap) -> None:
    """Past one column chunk and many row tiles (1100 keys); the compiler must work on CI machines."""
    torch._dynamo.reset()  # compile afresh, whatever other tests compiled before (Dynamo's recompile limit)
    torch._dynamo.utils.counters.clear()
    logits = _plane_like(3, 1100, softcap, seed=block_size)
    monkeypatch.setenv(kernels.COMPILE_ENV, "0")
    eager = methods.swap_scores(logits, block_size, 1e-4)
    fused = kernels.Fused(methods.swap._tile_row_sums)
    monkeypatch.setattr(methods.swap, "_tile_kernel", fused)
    monkeypatch.setenv(kernels.COMPILE_ENV, "1")
    compiled = methods.swap_scores(logits, block_size, 1e-4)
    assert fused._compiled is not None and not fused._failed
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # a graph was compiled, not skipped
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-13, atol=0)
    assert not torch.allclose(eager[0], eager[1])  # the scores are not degenerate
