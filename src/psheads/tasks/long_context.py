"""Long-context retrieval tasks for pretrained LLMs, scored teacher-forced in one forward per prompt.

These tasks test KV-cache policies: a *streamed* head sees only the first ``sink`` and the last
``recent`` tokens, so a task must break when the heads that fetch far-away content are streamed.
Every prompt is built for a Hugging Face tokenizer at an exact token ``length`` (1K–8K tokens for
Gemma 3 270M, SmolLM2-135M or Qwen2.5-Coder-0.5B) and already holds its answers: an answer is
correct when the model's argmax at each position predicts the next answer token. Four tasks are
registered (``long_context_names()``):

- ``"needle"`` (``NeedleTask``): RULER's multi-key needle in a haystack. Sentences "One of the
  special magic numbers for {key} is: {value}." lie at random depths of natural text; a few of
  them are asked at the end ("… The special magic number for {key} is: {value}").
- ``"variable-tracking"`` (``VariableTrackingTask``): RULER's variable tracking. Chains
  "VAR ABCDE = 12345." … "VAR FGHIJ = VAR ABCDE." lie in order through the text; the value of each
  chain's last variable is asked at the end.
- ``"copy"`` (``CopyTask``): random word tokens, then the same tokens again (induction over the
  whole context).
- ``"passkey"`` (``PasskeyTask``): Mohtashami & Jaggi (2023)'s pass key hidden in repeated filler.

The haystack is ``"prose"`` (psheads' shipped English prose, ``psheads.data.path("prose.txt")``)
or ``"pydoc"`` (the text of Python's own ``pydoc_data.topics``), tokenized once per tokenizer;
each prompt reads a contiguous window of it from a seeded random offset. Prompts are lists of
token ids assembled from separately tokenized pieces, so every answer's span is known exactly.
``long_context_task(name, **options)`` builds a registered task and ``register_long_context_task``
adds your own (any object with a ``name`` and ``generate(tokenizer, length, n, seed)``).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
import string
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

import psheads.data as data
from psheads.interface import validation
from psheads.interface.registry import Registry
from psheads.tasks.llm import KEYS

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

Haystack = Literal["prose", "pydoc"]
HAYSTACKS: tuple[str, ...] = ("prose", "pydoc")
"""The haystack texts: psheads' shipped prose (about 21K tokens) and Python's pydoc topics (about 110K)."""
UNITS: tuple[str, ...] = ("answer", "token")
"""How ``TeacherForced.score`` counts: one measurement per answer, or per answer token."""
MIN_HAYSTACK = 32
"""Haystack tokens a prompt holds at least (more when more sentences are hidden in it), so that a
depth means something."""
PASSKEY_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
"""Mohtashami & Jaggi (2023)'s filler, repeated around the pass key."""
_SENTENCE_ENDS = (".", "!", "?")
_WORD = re.compile(r" [A-Za-z][a-z]+")
_ANY_WORD = re.compile(r" ?[A-Za-z]+")
_MIN_POOL = 16


