"""The checkpoint store: complete-or-absent checkpoint folders that resume exactly.

A checkpoint folder holds the model (safetensors), the tokenizer, ``training_config.json``, the
trainer state (optimizer tensors and RNG state in safetensors, the rest in JSON: nothing is ever
unpickled), the run's ``evaluation.csv`` and ``dynamics.csv`` up to its step, and last a
``manifest.json`` with the SHA-256 and size of every other file. ``sealed`` writes it under a
``.partial`` name and renames it into place only when complete; ``verify_checkpoint`` checks it
against its manifest; ``latest_checkpoint`` skips damaged ones. A manifest detects damage; it
does not authenticate.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import safetensors.torch
import torch

from psheads.interface.atomic import PARTIAL_SUFFIX, fsync, replacing
from psheads.results import schema
from psheads.results.files import from_json_data, to_json_data
from psheads.tasks.base import TRAINING_RECORD

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"

CHECKPOINT_FORMAT = 2
"""Version of the checkpoint layout (1: the old pickled ``trainer_state.pt``, no longer read)."""
MANIFEST = "manifest.json"
"""SHA-256 and size of every other file of a checkpoint; written last."""
TRAINER_TENSORS = "trainer_state.safetensors"
"""Optimizer state tensors (``optimizer.<param>.<name>``) and the RNG state (``rng.cpu``, uint8)."""
TRAINER_JSON = "trainer_state.json"
"""The step, the optimizer's param groups and non-tensor state, and the scheduler state."""
TRAINING_CONFIG = TRAINING_RECORD
"""The run's record: task, task options, step, training settings (``psheads.tasks.base.TRAINING_RECORD``)."""
EVALUATION_CSV = "evaluation.csv"
DYNAMICS_CSV = "dynamics.csv"
LEGACY_TRAINER_STATE = "trainer_state.pt"
LOCK = ".psheads-lock.json"
"""A run folder's writer: pid, host and start time of the training that holds it."""

_CHECKPOINT_NAME = re.compile(re.escape(CHECKPOINT_PREFIX) + r"([0-9]+)")



