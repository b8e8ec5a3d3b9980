"""Files written whole or not at all: a temporary file beside the target, renamed over it.

Every file psheads writes goes through ``replacing`` (or ``write_atomic``): the new content is
written to a temporary file in the target's folder, flushed to disk and renamed over the target in
one step. A reader sees the old file or the new one, never a part of either; an exception during
the write (Ctrl-C included) removes the temporary file and leaves the old file as it was. Only a
process killed outright (SIGKILL, a power cut) can leave a temporary file behind, named
``.<file>.<random>.partial``; the target is intact then too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".partial"
"""The suffix of what is being written and not yet renamed into place (a file here, a checkpoint folder)."""


@contextlib.contextmanager
def replacing(path: str | Path, partial: str | Path | None = None) -> Iterator[Path]:
    """A temporary file to write instead of ``path``, renamed over ``path`` when the block ends cleanly.

    The new file gets the permissions of the file it replaces (a new file: those a plain write
    gives it). A symbolic link at ``path`` is replaced by the file, never written through.

    Args:
        path: the file to write.
        partial: a fixed name for the temporary file, for a folder one process writes at a time (a
            locked training run, which thus replaces what an interrupted write left there); whatever
            is at that name is removed first. By default a new, unique name beside ``path``, so that
            processes writing one file at once never share a temporary file.

    Yields:
        The temporary file, created empty; write it by its path.

    Raises:
        FileNotFoundError: the folder of ``path`` does not exist.
    """
    path = Path(path)
    temporary = _create(path, None if partial is None else Path(partial))
    try:
        yield temporary
        if path.is_symlink():
            logger.warning("%s is a symbolic link (to %s): psheads replaces the link and never writes through it.",
                           path, os.readlink(path))
        elif path.is_file():
            os.chmod(temporary, stat.S_IMODE(path.stat().st_mode))
        fsync(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync(path.parent)


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through ``replacing``; returns ``path`` as a ``Path``."""
    path = Path(path)
    with replacing(path) as temporary:
        temporary.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def fsync(path: str | Path) -> None:
    """Flush a file or folder to disk (folders: where the OS allows it)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _create(path: Path, partial: Path | None) -> Path:
    """Create the temporary file for ``path`` (exclusively: a link placed at its name is never followed)."""
    if not path.parent.is_dir():
        raise FileNotFoundError(f"Cannot write {path}: the folder {path.parent} does not exist; create it first.")
    while True:
        if partial is None:
            temporary = path.with_name(f".{path.name[:200]}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
        else:
            temporary = partial
            temporary.unlink(missing_ok=True)
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return temporary
