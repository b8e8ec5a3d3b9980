"""Causal tests on the shipped models: knock out the number model's positional heads, or only their
fast planes, and do the same to the letter model (paper B's question: are the positional heads and
their fast planes what the number task needs, and only the number task?).

Boots both shipped models as users do (``psheads.load_pretrained``). The number model's positional
and symbolic heads are labelled by ``score_heads`` on the number task's own prompts (not hard-coded);
their dominant planes come from ``frequency_profile``. Every intervention is then run, with the same
layers and planes, on both models at the training length (17 tokens) on the same number of fresh
test prompts:

- ``positional heads``: mean-ablate the number model's positional heads;
- ``fast planes 1-4``: gate only planes 1–4 (the four fastest) of those heads' queries;
- ``slow planes F-3..F``: control, gate the four slowest planes of the same heads;
- ``symbolic heads``: mean-ablate the number model's symbolic heads;
- ``random heads``: control, mean-ablate as many heads drawn at random (seeded) from the other layers.

Writes ``src/psheads/data/tables/causal_tests.csv`` (model, intervention, layers, planes, hops, accuracy, n) and
``src/psheads/data/tables/causal_heads.csv`` (each model's labels and dominant planes per head), and prints both.

    python scripts/causal_tests.py                       # the docs' table (512 prompts, a few minutes on a CPU)
    python scripts/causal_tests.py --n 64 --out-dir /tmp/causal   # a quick check
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd

import psheads
from psheads.data import TABLES
from psheads.experiments.ablation import Intervention, ablate, heads_by_label, random_heads
from psheads.models.zoo import Pretrained
from psheads.rope.lens import as_lens

FAST_PLANES = (1, 2, 3, 4)
"""The fast planes removed: the four fastest (the positional heads' dominant planes are 1 and 2)."""
HOPS = ["1", "2", "3", "4", "all"]


def _interventions(number: Pretrained, scores: pd.DataFrame, seed: int) -> list[Intervention]:
    positional, symbolic = heads_by_label(scores, "positional"), heads_by_label(scores, "symbolic")
    if not positional:
        raise SystemExit("score_heads labels no head of the number model positional: nothing to remove.")
    lens = as_lens(number.model)
    slowest = lens.layers[positional[0][0]].layout.n_planes
    chosen = [
        Intervention("positional heads", positional),
        Intervention("fast planes 1-4", positional, planes=FAST_PLANES),
        Intervention(f"slow planes {slowest - 3}-{slowest}", positional, planes=range(slowest - 3, slowest + 1)),
    ]
    if symbolic:
        chosen.append(Intervention("symbolic heads", symbolic))
    chosen.append(Intervention("random heads", random_heads(lens, len(positional), seed=seed, exclude=positional)))
    return chosen


def _describe(intervention: Intervention | None) -> tuple[str, str]:
    """The ``layers`` and ``planes`` cells of an intervention's rows (the shipped models have one head per layer);
    ``planes`` is ``all`` for a whole head; both are empty for the baseline."""
    if intervention is None:
        return "", ""
    layers = " ".join(str(layer) for layer in intervention.layers)
    planes = "all" if intervention.planes is None else " ".join(str(plane) for plane in intervention.planes)
    return layers, planes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="test prompts per intervention (and prompts scored)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the test prompts")
    parser.add_argument("--score-seed", type=int, default=1, help="seed of the prompts score_heads labels heads on")
    parser.add_argument("--control-seed", type=int, default=0, help="seed of the random-heads control")
    parser.add_argument("--out-dir", type=Path, default=TABLES)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    models = {name: psheads.load_pretrained(name) for name in ("number", "letter")}
    head_rows, scores = [], {}
    for name, pretrained in models.items():
        prompts = pretrained.task.generate(args.n, seed=args.score_seed).tokens
        scores[name] = psheads.score_heads(pretrained.model, prompts, progress=False)
        profile = psheads.frequency_profile(pretrained.model, prompts, progress=False)
        fast = profile.planes[profile.planes["plane"].isin(FAST_PLANES)].groupby(["layer", "head"])["usage"].sum()
        frame = scores[name][["layer", "head", "positional", "symbolic", "label"]].merge(
            profile.heads[["layer", "head", "dominant_plane"]], on=["layer", "head"])
        frame["usage_planes_1_4"] = [float(fast[(layer, head)])
                                     for layer, head in zip(frame["layer"], frame["head"], strict=True)]
        frame.insert(0, "model", name)
        head_rows.append(frame)
    heads = pd.concat(head_rows, ignore_index=True)
    chosen = _interventions(models["number"], scores["number"], args.control_seed)
    by_name = {intervention.name: intervention for intervention in chosen}
    frames = []
    for name, pretrained in models.items():
        frame = ablate(pretrained.model, pretrained.task, chosen, n=args.n, seed=args.seed, progress=False)
        cells = [_describe(by_name.get(each)) for each in frame["intervention"]]
        frame.insert(0, "model", name)
        frame.insert(2, "layers", [layers for layers, _ in cells])
        frame.insert(3, "planes", [planes for _, planes in cells])
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out_dir / "causal_tests.csv", index=False, float_format="%.4f")
    heads.to_csv(args.out_dir / "causal_heads.csv", index=False, float_format="%.4f")
    pd.set_option("display.width", 200)
    print(heads.to_string(index=False, float_format="%.3f"))
    print()
    wide = table.pivot_table(index=["model", "intervention", "layers", "planes"], columns="hops", values="accuracy",
                             sort=False)[HOPS]
    print(wide.to_string(float_format="%.3f"))
    print(f"\n{args.n} test prompts per row (seed {args.seed}); heads labelled on {args.n} prompts "
          f"(seed {args.score_seed}); {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
