"""The frequency rules (psheads.reproduction.rules.frequencies): table 1's IDs per layer and the
number model's layer-1 geometry."""

from __future__ import annotations

import pytest
import torch

from psheads.reproduction.references import PAPER_B_TABLE_1
from psheads.reproduction.rules import Graded, frequencies


def test_the_frequency_id_rule_is_per_layer() -> None:
    paper = PAPER_B_TABLE_1["number"]
    grade = frequencies.frequency_id(paper)
    assert grade(paper).verdict == "reproduces"
    assert grade([value + 8 for value in paper]).verdict == "reproduces"
    assert grade([value - 8 for value in paper]).verdict == "reproduces"
    number_l5 = list(paper)
    number_l5[5] = 3.3  # fast where the paper is slow
    assert grade(number_l5) == Graded("partly", "L5 (3.3 vs 39)")
    letter = frequencies.frequency_id(PAPER_B_TABLE_1["letter"])
    three_off = [value + 9 if layer < 4 else value for layer, value in enumerate(PAPER_B_TABLE_1["letter"])]
    assert letter(three_off).verdict == "does not reproduce"
    assert grade([]).verdict == "not measured"


def test_the_geometry_rule_needs_the_paper_s_plane_and_the_routing() -> None:
    """The old ±8 IDs covered the whole fast band, and routing (21% of prompts) was not part of the rule."""
    theta, offsets = 0.8, torch.arange(16, -1, -1, dtype=torch.float64)  # keys 0 … 16, query at 16
    aligned = 3.0 * torch.cos((offsets - 2) * theta)  # every key alike: one sinusoid peaking at distance 2
    noise = torch.randn(2, 17, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    r2, peak, fitted = frequencies.plane_fit(torch.stack([aligned, noise[0]]), theta)
    assert r2[0] == pytest.approx(1.0) and peak[0] == pytest.approx(2.0) and torch.allclose(fitted[0], aligned)
    assert r2[1] < 0.5  # token-dependent keys: no single sinusoid
    good = {"plane": 1, "fit": 0.95, "peak": 2.2, "routes": 0.8}
    assert frequencies.geometry_grade(good).verdict == "reproduces"
    assert frequencies.geometry_grade({**good, "routes": 0.21}).verdict == "partly"
    assert frequencies.geometry_grade({**good, "routes": 0.21, "peak": 3.3}).verdict == "does not reproduce"
    assert frequencies.geometry_grade({**good, "plane": 4}).verdict == "does not reproduce"  # within the old ±8
