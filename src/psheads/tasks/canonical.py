"""Paper A's canonical tasks: Index and Retrieval as paper B's theory (section 3.4) states them,
and partial induction, which needs both mechanisms.

- ``IndexTask`` (``"index"``, positional): ``length − 1`` single letters, then an integer ``k``;
  the answer is the letter ``k`` positions before the query (``Index`` of paper B).
- ``RetrievalTask`` (``"retrieval"``, symbolic): ``length`` letter·letter pairs; the last one,
  ``xy``, is the query and the answer is the one earlier pair whose first letter is ``y``
  (``Retrieval`` of paper B).
- ``PartialInductionTask`` (``"partial-induction"``, positional and symbolic): ``length``
  letters; the last one, ``x``, occurred exactly once before, and the answer is the letter right
  after that occurrence (paper A's partial induction: finding ``x`` is a symbolic match, stepping
  one position on from it a positional one).

The tasks share one vocabulary, so a model over it runs any of them: the ``n_letters`` letters
``a, b, …``, then the integers ``1 … max_offset``, then the ``n_letters²`` pairs ``aa, ab, …``
(word i is token id i). ``max_offset`` defaults to ``length − 1``; pass it explicitly to keep the
vocabulary fixed while the length changes. There is no BOS token and ``hops`` is 1.

Doubled pairs: a query ``xx`` would match its own key, since its first letter is the letter it
asks for. The query is therefore never a doubled pair (``x ≠ y``); doubled pairs may stand
anywhere else, the answer included.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass, field
from typing import overload

import torch
from torch import Tensor

from psheads.interface import validation
from psheads.tasks.base import TaskBatch, balanced, register_task, to_text


@dataclass(frozen=True)
class _CanonicalTask:
    """The options and the vocabulary both canonical tasks share."""

    length: int = 16
    n_letters: int = 8
    max_offset: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "length", validation.integer(self.length, "length", minimum=2))
        object.__setattr__(self, "n_letters", validation.integer(self.n_letters, "n_letters", minimum=1, maximum=26))
        if self.max_offset is None:
            object.__setattr__(self, "max_offset", self.length - 1)
        object.__setattr__(self, "max_offset", validation.integer(self.max_offset, "max_offset", minimum=1))

    @property
    def letters(self) -> list[str]:
        """The alphabet ``a, b, …``."""
        return list(string.ascii_lowercase[: self.n_letters])

    @property
    def _max_offset(self) -> int:
        """``max_offset`` as resolved: the largest integer in the vocabulary."""
        assert self.max_offset is not None  # resolved by __post_init__
        return self.max_offset

    @property
    def vocabulary(self) -> list[str]:
        """Letters (letter i is token id i), then the integers ``1 … max_offset``, then the pairs."""
        return [*self.letters, *(str(k) for k in range(1, self._max_offset + 1)),
                *(x + y for x in self.letters for y in self.letters)]

    def at_length(self, length: int) -> _CanonicalTask:
        """This task with prompts of ``length`` tokens."""
        return dataclasses.replace(self, length=length)

    @overload
    def integer_id(self, k: int) -> int: ...
    @overload
    def integer_id(self, k: Tensor) -> Tensor: ...
    def integer_id(self, k: int | Tensor) -> int | Tensor:
        """Token id of the integer ``k`` (1 … ``max_offset``)."""
        return self.n_letters + k - 1

    @overload
    def pair_id(self, first: int, second: int) -> int: ...
    @overload
    def pair_id(self, first: Tensor, second: int | Tensor) -> Tensor: ...
    @overload
    def pair_id(self, first: int | Tensor, second: Tensor) -> Tensor: ...
    def pair_id(self, first: int | Tensor, second: int | Tensor) -> int | Tensor:
        """Token id of the pair of letters ``first``·``second``."""
        return self.n_letters + self._max_offset + first * self.n_letters + second


@dataclass(frozen=True)
class IndexTask(_CanonicalTask):
    """Copy the letter ``k`` positions back: ``length − 1`` letters, then the integer ``k``.

    Offsets ``k`` are drawn from ``1 … min(max_offset, length − 1)`` in equal shares (so the answer
    positions ``length − 1 − k`` are balanced too), and the answer letters in equal shares; every
    other letter is uniform. Candidates are the letters.

    Attributes:
        length: prompt length in tokens (the query included); at least 2.
        n_letters: alphabet size (1 … 26).
        max_offset: largest integer in the vocabulary (default ``length − 1``: every position can
            be asked for).
    """

    name: str = field(default="index", init=False)

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts of ``length`` tokens, deterministic in ``seed``."""
        n = validation.integer(n, "n", minimum=1)
        generator = torch.Generator().manual_seed(validation.seed(seed))
        offsets = balanced(list(range(1, min(self._max_offset, self.length - 1) + 1)), n, generator)
        answers = balanced(list(range(self.n_letters)), n, generator)
        letters = torch.randint(0, self.n_letters, (n, self.length - 1), generator=generator)
        positions = self.length - 1 - offsets
        rows = torch.arange(n)
        letters[rows, positions] = answers
        tokens = torch.cat([letters, self.integer_id(offsets)[:, None]], dim=1)
        return TaskBatch(tokens, tokens[rows, positions], torch.ones(n, dtype=torch.long), positions,
                         to_text(self.vocabulary, tokens), [self.letters[i] for i in answers.tolist()],
                         candidates=torch.arange(self.n_letters))


