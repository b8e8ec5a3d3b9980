"""The reproduction report: every claim of both papers beside psheads' own measurement, in one page.

``reproduce()`` measures what is quick on the shipped models when it runs (scores, frequency
profiles, a spot check of the length-generalization curves, the theory constructions) and reads
the stored tables of the long experiments (training dynamics of every seed, length
generalization, discrepancy, the gated training sweep, the Gemma 3 270M analysis). Each claim
gets a verdict by a rule the report states next to it. ``Report.to_html()`` is one
self-contained file: plotly.js inline, no network.

Every number comes from psheads or from a stored table when the report runs; only the papers'
published values (``psheads.reproduction.references.PUBLISHED``) are typed in.
"""

from __future__ import annotations

import datetime
import html
import json
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from torch import Tensor

import psheads
from psheads import data as stored_tables
from psheads import plotting
from psheads.interface import validation
from psheads.interface.progress import progress_bar
from psheads.interface.reprs import layer_text
from psheads.models.zoo import Pretrained
from psheads.reproduction import rules
from psheads.reproduction.references import NOT_TESTED, PAPER_A, PAPER_B, PUBLISHED, Published
from psheads.reproduction.rules import (
    CONVERGED,
    GAMMAS,
    VERDICT_COLORS,
    Rule,
    Verdict,
    decay_points,
    plane_fit,
)
from psheads.results import analysis, schema

logger = logging.getLogger(__name__)

TASKS = ("number", "letter")
RECIPE_FOLDER = "paper_b"
"""Where ``scripts/train_paper_b.py`` stores its cells' tables, under the data folder."""
RECIPE = "paper-b"
"""The cell variant that is paper B's whole recipe (the shipped models'); the others switch one part back."""


