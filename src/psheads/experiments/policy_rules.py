"""The rules that grade psheads' head map as a KV-cache policy, fixed before any measurement.

This module was committed on its own, before the first evaluation of a policy on a real model
(``git log --follow`` on this file gives the commit); any later change to a threshold or a rule is
committed alone, before re-measuring, and the report records the commit the rules came from.

What is measured (``psheads.experiments.attention_policy``): teacher-forced accuracy on long-context
tasks (multi-key needle, variable tracking, copying repeated random tokens, passkey) and the
perplexity of prose, at each length, under full attention and under every condition at the same KV
budget: psheads' map, ``N_RANDOM`` random maps over all KV heads and as many drawn within the map's
layers, the anti-map (the most symbolic heads streamed), StreamingLLM (every head streamed, the same
total KV), and the anchors' criteria re-implemented on the same model (retrieval score, echo plus
induction, the share of attention beyond the window).

The rules:

* **Cells.** A (model, task, length) cell counts only where full attention scores at least
  ``FULL_ATTENTION_MIN``; the others are reported and graded nowhere.
* **G1, no harm** (``RETENTION_TASKS`` at ``PRIMARY_BUDGET``): in every counted cell, the map keeps at
  least ``RETENTION_MIN`` of full attention's accuracy.
* **G2, better than chance** (``RETRIEVAL_TASKS`` at ``PRIMARY_BUDGET``): per (model, length), the map's
  accuracy averaged over the counted cells is above the random maps' (each draw averaged over the
  same cells; one-sided permutation p-value ``(1 + #draws ≥ map) / (1 + #draws) ≤ ALPHA``); the
  median over counted cells of (map − median random map) is at least ``MEDIAN_GAP_MIN``; the median
  of (anti-map − median random map) is below 0.
* **G3, the anchors**: the median over counted retrieval cells of (best anchor − map) is at most
  ``ANCHOR_MARGIN`` (the best anchor: the one with the highest mean over those cells), and the median
  of (map − beyond-window baseline) is above 0.
* **G4, agreement** with the retrieval-score map: Spearman ρ of the KV keep scores and the overlap of
  the halves each streams, reported (no threshold; the anchors agree at ρ ≈ 0.5 and 62–72 %).
* **G5, Gemma 3's design**: the positional score separates its sliding-window layers from its global
  layers with AUC ≥ ``AUC_MIN``, at the map's own setting (prose at the evaluation length, swap score).
* **G6, memory**: the KV kept at ``KV_LENGTH`` tokens is at least ``KV_RATIOS[b]`` times smaller than
  full attention's at budget b.
* **G7, perplexity**: at ``PRIMARY_BUDGET`` the map's perplexity on prose is at most
  ``PERPLEXITY_RISE_MAX`` above full attention's, at every length.
* **G8, cost**: a forward under a policy costs at most ``FORWARD_COST_MAX`` times the plain SDPA forward
  of the same batch (``benchmarks/policy_forward.py``).

A goal with no counted cell, or without the measurements it needs, is "not measured", never "met".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from psheads.results import schema

FULL_ATTENTION_MIN = 0.8
"""A cell counts only where full attention's accuracy is at least this."""
PRIMARY_BUDGET = 0.5
"""The budget (share of KV heads streamed) every comparison is made at."""
BUDGETS = (0.25, 0.5, 0.75)
"""The budgets measured (the curves)."""
SINK = 64
"""Sink tokens of every streamed head."""
RECENT = 256
"""Recent tokens of every streamed head."""
N_RANDOM = 20
"""Random maps per condition (over all KV heads; and as many within the map's layers)."""
ALPHA = 0.05
"""One-sided level of the permutation test."""
RETENTION_MIN = 0.95
"""G1: the map keeps at least this share of full attention's accuracy."""
RETENTION_TASKS = ("needle", "copy", "passkey")
"""G1's tasks."""
RETRIEVAL_TASKS = ("needle", "variable-tracking", "copy", "passkey")
"""G2's and G3's tasks."""
MEDIAN_GAP_MIN = 0.15
"""G2: the median gap between the map and the median random map."""
ANCHORS = ("retrieval", "razor")
"""G3: the anchors' criteria the map is held to."""
BASELINE = "beyond-window"
"""G3: the simple baseline the map must beat."""
ANCHOR_MARGIN = 0.05
"""G3: how far below the best anchor the map may be."""
AUC_MIN = 0.9
"""G5: AUC of the positional score between Gemma 3's windowed and global layers."""
KV_LENGTH = 8192
"""G6: the length the KV kept is computed at."""
KV_RATIOS = {0.5: 1.9, 0.75: 3.6}
"""G6: full attention's KV over the policy's, at least, per budget."""
PERPLEXITY_RISE_MAX = 0.02
"""G7: relative rise of perplexity allowed at the primary budget."""
FORWARD_COST_MAX = 1.1
"""G8: a forward under a policy over the plain SDPA forward, at most."""

