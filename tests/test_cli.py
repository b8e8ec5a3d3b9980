"""The command line, in-process."""

from __future__ import annotations

import pytest

from psheads.cli import main


def test_demo_prints_geometry_and_usage(capsys) -> None:
    assert main(["demo", "--prompts", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Self-check passed" in out
    geometry_rows = [line for line in out.splitlines() if line.strip().endswith("0.0884")]
    assert len(geometry_rows) == 12  # 12 layers, scale 1/sqrt(128)
    assert "adjacent" in geometry_rows[0] and " 64 " in geometry_rows[0]
    assert out.count("dominant") == 1


def test_unknown_command_exits_with_usage(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["nope"])
    assert exit_info.value.code == 2
