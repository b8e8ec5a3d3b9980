"""Gated training sweep: small GPT-Js trained with access to chosen RoPE frequency bands only.

Paper A's causal claim is that the frequencies a head can reach decide what it can do: rotating
planes make positional behaviour possible, slow or zero-frequency ones symbolic behaviour, and
tasks that need both need both kinds of plane. ``gating_sweep`` tests it: for every task, band and
seed it trains a small GPT-J with ``psheads.train`` and ``TrainConfig.keep_planes`` (every head's
query may use only the band's planes, from the first step), then records the test accuracy and
the trained heads' scores (``score_heads`` on the task's prompts, as ``train`` computes them at its
final checkpoint). There is no second training loop: each cell is one ``train`` call.

Bands are named by position in the spectrum, so they adapt to the model's shape
(``band_planes``): ``fast`` (frequency IDs ``1 … width``), ``middle`` (``width`` planes centred in
``1 … F``), ``slow`` (the last ``width`` planes), ``zero`` (plane 0: the ``d_head − rotary_dim``
unrotated dims, which only exist when ``rotary_dim < d_head``), ``all`` (no gating), and unions
written with ``+`` (``"fast+zero"``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transformers

from psheads.interface import validation
from psheads.interface.config import from_known_fields
from psheads.interface.distributed import ordered_map, world
from psheads.interface.progress import progress_bar
from psheads.models import zoo
from psheads.models.training import TrainConfig, train
from psheads.results import schema
from psheads.tasks import Task, available_tasks, get_task

logger = logging.getLogger(__name__)

BASE_BANDS = ("all", "fast", "middle", "slow", "zero")
"""Band names ``band_planes`` knows; ``+`` joins them (``"all"`` only stands alone)."""

DEFAULT_BANDS = ("all", "fast", "middle", "slow", "zero", "fast+zero", "fast+slow", "middle+zero")
"""The bands of the shipped sweep: the ungated baseline, four single bands, three unions."""

CANONICAL_TASKS = ("index", "retrieval", "partial-induction")
"""Paper A's canonical tasks (``psheads.tasks.canonical``)."""

SWEEP_MODEL: dict[str, Any] = dict(
    n_layer=2,
    n_head=1,
    n_embd=64,
    rotary_dim=56,
    n_positions=64,
    resid_pdrop=0.0,
    embd_pdrop=0.0,
    attn_pdrop=0.0,
)
"""The sweep's GPT-J: 2 layers × 1 head, hidden 64 = d_head 64, RoPE on the first 56 dims (28
planes, base 10000) and 8 unrotated dims (plane 0, as wide as 4 planes), no dropout."""


def band_planes(band: str, config: transformers.PretrainedConfig | dict, width: int = 4) -> tuple[int, ...] | None:
    """The frequency IDs a band keeps in a GPT-J of this shape (None for ``"all"``: no gating).

    Args:
        band: a name in ``BASE_BANDS`` or a ``+``-joined union such as ``"fast+zero"``.
        config: a ``transformers.GPTJConfig``, or ``TrainConfig.model`` overrides of paper B's
            GPT-J (``psheads.zoo.gptj_config``).
        width: planes per rotating band (``fast``, ``middle``, ``slow``), 1 … F.

    Returns:
        Sorted frequency IDs (1 = fastest … F; 0 = the unrotated dims), or None for ``"all"``.

    Raises:
        ValueError: an unknown band, ``"all"`` inside a union, a repeated part, ``zero`` in a
            model that rotates every dim, or a width out of range.
    """
    if isinstance(config, dict):
        config = zoo.gptj_config(2, **config)
    d_head = config.n_embd // config.n_head
    rotary_dim = config.rotary_dim or d_head
    n_planes = rotary_dim // 2
    width = validation.integer(width, "width", minimum=1, maximum=n_planes)
    if not isinstance(band, str) or not band:
        raise TypeError(f"band must be a non-empty string such as 'fast' or 'fast+zero', got {band!r}.")
    parts = band.split("+")
    unknown = [part for part in parts if part not in BASE_BANDS]
    if unknown:
        raise ValueError(f"band {band!r} has unknown parts {unknown}; use {BASE_BANDS} or unions such as 'fast+zero'.")
    if len(set(parts)) != len(parts):
        raise ValueError(f"band {band!r} repeats a part.")
    if "all" in parts:
        if len(parts) > 1:
            raise ValueError(f"band {band!r}: 'all' (no gating) cannot be joined with other bands.")
        return None
    start = (n_planes - width) // 2 + 1
    ranges = {"fast": range(1, width + 1), "middle": range(start, start + width),
              "slow": range(n_planes - width + 1, n_planes + 1)}
    planes: set[int] = set()
    for part in parts:
        if part == "zero":
            if rotary_dim >= d_head:
                raise ValueError(f"band {band!r}: this model rotates all {d_head} head dims, so it has no "
                                 "zero-frequency plane 0; set rotary_dim < d_head (TrainConfig.model).")
            planes.add(0)
        else:
            planes.update(ranges[part])
    return tuple(sorted(planes))


