"""The rules of the report's canonical-tasks section (paper A, from psheads' gated training
sweep): Index needs the fast planes, Retrieval is solved from the slow ones, partial induction
needs rotating and static planes together."""

from __future__ import annotations

from collections.abc import Mapping

from psheads.reproduction.rules.base import (
    FIRST_REPORT,
    Control,
    Graded,
    Rule,
    Verdict,
    fixed,
    missing_numbers,
    not_measured,
)

SOLVED = 0.99
"""A gated task counts as solved at this mean accuracy over seeds."""
FAILED = 0.5
"""…and as failed below it."""


def index_fast_grade(accuracy: Mapping[str, float]) -> Graded:
    """Index: solved with the fast planes, failed from slow or zero planes alone (``{"fast", "slow",
    "zero"}``; a band missing or not finite: *not measured*)."""
    if missing := missing_numbers(accuracy, ("fast", "slow", "zero")):
        return not_measured(f"accuracy: {missing}")
    fast, static = accuracy["fast"], max(accuracy["slow"], accuracy["zero"])
    return Graded("reproduces" if fast >= SOLVED and static < FAILED else "partly" if fast >= SOLVED
                  else "does not reproduce", f"fast {fast:.3f}, slow or zero only {static:.3f}")


def retrieval_slow_grade(accuracy: Mapping[str, float]) -> Graded:
    """Retrieval, two-sided: solved from the slow band and from plane 0 alone, and failed from the fast
    planes alone (``{"slow", "zero", "fast"}``): all three reproduce; solved from slow or zero planes
    (partly); else does not. A band missing or not finite: *not measured*."""
    if missing := missing_numbers(accuracy, ("slow", "zero", "fast")):
        return not_measured(f"accuracy: {missing}")
    slow, zero, fast = accuracy["slow"], accuracy["zero"], accuracy["fast"]
    verdict: Verdict = ("reproduces" if min(slow, zero) >= SOLVED and fast < FAILED else "partly"
                        if max(slow, zero) >= SOLVED else "does not reproduce")
    return Graded(verdict, f"slow {slow:.3f}, zero {zero:.3f}, fast {fast:.3f}")


INDUCTION_ALONE = 0.6
"""Partial induction: every single band alone (fast, middle, slow, zero) stays below this (reproduces)
or below ``SOLVED`` (partly)."""
SINGLE_BANDS = ("fast", "middle", "slow", "zero")
"""The gated sweep's single bands: partial induction's "alone" is the best of them."""


def induction_grade(accuracy: Mapping[str, float]) -> Graded:
    """Partial induction: solved with rotating and static planes together, not with any single band alone
    (``{"both", "alone"}``, ``alone`` the best of ``SINGLE_BANDS``; a value missing or not finite: *not
    measured*)."""
    if missing := missing_numbers(accuracy, ("both", "alone")):
        return not_measured(f"accuracy: {missing}")
    both, alone = accuracy["both"], accuracy["alone"]
    return Graded("reproduces" if both >= SOLVED and alone < INDUCTION_ALONE else "partly"
                  if both >= SOLVED and alone < SOLVED else "does not reproduce",
                  f"rotating + static {both:.3f}, best single band {alone:.3f}")


CHANCE_BANDS = {"fast": 0.04, "slow": 0.04, "zero": 0.04, "both": 0.04, "alone": 0.04}
"""A sweep at chance everywhere (1 of 24 answers): the null of the gated rules."""
SOLVED_BANDS = dict.fromkeys(CHANCE_BANDS, 1.0)
"""A sweep that solves the task in every band: the nearest null of a claim that a band is needed or fails."""

_NO_VALUES_A = "paper A's source for this claim was not found, and it publishes no numbers to test the rule on"


# ------------------------------------------------------------------------------------ the family

FAMILY: tuple[Rule, ...] = (
    Rule("index_fast", f"≥ {SOLVED} with the fast planes and < {FAILED} from slow or zero planes alone.",
         f"{SOLVED} / {FAILED} accuracy", fixed((FIRST_REPORT, "")), index_fast_grade, None,
         Control("a sweep at chance everywhere", CHANCE_BANDS), no_positive=_NO_VALUES_A),
    Rule("retrieval_slow", f"≥ {SOLVED} from the slow band and from plane 0 alone, and < {FAILED} from the fast "
         f"planes alone (reproduces); ≥ {SOLVED} from the slow band or plane 0 (partly).",
         f"{SOLVED} / {FAILED} accuracy",
         fixed((FIRST_REPORT, ""), ("2659c37", "two-sided: the fast planes alone scored 0.888 and passed unseen, "
                                               "where the claim says high frequencies fail; written with the sweep "
                                               "known")),
         retrieval_slow_grade, None, Control("a sweep that solves Retrieval in every band", SOLVED_BANDS),
         no_positive=_NO_VALUES_A),
    Rule("induction_both", f"≥ {SOLVED} with rotating and static planes together; reproduces when every single band "
         f"alone ({', '.join(SINGLE_BANDS)}) stays < {INDUCTION_ALONE}, partly when each stays < {SOLVED}.",
         f"{SOLVED} / {INDUCTION_ALONE} accuracy",
         fixed((FIRST_REPORT, ""), ("1058908", "'alone' is the best single band of all four, where it was the fast "
                                               "band or plane 0 (the middle band alone scores 1.000); written with "
                                               "the sweep known")),
         induction_grade, None, Control("a sweep that solves partial induction in every band", SOLVED_BANDS),
         no_positive=_NO_VALUES_A),
)
"""The canonical-task rules, in the report's order."""
