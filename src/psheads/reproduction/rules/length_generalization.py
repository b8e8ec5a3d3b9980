"""The rules of the report's length-generalization section (paper B, figure 5B and §3.6): the
letter model's reach, the number model's accuracy at figure 5B's reading points, and the decay of
accuracy with Theorem 3.2's bound within each model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from psheads.reproduction.references import PAPER_B_FIGURE_5B, PUBLISHED
from psheads.reproduction.rules.base import (
    CONTROLS,
    Control,
    Graded,
    Rule,
    Verdict,
    fixed,
    missing_columns,
    not_measured,
)
from psheads.reproduction.rules.theorems import DECAY_MODELS, figure_5a_config
from psheads.results import analysis

# ------------------------------------------------------------------------------- lengths

PROMPT_LENGTH = 17
"""Paper B's training prompt length: figure 5B's x counts the tokens added to it (L = x + 17)."""
LETTER_LENGTH_BANDS = (1.25, 2.0)
"""The letter model's reach (≥ 90%) against paper B's: within a factor 1.25 either way reproduces,
within a factor 2 partly."""
NUMBER_LENGTH_TOLERANCE = 0.15
"""The number model's accuracy at figure 5B's reading points: within ±0.15 (plot reading and sampling)."""


def figure_5b_curve(task: str) -> pd.DataFrame:
    """Paper B's figure 5B, read from the PDF's vector paths, as a ``length, hops, accuracy`` curve
    at L = x + 17 (x = 0 is the 17-token prompt, accuracy 1)."""
    points = {0: 1.0, **PAPER_B_FIGURE_5B[task]}
    return pd.DataFrame({"length": [x + PROMPT_LENGTH for x in points], "hops": "all",
                         "accuracy": list(points.values())})


def length_curve_gaps(curve: pd.DataFrame) -> str:
    """What a ``length, hops, accuracy`` curve lacks for figure 5B's rules, in words: a column, its
    all-hops rows, or a finite accuracy at one of its lengths ("" when it lacks nothing). A NaN is
    never below 90%, so it would stretch the reach."""
    if missing := missing_columns(curve, ("length", "hops", "accuracy")):
        return missing
    rows = curve[curve["hops"].astype(str) == "all"]
    if rows.empty:
        return "no all-hops accuracy"
    unread = sorted(rows.loc[~np.isfinite(rows["accuracy"].astype(float)), "length"].unique())
    return f"accuracy not finite at {', '.join(map(str, unread))} tokens" if unread else ""


def letter_length_grade(curve: pd.DataFrame) -> Graded:
    """Figure 5B's letter reach: the longest length the curve stays ≥ 90% at, against 850 + 17 tokens.
    A curve that lacks something (``length_curve_gaps``) is *not measured*."""
    if gaps := length_curve_gaps(curve):
        return not_measured(gaps)
    published = PUBLISHED["letter_length"].value + PROMPT_LENGTH
    reach = analysis.longest_ready(curve) or 0
    ratio = max(reach / published, published / reach) if reach > 0 else np.inf
    return Graded("reproduces" if ratio <= LETTER_LENGTH_BANDS[0] else "partly" if ratio <= LETTER_LENGTH_BANDS[1]
                  else "does not reproduce", f"≥ 90% up to {reach} tokens ({reach / published:.0%} of {published})")


def number_length_grade(curve: pd.DataFrame) -> Graded:
    """Figure 5B's number curve at its reading points (L = x + 17): within ``NUMBER_LENGTH_TOLERANCE``.
    A curve that lacks something (``length_curve_gaps``) or does not reach both points is *not measured*."""
    if gaps := length_curve_gaps(curve):
        return not_measured(gaps)
    published = {x + PROMPT_LENGTH: value for x, value in PUBLISHED["number_length"].value.items()}
    measured = {length: analysis.accuracy_at(curve, length) for length in published}
    if any(value is None for value in measured.values()):
        return not_measured("the curve does not reach " + ", ".join(map(str, published)))
    close = [abs(measured[length] - value) <= NUMBER_LENGTH_TOLERANCE for length, value in published.items()]
    return Graded("reproduces" if all(close) else "partly" if any(close) else "does not reproduce",
                  ", ".join(f"{measured[length]:.3f} at {length} (paper {value})"
                            for length, value in published.items()))


# ------------------------------------------------------------------------------- separation

SEPARATION_Z = 1.96
"""The letter model is above the number model at a length when the 95% interval of the difference
(normal approximation, binomial standard errors) lies above 0."""
FAR = 0.2
"""*Far* exceeds: at some length the interval of the difference lies above 0.2 accuracy."""
READY = 0.9
"""A length where both models are still ≥ 90% accurate compares nothing: both generalise there."""
PAPER_PROMPTS = 512
"""Prompts per length assumed for paper B's figure 5B (it does not say): psheads' own count, so the
paper's curve carries the sampling noise psheads' measurement carries."""


def binomial_se(accuracy: float, n: float) -> float:
    """The standard error of an accuracy measured on ``n`` prompts; at 0 or 1 it takes half a prompt
    off the edge, so a perfect score still has an error."""
    p = min(max(accuracy, 0.5 / n), 1 - 0.5 / n)
    return float(np.sqrt(p * (1 - p) / n))


def separation(curves: pd.DataFrame) -> pd.DataFrame:
    """Per length past the training prompt where both models' all-hops accuracy is measured
    (``model, length, hops, accuracy, n``) and at least one is below ``READY``: letter − number
    accuracy and its 95% interval."""
    rows = []
    part = curves[curves["hops"].astype(str) == "all"]
    wide = {model: part[part["model"] == model].groupby("length")[["accuracy", "n"]].mean()
            for model in ("number", "letter")}
    for length in sorted(set(wide["number"].index) & set(wide["letter"].index)):
        (number, n_number), (letter, n_letter) = wide["number"].loc[length], wide["letter"].loc[length]
        if length <= PROMPT_LENGTH or min(number, letter) >= READY:
            continue
        se = float(np.hypot(binomial_se(letter, n_letter), binomial_se(number, n_number)))
        gap = letter - number
        rows.append({"length": int(length), "letter": letter, "number": number, "letter − number": gap,
                     "ci_low": gap - SEPARATION_Z * se, "ci_high": gap + SEPARATION_Z * se})
    return pd.DataFrame(rows, columns=["length", "letter", "number", "letter − number", "ci_low", "ci_high"])


def separation_grade(curves: pd.DataFrame) -> Graded:
    """§3.6's "far exceeds": at every length graded by ``separation`` the difference's interval lies
    above 0, and at one above ``FAR`` (reproduces); above 0 at half of them (partly). Curves without
    both models, an ``n`` per length, or a length to compare are *not measured*."""
    if missing := missing_columns(curves, ("model", "length", "hops", "accuracy", "n")):
        return not_measured(missing)
    absent = [model for model in ("number", "letter") if model not in set(curves["model"])]
    if absent:
        return not_measured(f"no {' or '.join(absent)} curve")
    finite_rows = curves[np.isfinite(curves["accuracy"].astype(float)) & np.isfinite(curves["n"].astype(float))
                         & (curves["n"].astype(float) > 0)]
    table = separation(finite_rows)
    if table.empty:
        return not_measured("no length past the training prompt where both models are measured and one is below "
                            f"{READY:.0%}")
    above = table["ci_low"] > 0
    far = bool((table["ci_low"] > FAR).any())
    verdict: Verdict = ("reproduces" if above.all() and far else "partly" if 2 * above.sum() >= len(table)
                        else "does not reproduce")
    widest = table.iloc[int(np.argmax(table["letter − number"].to_numpy()))]
    return Graded(verdict, f"letter above number beyond the 95% interval at {int(above.sum())} of {len(table)} "
                  f"lengths; largest gap {widest['letter − number']:.3f} (interval from {widest['ci_low']:.3f})")


def paper_curves() -> pd.DataFrame:
    """Both of paper B's figure 5B curves (``figure_5b_curve``) as one ``model, length, hops, accuracy,
    n`` frame, at ``PAPER_PROMPTS`` prompts per length."""
    return pd.concat([figure_5b_curve(task).assign(model=task, n=PAPER_PROMPTS) for task in ("number", "letter")],
                     ignore_index=True)


def _flat(value: float, lengths: Sequence[int] = (17, 65, 145, 529, 1041)) -> pd.DataFrame:
    return pd.DataFrame({"length": list(lengths), "hops": "all", "accuracy": value})


# ------------------------------------------------------------------------------- decay

DECAY_CORRELATION = (0.8, 0.5)
"""§3.6, the number model: Spearman's ρ between the Index bound at its angle and its accuracy, once
its accuracy has dropped beyond the noise (reproduces, partly)."""
DECAY_SE = 3.0
"""A drop (or a gap between the models) counts only beyond 3 standard errors of the binomial noise;
within them it is noise, and the part is inconclusive."""
MIN_DECAY_POINTS = 3
"""Fewer lengths for the number model than this: *not measured*."""


def decay_points(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model in ``DECAY_MODELS`` (column ``model`` of ``curves``) and length L: the all-hops
    accuracy and its prompt count ``n`` (NaN where ``curves`` has none) beside Theorem 3.2's upper
    bound at n = L − 1 at that model's angle, where the Retrieval bound holds (n < ω/(2θ)), so both
    models are read over the same lengths. A length whose accuracy is NaN (no prompt measured) is
    left out, so the lengths listed are the lengths graded."""
    retrieval = figure_5a_config("retrieval")
    longest = retrieval.omega / (2 * retrieval.theta)
    rows = []
    curves = curves if "n" in curves.columns else curves.assign(n=np.nan)
    for model, kind in DECAY_MODELS.items():
        config = figure_5a_config(kind)
        part = curves[(curves["model"] == model) & (curves["hops"].astype(str) == "all")]
        for length, row in part.groupby("length")[["accuracy", "n"]].mean().iterrows():
            if length - 1 < longest and np.isfinite(row["accuracy"]):
                rows.append({"model": model, "construction": kind, "length": int(length),
                             "upper bound": config.bound(int(length)).upper, "accuracy": float(row["accuracy"]),
                             "n": float(row["n"])})
    return pd.DataFrame(rows, columns=["model", "construction", "length", "upper bound", "accuracy", "n"])


