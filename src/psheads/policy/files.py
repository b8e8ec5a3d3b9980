"""A policy in the files serving stacks read, written and read back.

* **DuoAttention's pattern folder** (``write_duo_folder`` / ``read_duo_folder``):
  ``full_attention_heads.tsv`` (one row per layer, one tab-separated column per KV head, the keep
  scores in [0, 1]) and ``config.json`` with ``sink_size``, ``recent_size`` and ``sparsity`` (the
  budget: the share of KV heads streamed), plus a ``psheads`` block (the model, the GQA map, the
  query-head scores and labels, how the map was made). duo-attention streams every head below
  ``np.quantile(scores, sparsity)``; kvpress's ``DuoAttentionPress`` and an SGLang fork read the same
  two files (kvpress streams the lowest ``round(r · N)``; the fork lets ``deploy_sink_size`` /
  ``deploy_recent_size`` override the plain sizes, and so does ``read_duo_folder``).
* **A 0/1 mask** (``write_mask`` / ``read_mask``): the same grid, 1 = full cache, 0 = streamed, at one budget.
* **Retrieval-Head / HeadKV scores** (``write_head_scores`` / ``read_head_scores``): JSON
  ``{"layer-head": [score, ...]}`` over query heads; a reader averages each list. Reading one makes
  the KV scores by the largest score in each group (``aggregation``).

Reading any of them gives a ``HeadPolicy``, so an anchor's map goes through the same code as
psheads' own; given ``shape=`` (``attention_shape(model)``), a file that does not fit the model is
refused with both shapes named. Scores are written with 9 significant digits: the tie-free keep
scores stay distinct and in order, so every reader's rule cuts the same ranking.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from psheads.interface.atomic import write_atomic
from psheads.policy.head_policy import (
    AGGREGATIONS,
    DEFAULT_BUDGET,
    DEFAULT_RECENT,
    DEFAULT_SINK,
    HeadPolicy,
    aggregate,
    as_grid,
    as_labels,
    check_budget,
    tie_free_keep,
)
from psheads.rope.backends import AttentionShape

FULL_HEADS = "full_attention_heads.tsv"
"""DuoAttention's grid of keep scores (layers × KV heads)."""
CONFIG = "config.json"
"""DuoAttention's settings file beside it."""


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (``write_atomic``), creating its folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def _grid_text(grid: Any, digits: int = 9) -> str:
    return "".join("\t".join(f"{float(x):.{digits}g}" for x in row) + "\n" for row in np.asarray(grid))


def _read_grid(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"No file {path}.")
    try:
        grid = np.loadtxt(path, dtype=float, delimiter="\t", ndmin=2)
    except ValueError as error:
        raise ValueError(f"{path} is not a tab-separated grid of numbers (layers × KV heads): {error}") from None
    if grid.size == 0:
        raise ValueError(f"{path} is empty: it should hold one row per layer and one column per KV head.")
    return grid


def _check_shape(grid: np.ndarray, shape: AttentionShape | None, path: Path, what: str) -> None:
    if shape is not None and grid.shape != (len(shape.layers), shape.n_kv_heads):
        raise ValueError(f"{path} holds {grid.shape[0]} layers × {grid.shape[1]} {what}, but the model {shape.name!r} "
                         f"has {len(shape.layers)} layers × {shape.n_kv_heads} KV heads: it is a map of another "
                         "model.")


def _record(policy: HeadPolicy) -> dict[str, Any]:
    """Everything a ``HeadPolicy`` holds beyond the grid, as plain JSON data (NaN as null)."""

    def plain(grid: Any) -> list:
        return [[None if isinstance(x, float) and not math.isfinite(x) else x for x in row] for row in grid]

    return {"model": policy.model, "architecture": policy.architecture, "layers": list(policy.layers),
            "n_heads": policy.n_heads, "n_kv_heads": policy.n_kv_heads, "kv_head_of": list(policy.kv_head_of),
            "budget": policy.budget, "positional": plain(policy.positional), "symbolic": plain(policy.symbolic),
            "labels": [list(row) for row in policy.labels], "query_scores": plain(policy.query_scores),
            "kv_scores": plain(policy.kv_scores),
            "wavelengths": None if policy.wavelengths is None else plain(policy.wavelengths),
            "d_head": policy.d_head,
            "model_windows": None if policy.model_windows is None else list(policy.model_windows),
            "max_window": policy.max_window,
            "provenance": dict(policy.provenance)}


def _nan(grid: Any) -> np.ndarray:
    return np.asarray([[math.nan if x is None else x for x in row] for row in grid], dtype=float)


