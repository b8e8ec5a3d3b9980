"""Print the numbers behind docs/science.md from the shipped models (offline, ~1 minute).

Usage: python scripts/science_report.py [--prompts 1024]
"""

from __future__ import annotations

import argparse

import pandas as pd

from psheads import RopeLens, frequency_profile, load_pretrained, score_heads
from psheads.reproduction.references import PAPER_B_TABLE_1
from psheads.results.analysis import learned_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=1024)
    parser.add_argument("--tasks", nargs="+", default=["number", "letter"])
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    for name in args.tasks:
        shipped = load_pretrained(name)
        lens = RopeLens(shipped.model)
        prompts = shipped.task.generate(args.prompts, seed=2024).tokens
        scores = score_heads(lens, prompts, progress=False)
        profile = frequency_profile(lens, prompts, progress=False).heads
        paper_b_style = frequency_profile(lens, prompts, progress=False, weighting="softmax", scale=False).heads
        table = scores[["layer", "positional", "symbolic", "positional_std", "symbolic_std", "entropy", "label"]].copy()
        table["dominant_plane"] = profile["dominant_plane"].to_numpy()
        table["mean_frequency_id"] = profile["mean_frequency_id"].round(1).to_numpy()
        table["softmax_id"] = paper_b_style["mean_frequency_id"].round(1).to_numpy()
        table["paper_B_id"] = PAPER_B_TABLE_1[name]
        print(f"\n===== {name}: shipped accuracy =====")
        print(shipped.evaluation.to_string(index=False))
        print(f"\n===== {name}: heads of the shipped model ({args.prompts} prompts) =====")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        record = shipped.dynamics
        evaluation = record.groupby("step")[[c for c in record.columns if c.startswith("accuracy_")]].first()
        print(f"\n===== {name}: accuracy per hop over training =====")
        print(evaluation.to_string(float_format=lambda x: f"{x:.3f}"))
        for threshold in (0.5, 0.9, 0.99):
            print(f"first checkpoint with accuracy ≥ {threshold}: {learned_at(record, threshold)}")
        labels = record.pivot_table(index="step", columns="layer", values="label", aggfunc="first")
        print(f"\n===== {name}: labels per layer over training (dynamics prompts) =====")
        print(labels.to_string())


if __name__ == "__main__":
    main()
