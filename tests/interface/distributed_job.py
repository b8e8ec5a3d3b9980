"""A job ``tests/interface/test_distributed.py`` launches with ``torchrun``: every prompt-set
front-end on the shipped number model, each rank's frames pickled to ``OUT/rank<r>.pkl``.

``python -m torch.distributed.run --nproc-per-node N tests/interface/distributed_job.py OUT [--init] [--fail]
[--disagree] [--mixed] [--main-only] [--main-only-later]``: ``--init`` initialises the process group before
psheads sees it (the caller's own group); ``--fail`` makes rank 1's share of an ``ordered_map`` raise, to
show that every rank stops; ``--disagree`` makes the ranks pass different work (``disagreements``) and
``--mixed`` the same prompts through different models and settings (``mixtures``), pickling what each call
raised, not frames; ``--main-only`` makes a call on rank 0 alone as the job's first psheads call, and
``--main-only-later`` after one call on every rank, pickling what it raised and how long it waited.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist

SWEEP = {"tasks": ("index", "retrieval"), "bands": ("all", "fast+zero"), "seeds": (0,), "steps": 3, "warmup_steps": 1,
         "length": 6, "n_letters": 3, "width": 2, "eval_prompts": 16, "score_prompts": 4}
"""A gated sweep of 4 tiny cells (the smoke sweep of ``tests/experiments/test_gating_sweep.py``, smaller)."""


def frames() -> dict[str, pd.DataFrame]:
    """Every front-end's frame on the shipped number model (5 batches of 8 prompts each: uneven over 2
    or 3 ranks), and a gated sweep's (4 cells)."""
    import psheads as ps
    from psheads.experiments.gating_sweep import SWEEP_MODEL, SweepConfig, gating_sweep

    model = ps.zoo.load_pretrained("number").model
    tokens = ps.tasks.get_task("number").generate(40, seed=3).tokens
    return {
        "swap": ps.score_heads(model, tokens, batch_size=8, progress=False),
        "anova_planes": ps.score_heads(model, tokens, method="anova", by_frequency=True, batch_size=8, progress=False),
        "per_prompt": ps.score_heads(model, tokens, reduce=False, batch_size=8, progress=False),
        "profile": ps.frequency_profile(model, tokens, batch_size=8, progress=False).planes,
        "evaluate": ps.evaluate(model, "number", n=40, batch_size=8, progress=False),
        "lengths": ps.length_generalization(model, "number", lengths=[17, 30], n=24, token_budget=8 * 17,
                                            progress=False),
        "discrepancy": ps.discrepancy(model, "number", n=40, batch_size=8, progress=False),
        "sweep": gating_sweep(SweepConfig(**SWEEP, model=dict(SWEEP_MODEL, n_embd=16, rotary_dim=12, n_positions=16)),
                              progress=False),
    }


def disagreements(rank: int) -> dict[str, str]:
    """What each call in which this rank's work differs from rank 0's raised (``type: message``), by
    what differs: the prompts (each rank its own seed, the usual DDP habit), their count, the batch
    size, and the count and the seed of an ``evaluate``."""
    import psheads as ps

    model = ps.zoo.load_pretrained("number").model
    task = ps.tasks.get_task("number")
    calls = {
        "prompts": lambda: ps.score_heads(model, task.generate(24, seed=rank).tokens, batch_size=8, progress=False),
        "count": lambda: ps.score_heads(model, task.generate(24 - 8 * rank, seed=0).tokens, batch_size=8,
                                        progress=False),
        "batch_size": lambda: ps.frequency_profile(model, task.generate(24, seed=0).tokens, batch_size=8 - 2 * rank,
                                                   progress=False),
        "evaluate": lambda: ps.evaluate(model, "number", n=24 - 8 * rank, batch_size=8, progress=False),
        "evaluate seed": lambda: ps.evaluate(model, "number", n=24, seed=rank, batch_size=8, progress=False),
    }
    raised = {}
    for name, call in calls.items():
        try:
            call()
            raised[name] = "no error"
        except Exception as error:
            raised[name] = f"{type(error).__name__}: {error}"
    return raised


