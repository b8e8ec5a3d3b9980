"""The rules of the report's learning-dynamics section (paper B, figures 2, 3A and 7 and §3.1):
the order in which hop counts are learned, where the pure heads sit, the Index hops' attention
flow, the labels' robustness to γ, when the heads become pure and the attention entropy at
initialisation."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np
import pandas as pd

from psheads.interface.reprs import layer_text
from psheads.reproduction.references import PAPER_B_FIGURE_2A, PUBLISHED
from psheads.reproduction.rules.base import (
    CONTROLS,
    FIRST_REPORT,
    Control,
    Graded,
    Rule,
    Verdict,
    finite,
    fixed,
    missing_columns,
    not_measured,
    share_verdict,
)
from psheads.results import analysis

# ------------------------------------------------------------------------------- learning order

HOP_LEAD = 0.2
"""Hop h leads hop h + 1 when its accuracy is at least 0.2 higher at one checkpoint (figure 2A: hop 1
over hop 2 by up to 0.81, hop 2 over hop 3 by up to 0.50)."""
HOP_TRAIL = 0.1
"""A later hop count is never ahead of the one before by more than 0.1: about 3 standard errors of
the difference of two accuracies near 0.5 measured on 512 prompts each (psheads' 2,048 test prompts,
a quarter per hop count)."""
LEADING_PAIRS = ((1, 2), (2, 3))
"""Figure 2A: 1 hop is learned first, then 2 hops, each ahead of the next by ``HOP_LEAD`` at one
checkpoint and never behind it by more than ``HOP_TRAIL``."""
LEVEL_PAIRS = ((3, 4),)
"""…then 3 and 4 hops, together: hop 4 never ahead of hop 3 by more than ``HOP_TRAIL``, and no lead
asked of hop 3 (paper B's own figure 2A has it ahead of hop 4 by at most 0.077)."""
PAPER_PROMPTS = 512
"""Prompts per hop count for figure 2A's sampling noise: the panel does not say (its caption's test
set has 11,400 per hop count, the training code's validation set 600), so psheads' own count, the
noisiest of the three."""
HOP_COUNTS = (1, 2, 3, 4)
"""Figure 2A's hop counts: every seed's curve must measure each of them."""


def hop_curve_gaps(curve: pd.DataFrame) -> str:
    """What a ``step, hops, accuracy`` curve lacks for figure 2A's rules, in words: a column, a hop
    count of ``HOP_COUNTS`` with no finite accuracy, or a second checkpoint ("" when it lacks nothing).
    A hop count missing or all NaN would otherwise drop out of the pairs, and the rest pass alone."""
    if missing := missing_columns(curve, ("step", "hops", "accuracy")):
        return missing
    measured = curve[np.isfinite(curve["accuracy"].astype(float))]
    absent = [hops for hops in HOP_COUNTS if hops not in set(measured["hops"].astype(int))]
    if absent:
        return f"no finite accuracy for {', '.join(map(str, absent))} hop{'s' if absent != [1] else ''}"
    if measured["step"].nunique() < 2:
        return "fewer than two checkpoints with a finite accuracy"
    return ""


def _seed_gaps(curves: Sequence[pd.DataFrame]) -> str:
    """Every seed's ``hop_curve_gaps``, named by the curve's place in ``curves`` ("" when none lacks anything)."""
    if not len(curves):
        return "no seed's curve"
    return "; ".join(f"curve {index + 1} of {len(curves)}: {gap}" for index, curve in enumerate(curves)
                     if (gap := hop_curve_gaps(curve)))


def _hop_table(curve: pd.DataFrame) -> pd.DataFrame:
    wide = curve.assign(hops=curve["hops"].astype(int)).pivot_table(index="step", columns="hops", values="accuracy")
    return wide.reindex(columns=sorted(wide.columns))


def _pair_gaps(curve: pd.DataFrame) -> dict[tuple[int, int], tuple[float, float]]:
    """Per pair of ``LEADING_PAIRS`` and ``LEVEL_PAIRS``: the largest lead of the smaller hop count over
    the larger and of the larger over the smaller, over the checkpoints that measure both."""
    wide = _hop_table(curve)
    gaps = {}
    for first, second in LEADING_PAIRS + LEVEL_PAIRS:
        gap = (wide[first] - wide[second]).dropna()
        gaps[(first, second)] = (float(gap.max()), float(-gap.min()))
    return gaps


def hop_leads(curve: pd.DataFrame) -> list[bool]:
    """Per pair of hop counts (1–2, 2–3, 3–4) in a ``step, hops, accuracy`` curve: whether it keeps
    figure 2A's order. In ``LEADING_PAIRS`` the smaller count leads by ``HOP_LEAD`` at some checkpoint
    and never trails by more than ``HOP_TRAIL``; in ``LEVEL_PAIRS`` it never trails by more than
    ``HOP_TRAIL``."""
    return [(pair in LEVEL_PAIRS or lead >= HOP_LEAD) and trail <= HOP_TRAIL
            for pair, (lead, trail) in _pair_gaps(curve).items()]


def _order_text(curve: pd.DataFrame) -> str:
    parts = []
    for (first, second), (lead, trail) in _pair_gaps(curve).items():
        if (first, second) in LEVEL_PAIRS:
            parts.append(f"{second} over {first} by at most {max(0.0, trail):.2f}")
        else:
            parts.append(f"{first} over {second} by {lead:.2f}" + (f" (behind by {trail:.2f})" if trail > HOP_TRAIL
                                                                    else ""))
    return ", ".join(parts)


def hop_by_hop(curves: Sequence[pd.DataFrame]) -> Graded:
    """Figure 2A's number task, per seed: 1 hop first, then 2, then 3 and 4 together (``hop_leads``).
    Reproduces when every seed keeps that order, partly when at least half do. A seed's curve that
    lacks a hop count (``hop_curve_gaps``) makes the claim *not measured*."""
    if gaps := _seed_gaps(curves):
        return not_measured(gaps)
    per_seed = [all(hop_leads(curve)) for curve in curves]
    return Graded(share_verdict(sum(per_seed), len(per_seed)),
                  f"{sum(per_seed)} of {len(per_seed)} seeds keep the order; per seed: "
                  + "; ".join(f"{_order_text(curve)} ({'yes' if kept else 'no'})"
                              for curve, kept in zip(curves, per_seed, strict=True)))


def checkpoint_interval(steps: Sequence[int]) -> int:
    """The usual spacing of a run's checkpoints (a last interval cut short by the run's end does not count)."""
    return int(np.median(np.diff(sorted(set(steps))))) if len(set(steps)) > 1 else 0


def at_once(curves: Sequence[pd.DataFrame]) -> Graded:
    """Figure 2A's letter task: every hop count reaches ``analysis.READY`` within one checkpoint
    interval of the first, in every seed. A seed's curve that lacks a hop count (``hop_curve_gaps``)
    makes the claim *not measured*."""
    if gaps := _seed_gaps(curves):
        return not_measured(gaps)
    spreads = []
    for curve in curves:
        wide = _hop_table(curve)
        ready = [wide.index[wide[hops] >= analysis.READY] for hops in wide.columns]  # the steps, per hop count
        firsts = [steps.min() for steps in ready if len(steps)]
        interval = checkpoint_interval(list(wide.index))
        spreads.append((max(firsts) - min(firsts), interval) if len(firsts) == len(ready) else None)
    close = sum(spread is not None and spread[0] <= spread[1] for spread in spreads)
    return Graded("reproduces" if close == len(spreads) else "partly" if close else "does not reproduce",
                  f"{close} of {len(spreads)} seeds learn every hop count within one checkpoint interval")


def _logistic_curves(centres: Mapping[int, float], steps: Sequence[int] = tuple(range(0, 6751, 500))) -> pd.DataFrame:
    """Per-hop accuracy rising on a logistic (width 200 steps) centred at ``centres[hops]``."""
    return pd.DataFrame([{"step": step, "hops": str(hops), "accuracy": 1 / (1 + math.exp(-(step - centre) / 200))}
                         for hops, centre in centres.items() for step in steps])


def figure_2a_curve(every: int = 50) -> pd.DataFrame:
    """Paper B's figure 2A, number task (``references.PAPER_B_FIGURE_2A``), as a ``step, hops,
    accuracy`` curve at every ``every`` steps up to the panel's last step (6,750): the PDF's vertices,
    interpolated linearly where its path leaves a point out (every 50 steps is the panel's own spacing)."""
    last = max(max(points) for points in PAPER_B_FIGURE_2A.values())
    steps = np.arange(every, last + 1, every)
    return pd.DataFrame([{"step": int(step), "hops": str(hops), "accuracy": float(accuracy)}
                         for hops, points in PAPER_B_FIGURE_2A.items()
                         for step, accuracy in zip(steps, np.interp(steps, list(points), list(points.values())),
                                                   strict=True)])


def figure_2a_together(apart: Sequence[int] = (), every: int = 50) -> pd.DataFrame:
    """Figure 2A's number curve (``figure_2a_curve``) with every hop count not in ``apart`` on the
    average of their curves: a null of hop-by-hop learning that keeps the paper's timing. ``apart=(1,)``
    is 1 hop first, then the rest at once (the letter task's pattern, the nearest null); ``()``, every
    hop count at once."""
    curve = figure_2a_curve(every)
    together = ~curve["hops"].astype(int).isin(apart)
    average = curve[together].groupby("step")["accuracy"].transform("mean")
    return curve.assign(accuracy=curve["accuracy"].where(~together, average))


STAIRCASE = _logistic_curves({1: 1000, 2: 2000, 3: 3000, 4: 4000})
"""A construction of hop-by-hop learning: hop h rises 1,000 steps after hop h − 1."""
TOGETHER = _logistic_curves({1: 2000, 2: 2000, 3: 2000, 4: 2000})
"""A construction of learning at once: every hop count on one curve."""


# ------------------------------------------------------------------------------- pure layers

PLACEMENT_BAND = (0.75, 1)
"""Per seed: the share of the paper's layers that are pure, and the pure layers outside them."""


def placement(published: set[int]) -> Callable[[Mapping[str, Any]], Graded]:
    """Figure 2C's rule against the paper's pure layers ``published``. The measurement:
    ``{"pure": [set per seed], "outside": [extra layers per seed that count as outside]}``. No seed,
    a seed without its set, or ``outside`` not one finite count per seed: *not measured*."""

    def grade(measurement: Mapping[str, Any]) -> Graded:
        if not isinstance(measurement, Mapping):
            raise TypeError(f'placement takes {{"pure": [set per seed], "outside": [...]}}; got a '
                            f"{type(measurement).__name__}.")
        measured = measurement.get("pure")
        if not measured:
            return not_measured("no seed's pure layers")
        unread = [str(index + 1) for index, layers in enumerate(measured) if not isinstance(layers, AbstractSet)]
        if unread:
            return not_measured(f"no pure layers for seed {', '.join(unread)} of {len(measured)}")
        extra = measurement.get("outside") or [0] * len(measured)
        if len(extra) != len(measured) or not all(finite(more) for more in extra):
            return not_measured(f"other layers not counted for each of the {len(measured)} seeds: {list(extra)}")
        share, most_outside = PLACEMENT_BAND
        shares = [len(layers & published) / len(published) if published else 1.0 for layers in measured]
        outside = [len(layers - published) + more for layers, more in zip(measured, extra, strict=True)]
        if all(s == 1 for s in shares) and not any(outside):
            verdict: Verdict = "reproduces"
        elif all(s >= share for s in shares) and all(o <= most_outside for o in outside):
            verdict = "partly"
        else:
            verdict = "does not reproduce"
        return Graded(verdict, "per seed: " + "; ".join(f"{s:.0%} of the paper's, {o} other"
                                                        for s, o in zip(shares, outside, strict=True)))

    return grade


def _placement_rule(claim: str, role: str, outside_note: str = "") -> Rule:
    published = set(PUBLISHED[claim].value)
    share, most_outside = PLACEMENT_BAND
    return Rule(claim, f"every seed's pure {role} layers are the paper's {layer_text(sorted(published))} (reproduces), "
                f"or include ≥ {share:.0%} of them with ≤ {most_outside} other (partly){outside_note}.",
                f"≥ {share:.0%} of the paper's layers, ≤ {most_outside} other layer",
                fixed(("c9671f5", "figure 2C read right, with the first report's layers known")), placement(published),
                Control("figure 2C's layers, three seeds", {"pure": [published] * 3}),
                Control("an untrained model: no pure layer", {"pure": [set()] * 3}))


# ------------------------------------------------------------------------------- index flow

FOLLOWS = 0.5
"""A layer follows a hop when the hop's target is the key it attends to most ("maximally attends",
§3.2) in at least half the prompts, per hop count and hop."""
INDEX_FLOW_PARTS = {"last_hop": "from_end == 1", "previous_hop": "from_end == 2", "query_hop": "step == 1"}


def _flow_share(flow: pd.DataFrame) -> pd.DataFrame | str:
    """Per hop count, hop and layer of an ``index_flow`` frame: the share of prompts whose hop target is
    the layer's most attended key, and whether it reaches ``FOLLOWS``; what is missing, in words, for a
    degenerate frame. Rows with NaN ``maximal`` are left out."""
    if missing := missing_columns(flow, ("hops", "step", "from_end", "layer", "maximal")):
        return missing
    flow = flow[flow["maximal"].notna()].astype({"maximal": float})
    if flow.empty:
        return "no Index hop measured"
    share = flow.groupby(["hops", "step", "from_end", "layer"])["maximal"].mean().reset_index()
    share["follows"] = share["maximal"] >= FOLLOWS
    return share


def index_flow_grade(flow: pd.DataFrame) -> Graded:
    """Figure 3A's reading in §3.2 on an ``index_flow`` frame (``hops, step, from_end, layer, maximal``):
    (a) layer 0 follows the last hop (into the answer's symbol); (b) layer 1 follows the hop before
    it, and layers 1 and 2 follow the hop at the query. Both reproduce, one partly. A part with a layer
    that has no row left (no such hop, or the layer not measured) makes the claim *not measured*, since
    it would otherwise fail unseen. What later layers do is psheads' reading, graded apart
    (``propagation_grade``)."""
    published = PUBLISHED["index_flow"].value
    share = _flow_share(flow)
    if isinstance(share, str):
        return not_measured(share)
    gaps = [f"no {part.replace('_', ' ')} measured in layers {layer_text(absent)}"
            for part, where in INDEX_FLOW_PARTS.items()
            if (absent := sorted(set(published[part]) - set(share.query(where)["layer"])))]
    if gaps:
        return not_measured("; ".join(gaps))
    failed = []
    for part, where in INDEX_FLOW_PARTS.items():
        rows = share.query(where)
        rows = rows[rows["layer"].isin(published[part])]
        if not rows["follows"].all():
            failed.append(f"layers {layer_text(list(published[part]))} miss the {part.replace('_', ' ')}")
    failed_parts = len([f for f in failed if "last hop" in f]) + (1 if any("previous" in f or "query" in f
                                                                            for f in failed) else 0)
    verdict: Verdict = "reproduces" if not failed_parts else "partly" if failed_parts == 1 else "does not reproduce"
    return Graded(verdict, "; ".join(failed) if failed else "both parts hold")


PROPAGATION_SHARE = 0.25
"""*partly*: at most this share of layers 4–11 follows an Index hop."""


def propagation_grade(flow: pd.DataFrame) -> Graded:
    """psheads' reading of §3.2's "from there on … information only needs to be propagated": on an
    ``index_flow`` frame, no layer of 4–11 follows an Index hop (reproduces), at most
    ``PROPAGATION_SHARE`` of them (partly). A layer of 4–11 without a row is *not measured*."""
    late_layers = PUBLISHED["index_flow_propagate"].value
    share = _flow_share(flow)
    if isinstance(share, str):
        return not_measured(share)
    if absent := sorted(set(late_layers) - set(share["layer"])):
        return not_measured(f"layers {layer_text(absent)} not measured")
    following = sorted(share[share["layer"].isin(late_layers) & share["follows"]]["layer"].unique())
    fraction = len(following) / len(late_layers)
    verdict: Verdict = ("reproduces" if not following else "partly" if fraction <= PROPAGATION_SHARE
                        else "does not reproduce")
    return Graded(verdict, f"{len(following)} of {len(late_layers)} layers follow an Index hop"
                  + (f" ({layer_text(following)})" if following else ""))


def _flow(follow: Callable[[int, int, int], bool], hops: int = 4, layers: int = 12, prompts: int = 4) -> pd.DataFrame:
    """A flow frame where layer l's attention is maximal on the hop's target iff ``follow(layer, step, from_end)``."""
    return pd.DataFrame([{"prompt": prompt, "hops": hops, "step": step, "from_end": hops + 1 - step, "layer": layer,
                          "maximal": follow(layer, step, hops + 1 - step)}
                         for prompt in range(prompts) for step in range(1, hops + 1) for layer in range(layers)])


def _figure_3a(layer: int, step: int, from_end: int) -> bool:
    """§3.2's reading of figure 3A: layer 0 on the last hop, layer 1 on the hop before, layers 1–2 at
    the query, layer 3 copies (it follows the query's hop too), later layers propagate."""
    return ((layer == 0 and from_end == 1) or (layer == 1 and from_end == 2) or (layer in (1, 2, 3) and step == 1))


# --------------------------------------------------------------------------------- purity γ

GAMMAS = (0.1, 0.05)
"""Paper B's figure 7: the purity threshold γ at its default and halved."""


def gamma_grade(finals: Sequence[Mapping[float, Mapping[str, int]]]) -> Graded:
    """Figure 7 per run (``{γ: {role: final count of pure heads}}``): every role with a pure head at
    γ = 0.1 keeps at least half of them (rounded up) at γ = 0.05. Paper B: number 4 → 2, 8 → 7.
    A run with no pure head at γ = 0.1 has nothing to keep and is not judged (it would pass
    vacuously); a run without both counts, or with a count that is not a number, is not measured."""
    if not len(finals):
        return not_measured("no run")
    gaps = []
    for index, final in enumerate(finals):
        if absent := [str(gamma) for gamma in GAMMAS if gamma not in final]:
            gaps.append(f"run {index + 1}: no counts at γ = {', '.join(absent)}")
        elif not all(finite(count) for gamma in GAMMAS for count in final[gamma].values()):
            gaps.append(f"run {index + 1}: a count not finite")
    if gaps:
        return not_measured("; ".join(gaps))
    judged = [final for final in finals if any(count >= 1 for count in final[GAMMAS[0]].values())]
    if not judged:
        return not_measured(f"no pure head at γ = {GAMMAS[0]} in any run: nothing to keep")
    kept = []
    for final in judged:
        base, half = final[GAMMAS[0]], final[GAMMAS[1]]
        kept.append(all(half.get(role, 0) >= math.ceil(count / 2) for role, count in base.items() if count >= 1))
    unjudged = len(finals) - len(judged)
    return Graded(share_verdict(sum(kept), len(kept)), f"{sum(kept)} of {len(kept)} runs keep half their pure heads"
                  + (f"; {unjudged} without a pure head at γ = {GAMMAS[0]}, not judged" if unjudged else ""))


# ----------------------------------------------------------------------------- convergence, entropy

CONVERGED = 0.99
"""Accuracy over all hop counts at which a run counts as converged."""
PURE_FIRST = 0.75
"""Share of the finally-pure layers already pure when the run converges."""


def convergence_grade(runs: Sequence[tuple[int | None, float]]) -> Graded:
    """Figure 2's timing per run (``(first converged step or None, share of finally-pure layers pure there)``).
    A run whose share is NaN (no layer pure at the end) has nothing to time and is not judged."""
    if not len(runs):
        return not_measured("no run")
    judged = [(step, share) for step, share in runs if step is None or finite(share)]
    if not judged:
        return not_measured(f"no pure layer at the end of any of the {len(runs)} runs: nothing to time")
    good = sum(step is not None and share >= PURE_FIRST for step, share in judged)
    unjudged = len(runs) - len(judged)
    return Graded(share_verdict(good, len(judged)), f"{good} of {len(judged)} runs"
                  + (f"; {unjudged} with no pure layer at the end, not judged" if unjudged else ""))


ENTROPY_HIGH = 0.9
"""Normalised attention entropy (1: uniform over the visible keys) that counts as high."""


def entropy_grade(measurement: tuple[float, Sequence[float]]) -> Graded:
    """§3.1: every head's entropy at initialisation high (reproduces), or each model's median (partly).
    ``(lowest entropy over every head, [median per model])``; without a finite lowest value and one
    finite median per model it is *not measured* (no median would pass "partly" vacuously)."""
    if len(measurement) != 2:
        return not_measured("no entropy: expected (lowest entropy, [median per model])")
    lowest, medians = measurement
    if not len(medians):
        return not_measured("no model's median entropy")
    if not finite(lowest) or not all(finite(median) for median in medians):
        return not_measured(f"an entropy not finite: lowest {lowest}, medians {list(medians)}")
    return Graded("reproduces" if lowest >= ENTROPY_HIGH else "partly" if all(m >= ENTROPY_HIGH for m in medians)
                  else "does not reproduce", f"lowest {lowest:.3f}")


# ------------------------------------------------------------------------------------ the family

FAMILY: tuple[Rule, ...] = (
    Rule("number_hop_by_hop",
         f"per seed, 1 hop first, then 2, then 3 and 4 together: hop 1 leads hop 2 and hop 2 leads hop 3 by "
         f"≥ {HOP_LEAD} in accuracy at some checkpoint, and no hop count is ever ahead of the one before by more "
         f"than {HOP_TRAIL} (about 3 standard errors at 512 prompts per hop count). Hop 3 need not lead hop 4: paper "
         "B's figure 2A has it ahead by at most 0.077. Reproduces when every seed keeps that order, partly when at "
         "least half do.", f"a {HOP_LEAD} lead at one checkpoint; a {HOP_TRAIL} reversal",
         fixed((CONTROLS, "the order at fixed steps replaces the first step at 90%, which 500-step checkpoints cannot "
                          "resolve; in the same commit, after a first re-measurement, partly also when every seed "
                          "separates all pairs but one (the first version graded two of three pairs in every seed "
                          "'does not reproduce')"),
               ("84f7562", "paper B's own figure 2A, read from the PDF, is the positive control: its hops 3 and 4 rise "
                    "together (hop 3 ahead by at most 0.077), so no level of the old rule let the paper reproduce. "
                    "Hops 3 and 4 now need only never be reversed beyond 0.1, and 'partly' for every seed but one "
                    "pair is gone. Written with the measurements known: psheads' three seeds separated 1–2 and 2–3 "
                    "and not 3–4, and got 'partly'")), hop_by_hop,
         Control("figure 2A's number curves, read from the PDF (every 50 steps)", [figure_2a_curve()]),
         Control("figure 2A's hop 1, then hops 2–4 at once on their average curve", [figure_2a_together((1,))])),
    Rule("letter_at_once", f"every hop count reaches {analysis.READY:.0%} within one checkpoint interval of the first, "
         "in every seed (partly: some seeds).", "one checkpoint interval", fixed((FIRST_REPORT, "")), at_once,
         Control("every hop count on one curve", [TOGETHER]),
         Control("a staircase: hop h rises 1,000 steps after hop h − 1", [STAIRCASE])),
    _placement_rule("number_positional_l0_l3", "positional"),
    _placement_rule("number_symbolic_l4_l11", "symbolic"),
    _placement_rule("letter_symbolic_1_11", "symbolic", "; a pure positional layer counts as other"),
    Rule("index_flow",
         f"a layer follows a hop when the hop's target is the key it attends to most in ≥ {FOLLOWS:.0%} of prompts, "
         "per hop count and hop (§3.2: \"maximally attends\"). (a) layer 0 follows the last hop, into the answer's "
         "symbol; (b) layer 1 follows the hop before it and layers 1 and 2 the hop at the query. Both reproduce, one "
         "partly. A model whose every layer follows every hop passes it too: what the later layers do is psheads' "
         "reading, graded apart (index_flow_propagate).", "the argmax key in half the prompts",
         fixed(("6b9061c", "the first rule, set after a look at the numbers"),
               (CONTROLS, "re-fixed from §3.2's text"),
               ("c2c3711", "part (c), layers 4–11 follow no hop, dropped: psheads' reading of §3.2, not paper B's "
                           "words, graded as psheads' prediction")), index_flow_grade,
         Control("figure 3A as §3.2 reads it, 4 hops", _flow(_figure_3a)),
         Control("uniform attention: no hop's target is the argmax", _flow(lambda *_: False))),
    Rule("index_flow_propagate",
         f"no layer of 4–11 follows an Index hop (its target the argmax key in ≥ {FOLLOWS:.0%} of prompts) reproduces; "
         f"at most {PROPAGATION_SHARE:.0%} of them partly.", f"{PROPAGATION_SHARE:.0%} of layers 4–11",
         fixed((CONTROLS, "part (c) of the index-flow rule"),
               ("c2c3711", "split off as psheads' reading (text and threshold unchanged, a level 'partly' added), "
                           "with psheads' flow known")),
         propagation_grade, Control("figure 3A as §3.2 reads it, 4 hops", _flow(_figure_3a)),
         Control("every layer follows every hop", _flow(lambda *_: True))),
    Rule("purity_gamma",
         "per run, every role with a pure head at γ = 0.1 keeps at least half of them (rounded up) at γ = 0.05; "
         "reproduces when every run does, partly when at least half do.", "half the pure heads of each role",
         fixed(("047bdc0", "counts within 1"),
               (CONTROLS, "half the pure heads kept: the first rule failed paper B's own figure 7")), gamma_grade,
         Control("figure 7: number model, positional 4 → 2, symbolic 8 → 7",
                 [{0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": 2, "symbolic": 7}}]),
         Control("every pure head lost at γ = 0.05",
                 [{0.1: {"positional": 4, "symbolic": 8}, 0.05: {"positional": 0, "symbolic": 0}}])),
    Rule("pure_before_convergence",
         f"at the first checkpoint with accuracy ≥ {CONVERGED} (all hops), ≥ {PURE_FIRST:.0%} of the layers that end "
         "pure are already pure for good; reproduces when every run does, partly when at least half do.",
         f"{PURE_FIRST:.0%} of the pure layers", fixed(("047bdc0", "")), convergence_grade,
         None, Control("heads that become pure after convergence", [(2000, 0.0), (2500, 0.25)]),
         no_positive="figure 2 shows the timing but publishes no step per head; a construction would only restate "
                     "the rule"),
    Rule("entropy_at_init",
         f"every head's normalised entropy (1 = uniform) at initialisation ≥ {ENTROPY_HIGH} reproduces; partly when "
         "only each model's median is.", f"entropy {ENTROPY_HIGH}", fixed(("047bdc0", "")), entropy_grade,
         Control("uniform attention at initialisation", (1.0, [1.0, 1.0])),
         Control("a trained model's heads", (0.05, [0.4, 0.5])),
         cannot_fail="any small-weight initialisation gives near-uniform attention, whatever the task or recipe: "
                     "the check tests the initialiser, not paper B's learning dynamics"),
)
"""The learning-dynamics rules, in the report's order."""