@dataclass(frozen=True)
class TeacherForced:
    """Prompts whose answers are scored teacher-forced, in one forward per prompt.

    For an answer span ``[start, stop)`` the model's logits at positions ``start − 1 … stop − 2``
    must argmax to ``tokens[start] … tokens[stop − 1]``.

    Attributes:
        task: the task's registered name.
        length: tokens per prompt, answers included.
        tokens: ``[n, length]`` token ids (``torch.long``, CPU); each row starts with the
            tokenizer's BOS (its EOS where it has no BOS, as Qwen2.5).
        spans: per prompt, each answer's token span ``(start, stop)`` in ``tokens`` (``start ≥ 1``).
        labels: per prompt, one short label per answer (``"hops=3"``, ``"depth=0.40"``).
        unit: ``"answer"`` (an answer is one measurement, correct when every token of its span is
            predicted) or ``"token"`` (each token of each span is its own measurement).
        text: each prompt decoded, for inspection.
    """

    task: str
    length: int
    tokens: Int[Tensor, "n pos"]
    spans: tuple[tuple[tuple[int, int], ...], ...]
    labels: tuple[tuple[str, ...], ...]
    unit: str
    text: tuple[str, ...]

    def __post_init__(self) -> None:
        tokens = self.tokens
        if not isinstance(tokens, Tensor) or tokens.dtype != torch.long or tokens.ndim != 2:
            raise ValueError(f"TeacherForced.tokens must be a 2-D LongTensor [n, length], got "
                             f"{getattr(tokens, 'dtype', type(tokens).__name__)} of shape "
                             f"{tuple(getattr(tokens, 'shape', ()))}.")
        n, length = tokens.shape
        if length != self.length:
            raise ValueError(f"TeacherForced.tokens has {length} positions, but length says {self.length}.")
        if self.unit not in UNITS:
            raise ValueError(f"TeacherForced.unit must be one of {UNITS}, got {self.unit!r}.")
        if len(self.spans) != n or len(self.labels) != n or len(self.text) != n:
            raise ValueError(f"TeacherForced: {n} prompts but {len(self.spans)} span lists, {len(self.labels)} label "
                             f"lists and {len(self.text)} texts; give one of each per prompt.")
        for row, (spans, labels) in enumerate(zip(self.spans, self.labels, strict=True)):
            if not spans or len(spans) != len(labels):
                raise ValueError(f"TeacherForced: prompt {row} has {len(spans)} answers and {len(labels)} labels; give "
                                 "each prompt at least one answer and one label per answer.")
            for start, stop in spans:
                if not 1 <= start < stop <= length:
                    raise ValueError(f"TeacherForced: prompt {row} has the answer span ({start}, {stop}); a span "
                                     f"(start, stop) needs 1 ≤ start < stop ≤ {length}.")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def _positions(self, row: int) -> list[int]:
        return sorted({position for start, stop in self.spans[row] for position in range(start - 1, stop - 1)})

    def logit_positions(self) -> Int[Tensor, "n k"]:
        """Per prompt, the positions whose next-token logits the scoring needs.

        Returns:
            ``[n, k]`` positions ``start − 1 … stop − 2`` of every span, sorted, without duplicates;
            a prompt that needs fewer than ``k`` repeats its last one.
        """
        rows = [self._positions(row) for row in range(len(self))]
        width = max(len(row) for row in rows)
        return torch.tensor([row + row[-1:] * (width - len(row)) for row in rows], dtype=torch.long)

    def _token_hits(self, predictions: Tensor) -> list[list[Tensor]]:
        """Per prompt, per answer, ``[stop − start]`` bools: each answer token predicted or not."""
        positions = self.logit_positions()
        if not isinstance(predictions, Tensor) or predictions.is_floating_point() or predictions.is_complex() \
                or predictions.dtype == torch.bool:
            raise TypeError("predictions must be an integer tensor of argmax token ids (logits.argmax(-1) gathered at "
                            f"logit_positions()), got {getattr(predictions, 'dtype', type(predictions).__name__)}.")
        if tuple(predictions.shape) != tuple(positions.shape):
            raise ValueError(f"predictions must have the shape of logit_positions(), {tuple(positions.shape)}, got "
                             f"{tuple(predictions.shape)}: gather the argmax at those positions.")
        hits = predictions.detach().to("cpu", torch.long) == self.tokens.gather(1, positions + 1)
        found = []
        for row in range(len(self)):
            columns = torch.searchsorted(positions[row], torch.arange(self.length))
            found.append([hits[row, columns[start - 1: stop - 1]] for start, stop in self.spans[row]])
        return found

    def correct_by_answer(self, predictions: Int[Tensor, "n k"]) -> list[list[bool]]:
        """Per prompt, per answer: whether every token of its span is predicted.

        Args:
            predictions: ``[n, k]`` argmax token ids at ``logit_positions()``.
        """
        return [[bool(answer.all()) for answer in row] for row in self._token_hits(predictions)]

    def score(self, predictions: Int[Tensor, "n k"]) -> tuple[int, int]:
        """``(correct, total)`` measurements (answers or answer tokens, as ``unit`` says).

        Args:
            predictions: ``[n, k]`` argmax token ids at ``logit_positions()`` (same shape).

        Raises:
            TypeError: ``predictions`` is not an integer tensor.
            ValueError: its shape is not that of ``logit_positions()``.
        """
        hits = self._token_hits(predictions)
        if self.unit == "answer":
            return sum(bool(a.all()) for row in hits for a in row), sum(len(row) for row in hits)
        return sum(int(a.sum()) for row in hits for a in row), sum(len(a) for row in hits for a in row)