def mixtures(rank: int) -> dict[str, str]:
    """What each call in which this rank scores the same prompts as rank 0 but differs in what changes a
    number raised (``type: message``): its own model (each rank's seed), ``tau``, ``precision``, the method,
    the reduction, and the profile's and the evaluation's model."""
    import psheads as ps

    vocab = ps.zoo.load_pretrained("number").model.cfg.d_vocab
    model, same = ps.zoo.random_gptj(seed=rank, vocab_size=vocab), ps.zoo.random_gptj(seed=0, vocab_size=vocab)
    tokens = ps.tasks.get_task("number").generate(16, seed=0).tokens
    calls = {
        "model": lambda: ps.score_heads(model, tokens, batch_size=8, progress=False),
        "tau": lambda: ps.score_heads(same, tokens, tau=1e-4 * (1 + rank), batch_size=8, progress=False),
        "precision": lambda: ps.score_heads(same, tokens, precision=("float64", "float32")[rank], batch_size=8,
                                            progress=False),
        "method": lambda: ps.score_heads(same, tokens, method=("swap", "anova")[rank], batch_size=8, progress=False),
        "reduce": lambda: ps.score_heads(same, tokens, reduce=rank == 0, batch_size=8, progress=False),
        "profile model": lambda: ps.frequency_profile(model, tokens, batch_size=8, progress=False),
        "evaluate model": lambda: ps.evaluate(model, "number", n=16, batch_size=8, progress=False,
                                              allow_task_mismatch=True),
    }
    raised = {}
    for name, call in calls.items():
        try:
            call()
            raised[name] = "no error"
        except Exception as error:
            raised[name] = f"{type(error).__name__}: {error}"
    return raised


def main_only(rank: int, later: bool) -> dict[str, Any]:
    """What a ``score_heads`` call on rank 0 alone raised, and the seconds it waited: the job's first psheads
    call, or (``later``) one after a call on every rank."""
    import psheads as ps

    model = ps.zoo.load_pretrained("number").model
    tokens = ps.tasks.get_task("number").generate(8, seed=0).tokens
    if later:
        ps.score_heads(model, tokens, batch_size=8, progress=False)
    if rank != 0:  # alive, elsewhere, for twice the test's join timeout (6 s)
        time.sleep(12)
        return {}
    start = time.monotonic()
    try:
        ps.score_heads(model, tokens, batch_size=8, progress=False)
        raised = "no error"
    except Exception as error:
        raised = f"{type(error).__name__}: {error}"
    return {"raised": raised, "seconds": time.monotonic() - start}


def refuse_training(out: Path) -> str:
    """The error ``train`` raises when every rank calls it."""
    import psheads as ps

    try:
        ps.train("number", ps.TrainConfig(steps=1, warmup_steps=0), out / "run")
    except ValueError as error:
        return str(error)
    return "no error"


def fail() -> None:
    from psheads.interface.distributed import ordered_map

    def work(item: int) -> int:
        if item == 1:
            raise ValueError("item 1 is broken on purpose")
        return item

    list(ordered_map(work, range(4)))


def main(out: Path, flags: list[str]) -> None:
    torch.set_num_threads(1)
    if "--init" in flags:
        dist.init_process_group("gloo")
    if "--fail" in flags:
        fail()
    rank = int(os.environ["RANK"])
    for flag, record in {"--disagree": disagreements, "--mixed": mixtures,
                         "--main-only": lambda rank: main_only(rank, later=False),
                         "--main-only-later": lambda rank: main_only(rank, later=True)}.items():
        if flag in flags:
            (out / f"rank{rank}.pkl").write_bytes(pickle.dumps(record(rank)))
            return
    result = frames()
    rank = dist.get_rank() if dist.is_initialized() else 0
    (out / f"rank{rank}.pkl").write_bytes(pickle.dumps({"frames": result, "world": dist.get_world_size(),
                                                        "train": refuse_training(out)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
