"""The report's section on learning dynamics (paper B, figure 2): when each hop count is learned,
where the pure heads sit and when they become pure, the Index hops' attention flow, the labels'
robustness to γ and the attention entropy at initialisation."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import torch

import psheads.plotting as plotting
from psheads.interface.reprs import layer_text
from psheads.reproduction.report.claims import Claim, Section, graded, not_measured
from psheads.reproduction.report.inputs import ReportConfig, Run, shipped_number, task_prompts
from psheads.reproduction.rules.learning import CONVERGED, GAMMAS
from psheads.results import analysis


def learning_order(runs: list[Run]) -> tuple[Claim, Claim]:
    """Figure 2A's claims on every run: the number model learns hop by hop, the letter model all hops at once."""
    number = [run for run in runs if run.task == "number"]
    letter = [run for run in runs if run.task == "letter"]

    def text(run: Run) -> str:
        steps = analysis.learned_at(run.dynamics).values()
        return f"seed {run.seed}: " + " / ".join("never" if s is None else str(s) for s in steps)

    claims = []
    for key, seeds in (("number_hop_by_hop", number), ("letter_at_once", letter)):
        if not seeds:
            claims.append(not_measured(key, "no run is stored"))
            continue
        claims.append(graded(key, "first step with ≥ 90% accuracy for 1 / 2 / 3 / 4 hops: "
                             + "; ".join(text(run) for run in seeds),
                             [analysis.hop_accuracy(run.dynamics) for run in seeds]))
    return claims[0], claims[1]


def placement(runs: list[Run]) -> tuple[Claim, Claim, Claim]:
    """Figure 2C's claims on every run: the layers where the number and letter models' pure heads sit."""
    number = [run for run in runs if run.task == "number"]
    letter = [run for run in runs if run.task == "letter"]

    def pure(run: Run, role: str) -> set[int]:
        return set(analysis.pure_layers(run.dynamics, role))

    def order(run: Run, role: str) -> str:
        firsts = analysis.first_pure(run.dynamics, role)
        return " → ".join(f"L{layer} ({step})" for layer, step in sorted(firsts.items(), key=lambda item: item[1]))

    claims = []
    for key, role in (("number_positional_l0_l3", "positional"), ("number_symbolic_l4_l11", "symbolic")):
        measured = "; ".join(f"seed {run.seed}: pure {role} layers {layer_text(sorted(pure(run, role)))}, "
                             f"first pure at step: {order(run, role) or 'none'}" for run in number)
        claims.append(graded(key, measured or "—", {"pure": [pure(run, role) for run in number]}))
    # a pure positional layer counts as outside: the paper's letter model has none
    measured = "; ".join(f"seed {run.seed}: pure symbolic layers {layer_text(sorted(pure(run, 'symbolic')))}, pure "
                         f"positional {layer_text(sorted(pure(run, 'positional'))) or 'none'}" for run in letter)
    claims.append(graded("letter_symbolic_1_11", measured or "—",
                         {"pure": [pure(run, "symbolic") for run in letter],
                          "outside": [len(pure(run, "positional")) for run in letter]}))
    return claims[0], claims[1], claims[2]


def learning_section(runs: list[Run], config: ReportConfig) -> Section:
    section = Section("learning", "Learning dynamics (paper B, figure 2)",
                      "Accuracy per hop count, per-layer scores and pure-head counts over training, read from the "
                      "dynamics tables that training wrote (256 prompts scored per checkpoint), over the whole run "
                      "(6,750 steps of paper B's recipe). Seed 0 is the shipped model (its best-validation "
                      "checkpoint); other seeds are stored tables.")
    section.claims.extend(learning_order(runs))
    section.claims.extend(placement(runs))
    section.claims.extend(_index_flow(runs, config, section))
    section.claims.append(_gamma_robustness(runs, section))
    section.claims.append(_pure_before_convergence(runs))
    section.claims.append(_entropy_at_init(runs, config, section))
    for run in runs:
        if run.shipped is None:
            continue
        section.figures.append((f"{run.task}: accuracy per hop over training",
                                plotting.accuracy_by_hops(analysis.hop_accuracy(run.dynamics))))
        per_layer = plotting.learning_dynamics(run.dynamics, columns=("positional", "symbolic", "entropy"))
        section.figures.append((f"{run.task}: per-layer scores and attention entropy over training", per_layer))
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
    from psheads.rope.lens import RopeLens

    lens = RopeLens(model)
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