@runtime_checkable
class LongContextTask(Protocol):
    """What a long-context task provides: a name and a seeded generator of teacher-forced prompts."""

    @property
    def name(self) -> str:
        """The task's registered name (a read-only property, so frozen dataclasses qualify)."""
        ...

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        """``n`` prompts of exactly ``length`` tokens for ``tokenizer``, deterministic in ``seed``."""
        ...


# --- per-tokenizer caches -----------------------------------------------------------------------

class _TokenizerCache:
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


_CACHE = _TokenizerCache()


def _checked_tokenizer(tokenizer: Any, task: str) -> int:
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


def _encode(tokenizer: Any, pieces: Sequence[str]) -> list[list[int]]:
    """Token ids of each piece of text, tokenized on its own without special tokens."""
    if not pieces:
        return []
    return [[int(token) for token in ids] for ids in tokenizer(list(pieces), add_special_tokens=False)["input_ids"]]


def _decode_each(tokenizer: Any, ids: Sequence[int]) -> list[str]:
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
    _checked_haystack(source)
    if source == "prose":
        return data.path("prose.txt").read_text(encoding="utf-8")
    from pydoc_data.topics import topics  # in every CPython

    return "\n\n".join(topics[key] for key in sorted(topics))


def _checked_haystack(source: Any) -> str:
    if not isinstance(source, str) or source not in HAYSTACKS:
        raise ValueError(f"haystack must be one of {', '.join(map(repr, HAYSTACKS))}, got {source!r}.")
    return source


@dataclass(frozen=True)
class _Haystack:
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


def _haystack_from_ids(tokenizer: Any, name: str, ids: list[int]) -> _Haystack:
    """A haystack whose boundaries follow a token ending in ``.``, ``!`` or ``?`` and precede one that
    starts with whitespace (or the end): a sentence's end, not the dot of ``3.14``."""
    unique = sorted(set(ids))
    texts = _decode_each(tokenizer, unique)
    ends = [token for token, text in zip(unique, texts, strict=True) if text.endswith(_SENTENCE_ENDS)]
    spaced = [token for token, text in zip(unique, texts, strict=True) if text[:1].isspace()]
    array = np.asarray(ids, dtype=np.int64)
    after_end = np.isin(array, np.asarray(ends, dtype=np.int64))
    before_space = np.append(np.isin(array[1:], np.asarray(spaced, dtype=np.int64)), True)
    return _Haystack(name, array, np.flatnonzero(after_end & before_space) + 1)


def _haystack(tokenizer: Any, source: str) -> _Haystack:
    """The haystack ``source`` tokenized by ``tokenizer`` (cached while the tokenizer lives)."""

    def build() -> _Haystack:
        logger.debug("tokenizing the %s haystack", source)
        return _haystack_from_ids(tokenizer, source, _encode(tokenizer, [haystack_text(source)])[0])

    return _CACHE.get(tokenizer, ("haystack", source), build)


