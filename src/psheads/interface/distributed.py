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

psheads shards the work itself, so every rank must pass all of it: the same model and prompts, in
the same order, with the same settings. Before any work the ranks compare a cheap ``fingerprint``
of it (the number of prompts, their shapes, a hash of their token ids, a hash of the model's
weights, the method and its parameters, the precision and the settings that cut batches), and if
any rank differs, every rank raises the same ``ValueError`` naming what differs. In one process
nothing is compared, or computed.

Every rank must make the same calls. Each call's first contact (initialising the process group,
then a barrier at the start of every ``ordered_map``) waits at most ``JOIN_TIMEOUT``
(``PSHEADS_DIST_JOIN_TIMEOUT_MIN``, 5 minutes by default) for the other ranks, then raises a
``RuntimeError`` naming the ranks that did not join: a call made on rank 0 alone
(``if rank == 0: ps.score_heads(...)``) fails there within minutes, not after ``TIMEOUT``.

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
import functools
import hashlib
import itertools
import os
import re
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

T = TypeVar("T")
R = TypeVar("R")

TIMEOUT = timedelta(minutes=int(os.environ.get("PSHEADS_DIST_TIMEOUT_MIN", "60")))
"""How long a rank waits for the others in one round before failing (``PSHEADS_DIST_TIMEOUT_MIN``)."""
JOIN_TIMEOUT = timedelta(minutes=float(os.environ.get("PSHEADS_DIST_JOIN_TIMEOUT_MIN", "5")))
"""How long a rank waits for the others to reach the same call (``PSHEADS_DIST_JOIN_TIMEOUT_MIN``)."""
SAMPLED = 1024
"""Values of each weight tensor a model's fingerprint hashes (evenly spaced), besides its name, shape and dtype."""

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
        raise ValueError(f"WORLD_SIZE is {os.environ['WORLD_SIZE']} but {', '.join(missing)} is not set: launch with "
                           "torchrun (or srun with those variables), or call torch.distributed.init_process_group "
                           "yourself.")
    backend = "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    try:
        store, rank, size = next(dist.rendezvous("env://", rank, size, timeout=JOIN_TIMEOUT))
    except dist.DistError as error:  # rank 0's own store waits for the others to connect
        raise _absent(rank, size, "the other ranks", error) from None
    key = "psheads/joined/{}".format
    store.set(key(rank), "1")
    try:
        store.wait([key(other) for other in range(size)], JOIN_TIMEOUT)
    except dist.DistError as error:
        absent = [other for other in range(size) if not store.check([key(other)])]
        raise _absent(rank, size, _ranks(absent), error) from None
    store.set_timeout(TIMEOUT)
    # as init_process_group does with a store it makes: a prefix, for stores shared with the launcher
    dist.init_process_group(backend, store=dist.PrefixStore("default_pg", store), rank=rank, world_size=size,
                            timeout=TIMEOUT)
    atexit.register(_destroy)


def _meet(here: World) -> None:
    """Wait at most ``JOIN_TIMEOUT`` for every rank to reach this call.

    Raises:
        RuntimeError: a rank did not (the message names it when this is rank 0).
    """
    try:
        dist.monitored_barrier(group=_object_group(), timeout=JOIN_TIMEOUT, wait_all_ranks=True)
    except RuntimeError as error:
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        missing = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", detail)
        who = _ranks([int(r) for r in missing.group(1).split(",")]) if missing else "another rank"
        raise _absent(here.rank, here.size, who, error) from None


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _absent(rank: int, size: int, who: str, error: BaseException) -> RuntimeError:
    minutes = JOIN_TIMEOUT.total_seconds()
    waited = f"{minutes:g} s" if minutes < 120 else f"{minutes / 60:g} min"
    return RuntimeError(
        f"rank {rank} of {size} waited {waited} for every rank to reach this psheads call, and {who} did not join "
        f"({type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else '-'}). Under "
        "torchrun every rank must make the same psheads calls (psheads spreads each call's batches over them): "
        "call it on every rank, not under `if rank == 0:`; to compute on one rank alone, call it inside "
        "`with psheads.interface.distributed.alone():`. Ranks that reach a call minutes apart (one loading a "
        "model longer) can wait longer: PSHEADS_DIST_JOIN_TIMEOUT_MIN.")


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


