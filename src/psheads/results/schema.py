"""The columns of every frame psheads returns, declared once.

Scoring, training dynamics, the command line and plotting build, read and draw frames through
these declarations; ``docs/api.md`` renders them. A frame may carry a subset (``plane``/``theta``
only with ``by_frequency``, ``prompt`` only per prompt). A score method describes its own columns
(``ScoreMethod.columns``), which take the place of ``METHOD_COLUMNS`` in ``SCORES``.

Frames of one model take an optional leading ``model`` column (``MODEL``), so that frames of
several models concatenate; the head ``label`` is an ordered categorical (``LABEL_DTYPE``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

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
        per_model: the frame describes one model, and its function's ``model_name=`` adds the
            leading ``MODEL`` column (not listed in ``columns``; see ``tag_model``).
    """

    name: str
    columns: tuple[Column, ...]
    per_model: bool = False

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
        """The schema as a table (column, dtype, meaning), the optional ``model`` column first."""
        return pd.DataFrame([vars(column) for column in ((MODEL,) if self.per_model else ()) + self.columns])


MODEL = Column("model", "str", "the model_name= given (only then): frames of several models concatenate")
"""The optional leading column of a ``per_model`` frame."""


def model_name(value: object) -> str | None:
    """Check a ``model_name=`` argument: None or a non-empty string.

    Raises:
        TypeError: not a string.
        ValueError: an empty string.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"model_name must be a string naming the model (or None), got {type(value).__name__} "
                        f"({value!r}).")
    if not value.strip():
        raise ValueError("model_name must name the model, got an empty string; pass None to leave the column out.")
    return value


def tag_model(frame: pd.DataFrame, name: str | None) -> pd.DataFrame:
    """Give ``frame`` the leading ``model`` column and ``attrs["model_name"]`` (in place; returned).

    ``name=None`` leaves the frame as it is.
    """
    name = model_name(name)
    if name is None:
        return frame
    if MODEL.name in frame.columns:
        raise ValueError(f"This frame already has a {MODEL.name!r} column.")
    frame.insert(0, MODEL.name, pd.Series([name] * len(frame), index=frame.index, dtype="str"))
    frame.attrs["model_name"] = name
    return frame


NOT_ATTENTION = "not attention"
"""The label of a block without softmax attention (hybrid models): no head to score."""

LABEL_ORDER = ("positional", "mixed", "symbolic", "uniform", "non-finite", NOT_ATTENTION)
"""The head labels in their order: along the positional–symbolic axis (a mixed head lies between a
positional and a symbolic one), then ``uniform`` (both scores high: swaps change nothing, so the
head is on neither side of that axis), then ``non-finite`` (no measurement at all), then ``not
attention`` (a block of a hybrid model whose mixer is not softmax attention: no head to score)."""

LABEL_DTYPE = pd.CategoricalDtype(list(LABEL_ORDER), ordered=True)
"""dtype of the ``label`` column: sorting, ``min``/``max`` and ``<`` follow ``LABEL_ORDER``."""


def ordered_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``label`` column (if any) as ``LABEL_DTYPE`` (in place; returned).

    For frames read back from CSV (the shipped ``dynamics.csv``, a saved score table), whose
    labels come back as strings.

    Raises:
        ValueError: a label outside ``LABEL_ORDER`` (the frame is left unchanged).
    """
    if "label" not in frame.columns:
        return frame
    values = frame["label"]
    unknown = sorted({str(value) for value in values.dropna()} - set(LABEL_ORDER))
    if unknown:
        raise ValueError(f"label values {unknown} are not head labels; the labels are {list(LABEL_ORDER)}.")
    frame["label"] = values.astype(LABEL_DTYPE)
    return frame


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
    Column("<method columns>", "float", "the score method's own columns after positional and symbolic, in its "
           "order, as the method describes them (psheads.measure.methods.frame_schema(method) lists them)"),
    Column("entropy", "float", "attention entropy at the query over the visible keys / log(#keys)"),
    Column("n_prompts", "int", "prompts averaged (reduced frames)"),
    Column("label", "category", "positional < mixed < symbolic < uniform < non-finite (threshold γ; LABEL_ORDER); "
           "'not attention' for a hybrid model's blocks without softmax attention (one row each, no head)"),
), per_model=True)
"""``score_heads``: one row per (layer, head[, plane]) or per (prompt, layer, head[, plane])."""

SCORE_SPREAD = ("positional", "symbolic")
"""Score columns that get a ``_std`` column in reduced frames."""

METHOD_COLUMNS = SCORES.columns[SCORES.names.index("<method columns>")]
"""The placeholder in ``SCORES`` for the columns a score method adds (``ScoreMethod.columns``)."""


def score_schema(method_columns: Sequence[Column]) -> FrameSchema:
    """``SCORES`` with ``method_columns`` in place of ``METHOD_COLUMNS`` (what
    ``psheads.measure.methods.frame_schema`` builds from the methods' own descriptions)."""
    columns: list[Column] = []
    for column in SCORES.columns:
        columns.extend(method_columns if column is METHOD_COLUMNS else [column])
    return FrameSchema(SCORES.name, tuple(columns), per_model=SCORES.per_model)

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
"""``psheads.models.training.checkpoint_accuracy`` and ``evaluation.csv``."""

PROFILE_PLANES = FrameSchema("frequency profile (planes)", (
    *_HEAD[:2],
    *_PLANE,
    Column("usage", "float", "mean usage share of the plane over prompts (sums to 1 per head)"),
    Column("max_logit", "float", "mean over prompts of the plane's maximum pre-soft-cap logit over the keys "
           "(divided by the attention scale when the config says scale=False)"),
), per_model=True)
"""``FrequencyProfile.planes``."""

