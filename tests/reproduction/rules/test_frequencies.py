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
    assert grade(number_l5).verdict == "partly" and "outside: L5 (3.3 vs 39)" in grade(number_l5).detail
    letter = frequencies.frequency_id(PAPER_B_TABLE_1["letter"])
    three_off = [value + 9 if layer < 4 else value for layer, value in enumerate(PAPER_B_TABLE_1["letter"])]
    assert letter(three_off).verdict == "does not reproduce"
    assert grade([]).verdict == "not measured"


def test_the_frequency_id_rule_fails_the_nearest_null() -> None:
    """The referee's counter-example: every measured letter layer lies within 4.7 IDs of the uniform
    32.5, and a constant near-uniform ID (33.5–37) got 'partly'. Layers where both table 1 and the
    measurement are near uniform tell nothing and are not graded; a graded layer must be nearer table 1
    than uniform."""
    letter = frequencies.frequency_id(PAPER_B_TABLE_1["letter"])
    number = frequencies.frequency_id(PAPER_B_TABLE_1["number"])
    for constant in (32.5, 33.5, 35.0, 37.0):
        assert letter([constant] * 12).verdict == "does not reproduce", constant
        assert number([constant] * 12).verdict == "does not reproduce", constant
    # slow planes everywhere (a constant 38-40) still matches the letter row but for layer 0: partly
    assert letter([40.0] * 12).verdict == "partly"
    assert "L0 (40.0 vs 18)" in letter([40.0] * 12).detail
    measured = [34.9, 36.3, 37.0, 36.2, 37.3, 33.2, 36.2, 34.3, 34.6, 34.9, 33.2, 30.9]  # the shipped letter model
    assert letter(measured).verdict == "does not reproduce"
    near = [frequencies.UNIFORM_ID + 1] * 12
    assert frequencies.frequency_id(near)(near) == Graded(
        "inconclusive", "every layer near the uniform ID in both: nothing to tell them apart")


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