@dataclass(frozen=True)
class _Digest:
    """A long value in a fingerprint: its length and a hash (messages name it without showing it)."""

    length: int
    hash: str


def fingerprint(ids: Tensor | Sequence[Tensor], *, model: torch.nn.Module | None = None,
                **settings: Any) -> dict[str, Any]:
    """A cheap fingerprint of a list of prompts, for the ranks to compare before any work.

    Args:
        ids: the prompts' token ids, ``[prompt, pos]`` or one ``[pos]`` tensor per prompt.
        model: the module that holds the model's weights, or None: kept as a hash of every
            parameter's and buffer's name, shape, dtype and ``SAMPLED`` of its values, evenly
            spaced (another seed, checkpoint, fine-tune or dtype changes it; one edited value may not).
        settings: what else every rank must share, by name: the settings that cut the prompts into
            items (``batch_size=…``), per-prompt choices (query positions), the method, its
            parameters and the precision; values with a long ``repr`` are kept as a hash of it.

    Returns:
        ``count`` (prompts), ``shapes``, a hash of the ``ids`` in order, ``model`` (when given),
        and ``settings``.
    """
    stacked = isinstance(ids, Tensor)
    rows = [ids] if isinstance(ids, Tensor) else list(ids)  # a stacked tensor is hashed in one piece
    digest = hashlib.blake2b(digest_size=16)
    for row in rows:
        row = row.detach().to("cpu", torch.int64).contiguous()
        digest.update(repr(tuple(row.shape)).encode())
        digest.update(row.numpy().data.cast("B"))
    shapes = tuple(rows[0].shape) if stacked else tuple(tuple(row.shape) for row in rows)
    return {"count": len(rows[0]) if stacked else len(rows), "shapes": _short(shapes),
            "ids": _Digest(sum(row.numel() for row in rows), digest.hexdigest()),
            **({} if model is None else {"model": _weights(model)}),
            **{name: _short(value) for name, value in settings.items()}}


def _weights(model: torch.nn.Module) -> _Digest:
    """A hash of ``model``'s parameters and buffers: names, shapes, dtypes and ``SAMPLED`` values of
    each (one gather per tensor on its device, one copy to the CPU)."""
    digest = hashlib.blake2b(digest_size=16)
    samples = []
    tensors = [*model.named_parameters(), *model.named_buffers()]
    for name, tensor in tensors:
        digest.update(f"{name} {tuple(tensor.shape)} {tensor.dtype};".encode())
        if tensor.numel() and tensor.device.type != "meta":  # meta: offloaded, no values here
            flat = tensor.detach().reshape(-1)
            where = torch.linspace(0, flat.numel() - 1, min(flat.numel(), SAMPLED), device=flat.device).long()
            samples.append(flat[where].contiguous().view(torch.uint8).cpu())  # bytes: any dtype, bit for bit
    if samples:
        digest.update(torch.cat(samples).numpy().data)
    return _Digest(len(tensors), digest.hexdigest())


def _short(value: Any) -> Any:
    """``value``, or a ``_Digest`` of its ``repr`` where that is long."""
    text = repr(value)
    if len(text) <= 48:
        return value
    return _Digest(len(value) if isinstance(value, Sized) else len(text),
                   hashlib.blake2b(text.encode(), digest_size=16).hexdigest())


