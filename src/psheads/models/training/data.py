"""The prompts a run trains on: each step's batch, fresh and seeded by the step or drawn from a fixed
training set in a seeded order per epoch (``TrainingData``), and the seeds of the test and
validation prompts, apart from every training batch. A step's batch depends only on the run's
seed and the step, so a resumed run sees the data it would have seen.
"""

from __future__ import annotations

import torch

from psheads.interface import validation
from psheads.interface.progress import progress_bar
from psheads.models.training.config import TrainConfig
from psheads.tasks import Task, checked_batch

TEST_SEED_OFFSET = 1 << 40  # test prompts never share a seed with training batches
VALIDATION_SEED_OFFSET = 1 << 41  # nor do validation prompts (keep_best)
TRAIN_SET_SEED_OFFSET = 3 << 40  # a fixed training set's chunks
EPOCH_SEED_OFFSET = 5 << 40  # its order in each epoch
TRAIN_SET_CHUNK = 4096
"""Prompts of a fixed training set generated from one seed (hop counts, answers balanced within it)."""


def derived_seed(value: int) -> int:
    """A data or test-set seed derived from ``TrainConfig.seed``, wrapped into the seed range so
    that every allowed seed trains (unchanged for every seed below about 2**44)."""
    return value % validation.SEED_LIMIT


def training_batch(task: Task, config: TrainConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fresh batch of ``step`` (deterministic in ``config.seed`` and ``step``)."""
    batch = checked_batch(task, config.batch_size, seed=derived_seed(config.seed * 1_000_003 + step))
    return batch.tokens, batch.answers


class TrainingData:
    """Where each step's batch comes from (``TrainConfig.train_set``).

    Without a fixed set, ``training_batch``. With one, the set is generated once, in chunks of
    ``TRAIN_SET_CHUNK`` prompts each seeded by ``config.seed`` and the chunk's index, and epoch
    ``e`` visits it in the order of a permutation seeded by ``config.seed`` and ``e``: a step's
    batch depends only on the seed and the step, so a resumed run sees the same data.
    """

    def __init__(self, task: Task, config: TrainConfig, progress: bool | None = None) -> None:
        self.task, self.config, self.progress = task, config, progress
        self._set: tuple[torch.Tensor, torch.Tensor] | None = None
        self._order: tuple[int, torch.Tensor] | None = None

    @property
    def steps_per_epoch(self) -> int | None:
        """Steps that visit the fixed set once (None: fresh prompts)."""
        if self.config.train_set is None:
            return None
        return -(-self.config.train_set // self.config.batch_size)

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens ``[batch, seq]`` and answers ``[batch]`` of ``step``."""
        steps = self.steps_per_epoch
        if steps is None:
            return training_batch(self.task, self.config, step)
        tokens, answers = self.fixed_set()
        epoch, within = divmod(step, steps)
        width = self.config.batch_size
        rows = self._epoch_order(epoch, len(answers))[within * width:(within + 1) * width]
        return tokens[rows], answers[rows]

    def fixed_set(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole fixed training set: tokens ``[train_set, seq]`` and answers ``[train_set]``.

        Raises:
            ValueError: the run has no fixed set (``train_set`` is None: fresh prompts every step).
        """
        if self._set is None:
            size, base = self.config.train_set, self.config.seed * 1_000_003
            if size is None:
                raise ValueError("This run draws fresh prompts every step (TrainConfig.train_set is None): it has no "
                                 "fixed training set.")
            chunks = progress_bar(range(0, size, TRAIN_SET_CHUNK), desc="training set", progress=self.progress)
            batches = [checked_batch(self.task, min(TRAIN_SET_CHUNK, size - start),
                                     seed=derived_seed(TRAIN_SET_SEED_OFFSET + base + start // TRAIN_SET_CHUNK))
                       for start in chunks]
            self._set = (torch.cat([b.tokens for b in batches]), torch.cat([b.answers for b in batches]))
        return self._set

    def _epoch_order(self, epoch: int, size: int) -> torch.Tensor:
        """The order in which epoch ``epoch`` visits the ``size`` prompts of the fixed set."""
        if self._order is None or self._order[0] != epoch:
            seed = derived_seed(EPOCH_SEED_OFFSET + self.config.seed * 1_000_003 + epoch)
            self._order = (epoch, torch.randperm(size, generator=torch.Generator().manual_seed(seed)))
        return self._order[1]