def planes_text(planes: tuple[int, ...] | None) -> str:
    """``"all"`` or the frequency IDs separated by spaces (the frame's ``planes`` column)."""
    return "all" if planes is None else " ".join(str(plane) for plane in planes)


@dataclass(frozen=True)
class SweepConfig:
    """What ``gating_sweep`` trains and measures (frozen; validated; recorded in ``frame.attrs``).

    Attributes:
        tasks: registered task names (default: paper A's canonical tasks).
        bands: band names (``band_planes``); every one must exist in the model.
        seeds: training seeds; each cell (task, band) is trained once per seed.
        steps: optimizer steps per run.
        batch_size: prompts per step.
        lr: AdamW peak learning rate.
        warmup_steps: linear warm-up steps (then linear decay to 0), in ``[0, steps)``.
        length: prompt length of every task (tokens, query included).
        n_letters: alphabet size of every task.
        width: planes per rotating band.
        eval_prompts: fresh test prompts for the accuracy.
        score_prompts: test prompts scored with ``score_heads`` (≥ 1).
        model: GPT-J overrides (default ``SWEEP_MODEL``).
    """

    tasks: tuple[str, ...] = CANONICAL_TASKS
    bands: tuple[str, ...] = DEFAULT_BANDS
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    warmup_steps: int = 100
    length: int = 16
    n_letters: int = 8
    width: int = 4
    eval_prompts: int = 1024
    score_prompts: int = 128
    model: dict = field(default_factory=lambda: dict(SWEEP_MODEL))

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("tasks", "bands"):
            values = getattr(self, name)
            if not isinstance(values, (list, tuple)) or not values or not all(isinstance(v, str) for v in values):
                raise TypeError(f"{name} must be a non-empty list of names, got {values!r}.")
            if len(set(values)) != len(values):
                raise ValueError(f"{name} must not repeat names, got {list(values)}.")
            put(name, tuple(values))
        unknown = [task for task in self.tasks if task not in available_tasks()]
        if unknown:
            raise ValueError(f"tasks {unknown} are not registered; registered tasks: {available_tasks()}.")
        put("seeds", validation.integers(self.seeds, "seeds", minimum=0, unique=True))
        if not self.seeds:
            raise ValueError("seeds must name at least one seed.")
        for name in ("steps", "batch_size", "length", "n_letters", "width", "eval_prompts", "score_prompts"):
            put(name, validation.integer(getattr(self, name), name, minimum=1))
        put("warmup_steps", validation.integer(self.warmup_steps, "warmup_steps", minimum=0))
        if self.warmup_steps >= self.steps:
            raise ValueError(f"warmup_steps must lie in [0, steps), got {self.warmup_steps} with steps={self.steps}.")
        put("lr", validation.number(self.lr, "lr", above=0))
        put("model", dict(TrainConfig(model=self.model).model))  # validated as TrainConfig validates it
        for band in self.bands:
            band_planes(band, self.model, self.width)
        for name in self.tasks:
            self.task(name)  # task options checked now, not halfway through a sweep

    def task(self, name: str) -> Task:
        """The task ``name`` with the sweep's length and alphabet."""
        return get_task(name, length=self.length, n_letters=self.n_letters)

    def planes(self, band: str) -> tuple[int, ...] | None:
        """``band_planes(band)`` for the sweep's model."""
        return band_planes(band, self.model, self.width)

    def train_config(self, band: str, seed: int) -> TrainConfig:
        """The ``TrainConfig`` of one run: one checkpoint at the end, scored on ``score_prompts``."""
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr, warmup_steps=self.warmup_steps,
                           checkpoint_every=self.steps, eval_prompts=self.eval_prompts,
                           dynamics_prompts=self.score_prompts, seed=seed, model=self.model,
                           keep_planes=self.planes(band))

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out = asdict(self)
        for name in ("tasks", "bands", "seeds"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SweepConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored."""
        return from_known_fields(cls, data)


def run_cell(config: SweepConfig, task: str, band: str, seed: int, output_dir: str | Path) -> pd.DataFrame:
    """Train one (task, band, seed) run into ``output_dir`` and return its rows of the sweep frame.

    One row per layer and head of the trained model (schema ``psheads.results.schema.GATING_SWEEP``); the
    run's accuracy is repeated on each. ``frame.attrs["seconds"]`` is the training time.
    """
    if not isinstance(config, SweepConfig):
        raise TypeError(f"config must be a SweepConfig, got {type(config).__name__}.")
    if task not in config.tasks or band not in config.bands or seed not in config.seeds:
        raise ValueError(f"({task!r}, {band!r}, {seed!r}) is not a cell of this sweep: tasks {config.tasks}, "
                         f"bands {config.bands}, seeds {config.seeds}.")
    training = config.train_config(band, seed)
    result = train(config.task(task), training, output_dir=output_dir, resume=False, progress=False)
    scores = result.dynamics[result.dynamics["step"] == config.steps]
    frame = pd.DataFrame({
        "task": task, "band": band, "planes": planes_text(training.keep_planes), "seed": seed, "steps": config.steps,
        "layer": scores["layer"].to_numpy(), "head": scores["head"].to_numpy(),
        "accuracy": scores["accuracy_all"].to_numpy(),
        **{name: scores[name].to_numpy() for name in ("positional", "symbolic", "positional_std", "symbolic_std",
                                                      "label")},
    })
    frame.attrs["seconds"] = result.seconds
    return frame[schema.GATING_SWEEP.names]


def band_geometry(config: SweepConfig) -> pd.DataFrame:
    """The planes of every band of ``config``, read from the sweep model's own rotation tables.

    Returns:
        One row per band and plane: ``band, plane, theta`` (radians per position), ``period``
        (positions per turn; inf for plane 0); ``"all"`` lists every plane.
    """
    from psheads.rope.lens import as_lens

    geometry = as_lens(zoo.random_gptj(seed=0, **config.model)).geometry_frame()
    geometry = geometry[geometry["layer"] == 0].set_index("plane")
    rows = []
    for band in config.bands:
        planes = config.planes(band)
        for plane in (sorted(geometry.index) if planes is None else planes):
            rows.append({"band": band, "plane": int(plane), "theta": float(geometry.loc[plane, "theta"]),
                         "period": float(geometry.loc[plane, "period"])})
    return pd.DataFrame(rows)


def _cell(config: SweepConfig, cell: tuple[str, str, int], output_dir: Path) -> pd.DataFrame:
    """``run_cell`` with its training seconds as a column (attrs do not survive pickling in every pandas)."""
    frame = run_cell(config, *cell, output_dir)
    return frame.assign(_seconds=frame.attrs["seconds"])


def _cell_in_worker(config: SweepConfig, task: str, band: str, seed: int, output_dir: Path,
                    threads: int) -> pd.DataFrame:
    """``_cell`` in a worker process, with that process's torch threads set first."""
    torch.set_num_threads(threads)
    return _cell(config, (task, band, seed), output_dir)


def gating_sweep(config: SweepConfig | None = None, progress: bool | None = None, workers: int = 1,
                 threads: int = 1) -> pd.DataFrame:
    """Train every (task, band, seed) cell of ``config`` and return one tidy frame.

    Runs are written to a temporary directory that is removed afterwards. The frame has one row
    per task, band, seed, layer and head (schema ``psheads.results.schema.GATING_SWEEP``), in the order
    tasks × bands × seeds whatever the number of workers; ``frame.attrs`` records the config, the
    planes of every band, the training seconds of every cell, the wall-clock seconds and the
    versions.

    Args:
        config: the sweep (default ``SweepConfig()``).
        progress: progress bar (default: in a notebook or on a terminal).
        workers: processes training cells side by side (1: in this process; in a ``torchrun`` job
            the ranks take the cells in turn and every rank returns the whole frame). Small models
            train fastest with one torch thread per process and one process per core.
        threads: torch threads of each worker process (ignored when ``workers`` is 1: this
            process's setting is left alone).
    """
    config = SweepConfig() if config is None else config
    if not isinstance(config, SweepConfig):
        raise TypeError(f"config must be a SweepConfig, got {type(config).__name__}.")
    progress = validation.optional_boolean(progress, "progress")
    workers = validation.integer(workers, "workers", minimum=1)
    threads = validation.integer(threads, "threads", minimum=1)
    if workers > 1 and world().size > 1:
        raise ValueError(f"workers={workers} inside a torchrun job of {world().size} ranks: the ranks already train "
                         "cells side by side; pass workers=1.")
    cells = [(task, band, seed) for task in config.tasks for band in config.bands for seed in config.seeds]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="psheads-sweep-") as scratch:
        directories = [Path(scratch) / f"cell-{index:04d}" for index in range(len(cells))]
        if workers == 1:  # in this process, or spread over the ranks of a torchrun job
            with progress_bar(total=len(cells), desc="gating sweep", progress=progress) as bar:
                frames = list(ordered_map(lambda each: _cell(config, *each), zip(cells, directories, strict=True),
                                          bar=bar))
        else:
            context = multiprocessing.get_context("spawn")  # no forked torch thread pools
            with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
                futures = [pool.submit(_cell_in_worker, config, task, band, seed, directory, threads)
                           for (task, band, seed), directory in zip(cells, directories, strict=True)]
                for _ in progress_bar(concurrent.futures.as_completed(futures), total=len(futures), desc="gating sweep",
                                      progress=progress):
                    pass
                frames = [future.result() for future in futures]
    seconds = []
    for (task, band, seed), cell in zip(cells, frames, strict=True):
        seconds.append({"task": task, "band": band, "seed": seed, "train_seconds": float(cell["_seconds"].iloc[0])})
        logger.info("%s / %s / seed %d: accuracy %.3f (%.1f s)", task, band, seed, cell["accuracy"].iloc[0],
                    seconds[-1]["train_seconds"])
    frame = pd.concat([cell.drop(columns="_seconds") for cell in frames], ignore_index=True)
    frame.attrs = {"config": config.to_dict(),
                   "bands": {band: planes_text(config.planes(band)) for band in config.bands},
                   "cells": seconds, "seconds": time.perf_counter() - began, "workers": workers, "threads": threads,
                   "versions": schema.versions()}
    return frame
