"""What the report's sections are made of: claims graded by their rules, figures, tables and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from psheads.reproduction import rules
from psheads.reproduction.references import PSHEADS, PUBLISHED, Published
from psheads.reproduction.rules import Rule, Verdict

SOURCES = ("paper B", "paper A", "psheads' recipe", "psheads' prediction")
"""Whose claim a verdict is about, as the report's tally counts them: paper B's or paper A's claim on
the recipe the paper used (the shipped models, the stored sweeps and tables), paper B's claim
re-graded on psheads' own training recipe, and psheads' own prediction."""


@dataclass(frozen=True)
class Claim:
    """One published result beside psheads' measurement.

    Attributes:
        published: the paper's result (source, words, value).
        measured: psheads' measurement in words, with its numbers.
        verdict: one of ``rules.VERDICT_COLORS``.
        reason: the rule applied and what decided it.
        rule: the rule that graded it (None: not measured or not tested).
        psheads_recipe: the claim is re-graded on psheads' own training recipe, not paper B's.
    """

    published: Published
    measured: str
    verdict: Verdict
    reason: str
    rule: Rule | None = None
    psheads_recipe: bool = False

    @property
    def source(self) -> str:
        """Whose claim the verdict is about: one of ``SOURCES``."""
        if self.published.paper.key == PSHEADS.key:
            return "psheads' prediction"
        if self.psheads_recipe:
            return "psheads' recipe"
        return f"paper {self.published.paper.key}"

    @property
    def cannot_fail(self) -> bool:
        """Whether the claim's check cannot fail on what it is given (``Rule.cannot_fail``)."""
        return self.rule is not None and bool(self.rule.cannot_fail)

    @property
    def controls(self) -> str:
        """The rule's two controls and their verdicts ("—" without a rule)."""
        return rules.control_text(self.rule) if self.rule is not None else "—"


def graded(key: str, measured: str, measurement: Any, *, comparable: str = "") -> Claim:
    """The claim ``key`` graded by its rule on ``measurement``. A claim whose published source was
    not found gets *unverified*, one where psheads measures something else (``comparable`` says
    what) *not comparable*; both keep the rule's outcome in the reason."""
    rule, published = rules.RULES[key], PUBLISHED[key]
    outcome = rule.grade(measurement)
    verdict: Verdict = outcome.verdict
    reason = f"Rule (fixed {rule.fixed}): {rule.text} Tolerance: {rule.tolerance}. Measured: {outcome.detail}."
    if rule.cannot_fail:
        reason += f" A check that cannot fail: {rule.cannot_fail}."
    if not published.found:
        verdict = "unverified"
        reason += (" The value's source was not found in the paper's text: no verdict "
                   f"(the rule gives {outcome.verdict}).")
    elif comparable:
        verdict = "not comparable"
        reason += f" {comparable}: no verdict (the rule gives {outcome.verdict})."
    return Claim(published, measured, verdict, reason, rule)


def not_measured(key: str, why: str) -> Claim:
    """The claim ``key`` without a measurement, and why."""
    return Claim(PUBLISHED[key], "—", "not measured", why)


@dataclass
class Section:
    """A part of the report: its claims, figures and tables."""

    key: str
    title: str
    intro: str
    claims: list[Claim] = field(default_factory=list)
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