MET, NOT_MET, NOT_MEASURED, REPORTED = "met", "not met", "not measured", "reported"
GOALS = ("G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8")

CELL = ["model", "task", "length"]


def _accuracy(frame: pd.DataFrame) -> pd.DataFrame:
    schema.POLICY_EVALUATION.check(frame, ["model", "task", "length", "budget", "condition", "draw", "metric",
                                           "value"], "the policy rules")
    return frame[frame["metric"] == "accuracy"]


def counted_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, task, length) with full attention's accuracy and whether the cell counts."""
    rows = _accuracy(frame)
    full = rows[rows["condition"] == "full"].groupby(CELL, as_index=False)["value"].mean()
    full = full.rename(columns={"value": "full"})
    full["counts"] = full["full"] >= FULL_ATTENTION_MIN
    return full


def permutation_p(value: float, draws: Sequence[float]) -> float:
    """One-sided p-value of ``value`` against random ``draws``: ``(1 + #draws ≥ value) / (1 + #draws)``."""
    values = np.asarray(draws, dtype=float)
    return float((1 + np.sum(values >= value - 1e-12)) / (1 + values.size))


def comparisons(frame: pd.DataFrame, budget: float = PRIMARY_BUDGET) -> pd.DataFrame:
    """Per counted cell at ``budget``: the accuracy of each condition, the random maps' median and 95th
    percentile, the map's retention of full attention, and the cell's permutation p-value."""
    rows = _accuracy(frame)
    cells = counted_cells(frame)
    at = rows[np.isclose(rows["budget"], budget)]
    out = []
    for cell in cells[cells["counts"]].itertuples(index=False):
        here = at[(at["model"] == cell.model) & (at["task"] == cell.task) & (at["length"] == cell.length)]
        values = {condition: float(group["value"].mean()) for condition, group in here.groupby("condition")
                  if condition not in ("random", "random-layers")}
        random = here[here["condition"] == "random"]["value"].to_numpy(float)
        layered = here[here["condition"] == "random-layers"]["value"].to_numpy(float)
        record = {"model": cell.model, "task": cell.task, "length": cell.length, "full": cell.full, **values,
                  "random_median": float(np.median(random)) if random.size else math.nan,
                  "random_q95": float(np.quantile(random, 0.95)) if random.size else math.nan,
                  "random_layers_median": float(np.median(layered)) if layered.size else math.nan,
                  "n_random": int(random.size)}
        record["retention"] = values.get("map", math.nan) / cell.full if cell.full > 0 else math.nan
        record["p"] = permutation_p(values["map"], random) if random.size and "map" in values else math.nan
        out.append(record)
    return pd.DataFrame(out)


