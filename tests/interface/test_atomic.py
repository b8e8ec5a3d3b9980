"""``replacing`` / ``write_atomic``: a file is replaced whole or left as it was."""

from __future__ import annotations

import os
import stat

import pytest

from psheads.interface.atomic import PARTIAL_SUFFIX, replacing, write_atomic


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path) -> None:
    path = write_atomic(tmp_path / "a.txt", "old")
    with replacing(path) as temporary:
        assert temporary.parent == tmp_path and temporary.name.endswith(PARTIAL_SUFFIX) and temporary.exists()
        temporary.write_text("new")
        assert path.read_text() == "old"  # a reader sees the old file until the rename
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["a.txt"]
    write_atomic(path, b"\x00bytes")
    assert path.read_bytes() == b"\x00bytes"


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary_file(tmp_path) -> None:
    path = write_atomic(tmp_path / "a.txt", "old")
    with pytest.raises(KeyboardInterrupt), replacing(path) as temporary:
        temporary.write_text("ne")
        raise KeyboardInterrupt
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.txt"]
    with pytest.raises(KeyboardInterrupt), replacing(tmp_path / "new.txt") as temporary:
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["a.txt"]  # a file that did not exist still does not


def test_permissions_are_kept_and_links_replaced_not_written_through(tmp_path, caplog) -> None:
    path = write_atomic(tmp_path / "a.txt", "old")
    path.chmod(0o640)
    write_atomic(path, "new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    victim = write_atomic(tmp_path / "victim.txt", "precious")
    link = tmp_path / "link.txt"
    link.symlink_to(victim)
    with caplog.at_level("WARNING", logger="psheads.interface.atomic"):
        write_atomic(link, "mine")
    assert victim.read_text() == "precious" and not link.is_symlink() and link.read_text() == "mine"
    assert "symbolic link" in caplog.text


def test_a_fixed_partial_name_replaces_what_an_interrupted_write_left(tmp_path) -> None:
    victim = write_atomic(tmp_path / "victim.txt", "precious")
    partial = tmp_path / "a.txt.partial"
    partial.symlink_to(victim)  # left there, or placed there: removed, never written through
    with replacing(tmp_path / "a.txt", partial=partial) as temporary:
        assert temporary == partial and not temporary.is_symlink()
        temporary.write_text("new")
    assert (tmp_path / "a.txt").read_text() == "new" and victim.read_text() == "precious" and not partial.exists()


def test_a_missing_folder_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"Cannot write .*a\.txt: the folder .*missing does not exist"):
        write_atomic(tmp_path / "missing" / "a.txt", "x")