def _filler(tokenizer: Any, size: int) -> _Haystack:
    """More than ``size`` tokens of the pass-key filler (whole repeats of it)."""
    unit = _CACHE.get(tokenizer, ("filler",), lambda: _encode(tokenizer, [" " + PASSKEY_FILLER])[0])
    return _haystack_from_ids(tokenizer, "passkey filler", unit * (size // len(unit) + 2))


# --- the haystack tasks ---------------------------------------------------------------------------

@dataclass
class _Draft:
    """One prompt's text pieces, before the haystack window is chosen.

    Attributes:
        intro: text right after BOS, before the haystack.
        hidden: sentences hidden in the haystack, in order (each written with a leading space).
        tail: text after the haystack: pairs (piece, is_answer); an answer piece starts with a space.
        labels: one label per answer, or an int: the index in ``hidden`` whose depth labels it.
    """

    intro: str
    hidden: list[str]
    tail: list[tuple[str, bool]]
    labels: list[str | int]


@dataclass
class _Encoded:
    """A draft's pieces as token ids.

    Attributes:
        draft: the text.
        intro: the intro's ids.
        hidden: each hidden sentence's ids.
        tail: each tail piece's ids, with the index of its first answer token (None for a question piece).
    """

    draft: _Draft
    intro: list[int]
    hidden: list[list[int]]
    tail: list[tuple[list[int], int | None]]

    @property
    def fixed(self) -> int:
        """Tokens outside the haystack window, BOS included."""
        return 1 + len(self.intro) + sum(map(len, self.hidden)) + sum(len(ids) for ids, _ in self.tail)


def _prompt_rng(seed: int, row: int) -> random.Random:
    """Prompt ``row``'s own generator: a prompt is the same whatever ``n`` (string seeds hash with SHA-512,
    independently of ``PYTHONHASHSEED``)."""
    return random.Random(f"psheads.long_context:{seed}:{row}")


def _number(rng: random.Random, digits: int) -> str:
    return str(rng.randrange(10 ** (digits - 1), 10**digits))


def _distinct_numbers(rng: random.Random, digits: int, count: int) -> list[str]:
    return [str(value) for value in rng.sample(range(10 ** (digits - 1), 10**digits), count)]


def _answer_start(tokenizer: Any, ids: list[int]) -> int:
    """Index of the first token of an answer piece that carries more than whitespace: the span of an
    answer starts there (Gemma writes " 123" as "▁" "1" "2" "3", and the space belongs to the question)."""
    texts = _decode_each(tokenizer, ids)
    return next((index for index, text in enumerate(texts) if text.strip()), 0)


class _HaystackTask:
    """What the haystack tasks share: drafting pieces, fitting the window, assembling ids and spans."""

    name: str

    def _draft(self, rng: random.Random) -> _Draft:
        raise NotImplementedError

    def _source(self, tokenizer: Any, length: int) -> _Haystack:
        """The haystack to read the windows of ``length``-token prompts from (never a function of the
        other prompts: prompt ``i`` is the same whatever ``n``)."""
        raise NotImplementedError

    def _haystack_hint(self) -> str:
        return "a shorter length"

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        """``n`` prompts of exactly ``length`` tokens for ``tokenizer``, deterministic in ``seed``.

        Prompt ``i`` is the same for every ``n > i``.

        Raises:
            TypeError: ``tokenizer`` is not a Hugging Face tokenizer.
            ValueError: ``length`` is too short for the task's fixed parts (the message says the
                minimum) or needs more haystack than there is (the message says how much there is).
        """
        length = validation.integer(length, "length", minimum=2)
        n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
        bos = _checked_tokenizer(tokenizer, self.name)
        rngs = [_prompt_rng(seed, row) for row in range(n)]
        encoded = [self._encoded(tokenizer, self._draft(rng)) for rng in rngs]
        needed = max(prompt.fixed + max(MIN_HAYSTACK, len(prompt.hidden)) for prompt in encoded)
        if length < needed:
            raise ValueError(f"{self.name!r}: length {length} is too short; with this tokenizer its prompts need at "
                             f"least {needed} tokens (the question, answers and hidden sentences, plus "
                             f"{MIN_HAYSTACK} of haystack). Pass length ≥ {needed}.")
        widest = length - min(prompt.fixed for prompt in encoded)
        source = self._source(tokenizer, length)
        if widest > len(source):
            raise ValueError(f"{self.name!r}: length {length} needs up to {widest} haystack tokens, but the "
                             f"{source.name!r} haystack has {len(source)} tokens with this tokenizer. Pass "
                             f"{self._haystack_hint()}.")
        rows, spans, labels = [], [], []
        for rng, prompt in zip(rngs, encoded, strict=True):
            ids, row_spans, row_labels = self._assemble(bos, prompt, source, length - prompt.fixed, rng)
            rows.append(ids)
            spans.append(row_spans)
            labels.append(row_labels)
        tokens = torch.tensor(rows, dtype=torch.long)
        text = tuple(tokenizer.batch_decode(rows, skip_special_tokens=False))
        return TeacherForced(self.name, length, tokens, tuple(spans), tuple(labels), "answer", text)

    def _encoded(self, tokenizer: Any, draft: _Draft) -> _Encoded:
        ids = _encode(tokenizer, [draft.intro, *draft.hidden, *(piece for piece, _ in draft.tail)])
        tail = [(piece, _answer_start(tokenizer, piece) if is_answer else None)
                for (_, is_answer), piece in zip(draft.tail, ids[1 + len(draft.hidden):], strict=True)]
        return _Encoded(draft, ids[0], ids[1: 1 + len(draft.hidden)], tail)

    def _assemble(self, bos: int, prompt: _Encoded, source: _Haystack, size: int,
                  rng: random.Random) -> tuple[list[int], tuple[tuple[int, int], ...], tuple[str, ...]]:
        offset = source.offset(size, rng)
        points = source.insertion_points(offset, size, len(prompt.hidden), rng)
        window = source.ids[offset: offset + size].tolist()
        ids = [bos, *prompt.intro]
        done = 0
        for point, sentence in zip(points, prompt.hidden, strict=True):
            ids += window[done:point]
            ids += sentence
            done = point
        ids += window[done:]
        spans = []
        for piece, skip in prompt.tail:
            if skip is not None:
                spans.append((len(ids) + skip, len(ids) + len(piece)))
            ids += piece
        labels = tuple(label if isinstance(label, str) else f"depth={points[label] / size:.2f}"
                       for label in prompt.draft.labels)
        return ids, tuple(spans), labels


_KEYS = tuple(dict.fromkeys(KEYS))
_MAX_DIGITS = 18


def _checked_digits(digits: Any, needed: int) -> int:
    """Digits of a number with a non-zero first digit, enough for ``needed`` distinct ones."""
    digits = validation.integer(digits, "digits", minimum=1, maximum=_MAX_DIGITS)
    if 9 * 10 ** (digits - 1) < needed:
        raise ValueError(f"digits={digits} gives only {9 * 10 ** (digits - 1)} distinct numbers, and a prompt needs "
                         f"{needed}; pass more digits.")
    return digits


def _pydoc_hint(haystack: str) -> str:
    return "a shorter length, or haystack='pydoc' (about 110K tokens)" if haystack == "prose" else "a shorter length"


class _TextHaystackTask(_HaystackTask):
    """A haystack task hiding its sentences in a text of ``HAYSTACKS`` (its ``haystack`` field)."""

    haystack: Haystack

    def _source(self, tokenizer: Any, length: int) -> _Haystack:
        return _haystack(tokenizer, self.haystack)

    def _haystack_hint(self) -> str:
        return _pydoc_hint(self.haystack)


@dataclass(frozen=True)
class NeedleTask(_TextHaystackTask):
    """RULER's multi-key needle in a haystack (``"needle"``), teacher-forced.

    ``n_needles`` sentences "One of the special magic numbers for {key} is: {value}." (distinct
    keys from ``KEYS``, distinct values) lie at random sentence boundaries of the haystack window;
    ``n_queries`` of them are asked at the end, each as "What is the special magic number for
    {key}? The special magic number for {key} is: {value}". The value's tokens are the answer;
    its label is the needle's depth in the haystack window (``"depth=0.37"``: 0 at its start, 1 at
    its end).

    Attributes:
        n_needles: needles hidden per prompt.
        n_queries: needles asked per prompt (distinct, in a random order).
        digits: digits of each value (its first digit is not 0).
        haystack: the text they hide in, ``"prose"`` or ``"pydoc"`` (``HAYSTACKS``).
    """

    n_needles: int = 4
    n_queries: int = 2
    digits: int = 6
    haystack: Haystack = "prose"
    name: str = field(default="needle", init=False)

    INTRO = ("Some special magic numbers are hidden within the following text. Make sure to memorize them. "
             "I will quiz you about the numbers afterwards.\n")

    def __post_init__(self) -> None:
        n_needles = validation.integer(self.n_needles, "n_needles", minimum=1, maximum=len(_KEYS))
        object.__setattr__(self, "n_needles", n_needles)
        object.__setattr__(self, "n_queries", validation.integer(self.n_queries, "n_queries", minimum=1,
                                                                 maximum=n_needles))
        object.__setattr__(self, "digits", _checked_digits(self.digits, n_needles))
        object.__setattr__(self, "haystack", _checked_haystack(self.haystack))

    def _draft(self, rng: random.Random) -> _Draft:
        keys = rng.sample(_KEYS, self.n_needles)
        values = _distinct_numbers(rng, self.digits, self.n_needles)
        asked = rng.sample(range(self.n_needles), self.n_queries)
        tail: list[tuple[str, bool]] = []
        for number, needle in enumerate(asked):
            key = keys[needle]
            tail.append((("\n\n" if number == 0 else "\n") + f"What is the special magic number for {key}? "
                         f"The special magic number for {key} is:", False))
            tail.append((f" {values[needle]}", True))
        hidden = [f" One of the special magic numbers for {key} is: {value}." for key, value in zip(keys, values,
                                                                                                   strict=True)]
        return _Draft(self.INTRO, hidden, tail, list(asked))

@dataclass(frozen=True)
class VariableTrackingTask(_TextHaystackTask):
    """RULER's variable tracking (``"variable-tracking"``), teacher-forced.

    One chain per entry of ``hops``: a chain of ``k`` hops is ``k + 1`` statements, "VAR ABCDE =
    12345." then ``k`` links "VAR FGHIJ = VAR ABCDE." … (RULER's ``num_hops``), hidden in order at
    random sentence boundaries of the haystack window, the chains interleaved at random. At the end
    each chain's last variable is asked, in a random order: "The value of VAR VWXYZ is 12345". The
    value's tokens are the answer, labelled ``"hops=k"``. Variable names are distinct random
    5-letter upper-case strings; values are distinct.

    Attributes:
        hops: the hop count of each chain (one chain per entry; repeats allowed).
        digits: digits of each value (its first digit is not 0).
        haystack: the text they hide in, ``"prose"`` or ``"pydoc"`` (``HAYSTACKS``).
    """

    hops: tuple[int, ...] = (1, 2, 3, 4)
    digits: int = 5
    haystack: Haystack = "prose"
    name: str = field(default="variable-tracking", init=False)

    INTRO = "Memorize and track the chains of variable assignment hidden in the following text.\n"

    def __post_init__(self) -> None:
        hops = validation.integers(self.hops, "hops", minimum=1)
        if not hops:
            raise ValueError("hops must list at least one chain's hop count, e.g. (1, 2, 3, 4).")
        object.__setattr__(self, "hops", hops)
        object.__setattr__(self, "digits", _checked_digits(self.digits, len(hops)))
        object.__setattr__(self, "haystack", _checked_haystack(self.haystack))

    def _draft(self, rng: random.Random) -> _Draft:
        names: list[str] = []
        while len(names) < sum(hops + 1 for hops in self.hops):
            name = "".join(rng.choices(string.ascii_uppercase, k=5))
            if name not in names:
                names.append(name)
        values = _distinct_numbers(rng, self.digits, len(self.hops))
        chains, last = [], []
        for hops, value in zip(self.hops, values, strict=True):
            chain, names = names[: hops + 1], names[hops + 1:]
            chains.append([f" VAR {chain[0]} = {value}."]
                          + [f" VAR {chain[j]} = VAR {chain[j - 1]}." for j in range(1, hops + 1)])
            last.append(chain[-1])
        order = [index for index, hops in enumerate(self.hops) for _ in range(hops + 1)]
        rng.shuffle(order)  # the chains interleave; each keeps its own order
        hidden = [chains[index].pop(0) for index in order]
        asked = rng.sample(range(len(self.hops)), len(self.hops))
        tail: list[tuple[str, bool]] = []
        for number, index in enumerate(asked):
            tail.append((("\n\n" if number == 0 else "\n") + f"The value of VAR {last[index]} is", False))
            tail.append((f" {values[index]}", True))
        return _Draft(self.INTRO, hidden, tail, [f"hops={self.hops[index]}" for index in asked])

@dataclass(frozen=True)
class PasskeyTask(_HaystackTask):
    """Mohtashami & Jaggi (2023)'s pass-key retrieval (``"passkey"``), teacher-forced.

    "The pass key is {key}. Remember it. {key} is the pass key." lies at a random sentence
    boundary of their repeated filler ("The grass is green. The sky is blue. …",
    ``PASSKEY_FILLER``); the prompt ends "What is the pass key? The pass key is {key}". The key's
    tokens are the answer, labelled with its depth (``"depth=0.37"``). The filler never runs out.

    Attributes:
        digits: digits of the key (its first digit is not 0).
    """

    digits: int = 5
    name: str = field(default="passkey", init=False)

    INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
             "I will quiz you about the important information there.")

    def __post_init__(self) -> None:
        object.__setattr__(self, "digits", _checked_digits(self.digits, 1))

    def _draft(self, rng: random.Random) -> _Draft:
        key = _number(rng, self.digits)
        return _Draft(self.INTRO, [f" The pass key is {key}. Remember it. {key} is the pass key."],
                      [("\nWhat is the pass key? The pass key is", False), (f" {key}", True)], [0])

    def _source(self, tokenizer: Any, length: int) -> _Haystack:
        return _filler(tokenizer, length)


# --- copying --------------------------------------------------------------------------------------

def word_pool(tokenizer: Any) -> Int[Tensor, " words"]:
    """The token ids of ``tokenizer`` that decode to a plain word: a space and two or more ASCII
    letters, lower case but the first (ASCII letters with or without a space where fewer than 16
    tokens are such words), special and added tokens left out; sorted, cached while the tokenizer lives.

    Raises:
        ValueError: fewer than two such tokens.
    """
    return torch.from_numpy(_CACHE.get(tokenizer, ("words",), lambda: _word_pool(tokenizer)))


def _word_pool(tokenizer: Any) -> np.ndarray:
    special = {int(token) for token in getattr(tokenizer, "all_special_ids", [])}
    added = getattr(tokenizer, "get_added_vocab", None)
    if callable(added):
        special |= {int(token) for token in added().values()}
    ids = [token for token in range(len(tokenizer)) if token not in special]
    texts = _decode_each(tokenizer, ids)
    for pattern in (_WORD, _ANY_WORD):
        pool = [token for token, text in zip(ids, texts, strict=True) if pattern.fullmatch(text)]
        if len(pool) >= _MIN_POOL:
            break
    if len(pool) < 2:
        raise ValueError(f"This tokenizer has {len(pool)} tokens that decode to a plain alphabetic word; the copy task "
                         "needs at least 2. Use a tokenizer of natural text.")
    return np.asarray(pool, dtype=np.int64)


@dataclass(frozen=True)
class CopyTask:
    """Copying (``"copy"``): random word tokens, then the same tokens again.

    After BOS come ``m = (length − 1) // 2`` tokens drawn from ``word_pool(tokenizer)`` (distinct
    where the pool is large enough, so every next token is determined by its previous one), then the
    same ``m`` tokens again; an even ``length`` adds one more token, the first of the sequence again
    (the prompt continues periodically). The answer is the second copy but its first token (which
    no copy rule predicts), one span scored per token (``unit="token"``), labelled with the copying
    distance (``"distance=m"``).
    """

    name: str = field(default="copy", init=False)

    MINIMUM = 5
    """The shortest prompt: BOS, two tokens, their copy."""

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        """``n`` prompts of exactly ``length`` tokens for ``tokenizer``, deterministic in ``seed``.

        Prompt ``i`` is the same for every ``n > i``.

        Raises:
            TypeError: ``tokenizer`` is not a Hugging Face tokenizer.
            ValueError: ``length`` is below ``MINIMUM``.
        """
        length = validation.integer(length, "length", minimum=1)
        n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
        if length < self.MINIMUM:
            raise ValueError(f"{self.name!r}: length {length} is too short; its prompts need at least {self.MINIMUM} "
                             "tokens (BOS, two tokens and their copy).")
        bos = _checked_tokenizer(tokenizer, self.name)
        pool = word_pool(tokenizer).tolist()
        half = (length - 1) // 2
        rows = []
        for row in range(n):
            rng = _prompt_rng(seed, row)
            sequence = rng.sample(pool, half) if len(pool) >= half else rng.choices(pool, k=half)
            rows.append([bos, *(sequence * 3)[: length - 1]])
        tokens = torch.tensor(rows, dtype=torch.long)
        text = tuple(tokenizer.batch_decode(rows, skip_special_tokens=False))
        spans = (((half + 2, length),),) * n
        return TeacherForced(self.name, length, tokens, spans, ((f"distance={half}",),) * n, "token", text)


@dataclass(frozen=True)
class FromTask:
    """A psheads task with single-token answers (``psheads.tasks``: paper B's number and letter tasks,
    say) as a long-context task: its prompts at ``length − 1`` tokens (``at_length``), each followed by
    its answer, scored teacher-forced at the last position. The tokenizer is the task's own (ignored).

    ``register_long_context_task(FromTask(get_task("letter")))`` makes it one more task of a
    policy evaluation, under the task's name.
    """

    task: Any

    @property
    def name(self) -> str:
        return str(self.task.name)

    def generate(self, tokenizer: Any, length: int, n: int, seed: int = 0) -> TeacherForced:
        from psheads.tasks.base import at_length, checked_batch

        length = validation.integer(length, "length", minimum=3)
        batch = checked_batch(at_length(self.task, length - 1), validation.integer(n, "n", minimum=1), seed=seed)
        tokens = torch.cat([batch.tokens, batch.answers[:, None]], dim=1)
        width = int(tokens.shape[1])
        return TeacherForced(task=self.name, length=width, tokens=tokens,
                             spans=tuple(((width - 1, width),) for _ in range(len(batch))),
                             labels=tuple((f"hops={int(h)}",) for h in batch.hops), unit="answer",
                             text=tuple(f"{text} {answer}" for text, answer in zip(batch.text, batch.answer_text,
                                                                                   strict=True)))


# --- the registry ---------------------------------------------------------------------------------

LONG_CONTEXT_TASKS: Registry[LongContextTask] = Registry(
    "long-context task", "psheads.tasks.long_context.register_long_context_task")
"""The long-context tasks by name (``long_context_names()``)."""


def register_long_context_task(task: LongContextTask, replace: bool = False) -> LongContextTask:
    """Register ``task`` (an instance) under ``task.name``; returns it.

    ``long_context_task(task.name, **options)`` then builds it with other options
    (``dataclasses.replace``, for a dataclass task).

    Raises:
        TypeError: ``task`` has no ``name`` or ``generate`` (or is a class, not an instance).
        ValueError: its name is already registered and ``replace`` is False.
    """
    if isinstance(task, type) or not isinstance(task, LongContextTask):
        raise TypeError(f"register_long_context_task takes a task instance with a `name` and a "
                        f"`generate(tokenizer, length, n, seed)` method (e.g. NeedleTask()), got {task!r}.")
    return LONG_CONTEXT_TASKS.register(task.name, task, replace=replace)


def long_context_task(name: str, **options: Any) -> LongContextTask:
    """The registered long-context task ``name``, with ``options`` changed (its dataclass fields).

    Raises:
        TypeError: ``name`` is not a string, or an option the task does not take.
        ValueError: no task of that name (the message lists them), or an option's value is refused.
    """
    task = LONG_CONTEXT_TASKS.lookup(name)
    if not options:
        return task
    fields: list[str] = sorted(f.name for f in dataclasses.fields(task) if f.init) \
        if dataclasses.is_dataclass(task) and not isinstance(task, type) else []
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise TypeError(f"The long-context task {name!r} takes no option {', '.join(map(repr, unknown))}; its options "
                        f"are: {', '.join(fields) or 'none'}.")
    return dataclasses.replace(task, **options)  # type: ignore[type-var]


def long_context_names() -> tuple[str, ...]:
    """The registered long-context tasks' names, sorted."""
    return LONG_CONTEXT_TASKS.names()


for _task in (NeedleTask(), VariableTrackingTask(), CopyTask(), PasskeyTask()):
    register_long_context_task(_task)
