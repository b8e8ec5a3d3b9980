"""What every rule is made of: the verdicts, a rule's outcome (``Graded``), its calibrating inputs
(``Control``), the ``Rule`` itself, and the helpers that combine verdicts over seeds, runs and models.

A rule turns one measurement into a verdict. Each states its claim, its tolerance in the paper's
units and when it was fixed, and carries two controls that go through the same function:

- **positive**: the paper's own published numbers (or, where the paper publishes none, a
  construction that plainly has the property) must give *reproduces*;
- **negative**: a null input (flat curves, scores on the metric's own arc, an untrained model)
  must not.

``Rule.controls()`` runs both; the report shows them beside every verdict. A degenerate measurement
(empty, NaN, a part missing) gets ``not_measured``, saying what is missing; ``missing_numbers`` and
``missing_columns`` say it for the usual shapes. The family modules of this package hold the rules
themselves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import pandas as pd

from psheads.reproduction.references import PUBLISHED

Verdict = Literal["reproduces", "partly", "does not reproduce", "inconclusive", "not comparable", "unverified",
                  "not measured", "not tested"]
VERDICT_COLORS = {"reproduces": "#1a7f37", "partly": "#9a6700", "does not reproduce": "#cf222e",
                  "inconclusive": "#6e7781", "not comparable": "#8250df", "unverified": "#bc4c00",
                  "not measured": "#57606a", "not tested": "#57606a"}
"""Every verdict a claim can get. *inconclusive*: the measurement cannot tell (an interval that
contains 0, a task not solved where the claim starts); *not comparable*: psheads measures a
different model or quantity from the paper's, so the rule's outcome is context only;
*unverified*: the published value's source was not found in the paper's text, so it gets no
verdict; *not measured*: a table psheads needs is missing, or the measurement is degenerate (empty,
NaN, a part missing), so no rule may grade it; *not tested*: no rule exists yet."""

FIRST_REPORT = "6b8de76"
"""The commit of the first reproduction report, whose rules printed verdicts before any rule had
controls; every threshold since was written with its measurements, or earlier ones, known."""
CONTROLS = "bf799b6"
"""The commit that gave every rule its two controls and re-fixed most of them, before re-measuring
but with the first report's measurements known."""
PRE_REGISTRATION = ("No threshold was pre-registered: each was written with psheads' earlier measurements known "
                    f"(the first report, commit {FIRST_REPORT}, printed verdicts before any rule had controls). A rule "
                    "change is committed alone, before the report is re-measured, and its `fixed` entry names its "
                    "commit and says what was known.")
"""What the rules' history can and cannot show, as the report and the docs say it."""


def fixed(*entries: tuple[str, str]) -> str:
    """A rule's history as ``fixed`` holds it: ``(commit, what changed and why)`` per change, oldest first.
    A change's own commit cannot name itself: its entry has commit ``""`` ("this change") until the
    next commit fills the hash in."""
    return "; ".join((f"commit {commit}" if commit else "this change") + (f": {why}" if why else "")
                     for commit, why in entries)


@dataclass(frozen=True)
class Graded:
    """A rule's outcome: the verdict and what decided it."""

    verdict: Verdict
    detail: str = ""


@dataclass(frozen=True)
class Control:
    """An input a rule is calibrated on: what it is, and the measurement it stands for."""

    description: str
    measurement: Any


@dataclass(frozen=True)
class Rule:
    """How one claim is graded.

    Attributes:
        claim: the claim's key in ``references.PUBLISHED``.
        text: the rule in words, as the report prints it.
        tolerance: the tolerance in the paper's units.
        fixed: the commits that fixed the rule and why (``fixed(...)``; a new entry for every change).
        grade: measurement -> ``Graded``.
        positive: the input that must give *reproduces*; None with ``no_positive`` saying why.
        negative: a null input that must not give *reproduces*.
        no_positive: why there is no honest positive control.
        cannot_fail: why the check cannot fail on what it is given ("" for a check that can): the
            report flags it and its tally counts it apart.
    """

    claim: str
    text: str
    tolerance: str
    fixed: str
    grade: Callable[[Any], Graded]
    positive: Control | None
    negative: Control
    no_positive: str = ""
    cannot_fail: str = ""

    def __post_init__(self) -> None:
        if self.claim not in PUBLISHED:
            raise ValueError(f"Rule for unknown claim {self.claim!r}; add it to references.PUBLISHED first.")
        if (self.positive is None) == (not self.no_positive):
            raise ValueError(f"Rule {self.claim!r}: give a positive control or say why there is none (no_positive).")

    def controls(self) -> tuple[Graded | None, Graded]:
        """The verdicts of the positive control (None when there is none) and the negative one."""
        return self._control_verdicts

    @cached_property
    def _control_verdicts(self) -> tuple[Graded | None, Graded]:
        # computed once per rule: some controls (the arc null, the bounds tables) are not free
        return (None if self.positive is None else self.grade(self.positive.measurement),
                self.grade(self.negative.measurement))


def control_text(rule: Rule) -> str:
    """Both controls in one line, for the report."""
    positive, negative = rule.controls()
    first = (f"positive ({rule.positive.description}): {positive.verdict}" if rule.positive is not None and positive
             else f"positive: none ({rule.no_positive})")
    return f"{first}; negative ({rule.negative.description}): {negative.verdict}."


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """The weakest of several verdicts (not measured when none grades anything)."""
    for verdict in ("does not reproduce", "partly", "inconclusive", "reproduces"):
        if verdict in verdicts:
            return verdict
    return "not measured"


def share_verdict(passed: int, total: int) -> Verdict:
    """Reproduces when every unit passes, partly when at least half do."""
    if not total:
        return "not measured"
    return "reproduces" if passed == total else "partly" if 2 * passed >= total else "does not reproduce"


def not_measured(missing: str) -> Graded:
    """The outcome of a degenerate measurement (empty, NaN, a part missing): *not measured*, saying
    what is missing. A rule grades only what was measured, never a vacuous or NaN comparison."""
    return Graded("not measured", missing)


def finite(value: Any) -> bool:
    """Whether ``value`` is one finite real number (not None, NaN, infinite or something else)."""
    try:
        return math.isfinite(value)
    except TypeError:
        return False


def missing_numbers(measurement: Any, keys: Sequence[str]) -> str:
    """What a ``{key: number}`` measurement lacks, in words: the ``keys`` it does not hold and those
    whose value is not a finite number ("" when it lacks nothing).

    Raises:
        TypeError: ``measurement`` is not a mapping.
    """
    if not isinstance(measurement, Mapping):
        raise TypeError(f"expected a mapping with keys {', '.join(keys)}; got a {type(measurement).__name__}.")
    absent = [key for key in keys if key not in measurement]
    infinite = [key for key in keys if key in measurement and not finite(measurement[key])]
    parts = []
    if absent:
        parts.append(f"no {', '.join(absent)}")
    if infinite:
        parts.append(f"{', '.join(infinite)} not finite")
    return "; ".join(parts)


def missing_columns(frame: Any, columns: Sequence[str]) -> str:
    """The ``columns`` a measurement frame lacks, in words ("" when it has them all).

    Raises:
        TypeError: ``frame`` is not a DataFrame.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"expected a DataFrame with columns {', '.join(columns)}; got a {type(frame).__name__}.")
    absent = [column for column in columns if column not in frame.columns]
    return f"no column {', '.join(absent)}" if absent else ""
