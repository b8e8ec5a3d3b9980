"""``make_policy``: a model's head map, scored on prompts, as a ``HeadPolicy`` in one call."""

from __future__ import annotations

import logging
from typing import Any, Literal

from psheads.measure.frequency_profile import frequency_profile
from psheads.measure.methods import ScoreConfig
from psheads.measure.scoring import score_heads
from psheads.policy.head_policy import (
    DEFAULT_AGGREGATION,
    DEFAULT_BUDGET,
    DEFAULT_RECENT,
    DEFAULT_SCORE,
    DEFAULT_SINK,
    HeadPolicy,
    check_settings,
)
from psheads.policy.windows import DEFAULT_SHARE, wavelengths
from psheads.rope.backends import attention_shape
from psheads.rope.lens import as_lens

logger = logging.getLogger(__name__)

Windows = Literal["uniform", "rope"]


def make_policy(model: Any, prompts: Any, config: ScoreConfig | None = None, *, sink: int = DEFAULT_SINK,
                recent: int = DEFAULT_RECENT, budget: float = DEFAULT_BUDGET, score: str = DEFAULT_SCORE,
                aggregation: str = DEFAULT_AGGREGATION, windows: Windows = "uniform", share: float = DEFAULT_SHARE,
                progress: bool | None = None, provenance: dict[str, Any] | None = None) -> HeadPolicy:
    """Score every head of ``model`` on ``prompts`` and make the policy of the default rule (or the options').

    Score the heads at the length the policy will serve (or show the scores stable across lengths):
    a head's behaviour on short prompts need not hold on long ones.

    Args:
        model: a TransformerLens RoPE model or a Hugging Face ``PreTrainedModel`` (scored on a bridged
            copy; the policy applies to the model itself).
        prompts: what ``score_heads`` takes (strings, token ids, a tokenizer's output).
        config: the ``ScoreConfig`` (default: the swap score).
        sink: tokens at the start a streamed head keeps.
        recent: most recent tokens a streamed head keeps.
        budget: the default share of KV heads streamed.
        score: the query-head score ranked (``psheads.policy.head_policy.QUERY_SCORES``).
        aggregation: how a KV head's score comes from its query heads'.
        windows: ``"uniform"`` (every streamed head keeps ``recent`` tokens) or ``"rope"`` (windows in
            proportion to each head's RoPE wavelength at the same total, ``psheads.policy.windows``;
            profiles the frequency usage on the same prompts).
        share: with ``windows="rope"``, the share of logit use whose slowest plane sets the wavelength.
        progress: progress bars (default: in a notebook or on a terminal).
        provenance: what else to record (the prompts' source, say).

    Raises:
        ValueError: bad options (before any forward pass), or a model psheads cannot score.
    """
    if windows not in ("uniform", "rope"):
        raise ValueError(f"windows must be 'uniform' or 'rope', got {windows!r}.")
    check_settings(sink, recent, budget)
    shape = attention_shape(model)
    lens = as_lens(model, progress=progress)
    frame = score_heads(lens, prompts, config, progress=progress)
    record = {"prompts": frame.attrs.get("n_prompts"), **dict(provenance or {})}
    lengths = getattr(prompts, "shape", None)
    if lengths is not None and len(lengths) == 2:
        record.setdefault("length", int(lengths[1]))
    policy = HeadPolicy.from_scores(frame, sink=sink, recent=recent, budget=budget, score=score,
                                    aggregation=aggregation, shape=shape, provenance=record)
    if windows == "rope":
        profile = frequency_profile(lens, prompts, progress=progress)
        policy = policy.with_changes(wavelengths=wavelengths(profile, policy.kv_head_of, policy.layers, share),
                                     provenance={**policy.provenance, "windows": "rope", "share": share})
    logger.info("%r", policy)
    return policy
