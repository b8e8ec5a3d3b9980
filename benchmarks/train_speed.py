"""psheads.train's step time vs a bare Hugging Face training loop on the same model and data.

Both loops run side by side in one process on paper B's GPT-J and the number task (checkpoints,
evaluation and scoring are switched off for psheads by a large checkpoint interval, so the ratio
is the per-step overhead of the library loop). Usage: python benchmarks/train_speed.py [--steps 60]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from psheads.models import training
from psheads.tasks import NumberTask


def bare_loop(task, config: training.TrainConfig, steps: int) -> float:
    """Seconds per step of a plain loop: same model, data generation, loss and optimizer."""
    model = training.build_model(task, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    model.train()
    began = time.perf_counter()
    for step in range(steps):
        tokens, answers = training.training_batch(task, config, step)  # the same data generation
        loss = torch.nn.functional.cross_entropy(model(tokens).logits[:, -1], answers)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - began) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    task = NumberTask()
    config = training.TrainConfig(steps=args.steps, warmup_steps=1, checkpoint_every=10**9, dynamics_prompts=0,
                                  eval_prompts=64)
    ours, bare = [], []
    for _ in range(2):  # interleave to share the machine's noise
        with tempfile.TemporaryDirectory() as directory:
            result = training.train(task, config, directory, progress=False)
        ours.append(result.seconds / args.steps)
        bare.append(bare_loop(task, config, args.steps))
    print(f"paper-B GPT-J, number task, batch {config.batch_size}, {args.steps} steps, best of 2")
    print(f"bare HF loop        {min(bare) * 1e3:7.1f} ms/step")
    print(f"psheads.train       {min(ours) * 1e3:7.1f} ms/step   {min(ours) / min(bare):.3f}x")


if __name__ == "__main__":
    main()