def ordered_map(function: Callable[[T], R], items: Iterable[T], *, bar: Any = None,
                agree: Callable[[], Mapping[str, Any]] | None = None) -> Iterator[R]:
    """``function(item)`` for every item, in order, on every rank; each rank computes its share.

    Every rank must pass the same items in the same order (they are only enumerated, so pass
    cheap descriptions: prompt slices, cell keys). Rank ``r`` of ``N`` computes items ``r``,
    ``r + N``, …, inside ``alone()``; the results of each round of ``N`` are gathered to every
    rank. Memory holds one round of results. Before any work the ranks compare ``agree()``.

    Args:
        function: computes one item's result (picklable when ``N`` > 1).
        items: the work, identical on every rank.
        bar: a tqdm bar advanced once per item, or None.
        agree: what every rank must share, called once and only when ``N`` > 1: usually
            ``fingerprint(ids, batch_size=…)`` of the prompts that ``items`` cut. None: the items
            themselves when they are a ``range`` (of batch starts), else their number.

    Raises:
        ValueError: the ranks do not agree (every rank raises the same error).
        RuntimeError: another rank's ``function`` raised (this rank's own error is re-raised as is), or
            a rank did not reach this call within ``JOIN_TIMEOUT``.
    """
    here = world()
    if here.size > 1:
        if agree is None:
            if not isinstance(items, range):
                items = list(items)  # cheap descriptions: counted before any work
            agree = functools.partial(_described, items)
        _meet(here)
        _check_agreement(_everyone(agree, here))
    iterator = iter(items)
    while True:
        round_ = list(itertools.islice(iterator, here.size))
        if not round_:
            return
        if here.size == 1:
            results = [_compute(function, round_[0])]
        else:
            share = _nothing if here.rank >= len(round_) else functools.partial(_compute, function, round_[here.rank])
            results = _everyone(share, here)[:len(round_)]
        for result in results:
            if bar is not None:
                bar.update(1)
            yield result
        if len(round_) < here.size:
            return


def _described(items: range | list) -> dict[str, Any]:
    """The fingerprint of work that brings none: a range of batch starts itself, else the number of items."""
    return {"items": items if isinstance(items, range) else len(items)}


def _nothing() -> None:
    """A rank's share of a last round shorter than the ranks."""


def _compute(function: Callable[[T], R], item: T) -> R:
    with alone():
        return function(item)


def _everyone(compute: Callable[[], Any], here: World) -> list[Any]:
    """``compute()`` here, gathered from every rank; an error on any rank stops every rank."""
    try:
        mine = compute()
    except Exception as error:
        _gather(_Failure(here.rank, "".join(traceback.format_exception_only(error)).strip()), here)
        raise
    gathered = _gather(mine, here)
    failures = [value for value in gathered if isinstance(value, _Failure)]
    if failures:
        raise RuntimeError(f"rank {failures[0].rank} failed, so every rank stops: {failures[0].error}")
    return gathered


def _check_agreement(fingerprints: list[Mapping[str, Any]]) -> None:
    """Raise, on every rank alike, where a rank's fingerprint differs from rank 0's."""
    first = fingerprints[0]
    differences = []
    for rank, other in enumerate(fingerprints[1:], start=1):
        names = [name for name in {**first, **other} if first.get(name) != other.get(name)]
        if names:
            differences.append(f"rank {rank} differs from rank 0 in "
                               + ", ".join(_difference(name, first.get(name), other.get(name)) for name in names))
    if differences:
        shown = differences[:3] + ([f"{len(differences) - 3} more ranks differ"] if len(differences) > 3 else [])
        raise ValueError("every rank must pass the same model, prompts (in the same order) and settings: psheads "
                         "shards the prompts over the ranks itself (rank r of N computes batches r, r + N, …) and "
                         "gathers one result, so pass every rank all of them, one model (the same weights, dtype "
                         f"and precision) and one method with the same parameters; {'; '.join(shown)}.")


def _difference(name: str, first: Any, other: Any) -> str:
    if isinstance(first, _Digest) or isinstance(other, _Digest):
        return name
    return f"{name} ({first!r} vs {other!r})"


def _gather(value: Any, here: World) -> list[Any]:
    gathered: list[Any] = [None] * here.size
    dist.all_gather_object(gathered, value, group=_object_group())
    return gathered