def _gap(high: pd.Series, low: pd.Series) -> tuple[float, float]:
    """``high`` − ``low`` accuracy (rows with ``accuracy`` and ``n``), and the same in standard errors of
    the binomial noise under no difference (the two-proportion test's pooled error)."""
    gap = float(high["accuracy"] - low["accuracy"])
    pooled = float((high["accuracy"] * high["n"] + low["accuracy"] * low["n"]) / (high["n"] + low["n"]))
    se = binomial_se(pooled, 1 / (1 / high["n"] + 1 / low["n"]))
    return gap, gap / se


def decay_grade(points: pd.DataFrame) -> Graded:
    """§3.6, "the qualitative patterns of decay … closely resemble" figure 5A's bounds, noise-aware
    (``model, length, upper bound, accuracy, n`` from ``decay_points``):

    - the number model decays as the Index bound does: its accuracy at the longest length is below
      the shortest by more than ``DECAY_SE`` standard errors, and ρ(bound, accuracy) over the lengths
      ≥ ``DECAY_CORRELATION`` (reproduces, partly); a drop within the noise is inconclusive (ρ would
      rank noise), a rise beyond it does not reproduce;
    - the letter model stays away from zero as the Retrieval bound does: at the longest length both
      measure it is above the number model by more than ``DECAY_SE`` standard errors (reproduces);
      within them, inconclusive; below, does not reproduce.

    Both parts reproduce: reproduces; one fails: partly if the other reproduces, else does not;
    otherwise partly beside a part that reproduces, inconclusive without one. Points
    whose bound, accuracy or ``n`` is not finite are left out and named; a model with too few
    lengths, or no length both models measure, is *not measured*."""
    if missing := missing_columns(points, ("model", "length", "upper bound", "accuracy", "n")):
        return not_measured(missing)
    usable = {}
    texts = []
    for model in DECAY_MODELS:
        part = points[points["model"] == model]
        ok = (np.isfinite(part["upper bound"].astype(float)) & np.isfinite(part["accuracy"].astype(float))
              & np.isfinite(part["n"].astype(float)) & (part["n"].astype(float) > 0))
        if dropped := sorted(part.loc[~ok, "length"]):
            texts.append(f"{model}: not finite at {', '.join(map(str, dropped))} tokens, left out")
        usable[model] = part[ok].sort_values("length").set_index("length")
    if len(usable["number"]) < MIN_DECAY_POINTS:
        return not_measured("; ".join([f"number: {len(usable['number'])} lengths, too few", *texts]))
    common = sorted(set(usable["number"].index) & set(usable["letter"].index))
    if not common:
        return not_measured("; ".join(["no length both models measure", *texts]))
    number = usable["number"]
    drop, z = _gap(number.iloc[0], number.iloc[-1])
    rho = float(number["upper bound"].rank().corr(number["accuracy"].rank()))
    first, last = int(number.index[0]), int(number.index[-1])
    if z > DECAY_SE:
        decays: Verdict = ("reproduces" if rho >= DECAY_CORRELATION[0] else "partly" if rho >= DECAY_CORRELATION[1]
                           else "does not reproduce")
    else:
        decays = "does not reproduce" if z < -DECAY_SE else "inconclusive"
    texts.insert(0, f"number: drops {drop:.3f} from {first} to {last} tokens ({z:.1f} SE), ρ = {rho:.2f} over "
                    f"{len(number)} lengths ({decays})")
    gap, z_gap = _gap(usable["letter"].loc[common[-1]], number.loc[common[-1]])
    holds: Verdict = "reproduces" if z_gap > DECAY_SE else "does not reproduce" if z_gap < -DECAY_SE else "inconclusive"
    texts.insert(1, f"letter − number at {common[-1]} tokens {gap:+.3f} ({z_gap:.1f} SE) ({holds})")
    parts = [decays, holds]
    if all(verdict == "reproduces" for verdict in parts):
        verdict: Verdict = "reproduces"
    elif "does not reproduce" in parts:
        verdict = "partly" if "reproduces" in parts else "does not reproduce"
    else:
        verdict = "inconclusive" if "inconclusive" in parts and "reproduces" not in parts else "partly"
    return Graded(verdict, "; ".join(texts))


