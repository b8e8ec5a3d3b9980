"""Prompts for the measurements: prompt options, prepared prompts, batches and key groups. Every
front-end (``score_heads``, ``frequency_profile``, …) prepares its prompts here; token ids, layers
and query positions are checked against the model in ``psheads.rope.inputs``.

Prompts may be strings (tokenised with the model's own ``to_tokens``; whether a BOS token is
prepended follows ``prepend_bos``, default: the model's own default), a LongTensor
``[n_prompts, pos]`` (or ``[pos]`` for one prompt), a list of token-id lists of any lengths, or a
tokenizer's output (a ``BatchEncoding`` or a mapping with ``input_ids`` and, when padded, its
``attention_mask``; left or right padding): each prompt is then scored as if it had been passed
alone. Positions are always relative to each unpadded prompt. A BOS token at position 0 is never
swappable by default.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from psheads.interface import validation
from psheads.interface.config import config_dict, from_known_fields
from psheads.rope.backends import Backend
from psheads.rope.inputs import check_tokens, raise_out_of_range
from psheads.rope.layer import LayerGeometry


# --- options --------------------------------------------------------------------------------
def _is_position_list(value: Any) -> bool:
    """Whether ``value`` is a list of positions rather than one list per prompt."""
    items = list(value)
    return all(not isinstance(item, Iterable) or isinstance(item, (str, bytes))
               or (isinstance(item, Tensor) and item.ndim == 0) for item in items)


@dataclass(frozen=True)
class PromptOptions:
    """Where the query is and which keys may be swapped; shared by every front-end.

    Attributes:
        query: query position: None = each prompt's last token; an int (negative counts from
            each prompt's end) for all prompts; or one int per prompt.
        swappable: key positions that may be swapped: None = every key before the query except
            BOS; a slice or a list of positions for all prompts; or one list per prompt. Keys a
            layer masks (sliding window) are dropped per layer.
        exclude_bos: drop position 0 from the default swappable set: None = when it holds the
            tokenizer's BOS token; True/False to force.
        prepend_bos: for string prompts, whether to prepend BOS (None = the model's default).
    """

    query: int | tuple[int, ...] | None = None
    swappable: slice | tuple[int, ...] | tuple[tuple[int, ...], ...] | None = None
    exclude_bos: bool | None = None
    prepend_bos: bool | None = None

    def __post_init__(self) -> None:
        if self.query is not None:
            if isinstance(self.query, Iterable) and not isinstance(self.query, (str, bytes)) and not (
                    isinstance(self.query, Tensor) and self.query.ndim == 0):
                object.__setattr__(self, "query", validation.integers(self.query, "query"))
            else:
                object.__setattr__(self, "query", validation.integer(self.query, "query"))
        swappable = self.swappable
        if swappable is not None and not isinstance(swappable, slice):
            if isinstance(swappable, (str, bytes)) or not isinstance(swappable, Iterable) or (
                    isinstance(swappable, (Tensor, np.ndarray)) and swappable.ndim == 0):
                raise TypeError(f"swappable must be a slice, a list of positions or one list per prompt, "
                                f"got {type(swappable).__name__} ({swappable!r}).")
            if _is_position_list(swappable):
                value: Any = validation.integers(swappable, "swappable")
            else:
                value = tuple(validation.integers(item, "swappable") for item in swappable)
            object.__setattr__(self, "swappable", value)
        elif isinstance(swappable, slice):
            for part in ("start", "stop", "step"):
                bound = getattr(swappable, part)
                if bound is not None:
                    validation.integer(bound, f"swappable.{part}")
            if swappable.step == 0:
                raise ValueError("swappable.step must not be zero.")
        for name in ("exclude_bos", "prepend_bos"):
            object.__setattr__(self, name, validation.optional_boolean(getattr(self, name), name))

    def to_dict(self) -> dict:
        """Plain-JSON form (a slice becomes ``{"slice": [start, stop, step]}``)."""
        out: dict[str, Any] = {"query": list(self.query) if isinstance(self.query, tuple) else self.query,
                               "exclude_bos": self.exclude_bos, "prepend_bos": self.prepend_bos}
        swappable = self.swappable
        if isinstance(swappable, slice):
            out["swappable"] = {"slice": [swappable.start, swappable.stop, swappable.step]}
        elif swappable is not None and swappable and isinstance(swappable[0], tuple):
            out["swappable"] = [list(p) for p in swappable]
        else:
            out["swappable"] = list(swappable) if swappable is not None else None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> PromptOptions:
        """Inverse of ``to_dict``; unknown keys are logged and ignored (a non-dict raises ``TypeError``)."""
        data = config_dict(cls, data)
        if isinstance(data.get("swappable"), dict):
            data["swappable"] = slice(*data["swappable"]["slice"])
        return from_known_fields(cls, data)


class PromptConfig:
    """Shared behaviour of the frozen front-end configs that carry ``prompt_options``."""

    prompt_options: PromptOptions

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes``; prompt options (``query``, ``swappable``, ``exclude_bos``,
        ``prepend_bos``) may be given directly.

        Raises:
            TypeError: an unknown option (the message lists the valid ones).
        """
        prompt_fields = {f.name for f in dataclasses.fields(PromptOptions)}
        own = {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        unknown = set(changes) - own - prompt_fields
        if unknown:
            raise TypeError(f"Unknown {type(self).__name__} option(s) {sorted(unknown)}; valid: "
                            f"{sorted(own | prompt_fields)}.")
        prompt = {k: v for k, v in changes.items() if k in prompt_fields}
        changes = {k: v for k, v in changes.items() if k not in prompt_fields}
        if prompt:
            changes["prompt_options"] = dataclasses.replace(changes.get("prompt_options", self.prompt_options),
                                                            **prompt)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict:
        """Plain-JSON form."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, PromptOptions) else (
                list(value) if isinstance(value, tuple) else value)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Any:
        """Inverse of ``to_dict``; unknown keys are logged and ignored (a non-dict raises ``TypeError``)."""
        data = config_dict(cls, data)
        if isinstance(data.get("prompt_options"), dict):
            data["prompt_options"] = PromptOptions.from_dict(data["prompt_options"])
        return from_known_fields(cls, data)


# --- prepared prompts -----------------------------------------------------------------------
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


@dataclass(frozen=True)
class PromptSet(Sequence):
    """Prepared prompts (a sequence of ``Prompt``) plus what batching and grouping reuse.

    Attributes:
        prompts: the prompts.
        stacked: ``[n, pos]`` tokens when every prompt has the same length (batches are then
            slices of it), else None.
    """

    prompts: list[Prompt]
    stacked: Tensor | None = None
    _layouts: dict = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.prompts)

    def __getitem__(self, index: Any) -> Any:
        return self.prompts[index]

    def batches(self, batch_size: int) -> Iterator[tuple[list[int], Tensor, Tensor]]:
        """Right-padded batches: ``(indices, tokens [b, max_len], query [b])``.

        Padding sits after every query, so causal attention makes it invisible to the query.
        """
        for start in range(0, len(self.prompts), batch_size):
            chunk = self.prompts[start : start + batch_size]
            if self.stacked is not None:
                tokens = self.stacked[start : start + batch_size]
            else:
                width = max(int(p.tokens.shape[0]) for p in chunk)
                tokens = torch.zeros(len(chunk), width, dtype=torch.long)
                for row, prompt in enumerate(chunk):
                    tokens[row, : prompt.tokens.shape[0]] = prompt.tokens
            query = torch.tensor([p.query for p in chunk])
            yield list(range(start, start + len(chunk))), tokens, query

    def key_groups(self, indices: list[int], geo: LayerGeometry, minimum: int, need: str) -> list[KeyGroup]:
        """Group a batch's prompts by (query, S, other visible keys) under layer ``geo``'s mask (its
        sliding window or attention chunk).

        Raises:
            ValueError: a prompt has fewer than ``minimum`` swappable keys at this layer (``need``
                says what they are needed for).
        """
        groups: dict[tuple, KeyGroup] = {}
        for row, index in enumerate(indices):
            prompt = self.prompts[index]
            key = (prompt.query, prompt.candidates, geo.window, geo.chunk)
            layout = self._layouts.get(key)
            if layout is None:
                layout = self._layouts[key] = _window_layout(prompt.query, prompt.candidates, geo)
            swappable, others = layout
            if len(swappable) < minimum:
                mask = "" if geo.chunk is None else f", chunk {geo.chunk}"
                raise ValueError(
                    f"Prompt {index} has {len(swappable)} swappable keys at layer {geo.layer} "
                    f"(query {prompt.query}, window {geo.window}{mask}): fewer than {need}. Use longer prompts, a "
                    "smaller block_size or more swappable positions."
                )
            group_key = (prompt.query, *layout)
            group = groups.get(group_key)
            if group is None:
                group = groups[group_key] = KeyGroup([], [], prompt.query, swappable, others)
            group.rows.append(row)
            group.prompts.append(index)
        return list(groups.values())


def _window_layout(query: int, candidates: tuple[int, ...], geo: LayerGeometry) -> tuple[tuple, tuple]:
    """``(S, others)``: swappable keys and the other visible keys under the layer's mask (the keys a
    sliding window or an attention chunk leaves visible are a run ending at the query)."""
    first = 0 if geo.window is None else max(0, query - geo.window + 1)
    if geo.chunk is not None:
        first = max(first, query - query % geo.chunk)
    swappable = tuple(p for p in candidates if p >= first)
    in_s = set(swappable)
    return swappable, tuple(j for j in range(first, query + 1) if j not in in_s)


def _rows(value: Any, name: str) -> list[Tensor]:
    """One 1-D tensor per prompt of a tokenizer output's ``name`` (a tensor, an array or lists)."""
    if isinstance(value, (Tensor, np.ndarray)):
        value = torch.as_tensor(value)
        if value.ndim == 1:
            value = value.unsqueeze(0)
        if value.ndim != 2:
            raise ValueError(f"prompts['{name}'] must be [n_prompts, pos], got shape {tuple(value.shape)}.")
        return list(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        rows = list(value) if value and not isinstance(value[0], (int, np.integer)) else [value]
        try:
            return [torch.as_tensor(list(row)) for row in rows]
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"prompts['{name}'] must hold one list of ints per prompt.") from err
    raise TypeError(f"prompts['{name}'] must be a tensor or one list of ints per prompt, got {type(value).__name__}.")


def unpadded(encoding: Mapping) -> Tensor | list[Tensor]:
    """A tokenizer's output as token ids, one unpadded row per prompt: the tokens its
    ``attention_mask`` keeps (one run of ones per row: left or right padding). Without a mask, or
    with nothing masked, the ``input_ids`` as they are.

    Raises:
        TypeError: no ``input_ids``.
        ValueError: a mask of another shape, or one that hides tokens between kept ones.
    """
    if "input_ids" not in encoding:
        raise TypeError(f"prompts is a mapping without 'input_ids' (keys: {sorted(map(str, encoding))}): pass a "
                        "tokenizer's output, e.g. tokenizer(texts, padding=True, return_tensors='pt').")
    ids = encoding["input_ids"]
    mask = encoding.get("attention_mask")
    if mask is None:
        return ids
    id_rows, mask_rows = _rows(ids, "input_ids"), _rows(mask, "attention_mask")
    if len(id_rows) != len(mask_rows) or any(i.shape != m.shape for i, m in zip(id_rows, mask_rows, strict=True)):
        raise ValueError("prompts['attention_mask'] does not match prompts['input_ids'] in shape: pass them as the "
                         "tokenizer returned them.")
    out = []
    for index, (row, keep) in enumerate(zip(id_rows, mask_rows, strict=True)):
        kept = torch.nonzero(keep.bool()).flatten()
        if kept.numel() == 0:
            raise ValueError(f"Prompt {index}'s attention_mask keeps no token: drop the empty prompt.")
        first, last = int(kept[0]), int(kept[-1])
        if kept.numel() != last - first + 1:
            raise ValueError(f"Prompt {index}'s attention_mask hides tokens between kept ones: psheads scores "
                             "left- or right-padded prompts; pass masked-out tokens as separate prompts.")
        out.append(row[first : last + 1])
    if isinstance(ids, (Tensor, np.ndarray)) and all(row.numel() == len(id_rows[0]) for row in out):
        return torch.as_tensor(ids)  # nothing padded: keep the stacked tensor
    return out


def _warn_if_padded(backend: Backend, tokens: Tensor) -> None:
    """Warn when rows of a bare id tensor end (or, with a pad id other than BOS, start) in the
    tokenizer's pad id, or, with the pad id the BOS id (Pythia's set-up), start with a run of two
    or more of it: a padded batch whose mask was dropped."""
    tokenizer = backend.tokenizer
    pad = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    if pad is None or tokens.ndim != 2:
        return
    fix = ("For a padded batch, pass the tokenizer's output with its attention mask (score_heads(model, "
           "tokenizer(texts, padding=True, return_tensors='pt'))) or a list of unpadded prompts.")
    if pad == bos_token_id(backend) and tokens.shape[1] > 1:
        # one BOS starts a prompt; a run of them is left padding (and no prompt ends in it: see below)
        run = (tokens[:, 0] == pad) & (tokens[:, 1] == pad)
        if bool(run.any()):
            rows = torch.nonzero(run).flatten().tolist()
            warnings.warn(
                f"Prompts {rows[:10]}{' …' if len(rows) > 10 else ''} begin with a run of the tokenizer's pad token "
                f"(id {pad}, which is also its BOS token): left padding, which would be scored as tokens at the "
                f"positions the prompt's own tokens should hold. {fix}", stacklevel=4)
            return
    padded = tokens[:, -1] == pad
    if pad != bos_token_id(backend):
        padded |= tokens[:, 0] == pad
    if bool(padded.any()):
        rows = torch.nonzero(padded).flatten().tolist()
        warnings.warn(
            f"Prompts {rows[:10]}{' …' if len(rows) > 10 else ''} begin or end with the tokenizer's pad token "
            f"(id {pad}), which would be scored as a token (at the end: as the query). {fix}", stacklevel=4)


def tokenize(backend: Backend, prompts: Any, prepend_bos: bool | None = None) -> list[Tensor] | Tensor:
    """Any accepted prompt form as validated token ids: a ``[n, pos]`` tensor when the prompts
    came as one, else a list of 1-D LongTensors."""
    padded_input = isinstance(prompts, Mapping)
    if padded_input:
        prompts = unpadded(prompts)
    if isinstance(prompts, np.ndarray) and prompts.dtype.kind in "USO":
        prompts = prompts.tolist()  # e.g. df["text"].values: strings
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings (or token ids), not one string: wrap it in a list.")
    if isinstance(prompts, (bytes, bytearray, memoryview)):
        raise TypeError("prompts are bytes, which psheads will not read as token ids or guess an encoding for: "
                        "decode them first (e.g. [text.decode('utf-8')]), or pass token ids.")
    if isinstance(prompts, np.ndarray):
        prompts = torch.as_tensor(prompts)
    if isinstance(prompts, Tensor):
        if prompts.dtype.is_floating_point or prompts.dtype.is_complex or prompts.dtype == torch.bool:
            raise TypeError(f"prompts: token tensors must hold integer ids, got dtype {prompts.dtype}.")
        if prompts.ndim not in (1, 2):
            raise ValueError(f"A token tensor must be [n_prompts, pos] or [pos], got shape {tuple(prompts.shape)}.")
        if prompts.numel() == 0:
            raise ValueError("No prompts given: pass at least one prompt." if len(prompts) == 0 else
                             "Prompt 0 is empty or not one sequence (shape (0,)).")
        tokens = check_tokens(backend, prompts).cpu()
        if not padded_input:
            _warn_if_padded(backend, tokens)
        return tokens
    if not isinstance(prompts, Sequence):
        raise TypeError(
            f"prompts must be a list of strings, a LongTensor [n_prompts, pos] or a list of token-id lists, "
            f"got {type(prompts).__name__}."
        )
    if len(prompts) == 0:
        raise ValueError("No prompts given: pass at least one prompt.")
    out = []
    unknown = []
    unk_id = getattr(backend.tokenizer, "unk_token_id", None) if backend.tokenizer is not None else None
    for index, row in enumerate(prompts):
        if isinstance(row, (bytes, bytearray, memoryview)):
            raise TypeError(f"prompts: prompt {index} is bytes, which psheads will not read as token ids or guess an "
                            "encoding for: decode it first (e.g. text.decode('utf-8')), or pass token ids as a list "
                            "of ints.")
        if isinstance(row, str):
            if backend.tokenizer is None:
                raise ValueError("This model has no tokenizer: pass token ids instead of strings.")
            text, row = row, backend.to_tokens(row, prepend_bos)
            if unk_id is not None and unk_id in backend.tokenizer(text, add_special_tokens=False)["input_ids"]:
                unknown.append(index)
        elif not isinstance(row, Tensor):
            if isinstance(row, (list, tuple)):
                validation.no_bools(row, f"prompts: prompt {index}")
                for position, value in enumerate(row):  # beyond int64, torch cannot hold the id to check it
                    if isinstance(value, (int, np.integer)) and not -2**63 <= int(value) < 2**63:
                        raise_out_of_range(backend, int(value), index, position)
            try:
                row = torch.as_tensor(row if isinstance(row, np.ndarray) else list(row))
            except (TypeError, ValueError, RuntimeError) as err:
                raise TypeError(f"prompts: prompt {index} is neither a string nor a sequence of token ids.") from err
        if row.numel() == 0:  # before its dtype: torch reads [] as float32
            raise ValueError(f"Prompt {index} is empty (no token ids): drop it, or give it its tokens.")
        if row.dtype.is_floating_point or row.dtype.is_complex or row.dtype == torch.bool:
            raise TypeError(f"prompts: prompt {index} must hold integer token ids, got dtype {row.dtype}.")
        if row.ndim != 1:
            raise ValueError(f"Prompt {index} is not one sequence (shape {tuple(row.shape)}).")
        out.append(check_tokens(backend, row, prompt=index)[0].cpu())
    if not padded_input and len({int(row.shape[0]) for row in out}) == 1:
        _warn_if_padded(backend, torch.stack(out))  # e.g. tokenizer(texts, padding=True)["input_ids"]
    if unknown:
        warnings.warn(
            f"Prompts {unknown[:10]}{' …' if len(unknown) > 10 else ''} contain words outside the model's vocabulary, "
            "which became its unknown token. For a task model, write the task's own words separated by spaces "
            "(e.g. task.generate(1).text[0]), or pass token ids.", stacklevel=3)
    return out


def bos_token_id(backend: Backend) -> int | None:
    """The tokenizer's BOS id, or None."""
    tokenizer = backend.tokenizer
    return getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else None


def prepare_prompts(backend: Backend, prompts: Any, options: PromptOptions | None = None) -> PromptSet:
    """Validate and prepare prompts (see the module docstring and ``PromptOptions``).

    Args:
        backend: the model's backend (tokenizer, vocabulary and context checks).
        prompts: strings, a LongTensor or token-id lists.
        options: query, swappable keys and BOS handling.
    """
    options = options or PromptOptions()
    rows = tokenize(backend, prompts, options.prepend_bos)
    n = len(rows)
    queries = _per_prompt(options.query, n)
    sets = _swappable_per_prompt(options.swappable, n)
    bos_id = bos_token_id(backend)
    if options.exclude_bos is not None:
        bos_flags = [options.exclude_bos] * n
    elif bos_id is None:
        bos_flags = [False] * n
    else:
        firsts = rows[:, 0] if isinstance(rows, Tensor) else torch.stack([row[0] for row in rows])
        bos_flags = (firsts == bos_id).tolist()
    defaults: dict[tuple[int, bool], tuple[int, ...]] = {}
    out = []
    for index in range(n):
        tokens = rows[index]
        length = int(tokens.shape[0])
        q = length - 1 if queries[index] is None else queries[index]
        if not -length <= q < length:
            raise ValueError(f"query {q} is out of range for prompt {index} of {length} tokens.")
        q %= length
        bos = bool(bos_flags[index])
        chosen = sets[index]
        if chosen is None:
            candidates = defaults.get((q, bos))
            if candidates is None:
                candidates = defaults[(q, bos)] = tuple(range(1 if bos else 0, q))
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
    return PromptSet(out, stacked=rows if isinstance(rows, Tensor) else None)


def _per_prompt(value: int | tuple[int, ...] | None, n: int) -> list:
    if value is None or isinstance(value, int):
        return [value] * n
    if len(value) != n:
        raise ValueError(f"Got {len(value)} query values for {n} prompts: pass one per prompt or a single int.")
    return list(value)


def _swappable_per_prompt(swappable: Any, n: int) -> list:
    if swappable is None or isinstance(swappable, slice):
        return [swappable] * n
    if not swappable or not isinstance(swappable[0], tuple):
        return [swappable] * n
    if len(swappable) != n:
        raise ValueError(
            f"swappable has {len(swappable)} entries for {n} prompts: pass one list of positions for all "
            "prompts, a slice, or one list per prompt."
        )
    return list(swappable)


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

    rows: list[int]
    prompts: list[int]
    query: int
    swappable: tuple[int, ...]
    others: tuple[int, ...]

    def split(self, size: int) -> list[KeyGroup]:
        """The group cut into parts of at most ``size`` prompts (same layout)."""
        return [KeyGroup(self.rows[i : i + size], self.prompts[i : i + size], self.query, self.swappable, self.others)
                for i in range(0, len(self.rows), size)]