# --- DuoAttention's folder ------------------------------------------------------------------------
def write_duo_folder(policy: HeadPolicy, folder: str | Path, budget: float | None = None) -> Path:
    """Write ``policy`` as DuoAttention's pattern folder; returns the folder.

    Args:
        policy: the policy.
        folder: where to write ``full_attention_heads.tsv`` and ``config.json`` (created if needed).
        budget: the ``sparsity`` recorded (default: the policy's budget).
    """
    folder = Path(folder)
    budget = policy.budget if budget is None else check_budget(budget)
    config = {"sink_size": policy.sink, "recent_size": policy.recent, "sparsity": budget,
              "psheads": {**_record(policy), "budget": budget}}
    _write_atomic(folder / FULL_HEADS, _grid_text(policy.keep))
    _write_atomic(folder / CONFIG, json.dumps(config, indent=1, allow_nan=False) + "\n")
    return folder


def read_duo_folder(folder: str | Path, shape: AttentionShape | None = None) -> HeadPolicy:
    """A ``HeadPolicy`` from a DuoAttention pattern folder (psheads' own or an anchor's).

    The grid's scores (clipped to [0, 1], as duo-attention does) become the KV scores; ``sink_size``
    and ``recent_size`` (or ``deploy_sink_size`` / ``deploy_recent_size``, which take precedence) and
    ``sparsity`` the sink, window and budget. A folder psheads wrote gives back the policy it wrote.

    Raises:
        FileNotFoundError: the folder lacks either file.
        ValueError: a malformed file, or a grid that does not fit ``shape``.
    """
    folder = Path(folder)
    grid = np.clip(_read_grid(folder / FULL_HEADS), 0, 1)
    _check_shape(grid, shape, folder / FULL_HEADS, "KV heads")
    if not (folder / CONFIG).is_file():
        raise FileNotFoundError(f"No {CONFIG} in {folder}: DuoAttention's folder holds {FULL_HEADS} and {CONFIG} "
                                "(sink_size, recent_size).")
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{folder / CONFIG} is not valid JSON: {error}") from None
    sink = int(config.get("deploy_sink_size", config.get("sink_size", DEFAULT_SINK)))
    recent = int(config.get("deploy_recent_size", config.get("recent_size", DEFAULT_RECENT)))
    budget = float(config.get("sparsity", DEFAULT_BUDGET))
    ours = config.get("psheads")
    if isinstance(ours, Mapping):
        return _from_record(ours, grid, sink, recent, budget, shape)
    policy = HeadPolicy.from_kv_scores(grid, n_heads=None if shape is None else shape.n_heads, sink=sink,
                                       recent=recent, budget=budget,
                                       layers=None if shape is None else shape.layers,
                                       provenance={"source": f"DuoAttention folder {folder.name}"})
    return policy if shape is None else policy.for_shape(shape)


def _from_record(record: Mapping[str, Any], grid: np.ndarray, sink: int, recent: int, budget: float,
                 shape: AttentionShape | None) -> HeadPolicy:
    kv_scores = _nan(record["kv_scores"])
    if kv_scores.shape != grid.shape:
        raise ValueError(f"The psheads block of config.json describes {kv_scores.shape[0]} layers × "
                         f"{kv_scores.shape[1]} KV heads, but the grid has shape {grid.shape}.")
    query = _nan(record["query_scores"])
    policy = HeadPolicy(
        model=record.get("model"), architecture=record.get("architecture"), layers=tuple(record["layers"]),
        n_heads=int(record["n_heads"]), n_kv_heads=int(record["n_kv_heads"]), kv_head_of=tuple(record["kv_head_of"]),
        positional=as_grid(_nan(record["positional"])), symbolic=as_grid(_nan(record["symbolic"])),
        labels=as_labels(record["labels"]), query_scores=as_grid(query), kv_scores=as_grid(kv_scores),
        keep=as_grid(grid), query_keep=as_grid(tie_free_keep(query)), sink=sink, recent=recent, budget=budget,
        wavelengths=None if record.get("wavelengths") is None else as_grid(_nan(record["wavelengths"])),
        provenance=dict(record.get("provenance") or {}), d_head=record.get("d_head"),
        model_windows=None if record.get("model_windows") is None else tuple(record["model_windows"]),
        max_window=record.get("max_window"))
    return policy if shape is None else policy.for_shape(shape)


# --- a 0/1 mask --------------------------------------------------------------------------------------
def write_mask(policy: HeadPolicy, path: str | Path, budget: float | None = None) -> Path:
    """Write the 0/1 grid (layers × KV heads; 1 = full cache, 0 = streamed) at ``budget`` (default: the policy's)."""
    path = Path(path)
    full = ~policy.streamed(budget)
    _write_atomic(path, "".join("\t".join(str(int(x)) for x in row) + "\n" for row in full))
    return path


