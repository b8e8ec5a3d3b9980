"""The cross-family atlas: every head of every zoo LLM, on three kinds of prompts at two lengths.

For each model the atlas scores every head with paper B's swap score and the all-permutation
ANOVA shares, every plane of every head (ANOVA at each length; the swap score, which costs one
head's worth of work per plane, at the lengths ``AtlasConfig.plane_swap_lengths`` names),
measures each head's frequency usage and paper B's frequency ID, on:

* ``natural``: windows of English prose shipped with psheads (``psheads.data``), each after BOS;
* ``random``: uniformly random ordinary tokens (special and ``<…>`` tokens excluded), after BOS;
* ``llm-number``, ``llm-letter``, ``binding``: the LLM task prompts (paper B's 1-hop tasks and
  paper A's Binding task) at the target windows ``AtlasConfig.task_windows``; these are scored
  per head only.

The query is each prompt's last token; the swappable keys are every earlier key but BOS.
``write_atlas`` writes one folder per model (``FILES``, and ``atlas.json`` last, once the
tables are complete), so a run can be interrupted and resumed model by model.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

import psheads.data as data
import psheads.tasks as tasks
from psheads.interface import distributed, validation
from psheads.interface.config import from_known_fields
from psheads.interface.progress import progress_bar
from psheads.measure.frequency_profile import ProfileConfig, frequency_id, frequency_profile
from psheads.measure.scoring import score_heads
from psheads.models import zoo
from psheads.results import analysis, schema
from psheads.rope.lens import RopeLens

logger = logging.getLogger(__name__)

TABLES = {"heads": schema.ATLAS_HEADS, "planes": schema.ATLAS_PLANES, "usage": schema.ATLAS_USAGE,
          "frequency_id": schema.ATLAS_FREQUENCY_ID}
"""The atlas tables of one model and their schemas."""
FILES = {"heads": "heads.csv", "planes": "planes.csv.gz", "usage": "usage.csv.gz", "frequency_id": "frequency_id.csv"}
"""The file of each table in a model's folder (the per-plane tables gzipped, with a fixed mtime so
that the same numbers give the same bytes)."""
RECORD = "atlas.json"
"""A model folder's record (config, timings, versions): written last, so its presence means complete."""


@dataclass(frozen=True)
class AtlasConfig:
    """What the atlas measures on each model.

    Attributes:
        lengths: prompt lengths in tokens (BOS included) of the natural and random prompts.
        n_prompts: prompts per set at each length (same order as ``lengths``).
        plane_swap_lengths: lengths at which every plane is also scored with the swap score.
        tasks: the LLM task prompt sets (registered names).
        task_windows: target windows of the task prompts.
        n_task_prompts: prompts per task and window.
        seed: seed of the random prompts and the task prompts.
        batch_size: prompts per forward pass.
    """

    lengths: tuple[int, ...] = (64, 512)
    n_prompts: tuple[int, ...] = (32, 8)
    plane_swap_lengths: tuple[int, ...] = (64,)
    tasks: tuple[str, ...] = ("llm-number", "llm-letter", "binding")
    task_windows: tuple[int, ...] = (12, 100)
    n_task_prompts: int = 32
    seed: int = 0
    batch_size: int = 8

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731  (a frozen dataclass)
        put("lengths", tuple(validation.integers(self.lengths, "lengths", minimum=3, unique=True)))
        put("n_prompts", tuple(validation.integers(self.n_prompts, "n_prompts", minimum=1)))
        if len(self.n_prompts) != len(self.lengths):
            raise ValueError(f"n_prompts needs one count per length: {len(self.lengths)} lengths, "
                             f"{len(self.n_prompts)} counts.")
        put("plane_swap_lengths", tuple(validation.integers(self.plane_swap_lengths, "plane_swap_lengths",
                                                            minimum=3, unique=True)))
        if not set(self.plane_swap_lengths) <= set(self.lengths):
            raise ValueError(f"plane_swap_lengths {self.plane_swap_lengths} must be among lengths {self.lengths}.")
        if isinstance(self.tasks, str) or not all(isinstance(name, str) for name in self.tasks):
            raise TypeError(f"tasks must be a list of registered task names, got {self.tasks!r}.")
        unknown = sorted(set(self.tasks) - set(tasks.available_tasks()))
        if unknown:
            raise ValueError(f"Unknown tasks {unknown}; registered: {tasks.available_tasks()}.")
        put("tasks", tuple(self.tasks))
        put("task_windows", tuple(validation.integers(self.task_windows, "task_windows", minimum=1, unique=True)))
        put("n_task_prompts", validation.integer(self.n_task_prompts, "n_task_prompts", minimum=1))
        put("seed", validation.seed(self.seed))
        put("batch_size", validation.integer(self.batch_size, "batch_size", minimum=1))

    def to_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AtlasConfig:
        if not isinstance(values, dict):
            raise TypeError(f"AtlasConfig.from_dict takes a dict, got {type(values).__name__}.")
        return from_known_fields(cls, values)