def _index_flow(runs: list[Run], config: ReportConfig, section: Section) -> tuple[Claim, Claim]:
    """Figure 3A's flow graded by paper B's reading (§3.2) and, apart, by psheads' reading of the later layers."""
    weights = shipped_number(runs)
    if weights is None:
        return (not_measured("index_flow", "no number model"), not_measured("index_flow_propagate", "no number model"))
    tokens = task_prompts(weights, config)
    flow = index_flow(weights.model, weights.task, tokens)
    section.figures.append(("Figure 3A: number model, mean attention along each Index hop, per layer",
                            plotting.hop_attention(flow)))
    table = flow.groupby(["hops", "step", "layer"])["attention"].mean().unstack("layer").round(3).reset_index()
    section.tables.append(("Figure 3A: number model, mean attention along each Index hop (rows: hop count, hop "
                           "from the query; columns: layers)", table.rename(columns=lambda c: f"L{c}" if
                                                                           isinstance(c, int) else c)))
    per_layer = flow.groupby("layer")["maximal"].mean()
    measured = ("share of hops whose target is the layer's most attended key: "
                + ", ".join(f"L{layer} {value:.2f}" for layer, value in per_layer.items())
                + f" ({flow['prompt'].nunique()} prompts)")
    return graded("index_flow", measured, flow), graded("index_flow_propagate", measured, flow)


def relabelled(dynamics: pd.DataFrame, gamma: float) -> pd.DataFrame:
    """A dynamics table with every head's label recomputed at ``gamma`` from its stored scores."""
    from psheads.measure.methods import label

    labels = [label(p, s, gamma) for p, s in zip(dynamics["positional"], dynamics["symbolic"], strict=True)]
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
        return not_measured("purity_gamma", "no run is stored")
    return graded("purity_gamma", "final pure heads at γ = 0.1 → 0.05 (labels recomputed from the stored scores): "
                  + "; ".join(texts), finals)


def pure_before_convergence(dynamics: pd.DataFrame) -> tuple[int | None, float]:
    """The first checkpoint with accuracy ≥ ``CONVERGED``, and the share of the layers pure at the end
    (positional or symbolic) that are already pure there (from ``analysis.first_pure``; NaN when no
    layer is pure at the end, so there is nothing to time)."""
    wide = dynamics.drop_duplicates("step").set_index("step").sort_index()
    reached = wide.index[wide["accuracy_all"] >= CONVERGED]
    if not len(reached):
        return None, 0.0
    converged = int(reached.min())
    firsts = {**analysis.first_pure(dynamics, "positional"), **analysis.first_pure(dynamics, "symbolic")}
    share = sum(step <= converged for step in firsts.values()) / len(firsts) if firsts else float("nan")
    return converged, share


def _pure_before_convergence(runs: list[Run]) -> Claim:
    rows = [(run, *pure_before_convergence(run.dynamics)) for run in runs]
    if not rows:
        return not_measured("pure_before_convergence", "no run is stored")
    measured = "; ".join(f"{run.task} seed {run.seed}: " + ("never converged" if step is None else
                         f"converged at step {step} with no pure layer at the end" if pd.isna(share) else
                         f"converged at step {step} with {share:.0%} of its final pure layers already pure")
                         for run, step, share in rows)
    return graded("pure_before_convergence", measured, [(step, share) for _, step, share in rows])


def _entropy_at_init(runs: list[Run], config: ReportConfig, section: Section) -> Claim:
    import tempfile

    from psheads.measure.scoring import score_heads
    from psheads.models import checkpoints, training, zoo
    from psheads.tasks import checked_batch, task_tokenizer

    rows = []
    for run in runs:
        if run.shipped is None:
            continue
        task = run.shipped.task  # the task it was trained on (its recorded options)
        # the untrained model of the run's seed, booted as trained ones are
        with tempfile.TemporaryDirectory() as folder:
            checkpoints.save_model(training.build_model(task, training.TrainConfig(seed=run.seed)), folder)
            task_tokenizer(task).save_pretrained(folder)
            booted = zoo.boot_local(folder)
        tokens = checked_batch(task, config.prompts, seed=config.seed).tokens
        at_init = score_heads(booted, tokens, progress=False)["entropy"]
        trained = run.dynamics[run.dynamics["step"] == _weights_step(run)]["entropy"]
        rows.append({"task": run.task, "initialisation: min": at_init.min(), "initialisation: median": at_init.median(),
                     "trained: min": trained.min(), "trained: median": trained.median()})
    if not rows:
        return not_measured("entropy_at_init", "no shipped model")
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
    from psheads.measure.scoring import swap_attention
    from psheads.tasks import checked_batch

    assert run.shipped is not None  # learning_section draws runs with weights only
    final = run.dynamics[run.dynamics["step"] == _weights_step(run)]
    column = "positional" if run.task == "number" else "symbolic"
    best = final.loc[(final[column] - final["positional" if column == "symbolic" else "symbolic"]).idxmax()]
    prompt = checked_batch(run.shipped.task, 1, seed=0).tokens[0]
    swaps = swap_attention(run.shipped.model, prompt, int(best["layer"]), int(best["head"]))
    return (f"{run.task}: attention of L{int(best['layer'])}H{int(best['head'])} (its most {column} head) on one "
            "prompt, before and after its dominant swap", plotting.attention_under_swap(swaps))
