"""Prompt handling in one place: tokenising, BOS policy, query positions and swappable keys.

Prompts may be strings (tokenised with the model's own ``to_tokens``; whether a BOS token is
prepended follows ``prepend_bos``, default: the model's own default), a LongTensor
``[n_prompts, pos]`` (or ``[pos]`` for one prompt), or a list of token-id lists of any lengths.
Positions are always relative to each unpadded prompt. A BOS token at position 0 is never
swappable by default.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from psheads.lens import RopeLens


@dataclass(frozen=True)
class Prompt:
    """One prepared prompt.

    Attributes:
        tokens: ``[pos]`` token ids.
        query: query position ``t``.
        candidates: swappable key positions before any layer's window is applied (sorted,
            all ``< t``).
        bos: whether position 0 holds a BOS token (excluded from ``candidates`` by default).
    """

    tokens: Int[Tensor, " pos"]
    query: int
    candidates: tuple[int, ...]
    bos: bool


def tokenize(lens: RopeLens, prompts: Any, prepend_bos: bool | None = None) -> list[Tensor]:
    """Turn any accepted prompt form into a list of 1-D LongTensors (validated)."""
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings (or token ids), not one string: wrap it in a list.")
    if isinstance(prompts, Tensor):
        if prompts.dtype.is_floating_point or prompts.dtype == torch.bool:
            raise TypeError(f"Token tensors must hold integer ids, got dtype {prompts.dtype}.")
        rows = [prompts] if prompts.ndim == 1 else list(prompts) if prompts.ndim == 2 else None
        if rows is None:
            raise ValueError(f"A token tensor must be [n_prompts, pos] or [pos], got shape {tuple(prompts.shape)}.")
    elif isinstance(prompts, Sequence):
        rows = list(prompts)
    else:
        raise TypeError(
            f"prompts must be a list of strings, a LongTensor [n_prompts, pos] or a list of token-id lists, "
            f"got {type(prompts).__name__}."
        )
    if len(rows) == 0:
        raise ValueError("No prompts given: pass at least one prompt.")
    out = []
    for index, row in enumerate(rows):
        if isinstance(row, str):
            if getattr(lens.model, "tokenizer", None) is None:
                raise ValueError("This model has no tokenizer: pass token ids instead of strings.")
            kwargs = {} if prepend_bos is None else {"prepend_bos": prepend_bos}
            row = lens.model.to_tokens(row, **kwargs)[0].cpu()
        elif not isinstance(row, Tensor):
            try:
                row = torch.tensor(list(row), dtype=torch.long)
            except (TypeError, ValueError) as err:
                raise TypeError(f"Prompt {index} is neither a string nor a sequence of token ids.") from err
        if row.ndim != 1 or row.numel() == 0:
            raise ValueError(f"Prompt {index} is empty or not one sequence (shape {tuple(row.shape)}).")
        out.append(lens._tokens(row)[0])
    return out


def _bos_id(lens: RopeLens) -> int | None:
    tokenizer = getattr(lens.model, "tokenizer", None)
    return getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None


def prepare_prompts(
    lens: RopeLens,
    prompts: Any,
    query: int | Sequence[int] | None = None,
    swappable: Sequence[int] | Sequence[Sequence[int]] | slice | None = None,
    exclude_bos: bool | None = None,
    prepend_bos: bool | None = None,
) -> list[Prompt]:
    """Validate and prepare prompts.

    Args:
        lens: the lens (for the tokenizer, vocabulary and context checks).
        prompts: strings, a LongTensor or token-id lists (see the module docstring).
        query: query position: None = last token; an int (negative counts from each prompt's
            end) for all prompts; or one int per prompt.
        swappable: key positions that may be swapped: None = every key before the query
            except BOS; a slice or a list of positions for all prompts; or one list per prompt.
            Keys a layer masks (sliding window) are dropped per layer.
        exclude_bos: drop position 0 from the default swappable set: None = when it holds the
            tokenizer's BOS token; True/False to force.
        prepend_bos: for string prompts, whether to prepend BOS (None = the model's default).
    """
    rows = tokenize(lens, prompts, prepend_bos)
    n = len(rows)
    queries = _per_prompt(query, n, "query")
    sets = _swappable_per_prompt(swappable, n)
    bos_id = _bos_id(lens)
    out = []
    for index, tokens in enumerate(rows):
        length = int(tokens.shape[0])
        q = length - 1 if queries[index] is None else queries[index]
        if not isinstance(q, int) or isinstance(q, bool):
            raise TypeError(f"query must be an int or one int per prompt, got {q!r}.")
        if not -length <= q < length:
            raise ValueError(f"query {q} is out of range for prompt {index} of {length} tokens.")
        q %= length
        bos = bool(exclude_bos) if exclude_bos is not None else bos_id is not None and int(tokens[0]) == bos_id
        chosen = sets[index]
        if chosen is None:
            candidates = tuple(range(1 if bos else 0, q))
        else:
            positions = range(length)[chosen] if isinstance(chosen, slice) else list(chosen)
            candidates = tuple(sorted({int(p) for p in positions}))
            if len(candidates) != len(list(positions)):
                raise ValueError(f"Swappable positions of prompt {index} contain duplicates.")
            bad = [p for p in candidates if not 0 <= p < q]
            if bad:
                raise ValueError(
                    f"Swappable positions {bad} of prompt {index} are not keys before its query at {q}."
                )
        out.append(Prompt(tokens=tokens, query=q, candidates=candidates, bos=bos))
    return out


def _per_prompt(value: Any, n: int, name: str) -> list:
    if value is None or isinstance(value, int):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"Got {len(values)} {name} values for {n} prompts: pass one per prompt or a single int.")
    return [int(v) if isinstance(v, Tensor) else v for v in values]


def _swappable_per_prompt(swappable: Any, n: int) -> list:
    if swappable is None or isinstance(swappable, slice):
        return [swappable] * n
    items = list(swappable)
    if items and all(isinstance(item, (int, Tensor)) and getattr(item, "ndim", 0) == 0 for item in items):
        return [[int(p) for p in items]] * n
    if len(items) != n:
        raise ValueError(
            f"swappable has {len(items)} entries for {n} prompts: pass one list of positions for all "
            "prompts, a slice, or one list per prompt."
        )
    return items


def batches(prompts: list[Prompt], batch_size: int) -> Iterator[tuple[list[int], Tensor, Tensor]]:
    """Right-padded batches: ``(indices, tokens [b, max_len], query [b])``.

    Padding sits after every query, so causal attention makes it invisible to the query.
    """
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        width = max(int(p.tokens.shape[0]) for p in chunk)
        tokens = torch.zeros(len(chunk), width, dtype=torch.long)
        for row, prompt in enumerate(chunk):
            tokens[row, : prompt.tokens.shape[0]] = prompt.tokens
        query = torch.tensor([p.query for p in chunk])
        yield list(range(start, start + len(chunk))), tokens, query


@dataclass
class KeyGroup:
    """Prompts of one batch sharing the same query and key layout at one layer.

    Attributes:
        rows: rows of these prompts in the batch.
        prompts: their indices in the prompt list.
        query: the query position.
        swappable: the swappable keys S at this layer (window-masked keys dropped).
        others: the visible keys outside S (BOS, the query itself, keys not chosen).
    """

    rows: list[int]  # rows in the batch
    prompts: list[int]  # global prompt indices
    query: int
    swappable: tuple[int, ...]
    others: tuple[int, ...]


def layer_groups(
    prompts: list[Prompt], indices: list[int], geo: Any, minimum: int, need: str
) -> list[KeyGroup]:
    """Group a batch's prompts by (query, S, other visible keys) at the layer ``geo``.

    Raises:
        ValueError: a prompt has fewer than ``minimum`` swappable keys at this layer (``need``
            says what they are needed for).
    """
    groups: dict[tuple, KeyGroup] = {}
    for row, index in enumerate(indices):
        prompt = prompts[index]
        t = prompt.query
        visible = [j for j in range(t + 1) if geo.window is None or t - j < geo.window]
        swappable = tuple(p for p in prompt.candidates if geo.window is None or t - p < geo.window)
        if len(swappable) < minimum:
            raise ValueError(
                f"Prompt {index} has {len(swappable)} swappable keys at layer {geo.layer} "
                f"(query {t}, window {geo.window}): fewer than {need}. Use longer prompts, a smaller "
                "block_size or more swappable positions."
            )
        in_s = set(swappable)
        others = tuple(j for j in visible if j not in in_s)
        key = (t, swappable, others)
        if key not in groups:
            groups[key] = KeyGroup([], [], t, swappable, others)
        groups[key].rows.append(row)
        groups[key].prompts.append(index)
    return list(groups.values())


def split_group(group: KeyGroup, size: int) -> list[KeyGroup]:
    """The group cut into parts of at most ``size`` prompts (same layout)."""
    return [
        KeyGroup(group.rows[i : i + size], group.prompts[i : i + size], group.query, group.swappable, group.others)
        for i in range(0, len(group.rows), size)
    ]
