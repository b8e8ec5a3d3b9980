"""Score frames the figure tests share: per head, and per plane with two RoPE bases."""

from __future__ import annotations

import pandas as pd


def heads() -> pd.DataFrame:
    """A reduced per-head score frame: 4 layers × 3 heads, positional falling with depth, all ``mixed``."""
    rows = []
    for layer in range(4):
        for head in range(3):
            positional = 1 - layer / 4 - 0.05 * head
            rows.append({"layer": layer, "head": head, "positional": positional, "symbolic": 1 - positional,
                         "label": "mixed"})
    return pd.DataFrame(rows)


def planes() -> pd.DataFrame:
    """A reduced per-plane score frame: 2 layers (RoPE bases 1e4 and 1e6) × 2 heads × planes 0–4."""
    rows = []
    for layer, base in ((0, 1e4), (1, 1e6)):
        for head in range(2):
            for plane in range(5):
                rows.append({"layer": layer, "head": head, "plane": plane,
                             "theta": 0.0 if plane == 0 else base ** (-(plane - 1) / 4),
                             "positional": plane / 4, "symbolic": 1 - plane / 4 + 0.1 * head, "label": "mixed"})
    return pd.DataFrame(rows)
