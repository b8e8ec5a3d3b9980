"""What a caller asks of a model, checked against it: layer indices, a query position, token ids.

Every front-end (``RopeLens``, ``score_heads``, ``frequency_profile``, ``discrepancy``, …)
checks its inputs here, so the same rule and message hold everywhere.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from psheads.interface import validation
from psheads.rope.backends import Backend


def layer_index(layer: Any, n_layers: int) -> int:
    """A layer index in ``0 … n_layers − 1`` (negative counts from the end)."""
    layer = validation.integer(layer, "layer")
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer} is out of range for a model with {n_layers} layers.")
    return layer % n_layers


def layer_indices(layers: Any, n_layers: int) -> list[int]:
    """Sorted distinct layer indices from a list of layers (None: every layer)."""
    if layers is None:
        return list(range(n_layers))
    chosen = sorted({layer_index(layer, n_layers) for layer in validation.integers(layers, "layers")})
    if not chosen:
        raise ValueError("No layers requested: layers is empty; pass at least one layer (or None for all).")
    return chosen


def query_position(query: Any, n_pos: int) -> int:
    """A query position in ``0 … n_pos − 1`` (negative counts from the end)."""
    query = validation.integer(query, "query")
    if not -n_pos <= query < n_pos:
        raise ValueError(f"query {query} is out of range for sequences of {n_pos} tokens (use 0…{n_pos - 1} or "
                         "negative).")
    return query % n_pos


#: Unsigned dtypes torch holds but cannot reduce (``min``/``max``): token files store ids in them.
UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def check_tokens(backend: Backend, tokens: Any, prompt: int | None = None) -> Int[Tensor, "batch pos"]:
    """A validated LongTensor ``[batch, pos]`` (a 1-D tensor or one list is one sequence).

    Ids of any integer dtype are accepted, unsigned ones too (nanoGPT's token files are uint16),
    when they lie in the model's vocabulary. ``prompt``: the index a 1-D ``tokens`` has among the
    caller's prompts, for messages (default: its row).
    """
    if isinstance(tokens, (list, tuple)):
        if len(tokens) == 0:
            raise ValueError("tokens is empty: pass at least one token sequence.")
        validation.no_bools(tokens, "tokens")
        try:
            tokens = torch.tensor(tokens)
        except (ValueError, TypeError) as err:
            raise ValueError(
                "tokens must be a LongTensor [batch, pos] or a list of equal-length token-id lists."
            ) from err
    if isinstance(tokens, Mapping):
        raise TypeError("tokens is a mapping (a tokenizer's output?): RopeLens methods take one LongTensor [batch, "
                        "pos]; pass tokens['input_ids'] when nothing is padded, or give a padded batch to score_heads "
                        "or frequency_profile, which read its attention_mask.")
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(
            f"tokens must be a LongTensor [batch, pos] (e.g. from model.to_tokens), got {type(tokens).__name__}."
        )
    if tokens.device.type == "meta":
        raise ValueError("tokens is a tensor on the meta device, which holds no values: pass real token ids.")
    if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must hold integer token ids, got dtype {tokens.dtype}.")
    if tokens.ndim == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.ndim != 2:
        raise ValueError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}.")
    if tokens.numel() == 0:
        raise ValueError("tokens is empty: pass at least one token.")
    limit = backend.max_positions
    if limit is not None and tokens.shape[1] > limit:
        raise ValueError(f"Sequence length {tokens.shape[1]} exceeds {backend.max_positions_reason}.")
    if tokens.shape[1] > backend.n_ctx:
        warnings.warn(f"Sequence length {tokens.shape[1]} exceeds the model's context of {backend.n_ctx} tokens: "
                      "its rotation tables extrapolate there, and the model was not trained at those positions.",
                      stacklevel=3)
    if tokens.dtype == torch.uint64:
        huge = tokens.view(torch.int64) < 0  # above 2**63 a uint64 id reads as negative in int64
        if bool(huge.any()):
            row, position = (int(i) for i in torch.nonzero(huge)[0])
            raise_out_of_range(backend, int(tokens[row, position].item()), row if prompt is None else prompt, position)
    if tokens.dtype in UNSIGNED:
        tokens = tokens.to(torch.int64)
    outside = (tokens < 0) | (tokens >= backend.d_vocab)
    if bool(outside.any()):
        row, position = (int(i) for i in torch.nonzero(outside)[0])
        raise_out_of_range(backend, int(tokens[row, position]), row if prompt is None else prompt, position)
    return tokens.long()


def raise_out_of_range(backend: Backend, value: int, prompt: int, position: int) -> None:
    """Raise the error of a token id outside ``backend``'s vocabulary, naming it and where it is.

    Raises:
        ValueError: always.
    """
    raise ValueError(f"Token ids must lie in [0, {backend.d_vocab}): prompt {prompt} holds {value} at position "
                     f"{position}. These are not ids of this model's tokenizer ({backend.d_vocab} tokens): tokenise "
                     "the text with the model's own tokenizer, or pass the strings.")
