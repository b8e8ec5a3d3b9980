"""Why the shipped number model fails at long lengths: where its heads attend on lengthened prompts.

For each shipped model (``number``, ``letter``) and prompt length, 1-hop prompts are lengthened with
``extra_target`` (the extra target-window tokens go before the effective window, so the query still
points at the same relative offset). At the query, every layer's attention is rebuilt from its
per-plane logits (``RopeLens.frequency_logits``, fp64; the sum over planes is the model's own
score) and compared with the key a 1-hop head must read: the answer's position. Per model, length
and layer the script writes

- ``answer_weight``: mean attention on the answer key;
- ``argmax_hit``: share of prompts whose most attended key is the answer key;
- ``entropy``: mean normalised attention entropy (0 one key, 1 uniform);
- ``miss_in_extra``: among misses, the share whose most attended key lies in the extra window;
- ``miss_offset_error``: among misses, the median |distance from the query − the answer's distance|;
- ``positional``, ``symbolic``: the layer's swap scores on the same prompts (``score_heads``);

and ``psheads.discrepancy`` of every head on the same 1-hop prompts (paper B's
figure 5A: the worst-case margin of the answer key over the other keys, normalised) in
``lengthgen_discrepancy.csv``.

The model's accuracy on such prompts, per hop count, is ``scripts/length_generalization.py``'s.

    HF_HUB_OFFLINE=1 python scripts/why_number_fails.py                 # about 10 min on 2 cores
    HF_HUB_OFFLINE=1 python scripts/why_number_fails.py --n 8 --lengths 17 145   # a quick check
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import pandas as pd
import torch

import psheads
from psheads import discrepancy
from psheads.data import TABLES

LENGTHS = (17, 33, 65, 145, 289, 529, 1041, 2065, 4113)


def attention_rows(lens: psheads.RopeLens, tokens: torch.Tensor, answer: torch.Tensor, first_effective: int,
                   batch_size: int) -> pd.DataFrame:
    """Per prompt and layer: attention at the query on the answer key, argmax, entropy."""
    rows = []
    query = tokens.shape[1] - 1
    for start in range(0, len(tokens), batch_size):
        chunk, target = tokens[start:start + batch_size], answer[start:start + batch_size]
        for layer, planes in lens.frequency_logits_by_layer(chunk):
            weights = torch.softmax(planes.sum(2)[:, 0], dim=-1)  # [batch, key]; one head per layer
            top = weights.argmax(-1)
            entropy = -(weights * weights.clamp_min(1e-300).log()).sum(-1) / math.log(query + 1)
            for row in range(len(chunk)):
                hit = int(top[row]) == int(target[row])
                rows.append({
                    "layer": layer,
                    "answer_weight": float(weights[row, target[row]]),
                    "argmax_hit": hit,
                    "entropy": float(entropy[row]),
                    "miss_in_extra": None if hit else int(top[row]) < first_effective,
                    "miss_offset_error": None if hit else abs(int(top[row]) - int(target[row])),
                })
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--n", type=int, default=64, help="1-hop prompts per model and length")
    parser.add_argument("--score-max-length", type=int, default=1041,
                        help="longest length at which score_heads also runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--token-budget", type=int, default=16384, help="prompt tokens per forward pass")
    parser.add_argument("--parts", nargs="+", choices=["attention", "discrepancy"],
                        default=["attention", "discrepancy"])
    parser.add_argument("--out", type=Path, default=TABLES)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)

    layers, margins, timings = [], [], {}
    for name in ("number", "letter"):
        shipped = psheads.load_pretrained(name)
        lens = psheads.RopeLens(shipped.model)
        base = psheads.tasks.with_hops(shipped.task, 1)
        for length in args.lengths:
            clock = time.time()
            batch_size = max(1, args.token_budget // length)
            if "discrepancy" in args.parts:
                margins.append(discrepancy(lens, base, [length], n=args.n, seed=args.seed, batch_size=batch_size,
                                           progress=False).assign(model=name))
            if "attention" not in args.parts:
                timings[f"{name} {length}"] = round(time.time() - clock, 1)
                print(f"{name:>6} {length:>5}: normalised margin by layer "
                      f"{margins[-1]['mean_normalised'].round(3).tolist()}", flush=True)
                continue
            task = psheads.tasks.at_length(base, length)
            batch = psheads.tasks.checked_batch(task, args.n, seed=args.seed)
            frame = attention_rows(lens, batch.tokens, batch.answer_positions, task.extra_target, batch_size)
            summary = frame.groupby("layer").agg(
                answer_weight=("answer_weight", "mean"), argmax_hit=("argmax_hit", "mean"),
                entropy=("entropy", "mean"), miss_in_extra=("miss_in_extra", lambda s: s.dropna().astype(float).mean()),
                miss_offset_error=("miss_offset_error", lambda s: s.dropna().median())).reset_index()
            if length <= args.score_max_length:
                scores = psheads.score_heads(lens, batch.tokens, batch_size=batch_size, progress=False)
                summary = summary.merge(scores[["layer", "positional", "symbolic"]], on="layer")
            layers.append(summary.assign(model=name, length=length))
            timings[f"{name} {length}"] = round(time.time() - clock, 1)
            print(f"{name:>6} {length:>5}: answer weight by layer {summary['answer_weight'].round(2).tolist()}  "
                  f"({timings[f'{name} {length}']} s)",
                  flush=True)

    first = ["model", "length", "layer"]
    for frames, file in ((layers, "lengthgen_attention.csv"), (margins, "lengthgen_discrepancy.csv")):
        if frames:
            table = pd.concat(frames, ignore_index=True)
            table[first + [c for c in table.columns if c not in first]].to_csv(args.out / file, index=False,
                                                                                float_format="%.4g")
    record = json.dumps({
        "script": "scripts/why_number_fails.py", "n": args.n, "seed": args.seed, "lengths": args.lengths,
        "parts": args.parts, "token_budget": args.token_budget, "score_max_length": args.score_max_length,
        "timings_s": timings, "versions": {"psheads": psheads.__version__, "torch": torch.__version__}}, indent=2)
    for part in args.parts:  # each table's record beside it (the timings cover every part run)
        (args.out / f"lengthgen_{part}.json").write_text(record)


if __name__ == "__main__":
    main()
