"""The rule of the report's predictions section: psheads' own prediction from Theorem 3.2 and
Remark 3.2 (not a claim of either paper) that pure positional heads' margins shrink to zero with
length while pure symbolic layers' stay positive."""

from __future__ import annotations

from psheads.reproduction.rules.base import CONTROLS, FIRST_REPORT, Control, Graded, Rule, finite, fixed, not_measured

MARGIN_SHARE = 0.75
"""*partly*: at least this share of each kind of head behaves as predicted."""


def margins_grade(shares: tuple[float, float]) -> Graded:
    """psheads' prediction: the shares of pure positional heads whose margin reaches ≤ 0 at the longest
    length and of pure symbolic layers whose margin stays > 0 at every length. Without both shares as
    finite numbers it is *not measured* (``min`` skips a NaN in second place)."""
    if len(shares) != 2:
        return not_measured("no share: expected (positional share, symbolic share)")
    if unread := [kind for kind, share in zip(("positional", "symbolic"), shares, strict=True) if not finite(share)]:
        return not_measured(f"{' and '.join(unread)} share not finite")
    low = min(shares)
    return Graded("reproduces" if low == 1 else "partly" if low >= MARGIN_SHARE else "does not reproduce",
                  f"positional {shares[0]:.0%}, symbolic {shares[1]:.0%}")


# ------------------------------------------------------------------------------------ the family

FAMILY: tuple[Rule, ...] = (
    Rule("margins",
         "every pure positional head's worst-case normalised margin reaches ≤ 0 at the longest length and every pure "
         f"symbolic layer's stays > 0 at every length; partly when at least {MARGIN_SHARE:.0%} of each do.",
         f"{MARGIN_SHARE:.0%} of the heads",
         fixed((FIRST_REPORT, ""), (CONTROLS, "relabelled psheads' prediction")), margins_grade,
         Control("a construction: every positional margin reaches 0, every symbolic one stays positive (Remark 3.2 "
                 "at θ = 0)", (1.0, 1.0)),
         Control("every margin positive", (0.0, 1.0))),
)
"""The predictions' rule."""
