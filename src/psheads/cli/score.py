"""``psheads score``: positional and symbolic scores of every head (``score_heads``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from psheads.cli import common
from psheads.cli.fields import add_option, config_fields
from psheads.cli.options import add_prompt_options, command, positive_int

CONFIG = config_fields("psheads.measure.methods.base", "ScoreConfig")
"""``ScoreConfig``'s fields: the source of ``--method``, ``--by-frequency``, ``--precision``,
``--layers`` and ``--batch-size``."""

OWN_FLAGS = {"method": "--method", "by_frequency": "--by-frequency", "precision": "--precision",
             "batch_size": "--batch-size", "layers": "--layers", "prepend_bos": "--no-bos"}
"""Settings ``psheads score`` takes as flags of their own: ``--option`` may not set them too."""


def add(sub: Any) -> None:
    """Add ``score`` to the sub-commands."""
    score = command(sub, "score", "positional and symbolic scores of every head", run,
                    " Prints one row per head; --out writes every column.")
    add_prompt_options(score, CONFIG)
    add_option(score, CONFIG["method"],
               help="score method: swap (paper B's swap score), anova (all-permutation shares) or one an installed "
                    "package declares (entry-point group psheads.score_methods)")
    score.add_argument("--block-size", type=positive_int, metavar="B",
                       help="positions per swapped block (method swap; default 1)")
    score.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                       help="an option of the score method (repeatable), e.g. --option tau=1e-3; values are read as "
                            "JSON (numbers, true/false), else as text; the frame's attrs record them")
    add_option(score, CONFIG["by_frequency"], help="score every RoPE plane as its own head (adds the plane and theta "
                                                   "columns)")
    add_option(score, CONFIG["precision"], metavar="{auto,float64,float32}",
               help="dtype of the score arithmetic: auto (float64 on a CPU and on GPUs with full-rate float64, "
                    "float32 on consumer GPUs and MPS), float64 or float32 (averaged scores within 1e-5 of "
                    "float64, one prompt's swap scores within 3e-4)")


def method_options(pairs: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """``--option NAME=VALUE`` pairs as a dict; a value is read as JSON (a number, true, false, a list)
    when it parses, as text otherwise. ``--block-size`` joins them.

    Raises:
        ValueError: a malformed pair, a name given twice, a setting with a flag of its own, or
            ``block_size`` given both ways with different values.
    """
    options: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--option takes NAME=VALUE (an option of the score method, e.g. tau=1e-3), got {pair!r}.")
        if name in texts:
            raise ValueError(f"--option {name} is given twice ({texts[name]}, then {text}): give it once.")
        if name in OWN_FLAGS:
            raise ValueError(f"--option {pair} sets what {OWN_FLAGS[name]} sets: use {OWN_FLAGS[name]} (--option "
                             "takes the score method's own options, e.g. tau=1e-3).")
        texts[name] = text
        try:
            options[name] = json.loads(text)
        except json.JSONDecodeError:
            options[name] = text
    if args.block_size is not None:
        if "block_size" in options and options["block_size"] != args.block_size:
            raise ValueError(f"--option block_size={texts['block_size']} and --block-size {args.block_size} both set "
                             "block_size: give it once.")
        options["block_size"] = args.block_size
    return options


def run(args: argparse.Namespace) -> int:
    """Score every head and print the frame (without ``kv_head``)."""
    common.check_out(args.out, args.force)  # first: a wrong extension fails before torch is imported
    from psheads.measure.scoring import ScoreConfig, score_heads

    with common.as_usage():
        config = ScoreConfig().replace(method=args.method, by_frequency=args.by_frequency, precision=args.precision,
                                       **method_options(args.option, args), **common.prompt_config_options(args))
    source, device = common.prompt_source(args), common.checked_device(args)
    common.check_layers(args)
    model = common.load_model(args.model, args.dtype, device, args.quiet)
    frame = score_heads(model, common.prompts_for(source, model, args), config, progress=common.progress(args))
    common.write_frame(frame, args.out)
    shown = [name for name in frame.columns if name != "kv_head"]  # a method's own columns included
    print(frame[shown].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0
