"""``HeadPolicy``: a head map as a KV-cache policy, and the one rule that makes it from head scores.

A policy keeps the full KV cache for some KV heads and *streams* the others: a streamed head sees
only the first ``sink`` tokens and the last ``recent`` ones (StreamingLLM's pattern, DuoAttention's
streaming heads). Memory is saved per KV head, so a policy ranks KV heads by a *keep score* in
[0, 1] (higher keeps the full cache) and a budget (the share of KV heads streamed) cuts the ranking.

The default rule, fixed before any evaluation (``DEFAULT_SCORE``, ``DEFAULT_AGGREGATION``): a query
head's score is its symbolic score s_SYM (a head that attends by *what* a token is must reach any
token, wherever it is); a KV head's score is the largest score among the query heads that read it
(a KV group is streamed only when none of its query heads needs far content). Keep scores are the
ranks of those scores, ``(rank + ½) / N``: tie-free, evenly spaced and in (0, 1), so that every
reader's rule cuts the same ranking, if not always at the same place: kvpress streams the lowest
``round(r·N)``, DuoAttention's loader every score below ``np.quantile(scores, r)``, which is
``ceil(r·(N − 1))`` of them (5 of Gemma 3's 18 KV heads at r = 0.25, where kvpress streams 4);
``streamed(rule=...)`` gives either, and psheads' budget is kvpress's. Ties in the scores go to the
earlier layer and head being streamed first; a head without a finite score is kept full.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from psheads.interface import validation
from psheads.policy.windows import proportional_windows
from psheads.results import schema
from psheads.rope.backends import AttentionShape, short_name

logger = logging.getLogger(__name__)

Level = Literal["kv", "query"]
Rule = Literal["count", "quantile"]

DEFAULT_SINK = 64
"""Tokens at the start every streamed head keeps (DuoAttention's deployed value)."""
DEFAULT_RECENT = 256
"""Most recent tokens every streamed head keeps (DuoAttention's deployed value)."""
DEFAULT_BUDGET = 0.5
"""Share of KV heads streamed (DuoAttention's setting for grouped-query models)."""
DEFAULT_SCORE = "symbolic"
"""The query-head score the default rule ranks by (``QUERY_SCORES``)."""
DEFAULT_AGGREGATION = "max"
"""How the default rule makes a KV head's score from its query heads' (``AGGREGATIONS``)."""

QUERY_SCORES: dict[str, Callable[[pd.DataFrame], np.ndarray]] = {
    "symbolic": lambda frame: frame["symbolic"].to_numpy(float),
    "non-positional": lambda frame: 1.0 - frame["positional"].to_numpy(float),
    "contrast": lambda frame: (1.0 + frame["symbolic"].to_numpy(float) - frame["positional"].to_numpy(float)) / 2,
}
"""Query-head scores from a ``score_heads`` frame (higher: needs the full cache). Any other numeric
column of the frame (an anchor's criterion, say ``"retrieval"``) can be named instead."""

AGGREGATIONS: dict[str, Callable[[np.ndarray], float]] = {
    "max": lambda values: float(np.max(values)),
    "mean": lambda values: float(np.mean(values)),
    "min": lambda values: float(np.min(values)),
}
"""How a KV head's score comes from its query heads' scores (NaN scores left out; none left: NaN)."""

Grid = tuple[tuple[float, ...], ...]
Labels = tuple[tuple[str, ...], ...]


def as_grid(values: Any) -> Grid:
    """A 2-d array-like (an array, nested lists) as nested tuples of floats (the policy's grids)."""
    return tuple(tuple(float(x) for x in row) for row in np.asarray(values, dtype=float))


def as_labels(values: Any) -> Labels:
    """A 2-d array-like of labels as nested tuples of strings."""
    return tuple(tuple(str(x) for x in row) for row in values)


def _grid(values: Any, rows: int, columns: int, name: str) -> Grid:
    array = np.asarray(values, dtype=float)
    if array.shape != (rows, columns):
        raise ValueError(f"{name} must be {rows} layers × {columns} heads, got shape {array.shape}.")
    return tuple(tuple(float(x) for x in row) for row in array)


def tie_free_keep(scores: np.ndarray) -> np.ndarray:
    """Keep scores ``(rank + ½) / N`` of ``scores`` (any shape; NaN ranks highest: kept full).

    Ties rank in flat (layer, head) order: the earlier head ranks lower, so it is streamed first.
    """
    flat = np.asarray(scores, dtype=float).reshape(-1)
    filled = np.where(np.isfinite(flat), flat, np.inf)
    order = np.lexsort((np.arange(flat.size), filled))
    ranks = np.empty(flat.size, dtype=float)
    ranks[order] = np.arange(flat.size)
    return ((ranks + 0.5) / flat.size).reshape(np.shape(scores))


def streamed_count(budget: float, n: int) -> int:
    """How many of ``n`` heads a budget streams: ``round(budget · n)`` (Python's rounding, as kvpress)."""
    return int(round(budget * n))


def streamed_by_rule(keep: np.ndarray, budget: float, rule: Rule = "count") -> np.ndarray:
    """Which heads ``budget`` streams, as a boolean array shaped like ``keep``.

    ``"count"``: the lowest ``round(budget · N)`` keep scores (kvpress's ``DuoAttentionPress``).
    ``"quantile"``: every score below ``np.quantile(keep, budget)`` (DuoAttention's own loader; a
    budget of 0 streams none and of 1 all).
    """
    keep = np.asarray(keep, dtype=float)
    if rule == "count":
        chosen = np.zeros(keep.size, dtype=bool)
        chosen[np.argsort(keep, axis=None, kind="stable")[:streamed_count(budget, keep.size)]] = True
        return chosen.reshape(keep.shape)
    if rule == "quantile":
        if budget >= 1:
            return np.ones(keep.shape, dtype=bool)
        if budget <= 0:
            return np.zeros(keep.shape, dtype=bool)
        return keep < np.quantile(keep, budget)
    raise ValueError(f"rule must be 'count' or 'quantile', got {rule!r}.")


def check_budget(budget: Any) -> float:
    """A budget: the share of KV (or query) heads streamed, in [0, 1]."""
    return validation.number(budget, "budget (the share of heads streamed)", minimum=0.0, maximum=1.0)


def check_settings(sink: Any, recent: Any, budget: Any) -> tuple[int, int, float]:
    """Validated ``(sink, recent, budget)``: sink ≥ 0 tokens, a window of at least 1 token, a budget in [0, 1]."""
    return (validation.integer(sink, "sink", minimum=0), validation.integer(recent, "recent (window)", minimum=1),
            check_budget(budget))


@dataclass(frozen=True)
class HeadPolicy:
    """Which KV heads keep the full cache and which are streamed (sink + recent tokens).

    Grids are per attention layer (``layers``) and head, as nested tuples; ``frame()`` gives them as
    one tidy table.

    Attributes:
        model: the model's name (``psheads.rope.backends.AttentionShape.name``), or None when unknown
            (a file that does not say).
        architecture: the Hugging Face class, or None when unknown.
        layers: the attention layers the rows stand for.
        n_heads: query heads per layer.
        n_kv_heads: key/value heads per layer.
        kv_head_of: the KV head each query head reads.
        positional: per query head, s_POS (NaN where the map did not come from scores).
        symbolic: per query head, s_SYM (NaN likewise).
        labels: per query head, the label ("" where unknown).
        query_scores: per query head, the score ranked at ``level="query"`` (higher: keep).
        kv_scores: per KV head, the score its query heads aggregate to (higher: keep).
        keep: per KV head, the tie-free keep score in (0, 1) (``tie_free_keep`` of ``kv_scores``).
        query_keep: per query head, the tie-free keep score of ``query_scores``.
        sink: tokens at the start a streamed head keeps.
        recent: most recent tokens a streamed head keeps (the query's own included).
        budget: the default share of heads streamed.
        wavelengths: per KV head, positions per turn of the slowest RoPE plane carrying most of its
            logit use (``psheads.policy.windows``); with it, streamed heads get windows in proportion
            (``windows()``), at the same total KV as a uniform ``recent``. None: uniform windows.
        provenance: how the map was made (psheads version, prompts, lengths, score method, aggregation).
        d_head: key (and value) width per head, when known (``kv_bytes`` needs it).
        model_windows: per attention layer, the model's own sliding window (None: full), when known.
        max_window: with ``wavelengths``, the longest window a head can use (an input's length minus the
            sink): per-head windows are apportioned under it, so that they keep what uniform windows keep
            at that length. None: no cap.
    """

    model: str | None
    architecture: str | None
    layers: tuple[int, ...]
    n_heads: int
    n_kv_heads: int
    kv_head_of: tuple[int, ...]
    positional: Grid
    symbolic: Grid
    labels: Labels
    query_scores: Grid
    kv_scores: Grid
    keep: Grid
    query_keep: Grid
    sink: int = DEFAULT_SINK
    recent: int = DEFAULT_RECENT
    budget: float = DEFAULT_BUDGET
    wavelengths: Grid | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    d_head: int | None = None
    model_windows: tuple[int | None, ...] | None = None
    max_window: int | None = None

    def __post_init__(self) -> None:
        layers = validation.integers(self.layers, "layers", minimum=0, unique=True)
        if not layers:
            raise ValueError("A HeadPolicy needs at least one attention layer.")
        object.__setattr__(self, "layers", layers)
        heads = validation.integer(self.n_heads, "n_heads", minimum=1)
        kv_heads = validation.integer(self.n_kv_heads, "n_kv_heads", minimum=1)
        if heads % kv_heads:
            raise ValueError(f"n_heads ({heads}) must be a multiple of n_kv_heads ({kv_heads}).")
        kv_of = validation.integers(self.kv_head_of, "kv_head_of", minimum=0, maximum=kv_heads - 1)
        if len(kv_of) != heads or set(kv_of) != set(range(kv_heads)):
            raise ValueError(f"kv_head_of must name a KV head for each of the {heads} query heads and use all "
                             f"{kv_heads}, got {kv_of}.")
        object.__setattr__(self, "kv_head_of", kv_of)
        n = len(layers)
        for name in ("positional", "symbolic", "query_scores", "query_keep"):
            object.__setattr__(self, name, _grid(getattr(self, name), n, heads, name))
        for name in ("kv_scores", "keep"):
            object.__setattr__(self, name, _grid(getattr(self, name), n, kv_heads, name))
        labels = tuple(tuple(str(x) for x in row) for row in self.labels)
        if len(labels) != n or any(len(row) != heads for row in labels):
            raise ValueError(f"labels must be {n} layers × {heads} heads.")
        object.__setattr__(self, "labels", labels)
        for name in ("keep", "query_keep"):
            values = np.asarray(getattr(self, name))
            if not (np.isfinite(values).all() and (values > 0).all() and (values < 1).all()):
                raise ValueError(f"{name} must hold finite scores in (0, 1) (use tie_free_keep).")
            if len(np.unique(values)) != values.size:
                raise ValueError(f"{name} must be tie-free: serving stacks break ties at random (use tie_free_keep).")
        sink, recent, budget = check_settings(self.sink, self.recent, self.budget)
        object.__setattr__(self, "sink", sink)
        object.__setattr__(self, "recent", recent)
        object.__setattr__(self, "budget", budget)
        if self.wavelengths is not None:
            grid = _grid(self.wavelengths, n, kv_heads, "wavelengths")
            if not all(x > 0 for row in grid for x in row):
                raise ValueError("wavelengths must be positive (positions per turn; inf for plane 0).")
            object.__setattr__(self, "wavelengths", grid)
        if not isinstance(self.provenance, Mapping):
            raise TypeError(f"provenance must be a dict, got {type(self.provenance).__name__}.")
        object.__setattr__(self, "provenance", dict(self.provenance))
        if self.d_head is not None:
            object.__setattr__(self, "d_head", validation.integer(self.d_head, "d_head", minimum=1))
        if self.model_windows is not None:
            windows = tuple(None if w is None else validation.integer(w, "model_windows item", minimum=1)
                            for w in self.model_windows)
            if len(windows) != n:
                raise ValueError(f"model_windows must give one window (or None) per attention layer ({n}), got "
                                 f"{len(windows)}.")
            object.__setattr__(self, "model_windows", windows)
        if self.max_window is not None:
            object.__setattr__(self, "max_window", validation.integer(self.max_window, "max_window", minimum=1))

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_scores(cls, frame: pd.DataFrame, sink: int = DEFAULT_SINK, recent: int = DEFAULT_RECENT,
                    budget: float = DEFAULT_BUDGET, *, score: str = DEFAULT_SCORE,
                    aggregation: str = DEFAULT_AGGREGATION, n_kv_heads: int | None = None,
                    model: str | None = None, architecture: str | None = None,
                    provenance: Mapping[str, Any] | None = None, shape: AttentionShape | None = None) -> HeadPolicy:
        """A policy from one row per (layer, head): a reduced ``score_heads`` frame, or any frame with a score column.

        Args:
            frame: columns ``layer, head`` and the score's (``positional``, ``symbolic`` for the
                named scores; ``kv_head`` when present gives the GQA map, as ``score_heads`` writes).
            sink: tokens at the start a streamed head keeps.
            recent: most recent tokens a streamed head keeps.
            budget: the default share of KV heads streamed.
            score: ``"symbolic"`` (the default rule), ``"non-positional"``, ``"contrast"``
                (``QUERY_SCORES``), or another numeric column of ``frame`` (higher: keep).
            aggregation: ``"max"`` (the default rule), ``"mean"`` or ``"min"`` over a KV head's query heads.
            n_kv_heads: KV heads per layer when ``frame`` has no ``kv_head`` column (default: one per query head).
            model: the model's name (default: the last part of ``frame.attrs["model"]``).
            architecture: the Hugging Face class, when known.
            provenance: what to record beside the frame's own settings (prompts, lengths, …).
            shape: the model's ``attention_shape(model)``: its name, architecture, head width and own
                windows go into the policy (``kv_bytes`` needs them), and the frame must match it.

        Raises:
            ValueError: missing columns, a per-plane, per-prompt or several-lengths frame, missing or repeated heads,
                an unknown score or aggregation, or a frame that does not match ``shape``.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame with one row per (layer, head), got "
                            f"{type(frame).__name__}.")
        extra = [column for column in ("plane", "prompt") if column in frame.columns]
        if extra:
            raise ValueError(f"HeadPolicy.from_scores needs one row per head (a reduced score_heads frame without "
                             f"by_frequency); this frame has the column(s) {extra}.")
        if "length" in frame.columns and frame["length"].nunique() > 1:
            lengths = sorted(int(x) for x in pd.unique(frame["length"]))
            raise ValueError(f"HeadPolicy.from_scores needs the scores of one prompt length; this frame holds "
                             f"lengths {lengths}: select one, e.g. frame[frame['length'] == {lengths[0]}].")
        needed = ["layer", "head"] + (["positional", "symbolic"] if score in QUERY_SCORES else [score])
        missing = [column for column in needed if column not in frame.columns]
        if missing:
            raise ValueError(f"HeadPolicy.from_scores(score={score!r}) needs the columns {missing}; this frame has "
                             f"{list(frame.columns)}. Name a score of {sorted(QUERY_SCORES)} or a numeric column.")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {sorted(AGGREGATIONS)}, got {aggregation!r}.")
        rows = frame.sort_values(["layer", "head"], kind="stable")
        layers = tuple(int(x) for x in pd.unique(rows["layer"]))
        heads = sorted(int(x) for x in pd.unique(rows["head"]))
        n_heads = len(heads)
        if heads != list(range(n_heads)) or len(rows) != len(layers) * n_heads or \
                rows.duplicated(["layer", "head"]).any():
            raise ValueError(f"HeadPolicy.from_scores needs every head 0…{n_heads - 1} of every layer exactly once; "
                             f"got {len(rows)} rows for {len(layers)} layers and heads {heads}.")
        if "kv_head" in rows.columns:
            kv_of = tuple(int(x) for x in rows["kv_head"].to_numpy()[:n_heads])
            if not (rows["kv_head"].to_numpy().reshape(len(layers), n_heads) == np.asarray(kv_of)).all():
                raise ValueError("The kv_head column differs between layers; a policy needs one GQA map for all "
                                 "layers.")
        else:
            kv = n_heads if n_kv_heads is None else validation.integer(n_kv_heads, "n_kv_heads", minimum=1)
            if n_heads % kv:
                raise ValueError(f"n_kv_heads ({kv}) must divide the {n_heads} query heads.")
            kv_of = tuple(head // (n_heads // kv) for head in range(n_heads))
        n_kv = max(kv_of) + 1
        grid_shape = (len(layers), n_heads)
        if score in QUERY_SCORES:
            query = QUERY_SCORES[score](rows).reshape(grid_shape)
        else:
            if not pd.api.types.is_numeric_dtype(rows[score]):
                raise ValueError(f"score column {score!r} must be numeric, got dtype {rows[score].dtype}.")
            query = rows[score].to_numpy(float).reshape(grid_shape)
        unscored = int((~np.isfinite(query)).sum())
        if unscored:
            logger.warning("%d heads have no finite %s score; the policy keeps them full.", unscored, score)
        kv_scores = aggregate(query, kv_of, n_kv, aggregation)

        def column(name: str) -> np.ndarray:
            if name not in rows.columns:
                return np.full(grid_shape, np.nan)
            return rows[name].to_numpy(float).reshape(grid_shape)

        labels = rows["label"].astype(str).to_numpy().reshape(grid_shape) if "label" in rows.columns \
            else np.full(grid_shape, "", dtype=object)
        attrs = frame.attrs
        config = attrs.get("config") if isinstance(attrs.get("config"), Mapping) else {}
        record: dict[str, Any] = {
            "psheads": schema.versions().get("psheads"),
            "source": "score_heads" if "config" in attrs else "scores",
            "score": score, "aggregation": aggregation,
            "method": config.get("method") if config else None,
            "n_prompts": attrs.get("n_prompts"),
        }
        record.update(dict(provenance or {}))
        name = model if model is not None else attrs.get("model_name", attrs.get("model"))
        policy = cls(model=short_name(name), architecture=architecture, layers=layers, n_heads=n_heads,
                     n_kv_heads=n_kv, kv_head_of=kv_of, positional=as_grid(column("positional")),
                     symbolic=as_grid(column("symbolic")), labels=as_labels(labels), query_scores=as_grid(query),
                     kv_scores=as_grid(kv_scores), keep=as_grid(tie_free_keep(kv_scores)),
                     query_keep=as_grid(tie_free_keep(query)), sink=sink, recent=recent, budget=budget,
                     provenance=record)
        return policy if shape is None else policy.for_shape(shape)

    @classmethod
    def from_kv_scores(cls, kv_scores: Any, *, n_heads: int | None = None, sink: int = DEFAULT_SINK,
                       recent: int = DEFAULT_RECENT, budget: float = DEFAULT_BUDGET, model: str | None = None,
                       architecture: str | None = None, layers: Sequence[int] | None = None,
                       provenance: Mapping[str, Any] | None = None) -> HeadPolicy:
        """A policy from a layers × KV heads grid of scores (higher: keep), such as DuoAttention's gates.

        Query heads (``n_heads``, default one per KV head) take their KV head's score.
        """
        grid = np.asarray(kv_scores, dtype=float)
        if grid.ndim != 2 or grid.size == 0:
            raise ValueError(f"kv_scores must be a 2-d grid (layers × KV heads), got shape {grid.shape}.")
        n_layers, n_kv = grid.shape
        heads = n_kv if n_heads is None else validation.integer(n_heads, "n_heads", minimum=1)
        if heads % n_kv:
            raise ValueError(f"n_heads ({heads}) must be a multiple of the file's {n_kv} KV heads.")
        kv_of = tuple(head // (heads // n_kv) for head in range(heads))
        query = grid[:, list(kv_of)]
        nan = as_grid(np.full(query.shape, np.nan))
        return cls(model=model, architecture=architecture,
                   layers=tuple(range(n_layers)) if layers is None else tuple(layers), n_heads=heads, n_kv_heads=n_kv,
                   kv_head_of=kv_of, positional=nan, symbolic=nan, labels=as_labels(np.full(query.shape, "")),
                   query_scores=as_grid(query), kv_scores=as_grid(grid), keep=as_grid(tie_free_keep(grid)),
                   query_keep=as_grid(tie_free_keep(query)), sink=sink, recent=recent, budget=budget,
                   provenance=dict(provenance or {}))

    # --- reading ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int]:
        """(attention layers, query heads, KV heads)."""
        return len(self.layers), self.n_heads, self.n_kv_heads

    def streamed(self, budget: float | None = None, level: Level = "kv", rule: Rule = "count") -> np.ndarray:
        """Which heads ``budget`` (default: the policy's) streams: ``[layer, kv_head]`` (``level="kv"``)
        or ``[layer, head]`` (``level="query"``), boolean (``streamed_by_rule``)."""
        budget = self.budget if budget is None else check_budget(budget)
        if level == "kv":
            return streamed_by_rule(np.asarray(self.keep), budget, rule)
        if level == "query":
            return streamed_by_rule(np.asarray(self.query_keep), budget, rule)
        raise ValueError(f"level must be 'kv' (a KV group streamed together: the memory saving) or 'query' (one "
                         f"query head at a time), got {level!r}.")

    def streamed_query_heads(self, budget: float | None = None, level: Level = "kv") -> np.ndarray:
        """``[layer, head]``: the query heads that see only sink + recent tokens at ``budget``."""
        chosen = self.streamed(budget, level)
        return chosen[:, list(self.kv_head_of)] if level == "kv" else chosen

    def windows(self, budget: float | None = None, level: Level = "kv") -> np.ndarray:
        """``[layer, kv_head]`` (or ``[layer, head]``) recent windows at ``budget``: ``recent`` for each
        streamed head, 0 for full ones; with ``wavelengths``, streamed heads share the same total in
        proportion to their wavelengths (``psheads.policy.windows.proportional_windows``)."""
        chosen = self.streamed(budget, level)
        if self.wavelengths is None:
            return np.where(chosen, self.recent, 0)
        lengths = np.asarray(self.wavelengths)
        if level == "query":
            lengths = lengths[:, list(self.kv_head_of)]
        return proportional_windows(lengths, chosen, self.recent, self.max_window)

    def for_shape(self, shape: AttentionShape) -> HeadPolicy:
        """This policy with ``shape``'s name, architecture, head width and own windows filled in, after
        checking it describes that model (``check_fits``)."""
        check_fits(self, shape)
        return self.with_changes(model=self.model or shape.name, architecture=self.architecture or shape.architecture,
                                 d_head=shape.d_head, model_windows=shape.windows)

    def with_changes(self, **changes: Any) -> HeadPolicy:
        """A copy with some fields changed (``sink``, ``recent``, ``budget``, ``wavelengths``, …), validated."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        unknown = set(changes) - set(values)
        if unknown:
            raise ValueError(f"Unknown HeadPolicy fields {sorted(unknown)}; fields: {sorted(values)}.")
        values.update(changes)
        return HeadPolicy(**values)

    def frame(self, budget: float | None = None, level: Level = "kv") -> pd.DataFrame:
        """One row per (layer, head): ``layer, head, kv_head, positional, symbolic, label, query_score,
        kv_score, keep, streamed, window`` at ``budget`` (``window``: the head's recent tokens when
        streamed, 0 when it keeps the full cache). ``attrs`` holds the policy's settings."""
        streamed = self.streamed_query_heads(budget, level)
        windows = self.windows(budget, level)
        if level == "kv":
            windows = windows[:, list(self.kv_head_of)]
        rows = []
        for i, layer in enumerate(self.layers):
            for head in range(self.n_heads):
                kv = self.kv_head_of[head]
                rows.append({"layer": layer, "head": head, "kv_head": kv, "positional": self.positional[i][head],
                             "symbolic": self.symbolic[i][head], "label": self.labels[i][head],
                             "query_score": self.query_scores[i][head], "kv_score": self.kv_scores[i][kv],
                             "keep": self.keep[i][kv] if level == "kv" else self.query_keep[i][head],
                             "streamed": bool(streamed[i, head]), "window": int(windows[i, head])})
        frame = pd.DataFrame(rows)
        frame.attrs = {"model": self.model, "architecture": self.architecture, "sink": self.sink,
                       "recent": self.recent, "budget": self.budget if budget is None else check_budget(budget),
                       "level": level, "provenance": dict(self.provenance)}
        return frame

    def __repr__(self) -> str:
        layers, heads, kv = self.shape
        return (f"HeadPolicy(model={self.model!r}, {layers} layers × {heads} heads ({kv} KV), sink={self.sink}, "
                f"recent={self.recent}, budget={self.budget}, score={self.provenance.get('score')!r})")


def check_fits(policy: HeadPolicy, shape: AttentionShape) -> None:
    """Raise ``ValueError`` unless ``policy`` describes the model of ``shape`` (names both when not).

    The attention layers, query heads, KV heads and GQA map must match; so must the architecture and
    the model's name where the policy records them.
    """
    ours = f"{len(policy.layers)} layers × {policy.n_heads} heads ({policy.n_kv_heads} KV heads)"
    theirs = f"{len(shape.layers)} layers × {shape.n_heads} heads ({shape.n_kv_heads} KV heads)"
    if (policy.layers, policy.n_heads, policy.n_kv_heads, policy.kv_head_of) != \
            (shape.layers, shape.n_heads, shape.n_kv_heads, shape.kv_head_of):
        raise ValueError(f"This policy is for {ours} (layers {list(policy.layers)}), but the model {shape.name!r} has "
                         f"{theirs} (layers {list(shape.layers)}): use a policy made for this model.")
    if policy.architecture is not None and policy.architecture != shape.architecture:
        raise ValueError(f"This policy is for a {policy.architecture}, but the model is a {shape.architecture}: use a "
                         "policy made for this model.")
    if policy.model is not None and shape.name and policy.model != shape.name:
        raise ValueError(f"This policy is for the model {policy.model!r} ({ours}), but this model is {shape.name!r}: "
                         "use a policy made for it, or policy.with_changes(model=None) if it is the same model under "
                         "another name.")


def aggregate(query: np.ndarray, kv_head_of: Sequence[int], n_kv: int, aggregation: str) -> np.ndarray:
    """``[layer, kv_head]`` scores from ``[layer, head]`` query scores (NaN left out; an all-NaN group gives NaN)."""
    combine = AGGREGATIONS[aggregation]
    groups = [[head for head, kv in enumerate(kv_head_of) if kv == group] for group in range(n_kv)]
    out = np.full((query.shape[0], n_kv), np.nan)
    for i in range(query.shape[0]):
        for group, members in enumerate(groups):
            values = query[i, members]
            values = values[np.isfinite(values)]
            if values.size:
                out[i, group] = combine(values)
    return out