@dataclass(frozen=True)
class ReportConfig:
    """What the report measures live and where it reads the stored tables.

    Attributes:
        data: folder of the stored experiment tables (default: the tables shipped in the package,
            ``psheads.data.TABLES``; sections whose tables are missing say so).
        prompts: task prompts for the live scores and frequency profiles of each model.
        check_lengths: prompt lengths at which the stored length-generalization curves are re-measured.
        check_prompts: prompts per length for that check.
        theory_prompts: prompts per length for the theory constructions.
        seed: seed of every live measurement's prompts.
        retrain: a folder to retrain both models in first, with paper B's recipe as the shipped
            ``number`` and ``letter`` were (about 40 minutes per model on a 2-core CPU; resumes what
            is already there); the report then reads their best-validation checkpoints instead of
            the shipped models. None: the shipped models.
    """

    data: Path | None = None
    retrain: Path | None = None
    prompts: int = 512
    check_lengths: tuple[int, ...] = (17, 65, 145)
    check_prompts: int = 256
    theory_prompts: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("data", "retrain"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        for name in ("prompts", "check_prompts", "theory_prompts"):
            object.__setattr__(self, name, validation.integer(getattr(self, name), name, minimum=1))
        object.__setattr__(self, "check_lengths", validation.integers(self.check_lengths, "check_lengths", minimum=1))
        object.__setattr__(self, "seed", validation.seed(self.seed))

    @property
    def data_folder(self) -> Path:
        """The stored tables' folder."""
        return self.data if self.data is not None else stored_tables.TABLES


@dataclass(frozen=True)
class Claim:
    """One published result beside psheads' measurement.

    Attributes:
        published: the paper's result (source, words, value).
        measured: psheads' measurement in words, with its numbers.
        verdict: one of ``rules.VERDICT_COLORS``.
        reason: the rule applied and what decided it.
        rule: the rule that graded it (None: not measured or not tested).
    """

    published: Published
    measured: str
    verdict: Verdict
    reason: str
    rule: Rule | None = None

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
    if not published.found:
        verdict = "unverified"
        reason += f" The value's source was not found in the paper's text: no verdict (the rule gives {outcome.verdict})."
    elif comparable:
        verdict = "not comparable"
        reason += f" {comparable}: no verdict (the rule gives {outcome.verdict})."
    return Claim(published, measured, verdict, reason, rule)


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


@dataclass
class Report:
    """The whole report: sections in order and the context it ran in."""

    sections: list[Section]
    context: dict[str, Any]

    def summary(self) -> pd.DataFrame:
        """One row per claim: ``section, paper, source, claim, measured, verdict, rule fixed, controls``."""
        columns = ["section", "paper", "source", "claim", "measured", "verdict", "rule fixed", "controls"]
        rows = [{"section": s.title, "paper": c.published.paper.key, "source": c.published.locator,
                 "claim": c.published.claim, "measured": c.measured, "verdict": c.verdict,
                 "rule fixed": c.rule.fixed if c.rule is not None else "—", "controls": c.controls}
                for s in self.sections for c in s.claims]
        return pd.DataFrame(rows, columns=columns)

    def to_html(self) -> str:
        """The report as one self-contained HTML page (plotly.js inline; opens offline)."""
        return render_html(self)

    def write(self, path: str | Path) -> Path:
        """Write ``to_html()`` to ``path`` (its folder must exist); returns the path."""
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(f"Cannot write {path}: the folder {path.parent} does not exist; create it first.")
        path.write_text(self.to_html(), encoding="utf-8")
        return path


@dataclass(frozen=True)
class Run:
    """One trained model as the report reads it: shipped (with weights) or a stored seed (tables)."""

    task: str
    seed: int
    dynamics: pd.DataFrame
    final_accuracy: pd.DataFrame  # hops, accuracy, n
    shipped: Pretrained | None = None


# ---------------------------------------------------------------------------------------- inputs


def _final(evaluation: pd.DataFrame) -> pd.DataFrame:
    return evaluation[evaluation["step"] == evaluation["step"].max()][["hops", "accuracy", "n"]].reset_index(drop=True)


def retrained(folder: Path, task: str, progress: bool | None, recipe: Any = None) -> Pretrained:
    """Train ``task`` in ``folder/task`` (resuming what is there) and boot the checkpoint it keeps
    (the best-validation one with paper B's recipe, as the shipped ``number`` and ``letter`` models).

    Args:
        folder: the runs' folder.
        task: ``"number"`` or ``"letter"`` (the letter task with paper B's sampling).
        progress: training progress bar.
        recipe: a ``psheads.TrainConfig`` (default: ``TrainConfig.paper_b()``).
    """
    from psheads.models import checkpoints, training, zoo
    from psheads.tasks import get_task

    made = get_task(task, sampling="paper-b") if task == "letter" else get_task(task)
    result = training.train(made, recipe or training.TrainConfig.paper_b(), folder / task, progress=progress)
    info = json.loads((result.best_checkpoint / checkpoints.TRAINING_CONFIG).read_text())
    kept = result.evaluation[result.evaluation["step"] == info["step"]][["hops", "accuracy", "n"]].reset_index(drop=True)
    return Pretrained(zoo.boot_local(result.best_checkpoint), made, kept, result.dynamics, info)


def _with_weights(task: str, model: Pretrained) -> Run:
    """A run with weights: its seed, whole dynamics and the accuracy of the shipped checkpoint."""
    return Run(task, int(model.info["training"]["seed"]), model.dynamics, model.evaluation[["hops", "accuracy", "n"]],
               model)


def recipe_seeds(folder: Path, variant: str = "paper-b") -> list[Run]:
    """The stored cells of ``scripts/train_paper_b.py`` for one recipe variant, as runs without
    weights: the whole run's dynamics and the test accuracy of the checkpoint it kept (best-validation)."""
    runs = []
    for path in sorted(folder.glob(f"*_{variant}_seed*_run.json")):
        record = json.loads(path.read_text())
        stem = path.name.removesuffix("_run.json")
        evaluation = pd.read_csv(folder / f"{stem}_evaluation.csv")
        kept = evaluation[evaluation["step"] == record["best_step"]][["hops", "accuracy", "n"]].reset_index(drop=True)
        runs.append(Run(record["task"], int(record["training"]["seed"]),
                        schema.ordered_labels(pd.read_csv(folder / f"{stem}_dynamics.csv")), kept))
    return runs


def psheads_recipe_runs(config: ReportConfig) -> list[Run]:
    """psheads' own recipe: the shipped ``number-psheads`` and ``letter-psheads`` models (seed 0) and
    the stored seeds under ``data_folder/seeds`` (tables only)."""
    runs = [_with_weights(task, psheads.load_pretrained(f"{task}-psheads")) for task in TASKS]
    for path in sorted((config.data_folder / "seeds").glob("*_seed*_dynamics.csv")):
        task, seed = path.name.removesuffix("_dynamics.csv").split("_seed")
        evaluation = pd.read_csv(path.with_name(f"{task}_seed{seed}_evaluation.csv"))
        runs.append(Run(task, int(seed), schema.ordered_labels(pd.read_csv(path)), _final(evaluation)))
    return sorted(runs, key=lambda run: (TASKS.index(run.task), run.seed))


def load_runs(config: ReportConfig, progress: bool | None = None) -> list[Run]:
    """Paper B's recipe: seed 0 with weights (the shipped ``number`` and ``letter`` models, or
    ``config.retrain``'s runs) and the recipe's other seeds stored under ``data_folder/paper_b``
    (tables only)."""
    runs = [_with_weights(task, psheads.load_pretrained(task) if config.retrain is None
                          else retrained(config.retrain, task, progress)) for task in TASKS]
    with_weights = {(run.task, run.seed) for run in runs}
    runs += [run for run in recipe_seeds(config.data_folder / RECIPE_FOLDER, RECIPE)
             if (run.task, run.seed) not in with_weights]
    return sorted(runs, key=lambda run: (TASKS.index(run.task), run.seed))


def _stored(folder: Path, name: str, section: Section) -> pd.DataFrame | None:
    path = folder / name
    if not path.is_file():
        section.notes.append(f"Stored table {name} not found in {folder}; its claims are not measured here "
                             "(pass --data to a folder that holds it).")
        return None
    return pd.read_csv(path)


def _shipped_number(runs: list[Run]) -> Run | None:
    """The number run with weights (the shipped model or ``retrain``'s), if any."""
    return next((run for run in runs if run.task == "number" and run.shipped is not None), None)


def _task_prompts(run: Run, config: ReportConfig) -> Tensor:
    """The live measurements' prompts of a run with weights: ``config.prompts`` at ``config.seed``."""
    from psheads.tasks import checked_batch

    return checked_batch(run.shipped.task, config.prompts, seed=config.seed).tokens


def _not_measured(key: str, why: str) -> Claim:
    return Claim(PUBLISHED[key], "—", "not measured", why)


# ------------------------------------------------------------------------------- training runs


def _learning_order(runs: list[Run]) -> tuple[Claim, Claim]:
    number = [run for run in runs if run.task == "number"]
    letter = [run for run in runs if run.task == "letter"]

    def text(run: Run) -> str:
        steps = analysis.learned_at(run.dynamics).values()
        return f"seed {run.seed}: " + " / ".join("never" if s is None else str(s) for s in steps)

    claims = []
    for key, seeds in (("number_hop_by_hop", number), ("letter_at_once", letter)):
        if not seeds:
            claims.append(_not_measured(key, "no run is stored"))
            continue
        claims.append(graded(key, "first step with ≥ 90% accuracy for 1 / 2 / 3 / 4 hops: "
                             + "; ".join(text(run) for run in seeds),
                             [analysis.hop_accuracy(run.dynamics) for run in seeds]))
    return claims[0], claims[1]


def _placement(runs: list[Run]) -> tuple[Claim, Claim, Claim]:
    number = [run for run in runs if run.task == "number"]
    letter = [run for run in runs if run.task == "letter"]

    def pure(run: Run, role: str) -> set[int]:
        return set(analysis.pure_layers(run.dynamics, role))

    def order(run: Run, role: str) -> str:
        firsts = analysis.first_pure(run.dynamics, role)
        return " → ".join(f"L{layer} ({step})" for layer, step in sorted(firsts.items(), key=lambda item: item[1]))

    claims = []
    for key, role in (("number_positional_l0_l3", "positional"), ("number_symbolic_l4_l11", "symbolic")):
        measured = "; ".join(f"seed {run.seed}: pure {role} layers {layer_text(sorted(pure(run, role)))}, first pure at "
                             f"step: {order(run, role) or 'none'}" for run in number)
        claims.append(graded(key, measured or "—", {"pure": [pure(run, role) for run in number]}))
    # a pure positional layer counts as outside: the paper's letter model has none
    measured = "; ".join(f"seed {run.seed}: pure symbolic layers {layer_text(sorted(pure(run, 'symbolic')))}, pure "
                         f"positional {layer_text(sorted(pure(run, 'positional'))) or 'none'}" for run in letter)
    claims.append(graded("letter_symbolic_1_11", measured or "—",
                         {"pure": [pure(run, "symbolic") for run in letter],
                          "outside": [len(pure(run, "positional")) for run in letter]}))
    return claims[0], claims[1], claims[2]


def seeds_table(runs: list[Run]) -> pd.DataFrame:
    """Per run: final accuracy (all hops), pure layers, and when each hop count was learned."""
    rows = []
    for run in runs:
        final = run.final_accuracy.set_index(run.final_accuracy["hops"].astype(str))["accuracy"]
        n = run.final_accuracy.set_index(run.final_accuracy["hops"].astype(str))["n"]
        row = {"task": run.task, "seed": run.seed, "accuracy": float(final.get("all", np.nan)),
               "test prompts": int(n.get("all", 0)),
               "pure positional layers": layer_text(analysis.pure_layers(run.dynamics, "positional")),
               "pure symbolic layers": layer_text(analysis.pure_layers(run.dynamics, "symbolic"))}
        row.update({f"{hops} hop learned at": step for hops, step in analysis.learned_at(run.dynamics).items()})
        rows.append(row)
    return pd.DataFrame(rows)


def learning_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("learning", "Learning dynamics (paper B, figure 2)",
                      "Accuracy per hop count, per-layer scores and pure-head counts over training, read from the "
                      "dynamics tables that training wrote (256 prompts scored per checkpoint), over the whole run "
                      "(6,750 steps of paper B's recipe). Seed 0 is the shipped model (its best-validation "
                      "checkpoint); other seeds are stored tables.")
    section.claims.extend(_learning_order(runs))
    section.claims.extend(_placement(runs))
    section.claims.append(_index_flow(runs, config, section))
    section.claims.append(_gamma_robustness(runs, section))
    section.claims.append(_pure_before_convergence(runs))
    section.claims.append(_entropy_at_init(runs, config, section))
    for run in runs:
        if run.shipped is None:
            continue
        section.figures.append((f"{run.task}: accuracy per hop over training",
                                plotting.accuracy_by_hops(analysis.hop_accuracy(run.dynamics))))
        section.figures.append((f"{run.task}: per-layer scores and attention entropy over training",
                                plotting.learning_dynamics(run.dynamics, columns=("positional", "symbolic", "entropy"))))
        section.figures.append((f"{run.task}: pure heads over training", plotting.pure_head_counts(run.dynamics)))
        section.figures.append(_swap_example(run))
    return section


def index_flow(model: Any, task: Any, tokens: Any) -> pd.DataFrame:
    """Each layer's attention along every Index hop of number-task prompts: at each position the
    path visits (``NumberTask.hop_path``), the attention on the position its integer points to.

    Returns one row per prompt, hop and layer: ``prompt, hops, step`` (1 at the query),
    ``from_end`` (1 for the hop into the answer's symbol), ``layer, attention`` (head 0's; the
    paper's models have one head per layer) and ``maximal`` (the target is the key it attends to
    most). One forward per query position.
    """
    lens = psheads.RopeLens(model)
    tokens = torch.as_tensor(tokens)
    paths = [task.hop_path(row) for row in tokens]
    rows = []
    for query in range(tokens.shape[1]):
        hops = [(prompt, step, path) for prompt, path in enumerate(paths)
                for step, position in enumerate(path[:-1]) if position == query]
        if not hops:
            continue
        for layer, planes in lens.frequency_logits_by_layer(tokens, None, query):
            attention = torch.softmax(planes[:, 0].sum(1), dim=-1)  # [prompt, key]
            rows += [{"prompt": prompt, "hops": len(path) - 1, "step": step + 1, "from_end": len(path) - 1 - step,
                      "layer": layer, "attention": float(attention[prompt, path[step + 1]]),
                      "maximal": bool(attention[prompt].argmax() == path[step + 1])}
                     for prompt, step, path in hops]
    return pd.DataFrame(rows).sort_values(["prompt", "step", "layer"], ignore_index=True)


def _index_flow(runs: list[Run], config: ReportConfig, section: Section) -> Claim:
    run = _shipped_number(runs)
    if run is None:
        return _not_measured("index_flow", "no number model")
    tokens = _task_prompts(run, config)
    flow = index_flow(run.shipped.model, run.shipped.task, tokens)
    section.figures.append(("Figure 3A: number model, mean attention along each Index hop, per layer",
                            plotting.hop_attention(flow)))
    table = flow.groupby(["hops", "step", "layer"])["attention"].mean().unstack("layer").round(3).reset_index()
    section.tables.append(("Figure 3A: number model, mean attention along each Index hop (rows: hop count, hop "
                           "from the query; columns: layers)", table.rename(columns=lambda c: f"L{c}" if
                                                                           isinstance(c, int) else c)))
    per_layer = flow.groupby("layer")["maximal"].mean()
    return graded("index_flow", "share of hops whose target is the layer's most attended key: "
                  + ", ".join(f"L{layer} {value:.2f}" for layer, value in per_layer.items())
                  + f" ({flow['prompt'].nunique()} prompts)", flow)


def relabelled(dynamics: pd.DataFrame, gamma: float) -> pd.DataFrame:
    """A dynamics table with every head's label recomputed at ``gamma`` from its stored scores."""
    from psheads.measure.methods import label

    labels = [label(p, s, gamma) for p, s in zip(dynamics["positional"], dynamics["symbolic"])]
    return dynamics.assign(label=pd.Categorical(labels, categories=dynamics["label"].cat.categories)
                           if isinstance(dynamics["label"].dtype, pd.CategoricalDtype) else labels)


def pure_counts(dynamics: pd.DataFrame) -> pd.DataFrame:
    """Pure positional and symbolic heads per checkpoint (``step`` index)."""
    counts = analysis.label_counts(dynamics, by="step").pivot(index="step", columns="label", values="n")
    return counts.reindex(columns=["positional", "symbolic"]).fillna(0).astype(int).sort_index()


def _gamma_robustness(runs: list[Run], section: Section) -> Claim:
    finals, texts = [], []
    for run in runs:
        counts = {gamma: pure_counts(relabelled(run.dynamics, gamma)) for gamma in GAMMAS}
        final = {gamma: {role: int(counts[gamma][role].iloc[-1]) for role in ("positional", "symbolic")}
                 for gamma in GAMMAS}
        finals.append(final)
        texts.append(f"{run.task} seed {run.seed}: " + ", ".join(
            f"{role} {final[GAMMAS[0]][role]} → {final[GAMMAS[1]][role]}" for role in ("positional", "symbolic")))
        if run.shipped is not None:
            section.figures.append((f"{run.task}: pure heads over training with γ = {GAMMAS[1]} (figure 7; "
                                    f"γ = {GAMMAS[0]} above)", plotting.pure_head_counts(relabelled(run.dynamics,
                                                                                                    GAMMAS[1]))))
    if not finals:
        return _not_measured("purity_gamma", "no run is stored")
    return graded("purity_gamma", "final pure heads at γ = 0.1 → 0.05 (labels recomputed from the stored scores): "
                  + "; ".join(texts), finals)


def pure_before_convergence(dynamics: pd.DataFrame) -> tuple[int | None, float]:
    """The first checkpoint with accuracy ≥ ``CONVERGED``, and the share of the layers pure at the end
    (positional or symbolic) that are already pure there (from ``analysis.first_pure``)."""
    wide = dynamics.drop_duplicates("step").set_index("step").sort_index()
    reached = wide.index[wide["accuracy_all"] >= CONVERGED]
    if not len(reached):
        return None, 0.0
    converged = int(reached.min())
    firsts = {**analysis.first_pure(dynamics, "positional"), **analysis.first_pure(dynamics, "symbolic")}
    share = sum(step <= converged for step in firsts.values()) / len(firsts) if firsts else 0.0
    return converged, share


def _pure_before_convergence(runs: list[Run]) -> Claim:
    rows = [(run, *pure_before_convergence(run.dynamics)) for run in runs]
    if not rows:
        return _not_measured("pure_before_convergence", "no run is stored")
    measured = "; ".join(f"{run.task} seed {run.seed}: " + ("never converged" if step is None else
                         f"converged at step {step} with {share:.0%} of its final pure layers already pure")
                         for run, step, share in rows)
    return graded("pure_before_convergence", measured, [(step, share) for _, step, share in rows])


def _entropy_at_init(runs: list[Run], config: ReportConfig, section: Section) -> Claim:
    import tempfile

    from psheads.models import checkpoints, training, zoo
    from psheads.tasks import checked_batch, task_tokenizer

    rows = []
    for run in runs:
        if run.shipped is None:
            continue
        task = run.shipped.task  # the task it was trained on (its recorded options)
        with tempfile.TemporaryDirectory() as folder:  # the untrained model of the run's seed, booted as trained ones are
            checkpoints.save_model(training.build_model(task, training.TrainConfig(seed=run.seed)), folder)
            task_tokenizer(task).save_pretrained(folder)
            booted = zoo.boot_local(folder)
        tokens = checked_batch(task, config.prompts, seed=config.seed).tokens
        at_init = psheads.score_heads(booted, tokens, progress=False)["entropy"]
        trained = run.dynamics[run.dynamics["step"] == _weights_step(run)]["entropy"]
        rows.append({"task": run.task, "initialisation: min": at_init.min(), "initialisation: median": at_init.median(),
                     "trained: min": trained.min(), "trained: median": trained.median()})
    if not rows:
        return _not_measured("entropy_at_init", "no shipped model")
    table = pd.DataFrame(rows)
    section.tables.append(("Normalised attention entropy of every head at initialisation (same seed, live) and "
                           "after training", table))
    lowest = float(table["initialisation: min"].min())
    return graded("entropy_at_init", f"normalised entropy at initialisation ≥ {lowest:.4f} in every head (median "
                  + ", ".join(f"{r['task']} {r['initialisation: median']:.3f} → {r['trained: median']:.3f} trained"
                              for r in rows) + ")", (lowest, table["initialisation: median"].tolist()))


def _weights_step(run: Run) -> int:
    """The training step of a run's weights (the best-validation checkpoint kept), else its last step."""
    step = run.shipped.info.get("step") if run.shipped is not None else None
    return int(step) if step is not None else int(run.dynamics["step"].max())


def _swap_example(run: Run) -> tuple[str, go.Figure]:
    """Attention of the run's most positional (number) or most symbolic (letter) head (at its weights' step) on one
    prompt, before and after its dominant swap: what the two behaviours look like."""
    from psheads.tasks import checked_batch

    final = run.dynamics[run.dynamics["step"] == _weights_step(run)]
    column = "positional" if run.task == "number" else "symbolic"
    best = final.loc[(final[column] - final["positional" if column == "symbolic" else "symbolic"]).idxmax()]
    prompt = checked_batch(run.shipped.task, 1, seed=0).tokens[0]
    swaps = psheads.swap_attention(run.shipped.model, prompt, int(best["layer"]), int(best["head"]))
    return (f"{run.task}: attention of L{int(best['layer'])}H{int(best['head'])} (its most {column} head) on one "
            "prompt, before and after its dominant swap", plotting.attention_under_swap(swaps))


def seeds_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("seeds", "Seed robustness",
                      "Every seed trained with the same recipe. A difference from paper B that holds in every seed "
                      "is a property of the recipe, one that changes with the seed is luck.")
    table = seeds_table(runs)
    section.tables.append(("Per seed: final accuracy, where the pure heads sit, when each hop count was learned",
                           table))
    for task in TASKS:
        stacked = pd.concat([run.dynamics.assign(model=f"{task} seed {run.seed}") for run in runs if run.task == task],
                            ignore_index=True)
        section.figures.append((f"{task}: pure heads over training, per seed", plotting.pure_head_counts(stacked)))
    seeds = {task: sorted(table.loc[table["task"] == task, "seed"]) for task in TASKS}
    section.notes.append("Seeds: " + "; ".join(f"{task} {', '.join(map(str, s))}" for task, s in seeds.items()) + ".")
    if min(len(s) for s in seeds.values()) < 2:
        section.notes.append("Fewer than two seeds per task are stored: nothing can be said about robustness yet.")
    for claim in _placement(runs) + _learning_order(runs):
        per_seed = "survives in every seed" if claim.verdict == "does not reproduce" else (
            "depends on the seed" if claim.verdict == "partly" else "agrees with the paper in every seed")
        section.notes.append(f"{claim.published.claim}: {per_seed} ({claim.reason})")
    return section


# ------------------------------------------------------------------------------ frequency use


def frequency_table(runs: list[Run], config: ReportConfig) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Per shipped model and layer: both frequency IDs (usage-weighted, paper B's softmax) and table 1;
    and per model the per-plane frame of paper B's definition (``max_logit`` without the scale)."""
    rows, planes = [], {}
    for run in runs:
        if run.shipped is None:
            continue
        tokens = _task_prompts(run, config)
        usage = psheads.frequency_profile(run.shipped.model, tokens, progress=False).heads
        profile = psheads.frequency_profile(run.shipped.model, tokens, progress=False, weighting="softmax",
                                            scale=False)
        softmax, planes[run.task] = profile.heads, profile.planes
        paper = PUBLISHED[f"frequency_id_{run.task}"].value
        for (u, s) in zip(usage.itertuples(), softmax.itertuples()):
            rows.append({"task": run.task, "layer": u.layer, "usage-weighted ID": u.mean_frequency_id,
                         "softmax ID (paper B's definition)": s.mean_frequency_id,
                         "paper B table 1": paper[u.layer] if u.layer < len(paper) else np.nan,
                         "dominant plane": u.dominant_plane})
    return pd.DataFrame(rows), planes


def frequency_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("frequency", "Frequency use per layer (paper B, table 1 and figure 8)",
                      "Paper B publishes no formula for its frequency ID; its figure-8 data reproduce its table 1 as "
                      "Σ_f f · softmax(v)_f with v_f each plane's maximum logit at the query (no 1/√d scale), averaged "
                      "over prompts first. psheads computes that definition (frequency_profile(weighting='softmax', "
                      "scale=False)) beside its own usage-weighted mean; the two are not comparable with each other. "
                      f"Measured live on {config.prompts} fresh prompts per model.")
    table, planes = frequency_table(runs, config)
    section.tables.append(("Frequency ID per layer", table))
    for task, frame in planes.items():
        section.figures.append((f"{task}: each plane's maximum logit at the query (v_f, no 1/√d scale; the quantity "
                                "paper B's ID softmaxes), per layer", plotting.frequency_curves(frame, "max_logit")))
    section.claims.append(_layer_1_geometry(runs, config, section, planes.get("number")))
    for task in TASKS:
        rows = table[table["task"] == task]
        if rows.empty:
            section.claims.append(_not_measured(f"frequency_id_{task}", f"no {task} model"))
            continue
        ours = rows["softmax ID (paper B's definition)"].to_numpy()
        outcome = rules.RULES[f"frequency_id_{task}"].grade(ours)
        section.claims.append(graded(f"frequency_id_{task}", "softmax ID per layer (paper B's definition): "
                                     + ", ".join(f"{value:.1f}" for value in ours) + f"; outside: {outcome.detail}",
                                     ours))
    return section


def plane_geometry(model: Any, tokens: Any, layer: int, plane: int, head: int = 0) -> pd.DataFrame:
    """One head's logits on one plane at the last token, against each key's distance from it, with
    each prompt's ``plane_fit``: one row per prompt and key (``prompt, offset, logit, fit, r2, peak,
    attended``; ``attended`` marks the key with the head's largest logit over all planes)."""
    lens = psheads.RopeLens(model)
    planes = lens.frequency_logits(tokens, layer)[:, head]  # [prompt, plane, key]
    logits = planes[:, plane - 1]  # plane IDs count from 1
    r2, peak, fitted = plane_fit(logits, float(lens.layer(layer).theta[plane - 1]))
    n_prompts, n_keys = logits.shape
    attended = torch.zeros_like(logits, dtype=torch.bool)
    attended[torch.arange(n_prompts), planes.sum(1).argmax(-1)] = True
    return pd.DataFrame({"prompt": np.repeat(np.arange(n_prompts), n_keys),
                         "offset": np.tile(np.arange(n_keys - 1, -1, -1), n_prompts),
                         "logit": logits.reshape(-1).numpy(), "fit": fitted.reshape(-1).numpy(),
                         "r2": np.repeat(r2.numpy(), n_keys), "peak": np.repeat(peak.numpy(), n_keys),
                         "attended": attended.reshape(-1).numpy()})


def _layer_1_geometry(runs: list[Run], config: ReportConfig, section: Section, planes: pd.DataFrame | None) -> Claim:
    """Figure 4B–C on the shipped number model; ``planes`` is its per-plane frame from ``frequency_table``."""
    run = _shipped_number(runs)
    if run is None or planes is None:
        return _not_measured("layer_1_geometry", "no number model")
    plane = dominant_plane(planes, 1)
    tokens = _task_prompts(run, config)
    frame = plane_geometry(run.shipped.model, tokens, 1, plane)
    per_prompt = frame.drop_duplicates("prompt")
    fit, where = float(per_prompt["r2"].median()), float(per_prompt["peak"].median())
    top = frame.loc[frame.groupby("prompt")["logit"].idxmax()]
    routes = float(top["attended"].mean())
    shown = frame[frame["prompt"] < 8]
    section.figures.append((f"Figure 4B–C: number model, layer 1, plane {plane}: the logit against the key's distance "
                            "from the query for 8 prompts (points) and each prompt's sinusoid (lines)",
                            plotting.plane_logits(shown)))
    return graded("layer_1_geometry",
                  f"dominant plane {plane}; one sinusoid per prompt explains a median {fit:.2f} of that plane's logits "
                  f"(uncentred R²), peaking at distance {where:.2f} (median over {len(per_prompt)} prompts); the plane's "
                  f"own largest logit is on the key the head attends to most in {routes:.0%} of prompts",
                  {"plane": plane, "fit": fit, "peak": where, "routes": routes})


# ---------------------------------------------------------------------------- length generalization


def _length_claims(curves: pd.DataFrame) -> list[Claim]:
    """Figure 5B's two claims on length curves (column ``model``: the task): the letter model's reach
    and the number model's accuracy at the lengths paper B's curve is read at (L = x + 17)."""
    claims = []
    for key, task in (("letter_length", "letter"), ("number_length", "number")):
        curve = curves[curves["model"] == task]
        if curve.empty:
            claims.append(_not_measured(key, f"no {task} curve"))
            continue
        lengths = sorted(curve["length"].unique())
        claims.append(graded(key, f"{task}: ≥ 90% up to {analysis.longest_ready(curve)} tokens; accuracy measured at "
                             f"{len(lengths)} lengths from {lengths[0]} to {lengths[-1]}", curve))
    return claims


def length_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("length", "Length generalization and discrepancy (paper B, figure 5)",
                      "Accuracy against prompt length from the shipped curves (512 prompts per length), re-measured "
                      "live at a few lengths; the worst-case discrepancy of every head from the stored table.")
    curves = []
    shipped_runs = {run.task: run for run in runs if run.shipped is not None}
    for task, run in shipped_runs.items():
        shipped = run.shipped
        live = psheads.length_generalization(shipped.model, shipped.task, lengths=config.check_lengths,
                                             n=config.check_prompts, seed=config.seed + 1, progress=False)
        if shipped.length_generalization is None:  # a retrained model: only the live lengths
            curves.append(live.assign(model=task))
            continue
        curves.append(shipped.length_generalization.assign(model=task))
        stored = shipped.length_generalization
        merged = live[live["hops"] == "all"].merge(stored[stored["hops"] == "all"], on="length",
                                                    suffixes=(" (live)", " (shipped)"))
        se = np.sqrt(merged["accuracy (shipped)"] * (1 - merged["accuracy (shipped)"]) / merged["n (live)"])
        merged["within 3 SE"] = (merged["accuracy (live)"] - merged["accuracy (shipped)"]).abs() <= 3 * se + 1e-9
        section.tables.append((f"{task}: live re-measurement of the shipped curve (fresh prompts)",
                               merged.assign(model=task)[["model", "length", "accuracy (live)", "n (live)",
                                                          "accuracy (shipped)", "n (shipped)", "within 3 SE"]]))
    if not curves:
        section.claims += [_not_measured("letter_length", "no shipped curves"),
                           _not_measured("number_length", "no shipped curves")]
        return section
    stacked = pd.concat(curves, ignore_index=True)
    section.figures.append(("Accuracy against prompt length", plotting.accuracy_vs_length(stacked)))
    section.claims.extend(_length_claims(stacked))
    section.claims.append(_theory_decay(stacked, section))
    return section


def prediction_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("predictions", "psheads' own predictions (not claims of either paper)",
                      "Paper B never measures trained heads' discrepancy: figure 5A bounds the hand-built "
                      "constructions, and Remark 3.2 promises \"away from zero\" only at θ = 0. What follows is "
                      "psheads' prediction from Theorem 3.2 for the trained models, graded like the papers' claims.")
    shipped_runs = {run.task: run for run in runs if run.shipped is not None}
    margins = _stored(config.data_folder, "lengthgen_discrepancy.csv", section)
    if margins is None or set(shipped_runs) != set(TASKS):
        section.claims.append(_not_measured("margins", "stored discrepancy table or a shipped model missing"))
        return section
    section.figures.append(("Worst-case normalised discrepancy against length",
                            plotting.discrepancy_vs_length(margins)))
    last = margins[margins["length"] == margins["length"].max()]
    positional = last[(last["model"] == "number")
                      & last["layer"].isin(analysis.pure_layers(shipped_runs["number"].dynamics, "positional"))]
    symbolic = margins[(margins["model"] == "letter")
                       & margins["layer"].isin(analysis.pure_layers(shipped_runs["letter"].dynamics, "symbolic"))]
    shrunk = int((positional["normalised"] <= 0).sum())
    kept = symbolic.groupby("layer")["normalised"].min()
    kept_positive = int((kept > 0).sum())
    if not len(positional) or not len(kept):
        section.claims.append(_not_measured("margins", "no pure positional number head or pure symbolic letter layer"))
        return section
    section.claims.append(graded(
        "margins", f"at {int(last['length'].iloc[0])} tokens {shrunk} of {len(positional)} pure positional number heads "
        f"have normalised discrepancy ≤ 0; {kept_positive} of {len(kept)} pure symbolic letter layers stay > 0 at "
        "every length", (shrunk / len(positional), kept_positive / len(kept))))
    return section


def _theory_decay(curves: pd.DataFrame, section: Section) -> Claim:
    points = decay_points(curves)
    section.tables.append(("§3.6: Theorem 3.2's upper bound at each model's figure-5A angle beside its measured "
                           "accuracy", points.round(6)))
    lengths = ", ".join(map(str, sorted(points["length"].unique())))
    return graded("theory_decay", f"{len(points)} points (lengths {lengths})", points)


# --------------------------------------------------------------------------------- paper B's recipe


RECIPE_LENGTHS = (200, 850, 1000)
"""The lengths paper B's figure 5B is read at."""


def recipe_cells(folder: Path) -> pd.DataFrame:
    """One row per stored cell of ``scripts/train_paper_b.py``: recipe variant, seed, device, the
    best-validation and final steps and, for each of the two checkpoints, the reach (≥ 90%) and
    the accuracy at ``RECIPE_LENGTHS``; the pure layers at the last checkpoint."""
    rows = []
    for path in sorted(folder.glob("*_run.json")):
        stem = path.name.removesuffix("_run.json")
        curves = folder / f"{stem}_lengthgen.csv"
        if not curves.is_file():  # a cell still running: its length table is written last
            continue
        record = json.loads(path.read_text())
        curve, dynamics = pd.read_csv(curves), schema.ordered_labels(pd.read_csv(folder / f"{stem}_dynamics.csv"))
        row = {"task": record["task"], "variant": record["variant"], "seed": record["training"]["seed"],
               "device": record["machine"].get("device", "cpu"), "best step": record["best_step"],
               "final step": record["final_step"]}
        for checkpoint in ("best", "final"):
            part = curve[curve["checkpoint"] == checkpoint]
            row[f"≥ 90% up to ({checkpoint})"] = analysis.longest_ready(part)
            row.update({f"at {length} ({checkpoint})": analysis.accuracy_at(part, length) for length in RECIPE_LENGTHS})
        row["pure positional layers"] = layer_text(analysis.pure_layers(dynamics, "positional"))
        row["pure symbolic layers"] = layer_text(analysis.pure_layers(dynamics, "symbolic"))
        rows.append(row | {"_dynamics": dynamics, "_curve": curve})
    return pd.DataFrame(rows)


def _psheads_recipe_claims(runs: list[Run]) -> list[Claim]:
    """Figure 5B's length claims (the shipped ``-psheads`` curves) and figure 2C's placement claims
    (every stored seed) for psheads' own recipe, labelled as such."""
    curves = [run.shipped.length_generalization.assign(model=run.task) for run in runs
              if run.shipped is not None and run.shipped.length_generalization is not None]
    claims = (_length_claims(pd.concat(curves, ignore_index=True)) if curves else []) + list(_placement(runs))
    return [replace(claim, measured="psheads' recipe: " + claim.measured) for claim in claims]


def _ablation_notes(cells: pd.DataFrame) -> list[str]:
    """Per letter ablation (seed 0): the change at 850 tokens against the whole recipe, beside the
    seed-to-seed spread of the whole recipe."""
    letter = cells[cells["task"] == "letter"]
    recipe = letter[letter["variant"] == RECIPE]
    base = recipe[recipe["seed"] == 0]
    if base.empty:
        return []
    notes = []
    for checkpoint in ("best", "final"):
        column = f"at 850 ({checkpoint})"
        reference = float(base[column].iloc[0])
        changes = {row["variant"]: float(row[column]) - reference
                   for row in letter[(letter["seed"] == 0) & (letter["variant"] != RECIPE)].to_dict("records")}
        if not changes:
            continue
        spread = float(recipe[column].max() - recipe[column].min())
        beyond = [name for name, change in changes.items() if abs(change) > spread]
        notes.append(f"Letter accuracy at 850 tokens, {checkpoint} checkpoint, seed 0: {reference:.2f} with the whole "
                     "recipe; switching one part back changes it by "
                     + ", ".join(f"{change:+.2f} ({name})" for name, change in changes.items())
                     + f". Beyond the whole recipe's spread over its {len(recipe)} seeds ({spread:.2f}): "
                     + (", ".join(beyond) if beyond else "none") + ".")
    return notes


def recipe_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("recipe", "Paper B's recipe against psheads' own, and its ablations (paper B, figures 2 and 5B)",
                      "The shipped number and letter models and every seed above were trained by "
                      "scripts/train_paper_b.py with TrainConfig.paper_b() and the letter task's paper-b sampling "
                      "(gradient clipping, no decay on biases and LayerNorm, a fixed set of 432,000 prompts, the "
                      "best-validation checkpoint, exact GELU); each ablation switches one part back. Each model's "
                      "length curve: 128 prompts per length, hop counts 1–4 in equal shares. The claims below apply "
                      "the same rules to psheads' own recipe (the shipped number-psheads and letter-psheads models "
                      "and their stored seeds), for comparison.")
    folder = config.data_folder / RECIPE_FOLDER
    cells = recipe_cells(folder) if folder.is_dir() else pd.DataFrame()
    if cells.empty:
        section.notes.append(f"No finished cell of scripts/train_paper_b.py in {folder}; nothing is measured here.")
    else:
        shown = [column for column in cells.columns if not column.startswith("_")]
        section.tables.append(("Per cell: checkpoints, reach and accuracy at paper B's lengths, pure layers",
                               cells[shown].round(3)))
        recipe = cells[cells["variant"] == RECIPE]
        curves = pd.concat([row["_curve"][row["_curve"]["checkpoint"] == "best"]
                            .assign(model=f"{row['task']} seed {row['seed']}") for row in recipe.to_dict("records")],
                           ignore_index=True)
        section.figures.append(("Paper B's recipe: accuracy against prompt length (best-validation checkpoints)",
                                plotting.accuracy_vs_length(curves[["model", "length", "hops", "accuracy", "n"]])))
        section.notes.extend(_ablation_notes(cells))
        section.notes.append(f"Trained on: {', '.join(sorted(set(cells['device'])))} (fp32 throughout).")
    ours = psheads_recipe_runs(config)
    section.tables.append(("psheads' recipe: the number-psheads and letter-psheads models (seed 0) and stored seeds",
                           seeds_table(ours)))
    section.claims.extend(_psheads_recipe_claims(ours))
    return section


# ---------------------------------------------------------------------------------------- theory


def theory_section(runs: list[Run], config: ReportConfig) -> Section:
    from psheads.models import theory

    section = Section("theory", "Theorem 3.1's constructions and Theorem 3.2's bounds (paper B)",
                      "Both constructions built as real one-layer models and measured live: accuracy on "
                      f"{config.theory_prompts} prompts per length, and the exact worst-case discrepancy against the "
                      "closed-form bounds.")
    rows, bounds = [], []
    for kind in theory.CONSTRUCTIONS:
        construction = theory.construct(kind)
        n0 = construction.n0
        for length in (2, 3, n0 // 2, n0):
            row = psheads.evaluate(construction.model, construction.config.task(length), n=config.theory_prompts,
                                   seed=config.seed, batch_size=config.theory_prompts, progress=False).iloc[-1]
            rows.append({"construction": kind, "length": length, "accuracy": row["accuracy"], "n": int(row["n"])})
        for length in range(2, n0 + 1):  # every length, under both readings of n
            at_distance, at_length = construction.bound(length), construction.bound(length + 1)
            bounds.append({"construction": kind, "length": length, "exact": construction.margin(length),
                           "upper (n = L)": at_length.upper, "upper (n = L − 1)": at_distance.upper,
                           "lower (n = L − 1)": at_distance.lower})
    accuracy, margins = pd.DataFrame(rows), pd.DataFrame(bounds)
    section.tables += [("Accuracy up to n0", accuracy),
                       ("Exact worst-case discrepancy and Theorem 3.2's upper bound under both readings of n (the "
                        "lower bound is psheads' own, from the derivation)", margins)]
    section.claims.append(graded("theorem_3_1", f"accuracy {accuracy['accuracy'].min():.3f} at worst over "
                                 f"{len(accuracy)} (construction, length) cells", accuracy["accuracy"].tolist()))
    above = margins[margins["exact"] > margins["upper (n = L)"] + rules.BOUND_SLACK]
    section.claims.append(graded(
        "theorem_3_2", "exact worst cases at L = 2…n0 for both constructions; above the bound at n = L: "
        + (", ".join(f"{kind} L = {length}" for kind, length in zip(above["construction"], above["length"])) or "none"),
        margins))
    section.claims.append(_figure_5a(runs, config, section))
    return section


def figure_5a_curves() -> pd.DataFrame:
    """Theorem 3.2's bounds at paper B's angles for n = 1 … ``FIGURE_5A_N`` (``construction, n, upper, lower``)."""
    rows = []
    for kind in PUBLISHED["figure_5a"].value:
        config = rules.figure_5a_config(kind)
        for n in range(1, rules.FIGURE_5A_N + 1):
            bound = config.bound(n + 1)
            rows.append({"construction": kind, "n": n, "upper": bound.upper,
                         "lower": np.nan if bound.lower is None else bound.lower})
    return pd.DataFrame(rows)


def second_layer_ids(runs: list[Run], config: ReportConfig) -> dict[str, float]:
    """Per shipped model: layer 1's frequency ID by paper B's definition (softmax over each plane's
    maximum logit, no 1/√d scale), table 1's quantity."""
    out = {}
    for run in runs:
        if run.shipped is None:
            continue
        heads = psheads.frequency_profile(run.shipped.model, _task_prompts(run, config), layers=[1], progress=False,
                                          weighting="softmax", scale=False).heads
        out[run.task] = float(heads["mean_frequency_id"].mean())
    return out


def dominant_plane(planes: pd.DataFrame, layer: int) -> int:
    """The plane with the largest ``max_logit`` in ``layer`` of a ``frequency_profile(...).planes`` frame."""
    rows = planes[planes["layer"] == layer]
    return int(rows.loc[rows["max_logit"].idxmax(), "plane"])


def _figure_5a(runs: list[Run], config: ReportConfig, section: Section) -> Claim:
    curves = figure_5a_curves()
    section.figures.append((f"Figure 5A: Theorem 3.2's bounds for n ≤ {rules.FIGURE_5A_N} at paper B's angles (Index "
                            "θ = 0.8; Retrieval θ = 0.0027, |ALPH| = 8)", plotting.theorem_bounds(curves)))
    last = curves[curves["n"] == rules.FIGURE_5A_N].set_index("construction")
    ids = second_layer_ids(runs, config)
    if not ids:
        return _not_measured("figure_5a", "no shipped model")
    return graded("figure_5a", f"at n = {rules.FIGURE_5A_N} the Index upper bound is {last.loc['index', 'upper']:.4f} "
                  f"and the Retrieval bounds [{last.loc['retrieval', 'lower']:.4f}, "
                  f"{last.loc['retrieval', 'upper']:.4f}]; layer 1's frequency ID: "
                  + ", ".join(f"{task} {value:.1f}" for task, value in ids.items()), ids)


# ------------------------------------------------------------------------------------ paper A


def _band_accuracy(sweep: pd.DataFrame) -> pd.Series:
    runs = sweep.drop_duplicates(["task", "band", "seed"])
    return runs.groupby(["task", "band"])["accuracy"].mean()


def canonical_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("canonical", "Canonical tasks under frequency gating (paper A)",
                      "Two-layer GPT-J models trained with only some RoPE planes open (gated training sweep: 8 bands × "
                      "3 tasks × 3 seeds), from the stored sweep table.")
    sweep = _stored(config.data_folder, "gating_sweep.csv", section)
    if sweep is None:
        section.claims += [_not_measured(k, "stored sweep table missing")
                           for k in ("index_fast", "retrieval_slow", "induction_both")]
        return section
    section.figures.append(("Accuracy per task and band", plotting.accuracy_by_band(sweep)))
    acc = _band_accuracy(sweep)
    section.tables.append(("Mean accuracy over seeds", acc.unstack("band").reset_index()))

    def at(task: str, band: str) -> float:
        return float(acc.get((task, band), np.nan))

    index = {band: at("index", band) for band in ("fast", "slow", "zero")}
    section.claims.append(graded("index_fast", f"Index: fast planes {index['fast']:.3f}, slow {index['slow']:.3f}, "
                                 f"zero {index['zero']:.3f}", index))
    retrieval = {band: at("retrieval", band) for band in ("slow", "zero")}
    section.claims.append(graded("retrieval_slow", f"Retrieval: slow {retrieval['slow']:.3f}, zero "
                                 f"{retrieval['zero']:.3f}", retrieval))
    induction = {"both": max(at("partial-induction", "fast+zero"), at("partial-induction", "middle+zero")),
                 "alone": max(at("partial-induction", "fast"), at("partial-induction", "zero"))}
    section.claims.append(graded("induction_both", f"partial induction: rotating + static {induction['both']:.3f}, "
                                 f"best single kind {induction['alone']:.3f}", induction))
    causal = _stored(config.data_folder, "causal_tests.csv", section)
    if causal is not None:
        section.figures.append(("psheads' own causal test on the shipped models (no published counterpart): "
                                "accuracy under interventions", plotting.accuracy_under_ablation(causal)))
    return section


def llm_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("llm", "Real LLMs (paper B: frontier LLMs; paper A: gemma-2-2b-it; psheads: the zoo LLMs)",
                      "Paper B's table 3 beside the zoo LLMs on the same kind of 1-hop prompts (stored tables of "
                      "scripts/llm_tasks.py), and paper A's analysis on Gemma 3 270M (the analysis example: swap "
                      "score, natural-text prompts). Different and much smaller models than the papers', so "
                      "agreement in direction is what can be asked.")
    section.claims += _llm_task_claims(config)
    summary = _stored(config.data_folder, "gemma_summary.csv", section)
    correlation = _stored(config.data_folder, "gemma_correlation.csv", section)
    scores = _stored(config.data_folder, "gemma_scores.csv", section)
    if summary is None or correlation is None:
        section.claims += [_not_measured("llm_early_late", "stored Gemma tables missing"),
                           _not_measured("llm_correlation", "stored Gemma tables missing")]
        return section
    other_model = "psheads measures Gemma 3 270M (base) where paper A measures gemma-2-2b-it"
    rows = summary[(summary["comparison"] == "early vs late") & (summary["prompts"] == "natural")
                   & (summary["method"] == "swap") & (summary["score"] == "positional")].set_index("group")
    early, late = float(rows.loc["early", "median"]), float(rows.loc["late", "median"])
    low, high = float(rows.loc["late - early", "median_ci_low"]), float(rows.loc["late - early", "median_ci_high"])
    section.claims.append(graded("llm_early_late", f"median s_POS {early:.3f} (layers {rows.loc['early', 'layers']}) vs "
                                 f"{late:.3f} (layers {rows.loc['late', 'layers']}), late − early 95% CI [{low:.3f}, "
                                 f"{high:.3f}]", (low, high), comparable=other_model))
    r = correlation[(correlation["prompts"] == "natural") & (correlation["method"] == "swap")
                    & (correlation["layer_kind"] == "all")].iloc[0]
    section.claims.append(graded("llm_correlation", f"r = {r['r']:.3f} over {int(r['n'])} heads (95% CI "
                                 f"{r['ci_low']:.3f} to {r['ci_high']:.3f})",
                                 {"r": float(r["r"]), "ci_high": float(r["ci_high"]), "n": int(r["n"])},
                                 comparable=other_model))
    if scores is not None:
        natural = scores[(scores["prompts"] == "natural") & (scores["method"] == "swap")] \
            if {"prompts", "method"} <= set(scores.columns) else scores
        section.figures.append(("s_POS of every head", plotting.score_heatmap(natural, "positional")))
        section.figures.append(("Scores per layer", plotting.layer_distributions(natural)))
        section.figures.append(("s_POS against s_SYM", plotting.score_correlation(natural)))
    return section


LLM_TASK_TABLES = {"gemma-3-270m": "gemma_llm_tasks.csv", "smollm2-135m": "smollm2_llm_tasks.csv",
                   "qwen2.5-coder-0.5b": "qwen2.5_llm_tasks.csv"}
"""The stored LLM-task tables of the zoo LLMs (``scripts/llm_tasks.py``)."""
def _llm_task_claims(config: ReportConfig) -> list[Claim]:
    """Table 3's pattern and §3.7's thresholds on the zoo LLMs' stored task tables."""
    tables = {model: pd.read_csv(config.data_folder / name) for model, name in LLM_TASK_TABLES.items()
              if (config.data_folder / name).is_file()}
    if not tables:
        return [_not_measured(key, "no stored LLM-task table") for key in ("llm_table_3", "llm_thresholds")]

    def cell(table: pd.DataFrame, task: str, window: int) -> str:
        row = table[(table["task"] == task) & (table["window"] == window)]
        return "—" if row.empty else f"{float(row['accuracy'].iloc[0]):.2f}"

    measured = "; ".join(f"{model}: number {cell(t, 'llm-number', 12)} / {cell(t, 'llm-number', 32)} / "
                         f"{cell(t, 'llm-number', 100)}, letter {cell(t, 'llm-letter', 12)} / "
                         f"{cell(t, 'llm-letter', 32)} / {cell(t, 'llm-letter', 100)} at 12 / 32 / 100 items"
                         for model, t in tables.items())
    return [graded("llm_table_3", measured, tables), graded("llm_thresholds", measured, tables)]


def not_tested_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("not-tested", "Claims not tested",
                      "Claims of paper B that no rule grades yet, each with the reason.")
    section.claims += [Claim(published, "—", "not tested", why) for published, why in NOT_TESTED.values()]
    return section


SECTIONS: tuple[Callable[[list[Run], ReportConfig], Section], ...] = (
    learning_section, frequency_section, length_section, recipe_section, theory_section, canonical_section, llm_section,
    seeds_section, prediction_section, not_tested_section,
)
"""The report's sections, in order: each builds one ``Section`` from the runs and the config."""


def context(config: ReportConfig) -> dict[str, Any]:
    """Configuration, versions and machine the report ran on."""
    import torch

    
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "data folder": str(config.data_folder),
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "versions": {"python": platform.python_version(), **schema.versions()},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "torch threads": torch.get_num_threads(),
                    "cuda": torch.cuda.is_available()},
        "papers": {"A": PAPER_A.citation(), "B": PAPER_B.citation()},
    }


def reproduce(config: ReportConfig | None = None, *, progress: bool | None = None, **options: Any) -> Report:
    """Build the reproduction report (about a minute on a 2-core CPU with the defaults).

    Args:
        config: a ``ReportConfig``.
        progress: a progress bar over the sections (and over training with ``retrain``; default:
            in a notebook or on a terminal).
        **options: ``ReportConfig`` fields overriding ``config``.

    Returns:
        The ``Report``; ``report.write("report.html")`` saves it.
    """
    if config is not None and not isinstance(config, ReportConfig):
        raise TypeError(f"config must be a psheads.reproduction.report.ReportConfig, got {type(config).__name__}.")
    config = ReportConfig(**{**asdict(config or ReportConfig()), **options})
    progress = validation.optional_boolean(progress, "progress")
    start = time.perf_counter()
    runs = load_runs(config, progress)
    sections, timings = [], {}
    for build in progress_bar(SECTIONS, desc="report", progress=progress):
        began = time.perf_counter()
        sections.append(build(runs, config))
        timings[sections[-1].key] = round(time.perf_counter() - began, 1)
        logger.info("report: %s done in %.1f s", sections[-1].title, timings[sections[-1].key])
    info = context(config)
    info["timings (s)"] = {**timings, "total": round(time.perf_counter() - start, 1)}
    return Report(sections, info)


# ------------------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1f2328;line-height:1.5}
h1{font-size:1.8em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.88em;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}.verdict{color:#fff;border-radius:1em;padding:.1em .6em;white-space:nowrap;font-weight:600}
.note{color:#57606a}.figure{margin:1em 0}pre{background:#f6f8fa;padding:1em;overflow-x:auto}
"""


def _badge(verdict: str) -> str:
    return f'<span class="verdict" style="background:{VERDICT_COLORS[verdict]}">{html.escape(verdict)}</span>'


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="—", border=0, escape=True)


def _claims_html(claims: list[Claim]) -> str:
    head = ("<tr><th>source</th><th>claim</th><th>psheads measured</th><th>verdict</th><th>why</th>"
            "<th>the rule's controls</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(c.published.locator)}</td>"
        f"<td>{html.escape(c.published.claim)}</td><td>{html.escape(c.measured)}</td><td>{_badge(c.verdict)}</td>"
        f"<td>{html.escape(c.reason)}</td><td>{html.escape(c.controls)}</td></tr>" for c in claims)
    return f"<table>{head}{body}</table>"


def render_html(report: Report) -> str:
    """The report as one HTML page with plotly.js inline."""
    from plotly.offline import get_plotlyjs

    parts = [f"<h1>psheads {html.escape(psheads.__version__)}: reproduction report</h1>",
             f"<p>Generated {html.escape(report.context['date (UTC)'])} UTC in "
             f"{report.context['timings (s)']['total']:.0f} s. Papers: A — {html.escape(PAPER_A.citation())}; "
             f"B — {html.escape(PAPER_B.citation())}.</p>",
             "<h2 id='summary'>Summary</h2>"]
    summary = report.summary()
    counts = summary["verdict"].value_counts()
    parts.append("<p>" + ", ".join(f"{_badge(v)} {int(counts.get(v, 0))}" for v in VERDICT_COLORS) + "</p>")
    parts.append(_claims_html([c for s in report.sections for c in s.claims]))
    figure_index = 0
    for section in report.sections:
        parts.append(f"<h2 id='{section.key}'>{html.escape(section.title)}</h2><p>{html.escape(section.intro)}</p>")
        if section.claims:
            parts.append(_claims_html(section.claims))
        parts += [f"<p class='note'>{html.escape(note)}</p>" for note in section.notes]
        for caption, frame in section.tables:
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table(frame)}")
        for caption, figure in section.figures:
            figure_index += 1
            div = figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"figure-{figure_index}",
                                 config={"displaylogo": False, "responsive": True})
            parts.append(f"<div class='figure'><h3>{html.escape(caption)}</h3>{div}</div>")
    parts.append("<h2 id='context'>Configuration, versions and machine</h2>"
                 f"<pre>{html.escape(json.dumps(report.context, indent=2, default=str))}</pre>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>psheads reproduction report</title>"
            f"<style>{_CSS}</style><script>{get_plotlyjs()}</script></head><body>{''.join(parts)}</body></html>")