def read_mask(path: str | Path, shape: AttentionShape | None = None, sink: int = DEFAULT_SINK,
              recent: int = DEFAULT_RECENT) -> HeadPolicy:
    """A ``HeadPolicy`` from a 0/1 mask (1 = full): its budget streams exactly the 0 entries.

    Raises:
        ValueError: entries other than 0 and 1, or a grid that does not fit ``shape``.
    """
    path = Path(path)
    grid = _read_grid(path)
    if not np.isin(grid, (0, 1)).all():
        raise ValueError(f"{path} must hold only 0 (streamed) and 1 (full cache); it has {sorted(set(grid.ravel()))}.")
    _check_shape(grid, shape, path, "KV heads")
    policy = HeadPolicy.from_kv_scores(grid, n_heads=None if shape is None else shape.n_heads, sink=sink,
                                       recent=recent, budget=float(1 - grid.mean()),
                                       layers=None if shape is None else shape.layers,
                                       provenance={"source": f"0/1 mask {path.name}"})
    return policy if shape is None else policy.for_shape(shape)


# --- Retrieval-Head / HeadKV scores ------------------------------------------------------------------
def write_head_scores(policy: HeadPolicy, path: str | Path) -> Path:
    """Write the query-head scores as ``{"layer-head": [score]}`` (HeadKV / Retrieval Head's JSON); layers
    are counted by position among the attention layers. A head without a finite score is written as 1
    (kept), as the policy treats it."""
    path = Path(path)
    scores = {f"{i}-{head}": [float(x) if math.isfinite(x) else 1.0]
              for i, row in enumerate(policy.query_scores) for head, x in enumerate(row)}
    _write_atomic(path, json.dumps(scores, indent=1) + "\n")
    return path


def read_head_scores(path: str | Path, shape: AttentionShape | None = None, *, n_kv_heads: int | None = None,
                     aggregation: str = "max", sink: int = DEFAULT_SINK, recent: int = DEFAULT_RECENT,
                     budget: float = DEFAULT_BUDGET) -> HeadPolicy:
    """A ``HeadPolicy`` from Retrieval-Head / HeadKV JSON scores (each head's list averaged).

    KV heads come from ``shape`` (or ``n_kv_heads``; default one per query head) and take the
    ``aggregation`` of their query heads' scores.

    Raises:
        ValueError: malformed keys or scores, missing heads, or a map that does not fit ``shape``.
    """
    path = Path(path)
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {sorted(AGGREGATIONS)}, got {aggregation!r}.")
    if not path.is_file():
        raise FileNotFoundError(f"No file {path}.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, Mapping) or not data:
        raise ValueError(f"{path} must hold a JSON object {{\"layer-head\": [scores]}}.")
    entries: dict[tuple[int, int], float] = {}
    for key, value in data.items():
        parts = str(key).split("-")
        if len(parts) != 2 or not all(part.isdigit() for part in parts):
            raise ValueError(f"{path}: key {key!r} is not 'layer-head' (two integers joined by '-').")
        values = value if isinstance(value, list) else [value]
        try:
            entries[int(parts[0]), int(parts[1])] = float(np.mean([float(x) for x in values])) if values else math.nan
        except (TypeError, ValueError):
            raise ValueError(f"{path}: the scores of {key!r} are not numbers: {value!r}.") from None
    n_layers = max(layer for layer, _ in entries) + 1
    n_heads = max(head for _, head in entries) + 1
    if shape is not None and (n_layers, n_heads) != (len(shape.layers), shape.n_heads):
        raise ValueError(f"{path} scores {n_layers} layers × {n_heads} heads, but the model {shape.name!r} has "
                         f"{len(shape.layers)} layers × {shape.n_heads} heads: it is a map of another model.")
    missing = [f"{layer}-{head}" for layer in range(n_layers) for head in range(n_heads)
               if (layer, head) not in entries]
    if missing:
        raise ValueError(f"{path} lacks the heads {missing[:8]}{' …' if len(missing) > 8 else ''}; it must score "
                         "every head of every layer.")
    query = np.asarray([[entries[layer, head] for head in range(n_heads)] for layer in range(n_layers)])
    if shape is not None and n_kv_heads is not None and n_kv_heads != shape.n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} contradicts the model's {shape.n_kv_heads} KV heads: leave it out.")
    n_kv = shape.n_kv_heads if shape is not None else (n_heads if n_kv_heads is None else int(n_kv_heads))
    if n_heads % n_kv:
        raise ValueError(f"n_kv_heads ({n_kv}) must divide the {n_heads} query heads.")
    kv_of = tuple(head // (n_heads // n_kv) for head in range(n_heads))
    kv_scores = aggregate(query, kv_of, n_kv, aggregation)
    nan = as_grid(np.full(query.shape, math.nan))
    policy = HeadPolicy(model=None, architecture=None,
                        layers=tuple(range(n_layers)) if shape is None else shape.layers, n_heads=n_heads,
                        n_kv_heads=n_kv, kv_head_of=kv_of, positional=nan, symbolic=nan,
                        labels=as_labels(np.full(query.shape, "")), query_scores=as_grid(query),
                        kv_scores=as_grid(kv_scores), keep=as_grid(tie_free_keep(kv_scores)),
                        query_keep=as_grid(tie_free_keep(query)), sink=sink, recent=recent,
                        budget=budget, provenance={"source": f"head scores {path.name}", "aggregation": aggregation})
    return policy if shape is None else policy.for_shape(shape)