class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: damaged, incomplete, or written in the old pickled format."""


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def run_lock(output_dir: Path) -> Iterator[None]:
    """Hold ``output_dir`` for one training at a time: a lock file (``LOCK``) holding this process's
    pid, host and start time, created exclusively and removed on exit.

    A lock whose process is gone (same host, pid not running, or an unreadable lock file) is
    stale: it is taken over with a warning. A lock held by a running process, or by a process on
    another host (which this one cannot see), is refused.

    Raises:
        ValueError: another training holds ``output_dir`` (the message names it and the lock file).
    """
    path = output_dir / LOCK
    mine: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(),
                            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    while True:
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            try:
                holder = json.loads(path.read_text())
                pid, host = int(holder["pid"]), str(holder["host"])
            except (OSError, ValueError, KeyError, TypeError):
                holder, pid, host = None, -1, mine["host"]
            if holder is not None and (host != mine["host"] or process_alive(pid)):
                raise ValueError(f"{output_dir} is being written by another training (pid {pid} on {host}, since "
                                 f"{holder.get('since', '?')}): two runs in one folder would mix their checkpoints. "
                                 f"Wait for it, or pick another output_dir; if no such training runs, delete "
                                 f"{path}.") from None
            logger.warning("Taking over %s from a training that is no longer running (%s).", path, holder)
            remove_entry(path)
            continue
        with os.fdopen(handle, "w") as out:
            json.dump(mine, out)
        break
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def checkpoint_step(directory: str | Path) -> int | None:
    """The step of a checkpoint directory named ``checkpoint-<step>`` (None for any other name)."""
    match = _CHECKPOINT_NAME.fullmatch(Path(directory).name)
    return int(match.group(1)) if match else None


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Every ``checkpoint-<step>`` directory of a run, oldest first (sorted by step number, so
    ``checkpoint-1000000`` comes after ``checkpoint-999999``); ``.partial`` directories are not
    checkpoints. Nothing is verified: see ``verify_checkpoint``."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [p for p in output_dir.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=lambda p: (checkpoint_step(p), p.name))


def verify_checkpoint(directory: str | Path) -> dict:
    """Check a checkpoint against its ``manifest.json`` and return the manifest.

    Every file the manifest lists must be present with its SHA-256, and no other file may be.

    Raises:
        CheckpointError: a missing, extra, changed or unreadable file (each named with its path),
            or a checkpoint in the old pickled format (which psheads no longer reads).
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        if (directory / LEGACY_TRAINER_STATE).exists():
            raise CheckpointError(
                f"{directory} is a checkpoint in the old format: its trainer state "
                f"{directory / LEGACY_TRAINER_STATE} is a pickle, and psheads never unpickles files (a pickle "
                "can run arbitrary code). This run cannot be resumed; start a new output_dir. (Its weights, "
                "model.safetensors, still boot with psheads.zoo.boot_local(directory, allow_pickle_files=True).)")
        raise CheckpointError(f"{manifest_path} is missing: {directory} is not a complete checkpoint.")
    try:
        manifest = json.loads(manifest_path.read_text())
        listed = manifest["files"]
        if manifest.get("format") != CHECKPOINT_FORMAT or not isinstance(listed, dict) or not all(
                isinstance(entry, dict) and isinstance(entry.get("sha256"), str) for entry in listed.values()):
            raise ValueError(f"not a format-{CHECKPOINT_FORMAT} manifest")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{manifest_path} is unreadable ({error}).") from None
    present = {path.relative_to(directory).as_posix() for path in directory.rglob("*") if not path.is_dir()}
    present.discard(MANIFEST)
    problems = [f"{directory / name} is missing" for name in sorted(set(listed) - present)]
    problems += [f"{directory / name} is not listed in the manifest" for name in sorted(present - set(listed))]
    for name in sorted(set(listed) & present):
        try:
            digest = sha256(directory / name)
        except OSError as error:
            problems.append(f"{directory / name} is unreadable ({error})")
            continue
        if digest != listed[name]["sha256"]:
            size, recorded = (directory / name).stat().st_size, listed[name].get("bytes")
            what = f"has {size} bytes, the manifest says {recorded}" if size != recorded else \
                "does not match its SHA-256 in the manifest"
            problems.append(f"{directory / name} {what} (changed or damaged)")
    if problems:
        raise CheckpointError("; ".join(problems) + ".")
    return manifest


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest checkpoint in ``output_dir`` that passes ``verify_checkpoint`` (a damaged one
    is skipped with a warning; partial writes are never checkpoints), or None.

    Raises:
        CheckpointError: a checkpoint in the old pickled format.
    """
    for directory in reversed(list_checkpoints(output_dir)):
        try:
            verify_checkpoint(directory)
        except CheckpointError as error:
            if not (directory / MANIFEST).exists() and (directory / LEGACY_TRAINER_STATE).exists():
                raise
            logger.warning("Skipping the damaged checkpoint %s: %s", directory, error)
            continue
        return directory
    return None


def save_model(model: Any, directory: str | Path, **options: Any) -> None:
    """``model.save_pretrained(directory, **options)`` in whichever process calls it.

    transformers ≥ 5 writes nothing on ranks other than 0 of an initialised ``torch.distributed``
    group; psheads' saves are per process (a sweep cell's checkpoint on the rank that trains it, a
    built model booted through a temporary folder), so this one writes on every rank.
    """
    model.should_save_on_this_rank = lambda is_main_process: is_main_process  # this call only
    try:
        model.save_pretrained(directory, **options)
    finally:
        del model.should_save_on_this_rank


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_trainer_state(path: Path, optimizer: torch.optim.Optimizer, scheduler: Any, step: int) -> None:
    state = optimizer.state_dict()
    tensors = {"rng.cpu": torch.get_rng_state()}
    device = optimizer.param_groups[0]["params"][0].device
    if device.type == "cuda":  # dropout on a GPU draws from that GPU's generator
        tensors["rng.cuda"] = torch.cuda.get_rng_state(device)
    values: dict[str, dict] = {}
    for index, entries in state["state"].items():
        for name, value in entries.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                values.setdefault(str(index), {})[name] = to_json_data(value, where="the optimizer state")
    safetensors.torch.save_file(tensors, path / TRAINER_TENSORS)
    meta = {"format": CHECKPOINT_FORMAT, "step": step,
            "optimizer": {"indices": sorted(state["state"]), "values": values,
                          "param_groups": to_json_data(state["param_groups"], where="the optimizer's param groups")},
            "scheduler": to_json_data(scheduler.state_dict(), where="the scheduler state")}
    (path / TRAINER_JSON).write_text(json.dumps(meta, indent=1))


def read_trainer_state(directory: Path) -> dict:
    """The trainer state of a checkpoint (safetensors and JSON only: nothing is unpickled)."""
    try:
        meta = json.loads((directory / TRAINER_JSON).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CheckpointError(f"{directory / TRAINER_JSON} is unreadable ({error}).") from None
    try:
        tensors = safetensors.torch.load_file(directory / TRAINER_TENSORS)
    except Exception as error:  # safetensors raises its own SafetensorError, OSError, ...
        raise CheckpointError(f"{directory / TRAINER_TENSORS} is unreadable ({error}).") from None
    try:
        if meta["format"] != CHECKPOINT_FORMAT:
            raise ValueError(f"format {meta['format']!r}, expected {CHECKPOINT_FORMAT}")
        state: dict[int, dict] = {int(index): {} for index in meta["optimizer"]["indices"]}
        for key, tensor in tensors.items():
            if key.startswith("optimizer."):
                _, index, name = key.split(".", 2)
                state[int(index)][name] = tensor
        for index, entries in meta["optimizer"]["values"].items():
            state[int(index)].update(from_json_data(entries))
        rng = tensors["rng.cpu"]
        if rng.dtype != torch.uint8:
            raise ValueError(f"rng.cpu has dtype {rng.dtype}, expected torch.uint8")
        return {"optimizer": {"state": state, "param_groups": from_json_data(meta["optimizer"]["param_groups"])},
                "scheduler": from_json_data(meta["scheduler"]), "rng": rng, "rng_cuda": tensors.get("rng.cuda"),
                "step": int(meta["step"])}
    except (KeyError, ValueError, TypeError, AttributeError) as error:
        raise CheckpointError(f"{directory / TRAINER_JSON} or {directory / TRAINER_TENSORS} is inconsistent "
                              f"({type(error).__name__}: {error}).") from None


def write_manifest(path: Path, step: int) -> None:
    """Flush every file, then write the manifest (the checkpoint's last file) and flush it."""
    files = sorted(p for p in path.rglob("*") if not p.is_dir() and p.name != MANIFEST)
    listed = {}
    for file in files:
        fsync(file)
        listed[file.relative_to(path).as_posix()] = {"sha256": sha256(file), "bytes": file.stat().st_size}
    manifest = path / MANIFEST
    manifest.write_text(json.dumps({"format": CHECKPOINT_FORMAT, "step": step, "files": listed}, indent=1))
    fsync(manifest)
    fsync(path)


def remove_entry(path: Path) -> None:
    """Remove ``path`` whatever it is: a symbolic link itself (never what it points to), a file or a
    folder tree; nothing if it does not exist."""
    if path.is_symlink():
        logger.warning("%s is a symbolic link (to %s): psheads replaces the link and never writes through it.",
                       path, os.readlink(path))
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def replace_directory(partial: Path, directory: Path) -> None:
    remove_entry(directory)  # a damaged checkpoint of the same step, being redone (or a link to one)
    os.replace(partial, directory)
    fsync(directory.parent)


def write_history(history: pd.DataFrame | None, rows: pd.DataFrame, path: Path) -> None:
    frame = rows if history is None or history.empty else pd.concat([history, rows], ignore_index=True)
    frame.to_csv(path, index=False)


def read_records(directory: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A checkpoint's ``evaluation.csv`` and ``dynamics.csv`` (floats read back exactly, labels as
    ``schema.LABEL_DTYPE``)."""
    try:
        return (pd.read_csv(directory / EVALUATION_CSV, dtype={"hops": str}, float_precision="round_trip"),
                schema.ordered_labels(pd.read_csv(directory / DYNAMICS_CSV, float_precision="round_trip")))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise CheckpointError(f"The records of {directory} are unreadable ({error}).") from None


def publish_records(checkpoint: Path, output_dir: Path) -> None:
    """Make the run-level CSV files copies of ``checkpoint``'s (each replaced atomically)."""
    for name in (EVALUATION_CSV, DYNAMICS_CSV):
        # one writer holds the run folder: a fixed name, which the next run replaces if this one is killed
        with replacing(output_dir / name, partial=output_dir / (name + PARTIAL_SUFFIX)) as partial:
            shutil.copyfile(checkpoint / name, partial)


def _differences(saved: Any, now: Any, name: str) -> list[str]:
    """``name: <saved> in the checkpoint, <now> now`` for every differing (nested) field."""
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for key in sorted(set(saved) | set(now), key=str):
            absent = "<absent>"
            out += _differences(saved.get(key, absent), now.get(key, absent), f"{name}.{key}" if name else str(key))
        return out
    return [] if saved == now else [f"{name}: {saved!r} in the checkpoint, {now!r} now"]


def check_same_run(checkpoint: Path, info: dict, now: dict) -> None:
    """Refuse to resume ``checkpoint`` (its record ``info``) with another task or configuration.

    ``now`` holds this run's ``task``, ``task_options`` and ``training`` as JSON values.

    Raises:
        ValueError: naming every field that differs, with both values.
    """
    now = json.loads(json.dumps(now))
    saved = {key: info.get(key, "<absent>") for key in now}
    problems = _differences(saved["task"], now["task"], "task")
    problems += _differences(saved["task_options"], now["task_options"], "task_options")
    both = isinstance(saved["training"], dict)
    problems += _differences(saved["training"], now["training"], "" if both else "training")
    if problems:
        raise ValueError(f"{checkpoint} was trained with another task or configuration: " + "; ".join(problems)
                         + ". Resume with the same task and TrainConfig, or use a new output_dir.")


def read_training_record(directory: Path) -> dict:
    """A checkpoint's ``training_config.json`` (task, task options, step, training settings).

    Raises:
        CheckpointError: the file is missing, unreadable or not a JSON object.
    """
    try:
        info = json.loads((directory / TRAINING_CONFIG).read_text())
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CheckpointError(f"{directory / TRAINING_CONFIG} is unreadable ({error}).") from None
    return info


@contextlib.contextmanager
def sealed(directory: Path, step: int) -> Iterator[Path]:
    """Write a checkpoint complete or not at all.

    Yields ``<directory>.partial`` (emptied first) to write every file into; on exit the
    manifest is written last and the folder renamed into place. On an exception the partial
    folder is removed and nothing else changes.
    """
    partial = directory.with_name(directory.name + PARTIAL_SUFFIX)
    remove_entry(partial)
    partial.mkdir(parents=True)
    try:
        yield partial
        write_manifest(partial, step)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    replace_directory(partial, directory)
