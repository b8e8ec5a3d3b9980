"""Data parallelism on ``torch.distributed``: one code path for one process or many.

Every front-end that loops over prompt batches (``score_heads``, ``frequency_profile``,
``evaluate``, ``length_generalization``, ``discrepancy``) and every sweep over independent cells
runs its loop through ``ordered_map``. In one process that is a plain ``map``. Under ``torchrun``
(or when the caller has already called ``torch.distributed.init_process_group``), rank ``r`` of
``N`` computes items ``r, r + N, r + 2N, …``; after each round of ``N`` items the results are
gathered, and every rank receives all of them in the serial order. The caller's reduction then
runs on every rank, unchanged, over the same values in the same order, so the frame is
bit-for-bit the one-process frame for any ``N`` (given that each item itself is computed the
same way: a batch of prompts stays one batch). The engine gathers per-batch fp64 sums, not
per-prompt values, so the traffic per round is a few KB per layer.

Under ``torchrun`` with no process group yet, the first call initialises one from the launcher's
environment (``nccl`` where CUDA is available, else ``gloo``); results travel on a gloo group
either way. A Python error on one rank reaches every rank in the same round, so no rank waits
forever: the failing rank re-raises its own exception, the others raise ``RuntimeError`` naming
it. Inside an item (``ordered_map``'s function) the process counts as alone, so a sweep cell that
scores heads does so on its own rank.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import itertools
import os
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")
R = TypeVar("R")

TIMEOUT = timedelta(minutes=int(os.environ.get("PSHEADS_DIST_TIMEOUT_MIN", "60")))
"""How long a rank waits for the others in one round before failing (``PSHEADS_DIST_TIMEOUT_MIN``)."""

_alone: contextvars.ContextVar[bool] = contextvars.ContextVar("psheads_alone", default=False)
_groups: dict[int, Any] = {}


@dataclass(frozen=True)
class World:
    """This process's place among the ranks: ``rank`` of ``size`` (0 of 1 when alone)."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: the rank that shows progress and writes files."""
        return self.rank == 0


def world() -> World:
    """The ranks this process computes with: the initialised default process group, or under
    ``torchrun`` (``WORLD_SIZE`` > 1) one initialised now; else ``World(0, 1)``."""
    if _alone.get() or not dist.is_available():
        return World()
    if not dist.is_initialized():
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return World()
        _initialise()
    return World(dist.get_rank(), dist.get_world_size())


def is_main() -> bool:
    """Whether this process is rank 0 of its job (or not part of one): the rank that shows progress
    bars and writes files, inside ``alone()`` too."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0


def _initialise() -> None:
    """The default process group from ``torchrun``'s environment, destroyed at exit."""
    missing = [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
    if missing:
        raise RuntimeError(f"WORLD_SIZE is {os.environ['WORLD_SIZE']} but {', '.join(missing)} is not set: launch with "
                           "torchrun (or srun with those variables), or call torch.distributed.init_process_group "
                           "yourself.")
    backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=TIMEOUT)
    atexit.register(_destroy)


def _destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _object_group() -> Any:
    """A gloo group over every rank for pickled results (the default group when it is gloo)."""
    if dist.get_backend() == "gloo":
        return None
    key = id(dist.GroupMember.WORLD)
    if key not in _groups:
        _groups[key] = dist.new_group(backend="gloo", timeout=TIMEOUT)
    return _groups[key]


def from_main(value: T) -> T:
    """Rank 0's ``value`` on every rank (``value`` itself when alone): one decision for every rank,
    for example whether a file rank 0 sees exists."""
    here = world()
    if here.size == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0, group=_object_group())
    return box[0]


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Within this block the process computes as if it were alone (``world()`` is ``World(0, 1)``)."""
    token = _alone.set(True)
    try:
        yield
    finally:
        _alone.reset(token)


@dataclass(frozen=True)
class _Failure:
    rank: int
    error: str


def ordered_map(function: Callable[[T], R], items: Iterable[T], *, bar: Any = None) -> Iterator[R]:
    """``function(item)`` for every item, in order, on every rank; each rank computes its share.

    Every rank must pass the same items in the same order (they are only enumerated, so pass
    cheap descriptions: prompt slices, cell keys). Rank ``r`` of ``N`` computes items ``r``,
    ``r + N``, …, inside ``alone()``; the results of each round of ``N`` are gathered to every
    rank. Memory holds one round of results.

    Args:
        function: computes one item's result (picklable when ``N`` > 1).
        items: the work, identical on every rank.
        bar: a tqdm bar advanced once per item, or None.

    Raises:
        RuntimeError: another rank's ``function`` raised (this rank's own error is re-raised as is).
    """
    here = world()
    iterator = iter(items)
    while True:
        round_ = list(itertools.islice(iterator, here.size))
        if not round_:
            return
        if here.size == 1:
            results = [_compute(function, round_[0])]
        else:
            mine: Any = None
            if here.rank < len(round_):
                try:
                    mine = _compute(function, round_[here.rank])
                except Exception as error:
                    _gather(_Failure(here.rank, "".join(traceback.format_exception_only(error)).strip()), here)
                    raise
            results = _gather(mine, here)[:len(round_)]
            failures = [result for result in results if isinstance(result, _Failure)]
            if failures:
                raise RuntimeError(f"rank {failures[0].rank} failed, so every rank stops: {failures[0].error}")
        for result in results:
            if bar is not None:
                bar.update(1)
            yield result
        if len(round_) < here.size:
            return


def _compute(function: Callable[[T], R], item: T) -> R:
    with alone():
        return function(item)


def _gather(value: Any, here: World) -> list[Any]:
    gathered: list[Any] = [None] * here.size
    dist.all_gather_object(gathered, value, group=_object_group())
    return gathered
