"""Command line: ``psheads demo | score | profile | lengthgen | train | reproduce | atlas | policy``.
Thin: parse, check, call the library, print.

One module per command (``score``, ``train``, …: its options in ``add``, what it runs in ``run``);
the parser's shared parts in ``options``; options that mirror a config dataclass generated from its
fields in ``fields``; the checks, loading and running that commands share in ``common``. Nothing
heavy is imported at module level, so ``--help``, ``--version`` and argparse's errors start in a
fraction of the time of ``import torch``. Each command imports what it needs, checks every option
it can before it loads a model (``UsageError``: exit 2; ``CommandError``: exit 1), then runs. A new
command is one module with ``add`` and ``run``, listed in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

from psheads.cli import atlas, common, demo, lengthgen, policy, profile, reproduce, score, train
from psheads.cli.options import EXIT_STATUS, HelpFormatter
from psheads.interface.version import __version__

logger = logging.getLogger(__name__)

DESCRIPTION = """\
Find out which attention heads of a rotary-position (RoPE) transformer act positionally (they
attend by where a token stands) and which act symbolically (by what the token is), and which
rotary frequencies each head uses. Models are the two shipped task models (number, letter), the
zoo LLMs (gemma-3-270m, smollm2-135m, qwen2.5-coder-0.5b; from registry packages), or any local
Hugging Face model folder; nothing is downloaded.

Run "psheads COMMAND --help" for the options of a command."""

COMMANDS = (demo, score, profile, lengthgen, train, reproduce, atlas, policy)
"""The command modules, in the order ``--help`` lists them; each ``add``s its sub-command."""


def build_parser() -> argparse.ArgumentParser:
    """The ``psheads`` argument parser."""
    # allow_abbrev=False: an abbreviation is refused, not guessed (``--prompts 32`` was read as ``--prompts-file 32``)
    parser = argparse.ArgumentParser(prog="psheads", description=DESCRIPTION, epilog=EXIT_STATUS,
                                     formatter_class=HelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"psheads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return parser


@contextlib.contextmanager
def _console(command: str) -> Iterator[None]:
    """For one command: log records and library warnings as one line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"psheads {command}: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = lambda message, *_, **__: logger.warning("%s", message)
            yield
    finally:
        root.removeHandler(handler)


@contextlib.contextmanager
def _stdout_on_rank_0() -> Iterator[None]:
    """Under ``torchrun``, standard output of every rank but 0 goes nowhere (rank 0 prints the results)."""
    if os.environ.get("RANK", "0") == "0":
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (argparse and usage errors exit with 2 directly)."""
    args = build_parser().parse_args(argv)
    with _console(args.command), _stdout_on_rank_0():
        try:
            status: int = args.run(args)
            sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
            return status
        except common.UsageError as err:
            parser: argparse.ArgumentParser = args.parser  # the command's own parser: error() exits with 2
            parser.error(str(err))
        except BrokenPipeError:  # `psheads score … | head -1`: a closed stdout is not a failure
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except (common.CommandError, ValueError, TypeError, OSError) as err:
            print(f"psheads {args.command}: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"psheads {args.command}: interrupted", file=sys.stderr)
            return 130


__all__ = ["COMMANDS", "build_parser", "main"]
