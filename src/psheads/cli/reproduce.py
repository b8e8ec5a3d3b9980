"""``psheads reproduce``: the reproduction report (``psheads.reproduction.report``); ``--data``,
``--prompts`` and ``--seed`` are ``ReportConfig``'s fields."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from psheads.cli import common
from psheads.cli.fields import add_option, config_fields, config_values
from psheads.cli.options import add_force, command, positive_int, seed

CONFIG = config_fields("psheads.reproduction.report.inputs", "ReportConfig")
"""``ReportConfig``'s fields: the source of ``--data``, ``--prompts`` and ``--seed``."""


def add(sub: Any) -> None:
    """Add ``reproduce`` to the sub-commands."""
    reproduce = command(sub, "reproduce", "one self-contained HTML report of both papers' claims beside psheads' "
                                          "measurements", run,
                        " Measures the shipped models live and reads the stored tables of the long experiments "
                        "(about a minute on a 2-core CPU). Prints one line per claim.")
    reproduce.add_argument("--out", default="report.html", metavar="FILE", help="the HTML report (opens offline)")
    add_force(reproduce)
    reproduce.add_argument("--full", action="store_true",
                           help="retrain both models first with paper B's recipe, as the shipped number and letter "
                                "models were (about 40 minutes each on a 2-core CPU; resumes), and report on their "
                                "best-validation checkpoints instead of the shipped ones")
    reproduce.add_argument("--runs", default="runs/reproduce", metavar="DIR", help="where --full trains")
    add_option(reproduce, CONFIG["data"], metavar="DIR")
    add_option(reproduce, CONFIG["prompts"], type=positive_int)
    add_option(reproduce, CONFIG["seed"], type=seed)


def run(args: argparse.Namespace) -> int:
    """Build the report, write it and print one line per claim."""
    common.check_html(args.out, "--out", args.force)
    if args.data is not None and not Path(args.data).is_dir():
        raise common.CommandError(f"--data {args.data}: no such folder")
    from psheads.reproduction import report

    with common.as_usage():
        config = report.ReportConfig(**config_values(args, CONFIG, "data", "prompts", "seed"),
                                     retrain=args.runs if args.full else None)
    with common.loader_output(args.quiet):  # the report boots the shipped models and the theory constructions
        built = report.reproduce(config, progress=common.progress(args))
    if common.main_rank():
        built.write(args.out)
    summary = built.summary()
    counts = summary["verdict"].value_counts()
    print(f"wrote the report to {args.out} ({len(summary)} claims: "
          + ", ".join(f"{verdict} {int(counts[verdict])}" for verdict in report.VERDICT_COLORS if verdict in counts)
          + ")")
    print(summary[["paper", "source", "verdict", "measured"]].to_string(index=False, max_colwidth=90))
    return 0
