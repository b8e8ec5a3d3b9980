"""Theorem 3.1's constructions measured: accuracy and discrepancy against Theorem 3.2 (docs/theory.md).

Builds the Index and Retrieval constructions (``psheads.theory.construct``) for n0 = 16 over 8
letters, evaluates their accuracy at n0 and beyond with ``psheads.evaluate``, measures their
discrepancy on sampled prompts with ``psheads.discrepancy`` and writes, next to the
exact worst case and Theorem 3.2's bounds:

- ``src/psheads/data/tables/theory_accuracy.csv``: construction, length, accuracy, n, chance;
- ``src/psheads/data/tables/theory_discrepancy.csv``: construction, length, sampled Δ (normalised), exact worst
  case, lower and upper bound, sampled Δ in logits, β.

    HF_HUB_OFFLINE=1 python scripts/theory_tables.py          # about a minute on a busy 2-core CPU
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

import psheads
from psheads import discrepancy
from psheads.data import TABLES
from psheads.models import theory

LENGTHS = (2, 3, 8, 16, 17, 18, 24, 32, 33, 34, 40, 48)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n0", type=int, default=16)
    parser.add_argument("--n", type=int, default=512, help="prompts per length")
    parser.add_argument("--out", type=Path, default=TABLES)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    accuracy, margins = [], []
    for kind in theory.CONSTRUCTIONS:
        construction = theory.construct(kind, n0=args.n0)
        tasks = [construction.config.task(length) for length in LENGTHS]
        for task in tasks:
            row = psheads.evaluate(construction.model, task, n=args.n, seed=0, batch_size=args.n).iloc[-1]
            accuracy.append({"construction": kind, "length": task.length, "accuracy": row["accuracy"],
                             "n": int(row["n"]), "chance": row["chance"]})
        frame = discrepancy(construction.model, construction.task, lengths=LENGTHS, n=args.n, seed=0,
                            batch_size=args.n)
        for row in frame.itertuples():
            bound = construction.bound(row.length)
            margins.append({"construction": kind, "length": row.length, "sampled": row.normalised,
                            "exact": construction.margin(row.length),
                            "lower": float("nan") if bound.lower is None else bound.lower, "upper": bound.upper,
                            "sampled_logits": row.discrepancy, "beta": construction.beta,
                            "theta": construction.theta})
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(accuracy).to_csv(args.out / "theory_accuracy.csv", index=False)
    table = pd.DataFrame(margins)
    table.to_csv(args.out / "theory_discrepancy.csv", index=False, float_format="%.6g")
    print(pd.DataFrame(accuracy).pivot(index="length", columns="construction", values="accuracy").to_string())
    print(table.drop(columns=["beta", "theta"]).to_string(index=False))
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
