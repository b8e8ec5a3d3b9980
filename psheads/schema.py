"""The columns of every frame psheads returns, declared once.

Scoring, training dynamics, the command line and plotting build, read and draw frames through
these declarations; ``docs/api.md`` renders them. A frame may carry a subset (``plane``/``theta``
only with ``by_frequency``, ``prompt`` only per prompt, ``interaction`` only for ``anova``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Column:
    """One column: name, dtype and meaning."""

    name: str
    dtype: str
    meaning: str


@dataclass(frozen=True)
class FrameSchema:
    """The columns of one kind of frame, in order.

    Attributes:
        name: what produces the frame.
        columns: every column the frame may carry, in frame order.
    """

    name: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        """Column names in frame order."""
        return [column.name for column in self.columns]

    def check(self, frame: pd.DataFrame, required: list[str], what: str) -> None:
        """Raise ``ValueError`` naming the ``required`` columns ``frame`` lacks (``what`` needs them)."""
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{what} needs a pandas DataFrame (a {self.name!r} frame), got {type(frame).__name__}.")
        missing = [name for name in required if name not in frame.columns]
        if missing:
            raise ValueError(f"{what} needs the columns {missing} of a {self.name!r} frame; this frame has "
                             f"{list(frame.columns)}.")

    def describe(self) -> pd.DataFrame:
        """The schema as a table (column, dtype, meaning)."""
        return pd.DataFrame([vars(column) for column in self.columns])


_HEAD = (
    Column("layer", "int", "layer index"),
    Column("head", "int", "query head"),
    Column("kv_head", "int", "key/value head it reads (GQA)"),
)
_PLANE = (
    Column("plane", "int", "frequency ID: 1 = fastest plane … F, 0 = the unrotated dims"),
    Column("theta", "float", "radians per position of the plane (0 for plane 0)"),
)

SCORES = FrameSchema("score_heads", (
    Column("prompt", "int", "prompt index (per-prompt frames only)"),
    *_HEAD,
    *_PLANE,
    Column("positional", "float", "positional score s_POS (mean over prompts when reduced)"),
    Column("symbolic", "float", "symbolic score s_SYM"),
    Column("positional_std", "float", "spread of s_POS over prompts (ddof 0; reduced frames)"),
    Column("symbolic_std", "float", "spread of s_SYM over prompts"),
    Column("interaction", "float", "share of the interaction effects (method 'anova')"),
    Column("entropy", "float", "attention entropy at the query over the visible keys / log(#keys)"),
    Column("n_prompts", "int", "prompts averaged (reduced frames)"),
    Column("label", "str", "positional, symbolic, uniform or mixed (threshold γ)"),
))
"""``score_heads``: one row per (layer, head[, plane]) or per (prompt, layer, head[, plane])."""

SCORE_SPREAD = ("positional", "symbolic")
"""Score columns that get a ``_std`` column in reduced frames."""

DYNAMICS = FrameSchema("learning dynamics", (
    Column("step", "int", "training step of the checkpoint"),
    *_HEAD[:2],
    *(column for column in SCORES.columns if column.name in ("positional", "symbolic", "positional_std",
                                                              "symbolic_std", "entropy", "label")),
    Column("accuracy_<hops>", "float", "the checkpoint's test accuracy per hop count, and 'all'"),
))
"""``psheads.train``'s ``dynamics.csv``: one row per checkpoint, layer and head."""

DYNAMICS_SCORES = [column.name for column in DYNAMICS.columns if column.name not in ("step", "accuracy_<hops>")]
"""The ``score_heads`` columns a dynamics row keeps."""

EVALUATION = FrameSchema("evaluation", (
    Column("step", "int", "training step (training runs only)"),
    Column("hops", "str", "hop count '1', '2', … or 'all'"),
    Column("accuracy", "float", "next-token accuracy on fresh test prompts"),
    Column("n", "int", "test prompts"),
))
"""``psheads.training.evaluate`` and ``evaluation.csv``."""

PROFILE_PLANES = FrameSchema("frequency profile (planes)", (
    *_HEAD[:2],
    *_PLANE,
    Column("usage", "float", "mean usage share of the plane over prompts (sums to 1 per head)"),
))
"""``FrequencyProfile.planes``."""

