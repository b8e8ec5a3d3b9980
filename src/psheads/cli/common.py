"""What every command shares: its two errors, the checks made before any model loads, loading a
model, and running (progress, prompts, writing, the main rank).

A check raises ``UsageError`` (the command line is wrong: exit 2, with the usage) or
``CommandError`` (the command could not run: exit 1, one line). Nothing heavy is imported at
module level: each function imports what it needs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """The command line is wrong (exit 2, with the usage)."""


class CommandError(Exception):
    """The command could not run (exit 1, one line)."""


# --- checks made before any model loads ------------------------------------------------------
@contextlib.contextmanager
def as_usage() -> Iterator[None]:
    """A ValueError or TypeError while options are checked is a usage error."""
    try:
        yield
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from err


def check_writable(path: str | None, flag: str, force: bool | None = None, also: tuple[Path, ...] = ()) -> None:
    """Refuse an empty output path, one whose folder does not exist or cannot be written, and (unless
    ``force``; None: a folder that is created or resumed) a file that exists, with ``also`` beside it."""
    if path is None:
        return
    _non_empty(path, flag, "folder" if force is None else "file")
    existing = [str(each) for each in (Path(path), *also) if force is False and (each.exists() or each.is_symlink())]
    if existing:
        raise CommandError(f"{flag} {path}: {' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                           "pass --force to overwrite, or choose another name")
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise CommandError(f"cannot write {flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise CommandError(f"cannot write {flag} {path}: the folder {folder} is not writable")


def _non_empty(path: str | None, flag: str, what: str) -> None:
    if path is not None and not path.strip():
        raise UsageError(f"{flag} is empty: name the {what} to write")


def check_out(path: str | None, force: bool) -> None:
    """``--out``: a format ``save_frame`` writes (with its dependencies) into a writable folder, new
    unless ``--force`` (a CSV's settings file too)."""
    from psheads.results.files import check_frame_path, sidecar

    if path is None:
        return
    _non_empty(path, "--out", "file")
    try:
        check_frame_path(path)
    except ValueError as err:
        raise UsageError(f"--out {err}") from err
    except ImportError as err:
        raise CommandError(f"--out {err}") from err
    check_writable(path, "--out", force, (sidecar(path),) if Path(path).suffix.lower() == ".csv" else ())


def check_html(path: str | None, flag: str, force: bool) -> None:
    """An HTML output (a figure, the report) into a writable folder, new unless ``--force``."""
    _non_empty(path, flag, "file")
    if path is not None and Path(path).suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"{flag} {path}: it is written as HTML (.html)")
    check_writable(path, flag, force)


def model_task(model: str, needed: bool = True) -> Any:
    """The task ``model`` was trained on, or None (an LLM, or a folder without a training record)."""
    from psheads.models import zoo
    from psheads.tasks.base import TRAINING_RECORD
    from psheads.tasks.records import task_from_record

    if model in zoo.LLMS:
        return None
    directory = zoo.PRETRAINED_DIR / model if model in zoo.PRETRAINED else Path(model)
    if model not in zoo.PRETRAINED and not directory.is_dir():
        raise CommandError(f"{model!r} is neither a known model {zoo.PRETRAINED + tuple(zoo.LLMS)} nor a folder")
    if model not in zoo.PRETRAINED and not (directory / "config.json").is_file():
        raise CommandError(f"no model in {model}: the folder has no config.json; pass a folder that save_pretrained "
                           f"wrote, or one of the known models {zoo.PRETRAINED + tuple(zoo.LLMS)}")
    record = directory / TRAINING_RECORD  # a psheads training checkpoint knows its task
    if not record.is_file():
        return None
    try:
        return task_from_record(json.loads(record.read_text()))
    except (ValueError, TypeError, UnicodeDecodeError) as err:
        if not needed:  # --task names it
            return None
        raise CommandError(f"{record} is not a psheads training record ({err}); pass --task to name the task, "
                           "or remove the file") from None


def chosen_task(args: argparse.Namespace) -> Any:
    """``--task``, else the model's own task; a usage error when there is neither. ``--task`` naming
    the model's own task is that task with its recorded options (the shipped letter model's
    ``sampling="paper-b"``), as ``psheads.evaluate`` reads a name."""
    from psheads.tasks import get_task

    own = model_task(args.model, needed=not args.task)  # also refuses a model that is neither known nor a folder
    if args.task and (own is None or own.name != args.task):
        with as_usage():
            return get_task(args.task)
    if own is None:
        raise UsageError(f"{args.model} has no task of its own: pass --task"
                         + (" or --prompts-file" if hasattr(args, "prompts_file") else ""))
    return own


def prompt_source(args: argparse.Namespace) -> Any:
    """The lines of ``--prompts-file``, or the task that generates the prompts."""
    if args.prompts_file is None:
        return chosen_task(args)
    model_task(args.model, needed=False)  # refuses a missing model before anything loads
    path = Path(args.prompts_file)
    if not path.is_file():
        raise CommandError(f"--prompts-file {path} does not exist")
    try:
        # utf-8-sig: a BOM (Notepad's UTF-8) would join the first prompt's first word
        lines = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    except UnicodeDecodeError as err:
        raise CommandError(f"--prompts-file {path} is not UTF-8 text ({err.reason} at byte {err.start}): pass a text "
                           "file with one prompt per line") from None
    if not lines:
        raise CommandError(f"--prompts-file {path} has no prompts")
    return lines


def checked_device(args: argparse.Namespace) -> Any:
    """``--device`` as a torch device that exists on this machine."""
    import torch

    from psheads.interface import validation

    try:
        torch.device(args.device)
    except RuntimeError as err:  # not a device name at all: a usage error
        raise UsageError(f"--device {args.device}: {err}") from err
    try:
        return validation.device(args.device, "--device")
    except ValueError as err:  # a device this machine does not have
        raise CommandError(str(err)) from None


LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
"""Where a Hugging Face ``config.json`` gives the number of layers (GPT-J: ``n_layer``)."""


def configured_layers(model: str) -> int | None:
    """The number of layers a shipped model's or a local folder's ``config.json`` declares (its own or
    its ``text_config``'s); None where there is none to read (a zoo LLM, whose config comes with
    its weights, or a file that does not say)."""
    from psheads.models import zoo

    if model in zoo.LLMS:
        return None
    folder = zoo.PRETRAINED_DIR / model if model in zoo.PRETRAINED else Path(model)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sections = [config, config.get("text_config")] if isinstance(config, dict) else []
    for section in (s for s in sections if isinstance(s, dict)):
        for key in LAYER_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def check_layers(args: argparse.Namespace) -> None:
    """``--layers`` against the layers the model's ``config.json`` declares, before the model loads
    (``--layers 99`` used to fail only once the model had loaded, seconds later); the library
    checks them again against the loaded model."""
    if args.layers is None:
        return
    n_layers = configured_layers(args.model)
    if n_layers is None:
        return
    from psheads.rope.inputs import layer_indices

    try:
        layer_indices(args.layers, n_layers)
    except ValueError as err:
        raise CommandError(f"--layers {' '.join(map(str, args.layers))}: {err}") from None


# --- loading and running ---------------------------------------------------------------------
@contextlib.contextmanager
def loader_output(quiet: bool) -> Iterator[None]:
    """While a model loads: transformers' and the hub's bars only on a terminal (never with
    ``--quiet``), and their log lines only without ``--quiet``; restored afterwards."""
    from huggingface_hub import utils as hub
    from transformers.utils import logging as hf_logging

    from psheads.interface.progress import show_progress

    saved = (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled(), hf_logging.get_verbosity(),
             hub.logging.get_verbosity())
    if not show_progress(False if quiet else None):
        hf_logging.disable_progress_bar()
        hub.disable_progress_bars()
    if quiet:
        hf_logging.set_verbosity_error()
        hub.logging.set_verbosity_error()
    try:
        yield
    finally:
        if saved[0]:
            hf_logging.enable_progress_bar()
        if not saved[1]:
            hub.enable_progress_bars()
        hf_logging.set_verbosity(saved[2])
        hub.logging.set_verbosity(saved[3])


def load_model(model: str, dtype: str, device: Any, quiet: bool) -> Any:
    """A shipped model or LLM name, or a local Hugging Face folder, as a TransformerLens model."""
    import torch

    from psheads.models import zoo

    with loader_output(quiet):
        if model in zoo.PRETRAINED or model in zoo.LLMS:
            return zoo.load_pretrained(model, dtype=getattr(torch, dtype), device=str(device)).model
        return zoo.boot_local(model, dtype=getattr(torch, dtype), device=str(device))


def progress(args: argparse.Namespace) -> bool | None:
    """The library's convention: None shows bars on a terminal or in a notebook."""
    return False if args.quiet else None


def prompts_for(source: Any, model: Any, args: argparse.Namespace) -> Any:
    """Text lines as they are; a task's prompts as token ids (an LLM task in the model's own words),
    checked against the model's vocabulary and tokenizer."""
    from psheads.rope.backends import facts
    from psheads.tasks import check_fits, checked_batch

    if isinstance(source, list):
        return source
    if hasattr(source, "for_tokenizer") and not source.built:
        source = source.for_tokenizer(model.tokenizer)
    sample = checked_batch(source, 1, seed=args.seed)  # one prompt, to size the rest before allocating them
    check_memory(args.n, sample.tokens.element_size() * (sample.tokens.shape[1] + 3)
                 + sys.getsizeof(sample.text[0]) + sys.getsizeof(sample.answer_text[0]))
    batch = checked_batch(source, args.n, seed=args.seed)
    check_fits(source, batch, facts.vocab_size(model), facts.tokenizer_of(model), args.allow_task_mismatch)
    return batch.tokens


def check_memory(n: int, per_prompt: int) -> None:
    """Refuse ``--n`` prompts of ``per_prompt`` bytes each (a lower bound) that this machine's memory
    cannot hold, before any is allocated (where the total memory is unknown, nothing is checked)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # not POSIX
        return
    need = n * per_prompt
    if need > total:
        shown = f"{need / 1e12:.1f} TB" if need >= 1e12 else f"{need / 1e9:.1f} GB"
        raise CommandError(f"--n {n}: the prompts alone would take {shown}, more than this machine's "
                           f"{total / 1e9:.1f} GB of memory: pass a smaller --n")


def write_frame(frame: Any, path: str | None) -> None:
    """Write ``frame`` to ``--out`` (whole or not at all: a failed write leaves what was there)."""
    from psheads.results.files import save_frame, sidecar

    if path is None or not main_rank():
        return
    save_frame(frame, path)
    extra = f" (settings in {sidecar(path)})" if Path(path).suffix.lower() == ".csv" else ""
    print(f"wrote {len(frame)} rows to {path}{extra}")


def main_rank() -> bool:
    """Whether this process writes files and prints: rank 0 of a ``torchrun`` job, or alone."""
    from psheads.interface.distributed import is_main

    return is_main()


def prompt_config_options(args: argparse.Namespace) -> dict[str, Any]:
    """Options ``ScoreConfig`` and ``ProfileConfig`` share."""
    return {"batch_size": args.batch_size, "layers": args.layers, "prepend_bos": False if args.no_bos else None}