# --- prompt sets --------------------------------------------------------------------------------------
def natural_prompts(tokenizer: Any, text: str, length: int, n: int) -> Int[Tensor, "n length"]:
    """``n`` windows of ``length - 1`` tokens of ``text``, evenly spaced over it, each after BOS.

    Raises:
        ValueError: the text is too short for ``n`` windows of that length.
    """
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    n_windows = len(ids) // (length - 1)
    if n_windows < n:
        raise ValueError(f"The text gives {n_windows} windows of {length - 1} tokens; {n} were asked for.")
    starts = np.linspace(0, n_windows - 1, n).round().astype(int) * (length - 1)
    rows = [[_bos(tokenizer), *ids[s:s + length - 1]] for s in starts]
    return torch.tensor(rows, dtype=torch.long)


def random_prompts(tokenizer: Any, length: int, n: int, seed: int) -> Int[Tensor, "n length"]:
    """``n`` prompts of ``length - 1`` uniformly random ordinary tokens (no special, ``<…>`` or ``[…]``
    tokens), each after BOS; seeded."""
    special = set(tokenizer.all_special_ids)
    ordinary = torch.tensor(sorted(i for token, i in tokenizer.get_vocab().items()
                                   if i not in special and not re.fullmatch(r"<[^<>\s]*>|\[[^\]\s]*\]", token)),
                            dtype=torch.long)
    pick = torch.randint(0, len(ordinary), (n, length - 1), generator=torch.Generator().manual_seed(seed))
    return torch.cat([torch.full((n, 1), _bos(tokenizer), dtype=torch.long), ordinary[pick]], dim=1)


def _bos(tokenizer: Any) -> int:
    """The BOS id, or the end-of-text token that models without a BOS token (Qwen2.5) start documents with."""
    for name in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise ValueError("The tokenizer has neither a BOS nor an EOS token to start prompts with.")


def prompt_sets(tokenizer: Any, config: AtlasConfig, text: str | None = None) -> dict[tuple[str, int], Tensor]:
    """Every prompt set of the atlas: ``{(name, length or window): tokens}``."""
    text = data.path("prose.txt").read_text(encoding="utf-8") if text is None else text
    sets: dict[tuple[str, int], Tensor] = {}
    for length, n in zip(config.lengths, config.n_prompts, strict=True):
        sets["natural", length] = natural_prompts(tokenizer, text, length, n)
        sets["random", length] = random_prompts(tokenizer, length, n, config.seed)
    for name in config.tasks:
        for window in config.task_windows:
            task = tasks.get_task(name, window=window, tokenizer=tokenizer)
            sets[name, window] = tasks.checked_batch(task, config.n_task_prompts, seed=config.seed).tokens
    return sets


# --- one model ------------------------------------------------------------------------------------------
def atlas(model: str | Any, config: AtlasConfig | None = None, *, model_name: str | None = None,
          progress: bool | None = None) -> dict[str, pd.DataFrame]:
    """The atlas tables of one model (see the module docstring): ``{table: frame}`` as in ``TABLES``.

    Args:
        model: a zoo LLM's name (``psheads.zoo.LLMS``), or a TransformerLens model with a tokenizer.
        config: what to measure (default ``AtlasConfig()``).
        model_name: the ``model`` column (default: the zoo name, or the model's own name).
        progress: a bar over the measurements (default: in a notebook or on a terminal).
    """
    config = AtlasConfig() if config is None else config
    if not isinstance(config, AtlasConfig):
        raise TypeError(f"config must be an AtlasConfig, got {type(config).__name__}.")
    progress = validation.optional_boolean(progress, "progress")
    if isinstance(model, str):
        model_name = model if model_name is None else model_name
        model = zoo.load_pretrained(model).model
    lens = RopeLens(model)
    name = str(model_name if model_name is not None else lens.backend.model_name)
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("The atlas builds its prompts with the model's tokenizer, and this model has none.")
    kinds = {layer: kind if any(geo.window is not None for geo in lens.layers) else "full"
             for layer, kind in analysis.layer_kinds(lens).items()}
    sets = prompt_sets(tokenizer, config)
    common: dict[str, Any] = {"batch_size": config.batch_size, "progress": False}
    steps = [(key, method, planes) for key in sets for method in ("swap", "anova")
             for planes in ((False, True) if key[0] in ("natural", "random") else (False,))
             if not (planes and method == "swap" and key[1] not in config.plane_swap_lengths)]
    steps += [(key, "profile", False) for key in sets if key[0] in ("natural", "random")]
    heads: list[pd.DataFrame] = []
    planes: list[pd.DataFrame] = []
    usage: list[pd.DataFrame] = []
    ids: list[pd.DataFrame] = []
    for (prompts, length), method, by_frequency in progress_bar(steps, desc=f"atlas {name}", progress=progress):
        tokens = sets[prompts, length]
        keys = {"model": name, "prompts": prompts, "length": int(length)}
        if method == "profile":
            profile = frequency_profile(lens, tokens, **common)
            usage.append(profile.planes.assign(**keys))
            ids.append(profile.heads.assign(paper_b_id=_paper_b_ids(profile.planes, lens), **keys))
            continue
        frame = score_heads(lens, tokens, method=method, by_frequency=by_frequency, **common).assign(method=method,
                                                                                                   **keys)
        (planes if by_frequency else heads).append(frame)
    tables = {"heads": pd.concat(heads, ignore_index=True), "planes": pd.concat(planes, ignore_index=True),
              "usage": pd.concat(usage, ignore_index=True), "frequency_id": pd.concat(ids, ignore_index=True)}
    tables["heads"]["layer_kind"] = tables["heads"]["layer"].map(kinds)
    out = {}
    for table, frame_schema in TABLES.items():
        frame = tables[table]
        frame = frame[[column for column in frame_schema.names if column in frame.columns]].reset_index(drop=True)
        if "label" in frame.columns:
            frame = schema.ordered_labels(frame)
        frame.attrs = {"config": config.to_dict(), "model": name, "versions": schema.versions()}
        out[table] = frame
    return out


