"""``psheads lengthgen``: accuracy per prompt length and hop count (``length_generalization``)."""

from __future__ import annotations

import argparse
from typing import Any

from psheads.cli import common
from psheads.cli.options import OUT_HELP, add_force, add_mismatch_option, add_model_options, command, positive_int, seed

ANSWERS = ("task", "vocabulary")
"""``--answers`` choices (``psheads.experiments.lengthgen.Answers``)."""

TOKEN_BUDGET = 8192
"""``--token-budget`` default (``psheads.experiments.lengthgen.DEFAULT_TOKEN_BUDGET``)."""


def add(sub: Any) -> None:
    """Add ``lengthgen`` to the sub-commands."""
    lengthgen = command(sub, "lengthgen", "accuracy per prompt length and hop count (length generalization)", run)
    add_model_options(lengthgen, "a shipped model (number, letter) or a local Hugging Face model folder")
    lengthgen.add_argument("--lengths", type=positive_int, nargs="+", required=True, metavar="LENGTH",
                           help="total prompt lengths in tokens, from the task's base prompt (17 for the shipped "
                                "models) to the model's context")
    lengthgen.add_argument("--task", help="a registered multi-hop task (default: the model's own; the name of the "
                                          "model's own task gives it with its recorded options)")
    add_mismatch_option(lengthgen)
    lengthgen.add_argument("--n", type=positive_int, default=512, help="prompts per length")
    lengthgen.add_argument("--seed", type=seed, default=0, help="seed of every length's prompts")
    lengthgen.add_argument("--token-budget", type=positive_int, default=TOKEN_BUDGET, metavar="TOKENS",
                           help="tokens per forward pass (budget // length prompts at once, at least one)")
    lengthgen.add_argument("--answers", choices=ANSWERS, default="task",
                           help="argmax over the task's answer tokens or over the whole vocabulary")
    lengthgen.add_argument("--out", metavar="FILE", help=OUT_HELP)
    lengthgen.add_argument("--figure", metavar="FILE",
                           help="write accuracy against length to this HTML file (opens offline)")
    add_force(lengthgen)


def run(args: argparse.Namespace) -> int:
    """Measure the accuracy at every length; print it per hop count (and draw it with ``--figure``)."""
    common.check_out(args.out, args.force)
    common.check_html(args.figure, "--figure", args.force)
    from psheads.experiments.lengthgen import length_generalization

    task, device = common.chosen_task(args), common.checked_device(args)
    common.check_memory(args.n, 8 * (max(args.lengths) + 3))  # each length's prompts as int64 ids, at the least
    model = common.load_model(args.model, args.dtype, device, args.quiet)
    frame = length_generalization(model, task, args.lengths, n=args.n, seed=args.seed, token_budget=args.token_budget,
                                  answers=args.answers, progress=common.progress(args),
                                  allow_task_mismatch=args.allow_task_mismatch)
    common.write_frame(frame, args.out)
    if args.figure and common.main_rank():
        import psheads.plotting as plotting
        from psheads.interface.atomic import write_atomic

        # plotly.js inline: the page opens offline, at the cost of ~4 MB
        write_atomic(args.figure, plotting.accuracy_vs_length(frame).to_html(include_plotlyjs=True))
        print(f"wrote the figure to {args.figure}")
    table = frame.pivot(index="length", columns="hops", values="accuracy")
    print(f"accuracy of {args.model} on the {frame.attrs['task']} task ({args.n} prompts per length, seed {args.seed}, "
          f"argmax over {'the answer vocabulary' if args.answers == 'task' else 'the whole vocabulary'})")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    return 0
