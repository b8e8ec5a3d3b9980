"""Per-head windows from RoPE: a head's wavelength and the proportional split at the same total KV."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from psheads.policy.windows import head_wavelength, proportional_windows, wavelengths


def planes(usage: list[float], thetas: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"layer": 0, "head": 0, "plane": range(len(usage)), "theta": thetas, "usage": usage})


def test_the_slowest_of_the_fewest_planes_carrying_half_the_use_sets_the_wavelength() -> None:
    thetas = [1.0, 0.1, 0.01]
    assert head_wavelength(planes([0.6, 0.3, 0.1], thetas)) == pytest.approx(2 * math.pi)
    assert head_wavelength(planes([0.3, 0.3, 0.4], thetas)) == pytest.approx(2 * math.pi / 0.01)
    assert head_wavelength(planes([0.4, 0.3, 0.3], thetas)) == pytest.approx(2 * math.pi / 0.1)  # 0.4 + 0.3
    assert head_wavelength(planes([0.2, 0.1, 0.7], [1.0, 0.5, 0.0])) == math.inf  # plane 0 carries most


def test_a_kv_head_takes_the_longest_wavelength_of_its_query_heads() -> None:
    frame = pd.concat([planes([0.9, 0.1], [1.0, 0.01]).assign(head=0), planes([0.1, 0.9], [1.0, 0.01]).assign(head=1)])
    grid = wavelengths(frame, kv_head_of=(0, 0), layers=(0,))
    assert grid[0, 0] == pytest.approx(2 * math.pi / 0.01)
    with pytest.raises(ValueError, match="no planes"):
        wavelengths(frame, kv_head_of=(0, 0, 1, 1), layers=(0,))


def test_windows_share_the_uniform_total_in_proportion_to_wavelength() -> None:
    lengths = np.array([[10.0, 30.0, math.inf, 5.0]])
    streamed = np.array([[True, True, True, False]])
    windows = proportional_windows(lengths, streamed, recent=100)
    assert windows[0, 3] == 0 and windows.sum() == 300 and (windows[streamed] >= 1).all()
    assert windows[0, 0] < windows[0, 1] < windows[0, 2]
    assert proportional_windows(lengths, np.zeros_like(streamed), 100).sum() == 0


def test_a_cap_moves_the_excess_to_the_other_heads_at_the_same_total() -> None:
    lengths = np.array([[math.inf, 10.0, 10.0, 10.0]])
    streamed = np.ones((1, 4), dtype=bool)
    windows = proportional_windows(lengths, streamed, recent=256, cap=448)  # a 512-token input, sink 64
    assert windows.sum() == 4 * 256 and windows.max() <= 448 and windows[0, 0] == 448
    assert windows[0, 1:].tolist() == sorted(windows[0, 1:].tolist(), reverse=True)
    short = proportional_windows(lengths, streamed, recent=256, cap=100)  # uniform windows keep 100 each here
    assert short.sum() == 400 and (short <= 100).all()
