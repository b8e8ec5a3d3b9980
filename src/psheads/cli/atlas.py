"""``psheads atlas``: the cross-family atlas of the zoo LLMs (``write_atlas``); its options are
``AtlasConfig``'s fields."""

from __future__ import annotations

import argparse
from typing import Any

from psheads.cli import common
from psheads.cli.fields import add_option, config_fields, config_values
from psheads.cli.options import LLM_NAMES, command, positive_int, seed

CONFIG = config_fields("psheads.experiments.atlas", "AtlasConfig")
"""``AtlasConfig``'s fields: the source of every option but the models and ``--out``."""

OPTIONS: dict[str, dict[str, Any]] = {
    "lengths": {"type": positive_int, "metavar": "TOKENS"},
    "n_prompts": {"flag": "--n", "type": positive_int, "metavar": "N"},
    "plane_swap_lengths": {"type": positive_int, "nargs": "*", "metavar": "TOKENS"},
    "task_windows": {"type": positive_int, "metavar": "W"},
    "n_task_prompts": {"type": positive_int, "metavar": "N"},
    "seed": {"type": seed},
    "batch_size": {"type": positive_int, "metavar": "N"},
}
"""The ``AtlasConfig`` fields the command sets, in the order ``--help`` lists them, with what the
command line reads differently (the config checks every value when it is built)."""


def add(sub: Any) -> None:
    """Add ``atlas`` to the sub-commands."""
    atlas = command(sub, "atlas", "the cross-family atlas: every head of each zoo LLM on natural text, random tokens "
                                  "and the LLM task prompts", run,
                    " Writes one folder per model (heads.csv, planes.csv.gz, usage.csv.gz, frequency_id.csv, "
                    "atlas.json); a model whose folder is complete with the same settings is skipped, so an "
                    "interrupted run resumes.")
    atlas.add_argument("models", nargs="*", choices=[[], *LLM_NAMES], metavar="MODEL",
                       help=f"zoo LLMs to map (default: all of {', '.join(LLM_NAMES)})")
    atlas.add_argument("--out", required=True, metavar="DIR", help="the atlas folder")
    for name, overrides in OPTIONS.items():
        add_option(atlas, CONFIG[name], **overrides)


def run(args: argparse.Namespace) -> int:
    """Map every model asked (resuming); print each model's folder."""
    from psheads.experiments.atlas import AtlasConfig, write_atlas

    with common.as_usage():
        config = AtlasConfig(**config_values(args, CONFIG, *OPTIONS))
    common.check_writable(args.out, "--out")  # its parent must exist; the folder itself is created (or resumed)
    with common.loader_output(args.quiet):
        written = write_atlas(args.models or LLM_NAMES, args.out, config, progress=common.progress(args))
    for name, folder in written.items():
        print(f"{name}: {folder}")
    return 0
