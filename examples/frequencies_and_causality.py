"""Do the number model's positional heads, and the fast planes they read, carry the number task?

Labels the shipped number model's heads with ``score_heads``, then gates planes 1–4 of its
positional heads (and, as a control, planes 61–64) and measures accuracy per hop count with
``psheads.ablate``. The same gates go on the same layers of the letter model, whose early layers
are symbolic. ``scripts/causal_tests.py`` runs the full set of interventions behind the docs.

    python examples/frequencies_and_causality.py
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402

import psheads  # noqa: E402
from psheads.experiments.ablation import Intervention, heads_by_label  # noqa: E402


def main(n: int = 256) -> pd.DataFrame:
    """Accuracy over all hop counts: ``model × intervention``, on ``n`` fresh prompts per model."""
    number = psheads.load_pretrained("number")
    scores = psheads.score_heads(number.model, number.task.generate(n, seed=1).tokens)
    positional = heads_by_label(scores, "positional")
    print("positional heads of the number model (layer, head):", positional)
    interventions = [Intervention("fast planes 1-4", positional, planes=[1, 2, 3, 4]),
                     Intervention("slow planes 61-64", positional, planes=[61, 62, 63, 64])]
    frames = []
    for name in ("number", "letter"):
        shipped = number if name == "number" else psheads.load_pretrained(name)
        frame = psheads.ablate(shipped.model, shipped.task, interventions, n=n, seed=0)
        frames.append(frame.assign(model=name))
    table = pd.concat(frames).query("hops == 'all'").pivot(index="intervention", columns="model", values="accuracy")
    print(table.round(3).to_string())
    return table


if __name__ == "__main__":
    main()