PROFILE_HEADS = FrameSchema("frequency profile (heads)", (
    *_HEAD[:2],
    Column("dominant_plane", "int", "plane with the largest usage share"),
    Column("mean_frequency_id", "float", "mean frequency ID over the rotated planes, weighted by usage "
           "(default) or by paper B's softmax of max_logit (weighting='softmax'); attrs say which"),
), per_model=True)
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
), per_model=True)
"""``discrepancy``: one row per length, layer and head."""

ABLATION = FrameSchema("ablate", (
    Column("intervention", "str", "name of the intervention ('none': the unchanged model)"),
    Column("hops", "str", "hop count '1', '2', … or 'all'"),
    Column("accuracy", "float", "next-token accuracy on fresh test prompts under the intervention"),
    Column("n", "int", "test prompts"),
))
"""``psheads.experiments.ablation.ablate``: one row per intervention and hop count."""

LENGTH_GENERALIZATION = FrameSchema("length_generalization", (
    Column("length", "int", "total prompt length in tokens (extra_target + n_target + n_pre + 1)"),
    Column("hops", "str", "hop count '1', '2', … or 'all'"),
    Column("accuracy", "float", "next-token accuracy (argmax over the answer vocabulary by default)"),
    Column("n", "int", "prompts"),
), per_model=True)
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
"""``psheads.experiments.gating_sweep.gating_sweep``: one row per task, band, seed, layer and head (stored:
``psheads.data.table("gating_sweep")``)."""


POLICY_CONDITIONS = ("full", "map", "random", "random-layers", "anti", "streaming", "retrieval", "razor",
                     "beyond-window", "designed", "rope-windows", "map-mean")
"""The conditions of an attention-policy evaluation (``psheads.experiments.attention_policy``), in order."""

POLICY_EVALUATION = FrameSchema("attention policy evaluation", (
    Column("model", "str", "the model's name"),
    Column("task", "str", "long-context task (needle, variable-tracking, copy, passkey) or 'perplexity'"),
    Column("length", "int", "prompt length in tokens"),
    Column("budget", "float", "share of KV heads streamed asked for (0 for full attention)"),
    Column("condition", "str", "who chose the streamed heads: " + ", ".join(POLICY_CONDITIONS)),
    Column("draw", "int", "seed of a random map (0 for the other conditions)"),
    Column("metric", "str", "'accuracy' (teacher-forced, answers or tokens) or 'perplexity'"),
    Column("value", "float", "the accuracy in [0, 1], or the perplexity"),
    Column("correct", "float", "measurements correct (accuracy rows; NaN for perplexity)"),
    Column("total", "int", "measurements: answers or tokens (tokens predicted for perplexity)"),
    Column("streamed", "float", "share of KV heads the condition streams"),
    Column("kv_tokens", "int", "KV tokens kept at this length, summed over layers and KV heads"),
))
"""``psheads.experiments.attention_policy.evaluate_policies``: one row per model, task, length, budget,
condition and draw (stored: ``psheads.data.table("policy/evaluation")``)."""

_ATLAS = (
    Column("model", "str", "zoo name of the model"),
    Column("prompts", "str", "prompt set: natural, random, or an LLM task name"),
    Column("length", "int", "prompt length in tokens (natural, random) or the task's target window"),
)
_ANOVA_INTERACTION = Column("interaction", "float", "the anova method's own column "
                            "(psheads.measure.methods.AnovaScore.columns); NaN in the swap score's rows")
_ATLAS_SCORES = tuple(column for column in score_schema([_ANOVA_INTERACTION]).columns
                      if column.name in ("positional", "symbolic", "positional_std", "symbolic_std", "interaction",
                                         "entropy", "n_prompts", "label"))

ATLAS_HEADS = FrameSchema("atlas (heads)", (
    *_ATLAS,
    Column("method", "str", "score method: swap or anova"),
    *_HEAD,
    Column("layer_kind", "str", "local (sliding window), global, or full (a model without windows)"),
    *_ATLAS_SCORES,
))
"""``psheads.experiments.atlas``: every head of a model, per prompt set, length and method."""

ATLAS_PLANES = FrameSchema("atlas (planes)", (
    *_ATLAS,
    Column("method", "str", "score method: swap or anova"),
    *_HEAD,
    *_PLANE,
    *_ATLAS_SCORES,
))
"""``psheads.experiments.atlas``: every plane of every head scored as its own head."""

ATLAS_USAGE = FrameSchema("atlas (usage)", (*_ATLAS, *PROFILE_PLANES.columns))
"""``psheads.experiments.atlas``: every head's frequency usage per plane (natural and random prompts)."""

ATLAS_FREQUENCY_ID = FrameSchema("atlas (frequency ID)", (
    *_ATLAS,
    *PROFILE_HEADS.columns,
    Column("paper_b_id", "float", "paper B's table-1 frequency ID: softmax of the planes' maximum logits "
           "(without the attention scale), temperature 1"),
))
"""``psheads.experiments.atlas``: each head's dominant plane, usage-weighted mean frequency ID and paper B's ID."""

# --- provenance ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    out = []
    for package in ("psheads", "torch", "transformer-lens", "transformers", "pandas"):
        try:
            out.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            out.append((package, "not installed"))
    return tuple(out)


def versions() -> dict[str, str]:
    """Installed versions of psheads and the packages its numbers depend on (read once)."""
    return dict(_installed_versions())
