"""The haystack tasks: sentences hidden in a long text (``"needle"``, ``"variable-tracking"``) or in
repeated filler (``"passkey"``), asked at the end and scored teacher-forced.

Prompts are lists of token ids assembled from separately tokenized pieces, so every answer's span is
known exactly.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

import torch

from psheads.interface import validation
from psheads.tasks.llm import KEYS
from psheads.tasks.long_context.base import TeacherForced, prompt_rng
from psheads.tasks.long_context.text import (
    Haystack,
    HaystackIds,
    checked_haystack,
    checked_tokenizer,
    decode_each,
    encode,
    filler,
    tokenized_haystack,
)

MIN_HAYSTACK = 32
"""Haystack tokens a prompt holds at least (more when more sentences are hidden in it), so that a
depth means something."""


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



def _number(rng: random.Random, digits: int) -> str:
    return str(rng.randrange(10 ** (digits - 1), 10**digits))


def _distinct_numbers(rng: random.Random, digits: int, count: int) -> list[str]:
    return [str(value) for value in rng.sample(range(10 ** (digits - 1), 10**digits), count)]


def _answer_start(tokenizer: Any, ids: list[int]) -> int:
    """Index of the first token of an answer piece that carries more than whitespace: the span of an
    answer starts there (Gemma writes " 123" as "▁" "1" "2" "3", and the space belongs to the question)."""
    texts = decode_each(tokenizer, ids)
    return next((index for index, text in enumerate(texts) if text.strip()), 0)


class _HaystackTask:
    """What the haystack tasks share: drafting pieces, fitting the window, assembling ids and spans."""

    name: str

    def _draft(self, rng: random.Random) -> _Draft:
        raise NotImplementedError

    def _source(self, tokenizer: Any, length: int) -> HaystackIds:
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
        bos = checked_tokenizer(tokenizer, self.name)
        rngs = [prompt_rng(seed, row) for row in range(n)]
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
        ids = encode(tokenizer, [draft.intro, *draft.hidden, *(piece for piece, _ in draft.tail)])
        tail = [(piece, _answer_start(tokenizer, piece) if is_answer else None)
                for (_, is_answer), piece in zip(draft.tail, ids[1 + len(draft.hidden):], strict=True)]
        return _Encoded(draft, ids[0], ids[1: 1 + len(draft.hidden)], tail)

    def _assemble(self, bos: int, prompt: _Encoded, source: HaystackIds, size: int,
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

    def _source(self, tokenizer: Any, length: int) -> HaystackIds:
        return tokenized_haystack(tokenizer, self.haystack)

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
        object.__setattr__(self, "haystack", checked_haystack(self.haystack))

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
        object.__setattr__(self, "haystack", checked_haystack(self.haystack))

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

    def _source(self, tokenizer: Any, length: int) -> HaystackIds:
        return filler(tokenizer, length)


