"""Head maps as attention policies: psheads' positional/symbolic map as a KV-cache policy.

A ``HeadPolicy`` keeps the full KV cache for the heads that need it and *streams* the others (the
first ``sink`` tokens plus the last ``recent``), ranking KV heads by a keep score (by default the
largest symbolic score among a group's query heads). ``make_policy(model, prompts)`` scores a model
and makes one; ``windowed(model, policy, budget=0.5)`` runs the model under it; ``kv_bytes`` says what
it keeps; the files of DuoAttention, kvpress, HeadKV and Retrieval Head are written and read by
``write_duo_folder`` / ``read_duo_folder``, ``write_mask`` / ``read_mask`` and ``write_head_scores`` /
``read_head_scores``, so their maps go through the same code.

Modules: ``head_policy`` (the policy and its rule), ``windows`` (per-head windows from RoPE),
``files``, ``forward`` (applying a policy in a forward: ``windowed``), ``memory`` (``kv_bytes``), ``build``
(``make_policy``).
"""

from psheads.policy.build import make_policy
from psheads.policy.files import (
    read_duo_folder,
    read_head_scores,
    read_mask,
    write_duo_folder,
    write_head_scores,
    write_mask,
)
from psheads.policy.forward import keep_keys, windowed
from psheads.policy.head_policy import HeadPolicy, check_fits, streamed_by_rule, tie_free_keep
from psheads.policy.memory import kept_tokens, kv_bytes, streaming_everywhere
from psheads.rope.backends import AttentionShape, attention_shape

__all__ = [
    "AttentionShape",
    "HeadPolicy",
    "attention_shape",
    "check_fits",
    "keep_keys",
    "kept_tokens",
    "kv_bytes",
    "make_policy",
    "read_duo_folder",
    "read_head_scores",
    "read_mask",
    "streamed_by_rule",
    "streaming_everywhere",
    "tie_free_keep",
    "windowed",
    "write_duo_folder",
    "write_head_scores",
    "write_mask",
]
