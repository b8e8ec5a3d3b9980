"""The report's section on frequency use per layer (paper B, table 1 and figures 4B–C and 8): both
frequency IDs beside table 1, and the dominant plane's geometry in the number model's layer 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

import psheads.plotting as plotting
from psheads.reproduction import rules
from psheads.reproduction.references import PUBLISHED
from psheads.reproduction.report.claims import Claim, Section, graded, not_measured
from psheads.reproduction.report.inputs import TASKS, ReportConfig, Run, shipped_number, task_prompts
from psheads.reproduction.rules.frequencies import plane_fit


def frequency_table(runs: list[Run], config: ReportConfig) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Per shipped model and layer: both frequency IDs (usage-weighted, paper B's softmax) and table 1;
    and per model the per-plane frame of paper B's definition (``max_logit`` without the scale)."""
    from psheads.measure.frequency_profile import frequency_profile

    rows, planes = [], {}
    for run in runs:
        if run.shipped is None:
            continue
        tokens = task_prompts(run.shipped, config)
        usage = frequency_profile(run.shipped.model, tokens, progress=False).heads
        profile = frequency_profile(run.shipped.model, tokens, progress=False, weighting="softmax", scale=False)
        softmax, planes[run.task] = profile.heads, profile.planes
        paper = PUBLISHED[f"frequency_id_{run.task}"].value
        for layer, usage_id, softmax_id, dominant in zip(usage["layer"], usage["mean_frequency_id"],
                                                         softmax["mean_frequency_id"], usage["dominant_plane"],
                                                         strict=True):
            rows.append({"task": run.task, "layer": layer, "usage-weighted ID": usage_id,
                         "softmax ID (paper B's definition)": softmax_id,
                         "paper B table 1": paper[layer] if layer < len(paper) else np.nan,
                         "dominant plane": dominant})
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
            section.claims.append(not_measured(f"frequency_id_{task}", f"no {task} model"))
            continue
        ours = rows["softmax ID (paper B's definition)"].to_numpy()
        outcome = rules.RULES[f"frequency_id_{task}"].grade(ours)
        section.claims.append(graded(f"frequency_id_{task}", "softmax ID per layer (paper B's definition): "
                                     + ", ".join(f"{value:.1f}" for value in ours) + f"; {outcome.detail}",
                                     ours))
    return section


def plane_geometry(model: Any, tokens: Any, layer: int, plane: int, head: int = 0) -> pd.DataFrame:
    """One head's logits on one plane at the last token, against each key's distance from it, with
    each prompt's ``plane_fit``: one row per prompt and key (``prompt, offset, logit, fit, r2, peak,
    attended``; ``attended`` marks the key with the head's largest logit over all planes)."""
    from psheads.rope.lens import RopeLens

    lens = RopeLens(model)
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
    weights = shipped_number(runs)
    if weights is None or planes is None:
        return not_measured("layer_1_geometry", "no number model")
    plane = dominant_plane(planes, 1)
    tokens = task_prompts(weights, config)
    frame = plane_geometry(weights.model, tokens, 1, plane)
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
                  f"(uncentred R²), peaking at distance {where:.2f} (median over {len(per_prompt)} prompts); "
                  f"the plane's own largest logit is on the key the head attends to most in {routes:.0%} of prompts",
                  {"plane": plane, "fit": fit, "peak": where, "routes": routes})


def dominant_plane(planes: pd.DataFrame, layer: int) -> int:
    """The plane with the largest ``max_logit`` in ``layer`` of a ``frequency_profile(...).planes`` frame."""
    rows = planes[planes["layer"] == layer]
    return int(rows.loc[rows["max_logit"].idxmax(), "plane"])