def _paper_b_ids(planes: pd.DataFrame, lens: RopeLens) -> np.ndarray:
    """Paper B's table-1 frequency ID of each head, in the order of ``FrequencyProfile.heads``:
    the usage profile's per-plane maximum logits without the attention scale, through the softmax."""
    paper_b = ProfileConfig(weighting="softmax", scale=False)
    scale = planes["layer"].map({geo.layer: geo.scale for geo in lens.layers})
    unscaled = planes.assign(max_logit=planes["max_logit"] / scale)
    return np.array([frequency_id(rows, paper_b) for _, rows in unscaled.groupby(["layer", "head"], sort=True)])


# --- every model, resumable -----------------------------------------------------------------------------
def write_atlas(models: Iterable[str], out_dir: str | Path, config: AtlasConfig | None = None, *,
                progress: bool | None = None) -> dict[str, Path]:
    """Write the atlas of each zoo LLM to ``out_dir/<model>/``, skipping models already complete.

    A model's folder is complete when its ``atlas.json`` exists and records the same config; it is
    written into a temporary folder and renamed into place, so an interrupted model leaves
    nothing half-written and is redone on the next call. Under ``torchrun`` every rank measures
    each model's batches (``psheads.interface.distributed``) and rank 0 writes the folders.

    Returns:
        ``{model: folder}`` for every model, written now or before.
    """
    config = AtlasConfig() if config is None else config
    names = list(models)
    unknown = [name for name in names if name not in zoo.LLMS]
    if not names or unknown:
        raise ValueError(f"models must name zoo LLMs ({', '.join(zoo.LLMS)}); got {names}.")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {}
    for name in names:
        folder = out_dir / name
        record = folder / RECORD
        if distributed.from_main(record.is_file() and json.loads(record.read_text()).get("config") == config.to_dict()):
            logger.info("%s: complete in %s, skipped", name, folder)
            done[name] = folder
            continue
        began = time.perf_counter()
        tables = atlas(name, config, progress=progress)  # its batches are spread over the ranks of a torchrun job
        done[name] = folder
        if not distributed.world().main:  # rank 0 writes
            continue
        with tempfile.TemporaryDirectory(dir=out_dir, prefix=f".{name}-") as scratch:
            partial = Path(scratch) / name
            partial.mkdir()
            for table, frame in tables.items():
                frame.to_csv(partial / FILES[table], index=False, float_format="%.6g",
                             compression={"method": "gzip", "mtime": 0} if FILES[table].endswith(".gz") else None)
            (partial / RECORD).write_text(json.dumps({
                "model": name, "config": config.to_dict(), "seconds": round(time.perf_counter() - began, 1),
                "rows": {table: len(frame) for table, frame in tables.items()}, "versions": schema.versions(),
                "licence": zoo.LLMS[name].licence}, indent=1))
            if folder.exists():
                shutil.rmtree(folder)
            partial.replace(folder)
        logger.info("%s: written to %s", name, folder)
    return done


def read_atlas(folder: str | Path, models: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The atlas tables of every complete model folder under ``folder``, concatenated: ``{table: frame}``.

    Raises:
        FileNotFoundError: no complete model folder.
    """
    folder = Path(folder)
    found = sorted(p for p in folder.iterdir() if (p / RECORD).is_file()) if folder.is_dir() else []
    if models is not None:
        found = [p for p in found if p.name in set(models)]
    if not found:
        raise FileNotFoundError(f"No complete atlas under {folder} (run `psheads atlas --out {folder}`).")
    out = {}
    for table in TABLES:
        frames = [pd.read_csv(p / FILES[table], float_precision="round_trip") for p in found]
        frame = pd.concat(frames, ignore_index=True)
        out[table] = schema.ordered_labels(frame) if "label" in frame.columns else frame
    return out
