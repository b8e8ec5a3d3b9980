"""Learning dynamics (a training run's ``dynamics.csv``) and length curves: when each hop count is
learned, which layers end pure and since when, and up to which prompt length accuracy holds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

READY = 0.9
"""Accuracy at which a hop count counts as learned, and a length as still solved."""


def hop_accuracy(dynamics: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per checkpoint and hop count from a dynamics table: ``step, hops, accuracy``."""
    wide = dynamics.drop_duplicates("step").set_index("step")
    columns = sorted(c for c in wide.columns if c.startswith("accuracy_") and c != "accuracy_all")
    long = wide[columns].rename(columns=lambda c: c.removeprefix("accuracy_")).reset_index()
    return long.melt(id_vars="step", var_name="hops", value_name="accuracy")


def learned_at(dynamics: pd.DataFrame, threshold: float = READY) -> dict[str, int | None]:
    """Per hop count: the first checkpoint whose accuracy reaches ``threshold`` (None: never)."""
    out: dict[str, int | None] = {}
    for hops, rows in hop_accuracy(dynamics).groupby("hops", sort=True):
        reached = rows.loc[rows["accuracy"] >= threshold, "step"]
        out[str(hops)] = int(reached.min()) if len(reached) else None
    return out


def pure_layers(dynamics: pd.DataFrame, label: str) -> list[int]:
    """Layers whose heads all carry ``label`` at the last checkpoint."""
    final = dynamics[dynamics["step"] == dynamics["step"].max()]
    pure = final.groupby("layer")["label"].agg(lambda labels: bool((labels.astype(str) == label).all()))
    return [int(layer) for layer in pure.index[pure]]


def first_pure(dynamics: pd.DataFrame, label: str) -> dict[int, int]:
    """Per layer that ends with ``label``: the first checkpoint from which it keeps it."""
    out = {}
    for layer in pure_layers(dynamics, label):
        rows = dynamics[dynamics["layer"] == layer].groupby("step")["label"].agg(
            lambda labels: bool((labels.astype(str) == label).all())).sort_index()
        broken = rows.index[~rows.to_numpy()]
        out[layer] = int(rows.index[rows.index > broken.max()].min()) if len(broken) else int(rows.index.min())
    return out


def accuracy_at(frame: pd.DataFrame, length: int) -> float | None:
    """All-hops accuracy of a length curve at ``length`` tokens: the measured value, or the linear
    interpolation in log length between the two nearest measured lengths; None outside the range."""
    rows = frame[frame["hops"].astype(str) == "all"].groupby("length")["accuracy"].mean().sort_index()
    if rows.empty or not rows.index.min() <= length <= rows.index.max():
        return None
    if length in rows.index:
        return float(rows.loc[length])
    below, above = rows.index[rows.index < length].max(), rows.index[rows.index > length].min()
    share = (np.log(length) - np.log(below)) / (np.log(above) - np.log(below))
    return float(rows.loc[below] + share * (rows.loc[above] - rows.loc[below]))


def longest_ready(frame: pd.DataFrame, threshold: float = READY) -> int | None:
    """The longest prompt length up to which accuracy (all hops) stays ≥ ``threshold``."""
    rows = frame[frame["hops"].astype(str) == "all"].sort_values("length")
    below = rows.loc[rows["accuracy"] < threshold, "length"]
    kept = rows.loc[rows["length"] < below.min(), "length"] if len(below) else rows["length"]
    return int(kept.max()) if len(kept) else None