@dataclass(frozen=True)
class RetrievalTask(_CanonicalTask):
    """Copy the earlier pair that starts with the query's second letter: ``length`` letter pairs.

    The query ``xy`` (last token) has ``x ≠ y``; exactly one earlier pair starts with ``y`` and is
    the answer; every other earlier pair starts with another letter (repeats allowed). Answer
    pairs and answer positions (``0 … length − 2``) are drawn in equal shares. Candidates are the
    pairs.

    Attributes:
        length: prompt length in tokens (the query included); at least 2.
        n_letters: alphabet size (2 … 26).
        max_offset: largest integer in the shared vocabulary (unused by the prompts; default
            ``length − 1``, as for ``IndexTask``).
    """

    name: str = field(default="retrieval", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_letters < 2:
            raise ValueError(f"n_letters must be at least 2 for retrieval (the query pair xy needs x ≠ y), "
                             f"got {self.n_letters}.")

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts of ``length`` tokens, deterministic in ``seed``."""
        n = validation.integer(n, "n", minimum=1)
        generator = torch.Generator().manual_seed(validation.seed(seed))
        letters = self.n_letters
        answers = balanced(list(range(letters * letters)), n, generator)
        positions = balanced(list(range(self.length - 1)), n, generator)
        sought, second = answers // letters, answers % letters
        # any first letter but the sought one: draw from n_letters − 1 and skip over the sought letter
        shift = torch.randint(0, letters - 1, (n, self.length), generator=generator)
        firsts = shift + (shift >= sought[:, None]).long()
        seconds = torch.randint(0, letters, (n, self.length), generator=generator)
        rows = torch.arange(n)
        firsts[rows, positions], seconds[rows, positions] = sought, second
        seconds[:, -1] = sought  # the query asks for the sought letter; its own first letter is another
        tokens = self.pair_id(firsts, seconds)
        return TaskBatch(tokens, tokens[rows, positions], torch.ones(n, dtype=torch.long), positions,
                         to_text(self.vocabulary, tokens),
                         [self.vocabulary[i] for i in tokens[rows, positions].tolist()],
                         candidates=self.pair_id(torch.arange(letters).repeat_interleave(letters),
                                                 torch.arange(letters).repeat(letters)))


@dataclass(frozen=True)
class PartialInductionTask(_CanonicalTask):
    """After the query letter's one earlier occurrence, copy the next letter: ``length`` letters.

    Rules: the query ``x`` (last token) occurs exactly once before, at a position
    ``p ∈ 0 … length − 3`` (never the last-but-one token, whose "next" token would be the query
    itself); the answer is the letter at ``p + 1``, which is never ``x``; every other letter
    differs from ``x`` (repeats of other letters, the answer's included, are allowed). Answer
    letters and answer positions ``1 … length − 2`` are drawn in equal shares; the query letter is
    uniform over the letters other than the answer. Candidates are the letters.

    Paper A calls this partial induction: it needs a symbolic component (attend to the earlier
    ``x`` wherever it is) and a positional one (read the token one position after it), and
    reports that a solution needs one zero-frequency plane (the match) and one moderate plane (the
    fixed offset).

    Attributes:
        length: prompt length in tokens (the query included); at least 3.
        n_letters: alphabet size (2 … 26: the answer must differ from the query).
        max_offset: largest integer in the shared vocabulary (unused by the prompts; default
            ``length − 1``, as for ``IndexTask``).
    """

    name: str = field(default="partial-induction", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.length < 3:
            raise ValueError(f"length must be at least 3 for partial-induction (an earlier query letter, the letter "
                             f"after it, the query), got {self.length}.")
        if self.n_letters < 2:
            raise ValueError(f"n_letters must be at least 2 for partial-induction (the answer differs from the "
                             f"query letter), got {self.n_letters}.")

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts of ``length`` tokens, deterministic in ``seed``."""
        n = validation.integer(n, "n", minimum=1)
        generator = torch.Generator().manual_seed(validation.seed(seed))
        letters = self.n_letters
        answers = balanced(list(range(letters)), n, generator)
        positions = balanced(list(range(1, self.length - 1)), n, generator)
        # a letter other than a given one: draw from n_letters − 1 and skip over it
        shift = torch.randint(0, letters - 1, (n,), generator=generator)
        queries = shift + (shift >= answers).long()
        shift = torch.randint(0, letters - 1, (n, self.length), generator=generator)
        tokens = shift + (shift >= queries[:, None]).long()
        rows = torch.arange(n)
        tokens[rows, positions - 1], tokens[rows, positions], tokens[:, -1] = queries, answers, queries
        return TaskBatch(tokens, answers, torch.ones(n, dtype=torch.long), positions,
                         to_text(self.vocabulary, tokens), [self.letters[i] for i in answers.tolist()],
                         candidates=torch.arange(letters))


register_task("index", IndexTask)
register_task("retrieval", RetrievalTask)
register_task("partial-induction", PartialInductionTask)
