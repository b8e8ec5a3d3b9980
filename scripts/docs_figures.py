"""The figures of the Length generalization and Frequencies and causality pages, drawn from the
shipped tables (no model runs).

Reads the shipped curves (``psheads/pretrained/<model>/length_generalization.csv``), the tables of
``scripts/why_number_fails.py``, ``scripts/causal_tests.py`` and ``scripts/gating_sweep.py`` in
``docs/data``, and writes standalone HTML figures there (plotly.js from its CDN):

- ``lengthgen_curves.html``: accuracy against length per hop count, one panel per model;
- ``lengthgen_discrepancy.html``: the normalised worst-case margin of the answer's key against
  length, for the number model's positional layers 1–4 and the letter model's layer 0;
- ``causal_tests.html``: accuracy per hop count under each intervention, one panel per model;
- ``gating_sweep.html``: accuracy of the gated models, task × frequency band.

    python scripts/docs_figures.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

import psheads
from psheads.zoo import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
HEADS = {"number": [1, 2, 3, 4], "letter": [0]}
"""Layers drawn in the discrepancy figure: the number model's positional layers, the letter model's 1-hop layer."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "docs" / "data")
    args = parser.parse_args(argv)

    curves = pd.concat([pd.read_csv(PRETRAINED_DIR / name / "length_generalization.csv", dtype={"hops": str})
                        .assign(model=name) for name in ("number", "letter")], ignore_index=True)
    figure = psheads.plotting.accuracy_vs_length(curves)
    figure.update_layout(title="Shipped models on lengthened prompts (argmax over the answer vocabulary)")
    figure.write_html(args.data / "lengthgen_curves.html", include_plotlyjs="cdn")

    margins = pd.read_csv(args.data / "lengthgen_discrepancy.csv")
    chosen = pd.concat([margins[(margins["model"] == name) & margins["layer"].isin(layers)]
                        for name, layers in HEADS.items()])
    figure = psheads.plotting.discrepancy_vs_length(chosen)
    figure.update_xaxes(type="log")
    figure.update_layout(title="Worst-case margin of the answer's key, 1-hop prompts (64 per length)",
                         legend_title="model, head")
    figure.write_html(args.data / "lengthgen_discrepancy.html", include_plotlyjs="cdn")

    causal = pd.read_csv(args.data / "causal_tests.csv", dtype={"hops": str})
    psheads.plotting.accuracy_under_ablation(causal).write_html(args.data / "causal_tests.html",
                                                                include_plotlyjs="cdn")
    sweep = pd.read_csv(args.data / "gating_sweep.csv")
    psheads.plotting.accuracy_by_band(sweep).write_html(args.data / "gating_sweep.html", include_plotlyjs="cdn")


if __name__ == "__main__":
    main()
