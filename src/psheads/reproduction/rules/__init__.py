"""The rules that grade the reproduction report's claims, each calibrated by two controls.

One module per family of claims, named after the report's section that states them
(``psheads.reproduction.report``) and in its order: ``learning``, ``frequencies``,
``length_generalization``, ``predictions``, ``theorems``, ``canonical`` and ``llms``. What every rule
is made of (``Verdict``, ``Graded``, ``Control``, ``Rule``, ``not_measured``) lives in ``base``.
``RULES`` gathers every family's rules by the claim they grade. ``tests/reproduction/rules/`` checks
each rule against its two controls and feeds it degenerate input (empty, NaN, a part missing),
which every rule grades *not measured*, saying what is missing, never with a verdict. A rule
changes only with a new ``fixed`` entry naming the commit and why; ``PRE_REGISTRATION`` says what
that history can show (no threshold was pre-registered). Every name of a family module is also
importable from here (``psheads.reproduction.rules.arc_null``), as before the split.
"""

from __future__ import annotations

from psheads.reproduction.references import PUBLISHED
from psheads.reproduction.rules import (
    canonical,
    frequencies,
    learning,
    length_generalization,
    llms,
    predictions,
    theorems,
)

# every public name of the old single module, from its home; __all__ lists the ones the package advertises
from psheads.reproduction.rules.base import (  # noqa: F401
    CONTROLS,
    FIRST_REPORT,
    PRE_REGISTRATION,
    VERDICT_COLORS,
    Control,
    Graded,
    Rule,
    Verdict,
    control_text,
    fixed,
    worst,
)
from psheads.reproduction.rules.canonical import (  # noqa: F401
    CHANCE_BANDS,
    FAILED,
    INDUCTION_ALONE,
    SINGLE_BANDS,
    SOLVED,
    SOLVED_BANDS,
    index_fast_grade,
    induction_grade,
    retrieval_slow_grade,
)
from psheads.reproduction.rules.frequencies import (  # noqa: F401
    ALIGNED_FIT,
    FREQUENCY_ID_BAND,
    FREQUENCY_ID_TOLERANCE,
    GEOMETRY_PLANE_TOLERANCE,
    ROUTES,
    UNIFORM_ID,
    frequency_id,
    geometry_grade,
    plane_fit,
)
from psheads.reproduction.rules.learning import (  # noqa: F401
    CONVERGED,
    ENTROPY_HIGH,
    FOLLOWS,
    GAMMAS,
    HOP_LEAD,
    HOP_TRAIL,
    INDEX_FLOW_PARTS,
    LEADING_PAIRS,
    LEVEL_PAIRS,
    PLACEMENT_BAND,
    PROPAGATION_SHARE,
    PURE_FIRST,
    STAIRCASE,
    TOGETHER,
    at_once,
    checkpoint_interval,
    convergence_grade,
    entropy_grade,
    figure_2a_curve,
    figure_2a_together,
    gamma_grade,
    hop_by_hop,
    hop_leads,
    index_flow_grade,
    placement,
    propagation_grade,
)
from psheads.reproduction.rules.length_generalization import (  # noqa: F401
    DECAY_CORRELATION,
    LETTER_LENGTH_BANDS,
    MIN_DECAY_POINTS,
    NUMBER_LENGTH_TOLERANCE,
    PROMPT_LENGTH,
    decay_grade,
    decay_points,
    figure_5b_curve,
    letter_length_grade,
    number_length_grade,
)
from psheads.reproduction.rules.llms import (  # noqa: F401
    ARC_DRAWS,
    LETTER_HOLDS,
    LLM_SHORT,
    LLM_WINDOW,
    NUMBER_SOLVED,
    SECTION_3_7,
    arc_null,
    correlation_grade,
    early_late_grade,
    table_3_grade,
    table_3_tables,
    thresholds_grade,
)
from psheads.reproduction.rules.predictions import (  # noqa: F401
    MARGIN_SHARE,
    margins_grade,
)
from psheads.reproduction.rules.theorems import (  # noqa: F401
    BOUND_SLACK,
    DECAY_MODELS,
    FIGURE_5A_N,
    figure_5a_config,
    figure_5a_grade,
    theorem_3_1_grade,
    theorem_3_2_grade,
)

__all__ = ["RULES", "VERDICT_COLORS", "Control", "Graded", "Rule", "Verdict", "control_text", "rules_markdown"]

RULES: dict[str, Rule] = {rule.claim: rule for family in (learning, frequencies, length_generalization, predictions,
                                                          theorems, canonical, llms) for rule in family.FAMILY}
"""Every rule, by the claim it grades, in the report's order."""


def rules_markdown() -> str:
    """Every rule with its tolerance, when it was fixed and its two controls' verdicts, as the
    markdown table ``docs/reproduce.md`` shows (``scripts/docs_rules.py`` writes it there)."""
    lines = ["| claim | source | rule | tolerance | fixed | positive control | negative control |",
             "|---|---|---|---|---|---|---|"]
    for key, rule in RULES.items():
        positive, negative = rule.controls()
        first = (f"{rule.positive.description}: **{positive.verdict}**" if rule.positive is not None and positive
                 else f"none: {rule.no_positive}")
        cells = [f"`{key}`", PUBLISHED[key].locator, rule.text, rule.tolerance, rule.fixed, first,
                 f"{rule.negative.description}: **{negative.verdict}**"]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
