"""The figures' input checks: refuse a wrong frame, naming the psheads function that makes the right one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from psheads.results import schema

_PRODUCERS = {
    schema.SCORES.name: "psheads.score_heads",
    schema.DYNAMICS.name: "psheads.train (its dynamics.csv), or psheads.load_pretrained(name).dynamics",
    schema.EVALUATION.name: "psheads.models.training.checkpoint_accuracy, or psheads.load_pretrained(name).evaluation",
    schema.PROFILE_PLANES.name: "psheads.frequency_profile(...).planes",
    schema.SWAPS.name: "psheads.swap_attention",
    schema.DISCREPANCY.name: "psheads.discrepancy",
    schema.ABLATION.name: "psheads.experiments.ablation.ablate",
    schema.LENGTH_GENERALIZATION.name: "psheads.experiments.lengthgen.length_generalization",
    schema.GATING_SWEEP.name: "psheads.experiments.gating_sweep.gating_sweep",
    schema.POLICY_EVALUATION.name: "psheads.experiments.attention_policy.evaluate_policies (its .evaluation)",
}


def check_frame(frame: Any, frame_schema: schema.FrameSchema, required: Sequence[str], what: str) -> None:
    """Refuse a non-frame, missing columns or no rows, naming the psheads function that makes the right frame."""
    producer = _PRODUCERS[frame_schema.name]
    try:
        frame_schema.check(frame, list(dict.fromkeys(required)), what)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{error} Make it with {producer}.") from None
    if frame.empty:
        raise ValueError(f"{what} needs at least one row; this frame is empty. Make it with {producer}.")


def require_columns(frame: Any, columns: Sequence[str], what: str, optional: str = "") -> None:
    """Refuse anything but a non-empty DataFrame with ``columns`` (for frames no schema describes)."""
    if not isinstance(frame, pd.DataFrame) or not set(columns) <= set(frame.columns) or frame.empty:
        names = ", ".join(columns[:-1]) + f" and {columns[-1]}" if len(columns) > 1 else columns[0]
        raise ValueError(f"{what} needs a non-empty DataFrame with the columns {names}{optional}.")