PROFILE_HEADS = FrameSchema("frequency profile (heads)", (
    *_HEAD[:2],
    Column("dominant_plane", "int", "plane with the largest usage share"),
    Column("mean_frequency_id", "float", "usage-weighted mean frequency ID over the rotated planes"),
))
"""``FrequencyProfile.heads``."""

SWAPS = FrameSchema("swap_attention", (
    Column("block_i", "int", "first block of the swap"),
    Column("block_j", "int", "second block (block_i < block_j)"),
    Column("positions_i", "tuple", "key positions of block i"),
    Column("positions_j", "tuple", "key positions of block j"),
    Column("d_i", "float", "attention mass of block i on the input"),
    Column("d_j", "float", "attention mass of block j on the input"),
    Column("d_i_swapped", "float", "attention mass at block i's positions after the swap"),
    Column("d_j_swapped", "float", "attention mass at block j's positions after the swap"),
    Column("weight", "float", "swap weight α"),
    Column("cos_positional", "float", "cos(v_ij(πx), v_ij(x))"),
    Column("cos_symbolic", "float", "cos(v_ij(πx), v_ji(x))"),
))
"""``swap_attention``: one row per swap of one prompt and head."""

GEOMETRY = FrameSchema("geometry", (
    Column("layer", "int", "layer index"),
    _PLANE[0],
    _PLANE[1],
    Column("period", "float", "positions per full turn, 2π/θ"),
    Column("magnitude", "float", "norm of the (cos, sin) factors (1 for plain RoPE)"),
    Column("dims", "tuple", "head dimensions of the plane"),
))
"""``RopeLens.geometry_frame``."""

DISCREPANCY = FrameSchema("discrepancy", (
    Column("length", "int", "prompt length in tokens (the query included)"),
    Column("layer", "int", "layer index"),
    Column("head", "int", "query head"),
    Column("discrepancy", "float", "min over prompts of target logit − largest other visible logit"),
    Column("normalised", "float", "min over prompts of the pre-cap margin / (scale·‖q‖·max_j‖k_j‖)"),
    Column("mean_margin", "float", "mean over prompts of the logit margin"),
    Column("mean_normalised", "float", "mean over prompts of the normalised margin"),
    Column("n", "int", "prompts"),
))
"""``discrepancy``: one row per length, layer and head."""

ABLATION = FrameSchema("ablate", (
    Column("intervention", "str", "name of the intervention ('none': the unchanged model)"),
    Column("hops", "str", "hop count '1', '2', … or 'all'"),
    Column("accuracy", "float", "next-token accuracy on fresh test prompts under the intervention"),
    Column("n", "int", "test prompts"),
))
"""``psheads.ablation.ablate``: one row per intervention and hop count."""

LENGTH_GENERALIZATION = FrameSchema("length_generalization", (
    Column("length", "int", "total prompt length in tokens (extra_target + n_target + n_pre + 1)"),
    Column("hops", "str", "hop count '1', '2', … or 'all'"),
    Column("accuracy", "float", "next-token accuracy (argmax over the answer vocabulary by default)"),
    Column("n", "int", "prompts"),
))
"""``length_generalization``: one row per length and hop count (the shipped ``length_generalization.csv``)."""

GATING_SWEEP = FrameSchema("gating_sweep", (
    Column("task", "str", "registered task name"),
    Column("band", "str", "frequency band the heads were trained with ('all': ungated; 'fast+zero': a union)"),
    Column("planes", "str", "the band's frequency IDs, space-separated (0 = unrotated dims), or 'all'"),
    Column("seed", "int", "training seed (initialisation and data)"),
    Column("steps", "int", "optimizer steps"),
    *_HEAD[:2],
    Column("accuracy", "float", "the run's test accuracy (all prompts; repeated on each of its heads)"),
    *(column for column in SCORES.columns if column.name in ("positional", "symbolic", "positional_std",
                                                              "symbolic_std", "label")),
))
"""``psheads.sweep.gating_sweep``: one row per task, band, seed, layer and head (``docs/data/gating_sweep.csv``)."""
