"""Text and notebook (HTML) views of psheads objects, built from facts the objects already hold.

An object lists its facts once as ``(label, value)`` pairs; ``text`` turns them into a one-line
``__repr__`` and ``html`` into a small card for Jupyter's ``_repr_html_`` (every label, value
and table cell escaped). Neither computes anything.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

Facts = Sequence[tuple[str, Any]]
"""``(label, value)`` pairs in display order."""


def text(name: str, facts: Facts) -> str:
    """``name(label=value, …)`` with labels as identifiers (``"d_head"``) and values as ``repr``."""
    fields = (f"{label.replace(' ', '_')}={value!r}" for label, value in facts)
    return f"{name}({', '.join(fields)})"


def html(title: str, facts: Facts, tables: Sequence[tuple[str, pd.DataFrame]] = ()) -> str:
    """A small HTML card: a bold title, a two-column facts table, then each ``(caption, frame)``."""
    rows = "".join(f"<tr><th style='text-align:left'>{_html.escape(label)}</th>"
                   f"<td style='text-align:left'>{_html.escape(str(value))}</td></tr>" for label, value in facts)
    parts = [f"<div><strong>{_html.escape(title)}</strong><table>{rows}</table>"]
    for caption, frame in tables:
        parts.append(f"<details open><summary>{_html.escape(caption)}</summary>"
                     f"{frame.to_html(index=False, escape=True, float_format='{:.4g}'.format, border=0)}</details>")
    return "".join(parts) + "</div>"


def layer_text(layers: Iterable[int]) -> str:
    """Integers as runs of three or more: ``"0–8"``, ``"0–4, 6–10, 12"``, ``"5, 11, 17"``; ``"none"`` when empty."""
    runs: list[list[int]] = []
    for layer in sorted({int(layer) for layer in layers}):
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    parts = []
    for run in runs:
        parts.extend([f"{run[0]}–{run[-1]}"] if len(run) > 2 else [str(item) for item in run])
    return ", ".join(parts) or "none"
