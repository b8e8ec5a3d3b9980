"""``psheads profile``: frequency usage of every head (``frequency_profile``)."""

from __future__ import annotations

import argparse
from typing import Any

from psheads.cli import common
from psheads.cli.fields import config_fields
from psheads.cli.options import add_prompt_options, command

CONFIG = config_fields("psheads.measure.frequency_profile", "ProfileConfig")
"""``ProfileConfig``'s fields: the source of ``--layers`` and ``--batch-size``."""


def add(sub: Any) -> None:
    """Add ``profile`` to the sub-commands."""
    profile = command(sub, "profile", "frequency usage of every head", run,
                      " Prints the dominant plane and mean frequency ID of every head; --out writes the usage "
                      "of every plane.")
    add_prompt_options(profile, CONFIG)


def run(args: argparse.Namespace) -> int:
    """Profile every head; print its dominant plane and mean frequency ID."""
    common.check_out(args.out, args.force)
    from psheads.measure.frequency_profile import ProfileConfig, frequency_profile
    from psheads.results import schema

    with common.as_usage():
        config = ProfileConfig().replace(**common.prompt_config_options(args))
    source, device = common.prompt_source(args), common.checked_device(args)
    common.check_layers(args)
    model = common.load_model(args.model, args.dtype, device, args.quiet)
    profile = frequency_profile(model, common.prompts_for(source, model, args), config,
                                progress=common.progress(args))
    common.write_frame(profile.planes, args.out)
    print(profile.heads[schema.PROFILE_HEADS.names].to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return 0
