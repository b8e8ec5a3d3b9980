"""Train more seeds of the number and letter models with paper B's recipe unchanged, and store their
learning-dynamics and evaluation tables for the reproduction report (src/psheads/data/tables/seeds/).

Each run resumes what its folder already holds, so an interrupted call loses at most one checkpoint
interval. Only the tables are stored (the weights stay in the runs folder).

    HF_HUB_OFFLINE=1 python scripts/train_seeds.py --seeds 1 2 --runs runs/seeds   # ~30 min per run, 2 cores
    HF_HUB_OFFLINE=1 torchrun --nproc-per-node 2 scripts/train_seeds.py --seeds 1 2   # two runs at a time
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import psheads
from psheads.data import TABLES
from psheads.interface.distributed import is_main, ordered_map

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tasks", nargs="+", default=["number", "letter"], choices=["number", "letter"])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "seeds", help="run folders (checkpoints)")
    parser.add_argument("--out", type=Path, default=TABLES / "seeds", help="where the tables go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def run(cell: tuple[int, str]) -> str:  # one seed of one task, on whichever rank takes it
        seed, task = cell
        result = psheads.train(task, psheads.TrainConfig(seed=seed), args.runs / f"{task}-seed{seed}")
        for table in ("dynamics", "evaluation"):
            shutil.copy2(result.output_dir / f"{table}.csv", args.out / f"{task}_seed{seed}_{table}.csv")
        final = result.evaluation[result.evaluation["step"] == result.evaluation["step"].max()]
        accuracy = final.set_index(final["hops"].astype(str))["accuracy"]
        return (f"{task} seed {seed}: accuracy {accuracy.get('all', float('nan')):.4f} at step "
                f"{int(final['step'].iloc[0])}")

    # under torchrun the ranks take the runs in turn; rank 0 prints every run's line, in order
    for line in ordered_map(run, [(seed, task) for seed in args.seeds for task in args.tasks]):
        if is_main():
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
