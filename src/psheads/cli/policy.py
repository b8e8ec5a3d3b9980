"""``psheads policy``: psheads' head map as a KV-cache policy (``psheads.policy``) and its evaluation
(``evaluate_policies``); the evaluation's options are ``PolicyEvaluationConfig``'s fields."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from psheads.cli import common
from psheads.cli.fields import add_option, config_fields, config_values
from psheads.cli.options import LLM_NAMES, add_force, add_model_options, command, positive_int, seed

CONFIG = config_fields("psheads.experiments.attention_policy", "PolicyEvaluationConfig")
"""``PolicyEvaluationConfig``'s fields: the source of ``--sink``, ``--recent``, ``--score-prompts``,
``--budgets``, ``--n-random``, ``--n-prompts`` and ``--seed``."""


def add(sub: Any) -> None:
    """Add ``policy`` to the sub-commands."""
    policy = command(sub, "policy", "psheads' head map as a KV-cache policy: the files serving stacks read, and "
                                    "its test against random maps and the anchors' criteria", run,
                     " Scores every head on prose at --length (a shipped task model: on its own task), ranks KV "
                     "heads by the largest symbolic score in each group and writes DuoAttention's pattern folder "
                     "(full_attention_heads.tsv, config.json), a 0/1 mask at --budget, HeadKV's head_scores.json and "
                     "policy.csv. --evaluate also runs the long-context tasks under every condition of the "
                     "pre-registered evaluation (psheads.experiments.policy_rules) and prints the verdicts; it "
                     "resumes from --out.")
    add_model_options(policy, f"a zoo LLM ({', '.join(LLM_NAMES)}), a shipped model (number, letter) or a local "
                              "Hugging Face model folder (run with SDPA attention)")
    policy.add_argument("--out", required=True, metavar="DIR", help="the policy folder (created if needed)")
    policy.add_argument("--budget", type=float, default=0.5, help="share of KV heads streamed in the files")
    add_option(policy, CONFIG["sink"], help="tokens at the start every streamed head keeps")
    add_option(policy, CONFIG["recent"], help="most recent tokens every streamed head keeps")
    policy.add_argument("--length", type=positive_int, default=2048, help="tokens per prompt (score at the length "
                                                                             "the policy will serve)")
    add_option(policy, CONFIG["score_prompts"], type=positive_int, metavar="N", help="prompts scored")
    policy.add_argument("--windows", choices=("uniform", "rope"), default="uniform",
                        help="uniform windows, or per-head windows from RoPE wavelengths at the same total KV")
    policy.add_argument("--evaluate", action="store_true", help="also run the evaluation (long: hours on a CPU)")
    add_option(policy, CONFIG["budgets"], metavar="B", help="budgets of the evaluation")
    add_option(policy, CONFIG["n_random"], metavar="N", help="random maps per budget (--evaluate)")
    add_option(policy, CONFIG["n_prompts"], type=positive_int, metavar="N", help="prompts per task (--evaluate)")
    add_option(policy, CONFIG["seed"], type=seed, help="seed of the prompts and random maps")
    add_force(policy)


def run(args: argparse.Namespace) -> int:
    """Score the model at one length, write its policy files (and with --evaluate, the evaluation's tables)."""
    import torch

    import psheads.policy as policies
    from psheads.experiments.attention_policy import PolicyEvaluationConfig, evaluate_policies, write_tables
    from psheads.interface.atomic import write_atomic
    from psheads.models import zoo
    from psheads.policy.head_policy import check_settings
    from psheads.tasks.long_context import FromTask, register_long_context_task

    with common.as_usage():
        settings = check_settings(args.sink, args.recent, args.budget)
    out = Path(args.out)
    common.check_writable(args.out, "--out")
    written = [out / name for name in POLICY_FILES if (out / name).exists()]
    if written and not args.force:
        raise common.CommandError(f"--out {out} already holds {', '.join(p.name for p in written)}; pass --force to "
                                  "overwrite, or choose another folder")
    task = common.model_task(args.model)
    defaults = PolicyEvaluationConfig()
    tasks: tuple[str, ...] = defaults.tasks
    score_on, conditions = "prose", defaults.conditions
    if task is not None:  # a model trained on a task: its own prompts, at the length asked
        register_long_context_task(FromTask(task), replace=True)
        tasks, score_on = (task.name,), task.name
        conditions = tuple(c for c in conditions if c not in ("retrieval", "razor", "beyond-window"))
    with common.as_usage():  # every setting checked before the model loads
        config = PolicyEvaluationConfig(**config_values(args, CONFIG, "budgets", "n_random", "n_prompts",
                                                        "score_prompts", "seed"),
                                        lengths=(args.length,), tasks=tasks, sink=settings[0], recent=settings[1],
                                        perplexity=task is None, score_on=score_on, conditions=conditions)
    device, dtype = common.checked_device(args), getattr(torch, args.dtype)
    with common.loader_output(args.quiet):
        if args.model in zoo.PRETRAINED or args.model in zoo.LLMS:
            loaded = zoo.load_pretrained(args.model, dtype=dtype, device=str(device), backend="transformers")
            model, tokenizer = loaded.model, loaded.tokenizer
        else:
            import transformers

            model = zoo.boot_local(args.model, dtype=dtype, device=str(device), backend="transformers")
            tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    scoring = policy_prompts(model, tokenizer, config)
    policy = policies.make_policy(model, scoring, sink=settings[0], recent=settings[1], budget=settings[2],
                                  windows=args.windows, progress=common.progress(args),
                                  provenance={"prompts": score_on, "length": args.length})
    policies.write_duo_folder(policy, out)
    policies.write_mask(policy, out / "mask.tsv")
    policies.write_head_scores(policy, out / "head_scores.json")
    write_atomic(out / "policy.csv", policy.frame().to_csv(index=False))
    streamed = policy.streamed()
    full = policies.kv_bytes(policy, 8192, budget=0.0)
    print(f"{policy!r}\nstreamed at {settings[2]:.0%}: {int(streamed.sum())} of {streamed.size} KV heads; KV kept at "
          f"8,192 tokens {policies.kv_bytes(policy, 8192) / full:.1%} of full attention's")
    print(f"wrote {', '.join(POLICY_FILES)} to {out}")
    if args.evaluate:
        result = evaluate_policies(model, tokenizer, config, model_name=args.model, progress=common.progress(args),
                                   resume=out / "evaluation" / "rows.jsonl")
        write_tables(result, out / "evaluation")
        print(result.grades()[["goal", "verdict", "detail"]].to_string(index=False))
        print(f"wrote the evaluation to {out / 'evaluation'}")
    return 0


POLICY_FILES = ("full_attention_heads.tsv", "config.json", "mask.tsv", "head_scores.json", "policy.csv")
"""What ``psheads policy`` writes into ``--out``."""


def policy_prompts(model: Any, tokenizer: Any, config: Any) -> Any:
    """The prompts the map is scored on: prose windows at the length, or the model's own task's prompts."""
    import psheads.data as data
    from psheads.experiments.atlas import natural_prompts
    from psheads.tasks.long_context import long_context_task

    length = config.lengths[0]
    with common.as_usage():
        if config.score_on == "prose":
            return natural_prompts(tokenizer, data.path("prose.txt").read_text(encoding="utf-8"), length,
                                   config.score_prompts + 1)[1:]
        return long_context_task(config.score_on).generate(tokenizer, length, config.score_prompts,
                                                           seed=config.seed + 2000).tokens
