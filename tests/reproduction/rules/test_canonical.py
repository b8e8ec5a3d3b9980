"""The canonical-task rules (psheads.reproduction.rules.canonical): paper A's gated tasks, each
claim two-sided where the claim says a band fails."""

from __future__ import annotations

from psheads.reproduction.rules import canonical


def test_the_retrieval_rule_is_two_sided() -> None:
    """The referee's counter-example: the fast planes alone score 0.888 and the old rule passed it
    unseen, though the claim says high frequencies fail Retrieval."""
    sweep = {"slow": 1.0, "zero": 1.0, "fast": 0.888}
    assert canonical.retrieval_slow_grade(sweep).verdict == "partly"
    assert canonical.retrieval_slow_grade({**sweep, "fast": 0.30}).verdict == "reproduces"
    assert canonical.retrieval_slow_grade(canonical.SOLVED_BANDS).verdict == "partly"  # the nearest null
    assert canonical.retrieval_slow_grade(canonical.CHANCE_BANDS).verdict == "does not reproduce"
    assert canonical.retrieval_slow_grade({"slow": 1.0, "zero": 0.6, "fast": 0.1}).verdict == "partly"


def test_induction_alone_is_every_single_band() -> None:
    """The referee's counter-example: 'alone' was the fast band or plane 0, and the middle band alone
    scores 1.000 in the sweep; the report now passes the best of every single band."""
    assert canonical.SINGLE_BANDS == ("fast", "middle", "slow", "zero")
    assert canonical.induction_grade({"both": 1.0, "alone": 1.0}).verdict == "does not reproduce"
    assert canonical.induction_grade({"both": 1.0, "alone": 0.857}).verdict == "partly"
    assert canonical.induction_grade({"both": 1.0, "alone": 0.4}).verdict == "reproduces"
