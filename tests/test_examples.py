"""The examples run and show what they claim."""

from __future__ import annotations

import runpy
from pathlib import Path

import torch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_quickstart(capsys) -> None:
    namespace = runpy.run_path(str(EXAMPLES / "quickstart.py"))
    result = namespace["main"]()
    out = capsys.readouterr().out
    assert "M diagonal equals the model's logit row: True" in out
    torch.testing.assert_close(result["edited"], result["gated"], atol=1e-5, rtol=0)


def test_frequencies_and_causality(capsys) -> None:
    """Gating the fast planes of the number model's positional heads breaks it, and only it."""
    namespace = runpy.run_path(str(EXAMPLES / "frequencies_and_causality.py"))
    table = namespace["main"](n=64)
    assert "((1, 0), (2, 0), (3, 0))" in capsys.readouterr().out
    assert table.loc["none", "number"] >= 0.98  # 63 or 64 of 64 (0.9996 on 8192 prompts)
    assert table.loc["slow planes 61-64", "number"] == table.loc["none", "number"]
    assert table.loc["fast planes 1-4", "number"] < 0.7
    assert table.loc["fast planes 1-4", "letter"] > 0.95
