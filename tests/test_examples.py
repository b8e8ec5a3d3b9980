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