def pooled_p(frame: pd.DataFrame, budget: float = PRIMARY_BUDGET) -> pd.DataFrame:
    """Per (model, length): the map's accuracy averaged over its counted retrieval cells against each
    random draw's average over the same cells (one-sided permutation p-value)."""
    rows = _accuracy(frame)
    cells = counted_cells(frame)
    counted = cells[cells["counts"] & cells["task"].isin(RETRIEVAL_TASKS)]
    at = rows[np.isclose(rows["budget"], budget) & rows["task"].isin(RETRIEVAL_TASKS)]
    at = at.merge(counted[CELL], on=CELL)
    out = []
    for (model, length), group in at.groupby(["model", "length"]):
        tasks = sorted(set(group["task"]))
        mapped = group[group["condition"] == "map"].groupby("task")["value"].mean()
        random = group[group["condition"] == "random"].pivot_table(index="draw", columns="task", values="value")
        if mapped.empty or random.empty or set(mapped.index) != set(tasks) or set(random.columns) != set(tasks):
            continue
        draws = random.dropna().mean(axis=1).to_numpy(float)
        value = float(mapped.mean())
        out.append({"model": model, "length": length, "tasks": " ".join(tasks), "map": value,
                    "random_median": float(np.median(draws)), "n_random": int(draws.size),
                    "p": permutation_p(value, draws)})
    return pd.DataFrame(out)


def _verdict(ok: bool | None) -> str:
    return NOT_MEASURED if ok is None else MET if ok else NOT_MET


