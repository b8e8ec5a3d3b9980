"""Operator and kernel-launch counts of one score_heads call, beside the model's own forward.

On a GPU, small batches are bound by launches and Python overhead, not arithmetic: this counts
them. ``torch.profiler`` records every aten operator a call dispatches (on the CPU each is one
kernel; on a GPU most launch one); with ``--device cuda`` the CUDA kernel launches
(``cudaLaunchKernel`` and friends) are counted too. Shapes: paper B's (a random GPT-J, 12 layers x
1 head, 128 prompts of 17 tokens, batch 64) and a 2,048-token prompt of Gemma 3 270M's shape
(random weights). Each call is warmed up once, then profiled once; both precisions are counted.

Compute operators (views left out) are counted too, and for a ``score_heads`` call by stage:
the capture (the forward with psheads' hooks), the analysis on the model's device (stacking the
layers' captures, the factored logits, the score method, the results' copy to the host) and the
rest on the host (reductions over prompts, the frame). Only the first two launch GPU kernels.

Usage: python benchmarks/launches.py [--device cuda] [--shapes paper-b gemma-2048]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from long_prompts import random_directory  # noqa: E402  (benchmarks/long_prompts.py)

import psheads  # noqa: E402
from psheads.measure import engine, scoring  # noqa: E402
from psheads.models import zoo  # noqa: E402

LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def counts(fn: Callable[[], object], device: str) -> tuple[int, int]:
    """``(aten operators, CUDA kernel launches)`` of one call of ``fn`` (launches: 0 on the CPU)."""
    fn()  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    events = prof.events()
    operators = sum(1 for event in events if event.name.startswith("aten::"))
    launches = sum(1 for event in events if event.name in LAUNCHES)
    return operators, launches


class _StageCounter(TorchDispatchMode):
    """Counts compute operators (views left out) by the stage that dispatched them."""

    def __init__(self) -> None:
        super().__init__()
        self.stage = "host"
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if not func.is_view:
            self.counts[self.stage] += 1
        return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def at(self, stage: str) -> Iterator[None]:
        outer, self.stage = self.stage, stage
        try:
            yield
        finally:
            self.stage = outer


def stage_counts(lens: psheads.RopeLens, fn: Callable[[], object]) -> collections.Counter[str]:
    """Compute operators of one call of ``fn`` per stage: capture, device (analysis), host."""
    fn()  # warm-up
    counter = _StageCounter()

    def staged(stage: str, inner: Callable) -> Callable:
        def call(*args: object, **kwargs: object) -> object:
            with counter.at(stage):
                return inner(*args, **kwargs)
        return call

    # the stages are psheads' own functions, patched for this count only
    with (mock.patch.object(lens.backend, "capture", staged("capture", lens.backend.capture)),
          mock.patch.object(engine, "_stack", staged("device", engine._stack)),
          mock.patch.object(engine, "key_logits", staged("device", engine.key_logits)),
          mock.patch.object(scoring, "_measure", staged("device", scoring._measure)),
          mock.patch.object(engine, "_on_cpu", staged("device", engine._on_cpu)), counter):
        fn()
    return counter.counts


def shapes(device: str, scratch: Path) -> dict[str, tuple[object, torch.Tensor, int]]:
    """``{name: (model, tokens, batch size)}``."""
    gptj = zoo.random_gptj(seed=0).to(device)
    paper_b = torch.randint(0, int(gptj.cfg.d_vocab), (128, 17), generator=torch.Generator().manual_seed(0))
    gemma = zoo.boot_local(str(random_directory(scratch, "random")), device=device)
    long = torch.randint(0, int(gemma.cfg.d_vocab), (1, 2048), generator=torch.Generator().manual_seed(0))
    return {"paper-b": (gptj, paper_b, 64), "gemma-2048": (gemma, long, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--shapes", nargs="+", default=["paper-b", "gemma-2048"])
    args = parser.parse_args()
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, torch threads {torch.get_num_threads()}"
    print(f"operators (aten) and CUDA kernel launches per call; {where}")
    print("compute operators by stage (views left out): capture = forward with psheads' hooks, device = the "
          "analysis where the model is, host = reductions and frame")
    print(f"{'shape':>11} {'call':>28} {'operators':>10} {'launches':>9} {'compute':>8} {'capture':>8} {'device':>7} "
          f"{'host':>6}")
    with tempfile.TemporaryDirectory() as scratch:
        for name, (model, tokens, batch_size) in shapes(args.device, Path(scratch)).items():
            if name not in args.shapes:
                continue
            lens = psheads.RopeLens(model)
            on_device = tokens.to(args.device)

            def forward(model: object = model, on_device: torch.Tensor = on_device, batch_size: int = batch_size
                        ) -> None:
                with torch.no_grad():
                    for start in range(0, len(on_device), batch_size):
                        model(on_device[start:start + batch_size])  # type: ignore[operator]

            calls: dict[str, Callable[[], object]] = {"forward (TransformerLens)": forward}
            for method in ("swap", "anova"):
                for precision in ("float64", "float32"):
                    calls[f"{method} {precision}"] = (
                        lambda lens=lens, tokens=tokens, method=method, precision=precision, batch_size=batch_size:
                        psheads.score_heads(lens, tokens, method=method, precision=precision, batch_size=batch_size,
                                            progress=False))
            for call, fn in calls.items():
                operators, launches = counts(fn, args.device)
                by_stage = stage_counts(lens, fn)
                stages = ("—", "—", "—") if call.startswith("forward") else (
                    by_stage["capture"], by_stage["device"], by_stage["host"])
                print(f"{name:>11} {call:>28} {operators:>10} {launches if args.device == 'cuda' else '—':>9} "
                      f"{sum(by_stage.values()):>8} {stages[0]:>8} {stages[1]:>7} {stages[2]:>6}", flush=True)


if __name__ == "__main__":
    main()
