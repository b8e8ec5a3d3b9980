"""The text long-context prompts are made of, per tokenizer: the haystacks, the pass-key filler and
the word pool, tokenized once and cached while the tokenizer lives.

The haystack is ``"prose"`` (psheads' shipped English prose, ``psheads.data.path("prose.txt")``)
or ``"pydoc"`` (the text of Python's own ``pydoc_data.topics``); a prompt reads a contiguous window of
it from a seeded random offset.
"""

from __future__ import annotations

import logging
import random
import re
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

import psheads.data as data

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

Haystack = Literal["prose", "pydoc"]
HAYSTACKS: tuple[str, ...] = ("prose", "pydoc")
"""The haystack texts: psheads' shipped prose (about 21K tokens) and Python's pydoc topics (about 110K)."""
PASSKEY_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
"""Mohtashami & Jaggi (2023)'s filler, repeated around the pass key."""
_SENTENCE_ENDS = (".", "!", "?")
_WORD = re.compile(r" [A-Za-z][a-z]+")
_ANY_WORD = re.compile(r" ?[A-Za-z]+")
_MIN_POOL = 16


class TokenizerCache:
    """Values derived from a tokenizer (its haystacks, its word pool), kept while it lives.

    Keyed on the tokenizer's identity through a weak reference, for the last few tokenizers only,
    so neither the tokenizer nor old haystacks are kept alive by the cache.
    """

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._entries: OrderedDict[int, tuple[weakref.ref[Any], dict[Any, Any]]] = OrderedDict()

    def get(self, tokenizer: Any, key: Any, build: Callable[[], _T]) -> _T:
        key_id = id(tokenizer)
        entry = self._entries.get(key_id)
        if entry is None or entry[0]() is not tokenizer:
            def forget(dead: weakref.ref[Any]) -> None:  # the tokenizer is gone: so are its values
                if key_id in self._entries and self._entries[key_id][0] is dead:
                    del self._entries[key_id]

            try:
                entry = (weakref.ref(tokenizer, forget), {})
            except TypeError:  # not weakly referable: compute every time rather than keep it alive
                return build()
            self._entries[key_id] = entry
        self._entries.move_to_end(key_id)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        values = entry[1]
        full_key = (key, len(tokenizer))  # a tokenizer that gained tokens tokenizes anew
        if full_key not in values:
            values[full_key] = build()
        return values[full_key]

    def clear(self) -> None:
        self._entries.clear()


CACHE = TokenizerCache()


def checked_tokenizer(tokenizer: Any, task: str) -> int:
    """The id a prompt starts with (BOS, else EOS), after checking ``tokenizer`` is a Hugging Face tokenizer."""
    if not callable(tokenizer) or not callable(getattr(tokenizer, "decode", None)) \
            or not callable(getattr(tokenizer, "batch_decode", None)):
        raise TypeError(f"{task!r}: tokenizer must be a Hugging Face tokenizer (e.g. "
                        f"transformers.AutoTokenizer.from_pretrained(folder) or model.tokenizer), got "
                        f"{type(tokenizer).__name__}.")
    for attribute in ("bos_token_id", "eos_token_id"):
        token = getattr(tokenizer, attribute, None)
        if token is not None:
            return int(token)
    raise ValueError(f"{task!r}: the tokenizer has neither a BOS nor an EOS token to start a prompt with; give it one "
                     "(tokenizer.bos_token = ...).")


def encode(tokenizer: Any, pieces: Sequence[str]) -> list[list[int]]:
    """Token ids of each piece of text, tokenized on its own without special tokens."""
    if not pieces:
        return []
    return [[int(token) for token in ids] for ids in tokenizer(list(pieces), add_special_tokens=False)["input_ids"]]