def grade(frame: pd.DataFrame, *, agreement: Mapping[str, float] | None = None, auc: float | None = None,
          kv_ratios: Mapping[float, float] | None = None, forward_cost: float | None = None) -> pd.DataFrame:
    """Every goal's verdict: one row per goal (``goal, verdict, value, threshold, detail``).

    Args:
        frame: an ``evaluate_policies`` frame (any number of models and lengths).
        agreement: G4's measurements (``{"spearman": ρ, "overlap": share}``), reported.
        auc: G5's AUC (Gemma 3 only).
        kv_ratios: G6's ratios of full attention's KV over the policy's at ``KV_LENGTH``, per budget
            (the worst model's).
        forward_cost: G8's ratio of a forward under a policy to the plain SDPA forward.
    """
    compared = comparisons(frame)
    rows: list[dict] = []

    retention = compared[compared["task"].isin(RETENTION_TASKS)] if len(compared) else compared
    worst = float(retention["retention"].min()) if len(retention) else math.nan
    rows.append({"goal": "G1", "verdict": _verdict(None if not len(retention) else worst >= RETENTION_MIN),
                 "value": worst, "threshold": RETENTION_MIN,
                 "detail": f"lowest retention of full attention's accuracy over {len(retention)} counted cells"})

    retrieval = compared[compared["task"].isin(RETRIEVAL_TASKS)] if len(compared) else compared
    pooled = pooled_p(frame)
    if len(retrieval) and len(pooled) and "anti" in retrieval:
        gap = float(np.median(retrieval["map"] - retrieval["random_median"]))
        anti = float(np.median(retrieval["anti"] - retrieval["random_median"]))
        worst_p = float(pooled["p"].max())
        ok: bool | None = worst_p <= ALPHA and gap >= MEDIAN_GAP_MIN and anti < 0
        detail = (f"largest pooled permutation p {worst_p:.3f} (≤ {ALPHA}) over {len(pooled)} model×length; median "
                  f"gap to the median random map {gap:+.3f} (≥ {MEDIAN_GAP_MIN}); anti-map minus median random "
                  f"{anti:+.3f} (< 0)")
        value = gap
    else:
        ok, value, detail = None, math.nan, "no counted retrieval cell with the map, the anti-map and random maps"
    rows.append({"goal": "G2", "verdict": _verdict(ok), "value": value, "threshold": MEDIAN_GAP_MIN,
                 "detail": detail})

    present = [name for name in ANCHORS if len(retrieval) and name in retrieval]
    if present and BASELINE in retrieval and len(retrieval):
        best = max(present, key=lambda name: float(retrieval[name].mean()))
        behind = float(np.median(retrieval[best] - retrieval["map"]))
        ahead = float(np.median(retrieval["map"] - retrieval[BASELINE]))
        ok = behind <= ANCHOR_MARGIN and ahead > 0
        rows.append({"goal": "G3", "verdict": _verdict(ok), "value": behind, "threshold": ANCHOR_MARGIN,
                     "detail": f"best anchor {best!r}: median lead over the map {behind:+.3f} (≤ {ANCHOR_MARGIN}); "
                               f"map minus {BASELINE} {ahead:+.3f} (> 0)"})
    else:
        rows.append({"goal": "G3", "verdict": NOT_MEASURED, "value": math.nan, "threshold": ANCHOR_MARGIN,
                     "detail": "no counted retrieval cell with an anchor and the baseline"})

    rows.append({"goal": "G4", "verdict": REPORTED if agreement else NOT_MEASURED,
                 "value": float(agreement["spearman"]) if agreement else math.nan, "threshold": math.nan,
                 "detail": (f"Spearman ρ {agreement['spearman']:.2f}, overlap of the streamed halves "
                            f"{agreement['overlap']:.0%}" if agreement else "not measured")})
    rows.append({"goal": "G5", "verdict": _verdict(None if auc is None else auc >= AUC_MIN),
                 "value": math.nan if auc is None else float(auc), "threshold": AUC_MIN,
                 "detail": "AUC of the positional score, Gemma 3's windowed vs global layers"})
    if kv_ratios:
        misses = {b: r for b, r in kv_ratios.items() if b in KV_RATIOS and r < KV_RATIOS[b]}
        measured = [b for b in kv_ratios if b in KV_RATIOS]
        rows.append({"goal": "G6", "verdict": _verdict(None if not measured else not misses),
                     "value": min(kv_ratios[b] / KV_RATIOS[b] for b in measured) if measured else math.nan,
                     "threshold": 1.0,
                     "detail": ", ".join(f"{b:.0%}: {kv_ratios[b]:.2f}× (≥ {KV_RATIOS[b]}×)" for b in measured)})
    else:
        rows.append({"goal": "G6", "verdict": NOT_MEASURED, "value": math.nan, "threshold": 1.0,
                     "detail": "not measured"})
    rise = perplexity_rise(frame)
    worst_rise = float(rise["rise"].max()) if len(rise) else math.nan
    rows.append({"goal": "G7", "verdict": _verdict(None if not len(rise) else worst_rise <= PERPLEXITY_RISE_MAX),
                 "value": worst_rise, "threshold": PERPLEXITY_RISE_MAX,
                 "detail": f"largest relative rise of perplexity under the map over {len(rise)} model×length"})
    rows.append({"goal": "G8", "verdict": _verdict(None if forward_cost is None else forward_cost <= FORWARD_COST_MAX),
                 "value": math.nan if forward_cost is None else float(forward_cost), "threshold": FORWARD_COST_MAX,
                 "detail": "a forward under a policy over the plain SDPA forward"})
    return pd.DataFrame(rows)


def perplexity_rise(frame: pd.DataFrame, budget: float = PRIMARY_BUDGET) -> pd.DataFrame:
    """Per (model, length): the map's perplexity over full attention's, minus 1, at ``budget``."""
    schema.POLICY_EVALUATION.check(frame, ["model", "length", "budget", "condition", "metric", "value"],
                                   "perplexity_rise")
    rows = frame[frame["metric"] == "perplexity"]
    full = rows[rows["condition"] == "full"].groupby(["model", "length"])["value"].mean()
    mapped = rows[(rows["condition"] == "map") & np.isclose(rows["budget"], budget)].groupby(
        ["model", "length"])["value"].mean()
    both = pd.concat({"full": full, "map": mapped}, axis=1).dropna()
    both["rise"] = both["map"] / both["full"] - 1
    return both.reset_index()
