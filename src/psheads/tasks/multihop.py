"""Paper B's multi-hop tasks: the positional number task, the symbolic letter task.

Both have ``n_target`` target-window tokens, ``n_pre`` pre-target tokens and one query token
(8 + 8 + 1 = 17 by default), no BOS, and the answer as the next token. Hops start at the query
and end in the target window; hop counts are drawn in equal shares and, within each hop class,
the answer token and its position in the target window are balanced. ``extra_target`` inserts
that many more target-window tokens before the effective target window (length
generalization): they never shift a relative hop (number) nor create a second match (letter).
"""

from __future__ import annotations

import dataclasses
import itertools
import string
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Int
from torch import Tensor

from psheads.interface import validation
from psheads.tasks.base import TaskBatch, balanced, register_task, to_text


def _path_positions(hops: int, answer: int, first_pre: int, n_pre: int, generator: torch.Generator) -> list[int]:
    """Positions visited after the query: ``hops − 1`` pre-target positions (decreasing), then the answer."""
    middle = torch.randperm(n_pre, generator=generator)[: hops - 1] + first_pre
    return sorted(middle.tolist(), reverse=True) + [answer]


@dataclass(frozen=True)
class _MultiHopTask:
    """What both tasks share: window sizes, hop range, length generalization, batch assembly."""

    n_target: int = 8
    n_pre: int = 8
    min_hops: int = 1
    max_hops: int = 4
    extra_target: int = 0
    if TYPE_CHECKING:
        @property
        def name(self) -> str:
            """Each task's own field."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # the counts; not the name
            if f.type in ("int", int):
                object.__setattr__(self, f.name, validation.integer(getattr(self, f.name), f.name))
        if self.n_target < 1 or self.n_pre < 0 or self.extra_target < 0:
            raise ValueError("n_target must be ≥ 1 and n_pre, extra_target ≥ 0.")
        if not 1 <= self.min_hops <= self.max_hops:
            raise ValueError(f"Need 1 ≤ min_hops ≤ max_hops, got {self.min_hops}…{self.max_hops}.")
        if self.max_hops - 1 > self.n_pre:
            raise ValueError(f"{self.max_hops} hops need {self.max_hops - 1} pre-target positions; "
                             f"n_pre is {self.n_pre}.")

    @property
    def vocabulary(self) -> list[str]:  # pragma: no cover - defined by each task
        raise NotImplementedError

    @property
    def n_answers(self) -> int:
        """Number of distinct answer tokens: the target-window alphabet, ids 0…n_answers−1 of the vocabulary."""
        raise NotImplementedError

    @property
    def answer_ids(self) -> Tensor:
        """The token ids an answer can take: ``0 … n_answers − 1`` (the vocabulary lists them first)."""
        return torch.arange(self.n_answers)

    @property
    def generator_settings(self) -> dict[str, Any]:
        """Every option but those the front-ends vary on purpose: ``extra_target`` (``with_window``,
        ``at_length``), ``min_hops`` and ``max_hops`` (``with_hops``). A model trained on this task
        expects them again (``psheads.tasks.check_settings``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.init and f.name not in ("extra_target", "min_hops", "max_hops")}

    @property
    def window(self) -> int:
        """Target-window tokens of a prompt: ``n_target + extra_target``."""
        return self.n_target + self.extra_target

    @property
    def min_length(self) -> int:
        """Tokens of a prompt without extra target tokens: ``n_target + n_pre + 1``."""
        return self.n_target + self.n_pre + 1

    def with_window(self, window: int) -> _MultiHopTask:
        """This task with ``window`` target-window tokens: ``extra_target = window − n_target``
        extra tokens before the effective window (paper B's length generalization)."""
        window = validation.integer(window, "window", minimum=1)
        if window < self.n_target:
            raise ValueError(f"window must be at least the task's n_target={self.n_target} (the effective target "
                             f"window; the rest is extra_target), got {window}.")
        return dataclasses.replace(self, extra_target=window - self.n_target)

    def at_length(self, length: int) -> _MultiHopTask:
        """This task with prompts of ``length`` tokens: ``extra_target = length − min_length``."""
        length = validation.integer(length, "length", minimum=1)
        if length < self.min_length:
            raise ValueError(f"Task {self.name!r}: a length of {length} is below its shortest prompt of "
                             f"{self.min_length} tokens (n_target + n_pre + 1).")
        return self.with_window(self.n_target + length - self.min_length)

    def with_hops(self, hops: int) -> _MultiHopTask:
        """This task with every prompt taking ``hops`` hops."""
        return dataclasses.replace(self, min_hops=hops, max_hops=hops)

    def _row(self, hops: int, answer: int, answer_token: int, first_pre: int, query: int,
             generator: torch.Generator) -> Tensor:
        """One prompt whose path from the query takes ``hops`` hops to ``answer``."""
        raise NotImplementedError

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts of ``extra_target + n_target + n_pre + 1`` tokens, deterministic in ``seed``."""
        n = validation.integer(n, "n", minimum=1)
        generator = torch.Generator().manual_seed(validation.seed(seed))
        offset = self.extra_target
        first_pre = offset + self.n_target
        query = first_pre + self.n_pre
        hop_counts = balanced(list(range(self.min_hops, self.max_hops + 1)), n, generator)
        answer_slots = torch.empty(n, dtype=torch.long)
        answer_tokens = torch.empty(n, dtype=torch.long)
        for hops in hop_counts.unique().tolist():
            rows = (hop_counts == hops).nonzero().flatten()
            answer_slots[rows] = balanced(list(range(self.n_target)), len(rows), generator)
            answer_tokens[rows] = balanced(list(range(self.n_answers)), len(rows), generator)
        tokens = torch.stack([
            self._row(int(hop_counts[row]), offset + int(answer_slots[row]), int(answer_tokens[row]), first_pre,
                      query, generator)
            for row in range(n)
        ])
        answers = tokens[torch.arange(n), offset + answer_slots]
        return TaskBatch(tokens, answers, hop_counts, offset + answer_slots,
                         to_text(self.vocabulary, tokens), [self.vocabulary[i] for i in answers.tolist()])


@dataclass(frozen=True)
class NumberTask(_MultiHopTask):
    """Positional multi-hop task: an integer v at position p points to position p − v.

    Attributes:
        n_target: target-window length (symbols).
        n_pre: pre-target window length (integers; the query is one more integer).
        min_hops: fewest hops (hop counts from min to max come in equal shares).
        max_hops: most hops.
        n_symbols: alphabet size (a–z, then the bigrams aa, ab, …; 120 by default).
        max_int: largest integer (16 by default: any hop from the query into the window fits).
        extra_target: extra target-window symbols before the effective window.
    """

    n_symbols: int = 120
    max_int: int = 16
    name: str = field(default="number", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_int < self.n_target + self.n_pre:
            raise ValueError(f"max_int={self.max_int} cannot reach the whole target window from the query; "
                             f"use at least n_target + n_pre = {self.n_target + self.n_pre}.")
        if not 1 <= self.n_symbols <= 26 + 26 * 26:
            raise ValueError("n_symbols must lie in 1…702.")

    @property
    def symbols(self) -> list[str]:
        """The target-window alphabet."""
        letters = list(string.ascii_lowercase)
        return (letters + [a + b for a in letters for b in letters])[: self.n_symbols]

    @property
    def vocabulary(self) -> list[str]:
        """Symbols, then the integers 1…max_int."""
        return self.symbols + [str(v) for v in range(1, self.max_int + 1)]

    @property
    def n_answers(self) -> int:
        """The ``n_symbols`` symbols."""
        return self.n_symbols

    def hop_path(self, tokens: Int[Tensor, " pos"]) -> list[int]:
        """Positions the hops visit in one prompt, from the query (the last token) to the answer:
        each integer v at position p points to p − v, and the first symbol reached is the answer."""
        path, ints = [len(tokens) - 1], self.n_symbols - 1  # token id of integer v is n_symbols − 1 + v
        while int(tokens[path[-1]]) > ints:
            path.append(path[-1] - (int(tokens[path[-1]]) - ints))
            if path[-1] < 0:
                raise ValueError("tokens is not a NumberTask prompt: a hop leaves the prompt.")
        return path

    def _row(self, hops: int, answer: int, answer_token: int, first_pre: int, query: int,
             generator: torch.Generator) -> Tensor:
        tokens = torch.randint(0, self.n_symbols, (query + 1,), generator=generator)
        tokens[answer] = answer_token
        path = [query] + _path_positions(hops, answer, first_pre, self.n_pre, generator)
        values = {p: p - q for p, q in itertools.pairwise(path)}
        int_id = self.n_symbols - 1  # token id of integer v is int_id + v
        for position in range(first_pre, query + 1):
            value = values.get(position)
            if value is None:  # off-path integers point anywhere inside the effective prompt
                value = int(torch.randint(1, position - self.extra_target + 1, (1,), generator=generator))
            tokens[position] = int_id + value
        return tokens


@dataclass(frozen=True)
class LetterTask(_MultiHopTask):
    """Symbolic multi-hop task: from pair (x, y), hop to the one earlier pair starting with y.

    Attributes:
        n_target: target-window length (letter·integer pairs such as ``c2``).
        n_pre: pre-target window length (letter·letter pairs such as ``fa``; so is the query).
        min_hops: fewest hops (hop counts from min to max come in equal shares).
        max_hops: most hops.
        n_letters: alphabet size (a–h by default).
        n_ints: integers 1…n_ints in target pairs.
        extra_target: extra target-window pairs before the effective window.
        sampling: how letters off the path are drawn. ``"psheads"``: a filler's first letter
            only avoids the letters sought by the hops leaving later positions (the least the
            one-match rule needs); the query's first letter and off-path second letters are free.
            ``"paper-b"``: as paper B's generator, the answer's letter and every hop letter are
            banned from every filler's first letter, the query's first letter and every off-path
            second letter. The shipped ``letter`` model was trained with ``"paper-b"``;
            ``letter-psheads``, and every run recorded before this option existed, with the
            default (run a model on its own task: ``load_pretrained(name).task``, or its name).
    """

    n_letters: int = 8
    n_ints: int = 8
    sampling: str = "psheads"
    name: str = field(default="letter", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.max_hops < self.n_letters <= 26:
            raise ValueError(f"n_letters must exceed max_hops (each hop needs its own letter) and be ≤ 26, "
                             f"got {self.n_letters}.")
        if self.n_ints < 1:
            raise ValueError("n_ints must be ≥ 1.")
        if self.sampling not in LETTER_SAMPLING:
            raise ValueError(f"sampling must be one of {LETTER_SAMPLING}, got {self.sampling!r}.")

    @property
    def letters(self) -> list[str]:
        """The letter alphabet."""
        return list(string.ascii_lowercase[: self.n_letters])

    @property
    def vocabulary(self) -> list[str]:
        """Letter·integer pairs, then letter·letter pairs."""
        return ([x + str(v) for x in self.letters for v in range(1, self.n_ints + 1)]
                + [x + y for x in self.letters for y in self.letters])

    def _target_id(self, letter: int, value: int) -> int:
        return letter * self.n_ints + value

    def _pair_id(self, first: int, second: int) -> int:
        return self.n_letters * self.n_ints + first * self.n_letters + second

    @property
    def n_answers(self) -> int:
        """The letter·integer pairs."""
        return self.n_letters * self.n_ints

    def _row(self, hops: int, answer: int, answer_token: int, first_pre: int, query: int,
             generator: torch.Generator) -> Tensor:
        answer_letter, answer_value = divmod(answer_token, self.n_ints)  # target-pair ids come first
        path = [query] + _path_positions(hops, answer, first_pre, self.n_pre, generator)
        # first letters of the hop targets path[1:]: distinct, the answer's letter last
        others = [x for x in torch.randperm(self.n_letters, generator=generator).tolist() if x != answer_letter]
        firsts = others[: hops - 1] + [answer_letter]
        first_of = dict(zip(path[1:], firsts, strict=True))
        # a filler at q must not start with the letter sought by any hop leaving a position > q
        sought = list(zip(path[:-1], firsts, strict=True))  # the hop from p looks for x
        off_path = [x for x in range(self.n_letters) if x not in firsts]  # paper B: every free letter

        def draw(letters: list[int]) -> int:
            return letters[int(torch.randint(len(letters), (1,), generator=generator))]

        free = off_path if self.sampling == "paper-b" else list(range(self.n_letters))
        tokens = torch.empty(query + 1, dtype=torch.long)
        for position in range(query):
            if position in first_of:
                first = first_of[position]
            elif self.sampling == "paper-b":
                first = draw(off_path)
            else:
                banned = {letter for p, letter in sought if position < p}
                first = draw([x for x in range(self.n_letters) if x not in banned])
            if position < first_pre:
                value = (answer_value if position == answer
                         else int(torch.randint(self.n_ints, (1,), generator=generator)))
                tokens[position] = self._target_id(first, value)
            else:
                second = firsts[path.index(position)] if position in path else draw(free)
                tokens[position] = self._pair_id(first, second)
        tokens[query] = self._pair_id(draw(free), firsts[0])  # the query: a free letter, then the first hop's
        return tokens


LETTER_SAMPLING = ("psheads", "paper-b")
"""``LetterTask.sampling`` values: psheads' minimal bans, or paper B's generator (every path letter banned)."""

register_task("number", NumberTask)
register_task("letter", LetterTask)