def decode_each(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """Each token's own text."""
    singles = [[int(token)] for token in ids]
    backend = getattr(tokenizer, "backend_tokenizer", None)  # the fast path: 3× quicker on Gemma's 262K tokens
    if backend is not None and callable(getattr(backend, "decode_batch", None)):
        return list(backend.decode_batch(singles, skip_special_tokens=False))
    return list(tokenizer.batch_decode(singles, skip_special_tokens=False))


def haystack_text(source: str) -> str:
    """The text of the haystack ``source`` (one of ``HAYSTACKS``).

    Raises:
        ValueError: an unknown source.
    """
    checked_haystack(source)
    if source == "prose":
        return data.path("prose.txt").read_text(encoding="utf-8")
    from pydoc_data.topics import topics  # in every CPython

    return "\n\n".join(topics[key] for key in sorted(topics))


def checked_haystack(source: Any) -> str:
    if not isinstance(source, str) or source not in HAYSTACKS:
        raise ValueError(f"haystack must be one of {', '.join(map(repr, HAYSTACKS))}, got {source!r}.")
    return source


@dataclass(frozen=True)
class HaystackIds:
    """Token ids of a haystack text and where its sentences end.

    Attributes:
        name: the source, for messages.
        ids: ``[tokens]`` token ids.
        boundaries: sorted positions ``p`` (``1 … tokens``) whose previous token ends a sentence:
            a hidden sentence may go before ``ids[p]``.
    """

    name: str
    ids: np.ndarray
    boundaries: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def offset(self, size: int, rng: random.Random) -> int:
        """A window start for ``size`` tokens: the start of a sentence where there is one."""
        last = len(self) - size
        starts = self.boundaries[: np.searchsorted(self.boundaries, last, side="right")]
        return int(rng.choice(starts)) if len(starts) else rng.randrange(last + 1)

    def insertion_points(self, offset: int, size: int, count: int, rng: random.Random) -> list[int]:
        """``count`` distinct points ``0 … size`` of the window to hide sentences at, sorted: sentence
        boundaries where the window has enough, any points otherwise."""
        low = int(np.searchsorted(self.boundaries, offset + 1))
        high = int(np.searchsorted(self.boundaries, offset + size, side="right"))
        if high - low >= count:
            return sorted(int(self.boundaries[i]) - offset for i in rng.sample(range(low, high), count))
        return sorted(rng.sample(range(size + 1), count))


def haystack_from_ids(tokenizer: Any, name: str, ids: list[int]) -> HaystackIds:
    """A haystack whose boundaries follow a token ending in ``.``, ``!`` or ``?`` and precede one that
    starts with whitespace (or the end): a sentence's end, not the dot of ``3.14``."""
    unique = sorted(set(ids))
    texts = decode_each(tokenizer, unique)
    ends = [token for token, text in zip(unique, texts, strict=True) if text.endswith(_SENTENCE_ENDS)]
    spaced = [token for token, text in zip(unique, texts, strict=True) if text[:1].isspace()]
    array = np.asarray(ids, dtype=np.int64)
    after_end = np.isin(array, np.asarray(ends, dtype=np.int64))
    before_space = np.append(np.isin(array[1:], np.asarray(spaced, dtype=np.int64)), True)
    return HaystackIds(name, array, np.flatnonzero(after_end & before_space) + 1)


def tokenized_haystack(tokenizer: Any, source: str) -> HaystackIds:
    """The haystack ``source`` tokenized by ``tokenizer`` (cached while the tokenizer lives)."""

    def build() -> HaystackIds:
        logger.debug("tokenizing the %s haystack", source)
        return haystack_from_ids(tokenizer, source, encode(tokenizer, [haystack_text(source)])[0])

    return CACHE.get(tokenizer, ("haystack", source), build)


def filler(tokenizer: Any, size: int) -> HaystackIds:
    """More than ``size`` tokens of the pass-key filler (whole repeats of it)."""
    unit = CACHE.get(tokenizer, ("filler",), lambda: encode(tokenizer, [" " + PASSKEY_FILLER])[0])
    return haystack_from_ids(tokenizer, "passkey filler", unit * (size // len(unit) + 2))



def word_pool(tokenizer: Any) -> Int[Tensor, " words"]:
    """The token ids of ``tokenizer`` that decode to a plain word: a space and two or more ASCII
    letters, lower case but the first (ASCII letters with or without a space where fewer than 16
    tokens are such words), special and added tokens left out; sorted, cached while the tokenizer lives.

    Raises:
        ValueError: fewer than two such tokens.
    """
    return torch.from_numpy(CACHE.get(tokenizer, ("words",), lambda: _word_pool(tokenizer)))


def _word_pool(tokenizer: Any) -> np.ndarray:
    special = {int(token) for token in getattr(tokenizer, "all_special_ids", [])}
    added = getattr(tokenizer, "get_added_vocab", None)
    if callable(added):
        special |= {int(token) for token in added().values()}
    ids = [token for token in range(len(tokenizer)) if token not in special]
    texts = decode_each(tokenizer, ids)
    for pattern in (_WORD, _ANY_WORD):
        pool = [token for token, text in zip(ids, texts, strict=True) if pattern.fullmatch(text)]
        if len(pool) >= _MIN_POOL:
            break
    if len(pool) < 2:
        raise ValueError(f"This tokenizer has {len(pool)} tokens that decode to a plain alphabetic word; the copy task "
                         "needs at least 2. Use a tokenizer of natural text.")
    return np.asarray(pool, dtype=np.int64)