def _same_curve(curves: pd.DataFrame) -> pd.DataFrame:
    """Both models on the number model's curve: the nearest null of the separation."""
    number = curves[curves["model"] == "number"]
    return pd.concat([number, number.assign(model="letter")], ignore_index=True)


def _decay_control(curves: pd.DataFrame) -> pd.DataFrame:
    return decay_points(curves)


def _ceiling(seed: int = 0) -> pd.DataFrame:
    """Both models at the ceiling, 512 prompts per length: sampling noise and nothing else."""
    rng = np.random.default_rng(seed)
    lengths = [17, 33, 65, 145]
    return pd.DataFrame([{"model": model, "length": length, "hops": "all", "n": PAPER_PROMPTS,
                          "accuracy": rng.binomial(PAPER_PROMPTS, 0.99) / PAPER_PROMPTS}
                         for model in ("number", "letter") for length in lengths])


# ------------------------------------------------------------------------------------ the family

FAMILY: tuple[Rule, ...] = (
    Rule("letter_length",
         f"the letter model's reach (≥ 90%) within a factor {LETTER_LENGTH_BANDS[0]:g} of 850 + 17 = 867 tokens "
         f"reproduces, within a factor {LETTER_LENGTH_BANDS[1]:g} partly.",
         f"a factor {LETTER_LENGTH_BANDS[0]:g} in length",
         fixed(("8ee2c2b", "factors 1.25 and 2"), (CONTROLS, "figure 5B's x counts the added tokens, so 850 is "
                                                                     "L = 867")), letter_length_grade,
         Control("figure 5B's letter curve", figure_5b_curve("letter")),
         Control("a model that collapses past its training length", _flat(0.3).assign(
             accuracy=[1.0, 0.3, 0.3, 0.3, 0.3]))),
    Rule("number_length",
         f"at figure 5B's reading points (x = 200 and 1,000, so L = 217 and 1,017) within ±{NUMBER_LENGTH_TOLERANCE} "
         "of the paper's value: reproduces at both, partly at one; a model that generalises better fails as well. "
         "Between measured lengths the curve is interpolated linearly in log length.",
         f"±{NUMBER_LENGTH_TOLERANCE} accuracy", fixed(("8ee2c2b", "±0.15"), (CONTROLS, "read at L = x + 17")),
         number_length_grade,
         Control("figure 5B's number curve", figure_5b_curve("number")),
         Control("a model that generalises perfectly", _flat(1.0))),
    Rule("letter_beyond_number",
         f"at every length past the 17-token prompt where both models are measured and one is below {READY:.0%} "
         f"accuracy, the letter model's accuracy is above the number model's beyond the 95% interval of the "
         f"difference (binomial errors), and at one of them the interval lies above {FAR} (reproduces); above at "
         "half of those lengths (partly). Paper B's curves are taken at 512 prompts per length.",
         f"the difference's 95% interval above 0, and above {FAR} once",
         fixed(("1e674d0", "a claim of §3.6 no rule graded, written with psheads' curves known (the letter model "
                           "above the number model at every length from 65 tokens on)")), separation_grade,
         Control("figure 5B's two curves", paper_curves()),
         Control("both models on figure 5B's number curve", _same_curve(paper_curves()))),
    Rule("theory_decay",
         "over the lengths where the Retrieval bound holds (L − 1 < ω/(2θ) ≈ 145), noise-aware: (1) the number model "
         f"decays as the Index bound does: its accuracy drops from the shortest to the longest length by more than "
         f"{DECAY_SE:g} binomial standard errors and Spearman's ρ between the bound and its accuracy is "
         f"≥ {DECAY_CORRELATION[0]} (≥ {DECAY_CORRELATION[1]}: partly); (2) the letter model stays away from zero as "
         f"the Retrieval bound does: at the longest length both measure it is above the number model by more than "
         f"{DECAY_SE:g} standard errors. Both reproduce; one failing, partly beside the other, else does not; a drop "
         f"or gap within the noise is inconclusive; fewer than {MIN_DECAY_POINTS} number-model lengths not measured.",
         f"{DECAY_SE:g} standard errors; ρ {DECAY_CORRELATION[0]}",
         fixed(("6b9061c", "ρ ≥ 0.8 over both models pooled"),
               (CONTROLS, "per model: pooling let the gap between the models drive ρ"),
               ("0a132eb", "noise-aware: ρ over a letter curve at its ceiling ranked sampling noise (paper B's own "
                           "curves, read at psheads' lengths with 512-prompt noise, got 'does not reproduce' 11% of "
                           "the time, 'reproduces' 38%); written with psheads' curves known")), decay_grade,
         Control("figure 5B's two curves at 512 prompts per length, against their bounds", _decay_control(
             paper_curves())),
         Control("both models at the ceiling, with 512-prompt sampling noise", decay_points(_ceiling()))),
)
"""The length-generalization rules, in the report's order."""
